#include "containers/registry.h"

#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mle::containers {

namespace {

struct Reply {
  long status = 0;
  std::string body;
  std::string digest;  // Docker-Content-Digest
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  if (r->body.size() < (4u << 20)) r->body.append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reply*>(user);
  absl::string_view line(data, size * n);
  constexpr absl::string_view kName = "docker-content-digest:";
  if (line.size() > kName.size() && absl::EqualsIgnoreCase(line.substr(0, kName.size()), kName)) {
    r->digest = std::string(absl::StripAsciiWhitespace(line.substr(kName.size())));
  }
  return size * n;
}

absl::StatusOr<Reply> Fetch(const std::string& url, bool head) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  Reply reply;
  curl_slist* headers = nullptr;
  for (const char* type : {"application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
                           "application/vnd.docker.distribution.manifest.list.v2+json",
                           "application/vnd.docker.distribution.manifest.v2+json"}) {
    headers = curl_slist_append(headers, absl::StrCat("Accept: ", type).c_str());
  }
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> owned(headers, curl_slist_free_all);
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl.get(), CURLOPT_NOBODY, head ? 1L : 0L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &reply);
  curl_easy_setopt(curl.get(), CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl.get(), CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 10000L);
  const CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("cannot reach the image registry at ", url, ": ", curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace

std::string RegistryClient::Url(const std::string& path) const {
  return absl::StrCat(insecure_ ? "http://" : "https://", host_, path);
}

absl::StatusOr<std::optional<std::string>> RegistryClient::Digest(const std::string& repository,
                                                                  const std::string& tag_or_digest) const {
  auto reply = Fetch(Url(absl::StrCat("/v2/", repository, "/manifests/", tag_or_digest)), /*head=*/true);
  if (!reply.ok()) return reply.status();
  if (reply->status == 404) return std::optional<std::string>();
  if (reply->status != 200 || !absl::StartsWith(reply->digest, "sha256:")) {
    return absl::UnavailableError(absl::StrCat("the image registry ", host_, " answered HTTP ", reply->status,
                                               " for ", repository, ":", tag_or_digest));
  }
  return std::optional<std::string>(reply->digest);
}

absl::StatusOr<std::vector<std::string>> RegistryClient::List(size_t limit) const {
  auto catalog = Fetch(Url("/v2/_catalog?n=200"), false);
  if (!catalog.ok()) return catalog.status();
  auto j = nlohmann::json::parse(catalog->body, nullptr, false);
  std::vector<std::string> out;
  if (catalog->status != 200 || !j.is_object() || !j.contains("repositories") || !j["repositories"].is_array()) {
    return absl::UnavailableError(absl::StrCat("the image registry ", host_, " did not list its images"));
  }
  for (const auto& repo : j["repositories"]) {
    if (!repo.is_string() || out.size() >= limit) continue;
    auto tags = Fetch(Url(absl::StrCat("/v2/", repo.get<std::string>(), "/tags/list")), false);
    if (!tags.ok()) return tags.status();
    auto t = nlohmann::json::parse(tags->body, nullptr, false);
    if (!t.is_object() || !t.contains("tags") || !t["tags"].is_array()) continue;
    for (const auto& tag : t["tags"]) {
      if (tag.is_string() && out.size() < limit) out.push_back(absl::StrCat(repo.get<std::string>(), ":", tag.get<std::string>()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mle::containers
