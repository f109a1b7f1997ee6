#include "notify/poster.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace mle::notify {
namespace {

struct Guard {
  bool allow_loopback = false;
  std::string refused;  // the address refused, if one was
};

curl_socket_t OpenSocket(void* clientp, curlsocktype, curl_sockaddr* address) {
  auto* guard = static_cast<Guard*>(clientp);
  char text[INET6_ADDRSTRLEN] = {};
  if (address->family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address->addr)->sin_addr, text, sizeof(text));
  } else if (address->family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&address->addr)->sin6_addr, text, sizeof(text));
  }
  if (!AddressAllowed(text, guard->allow_loopback)) {
    guard->refused = text[0] != '\0' ? text : "an address of another family";
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

absl::Status Post(const Webhook& webhook, const Delivery& delivery, absl::Time now, const PostOptions& options) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  curl_slist* headers = nullptr;
  for (const std::string& h :
       {std::string("Content-Type: application/json"), std::string("User-Agent: mlengine-webhook/1"),
        absl::StrCat("X-Mlengine-Signature: ", Signature(webhook.secret, absl::ToUnixSeconds(now), delivery.body)),
        absl::StrCat("X-Mlengine-Event-Id: ", delivery.event_id), absl::StrCat("X-Mlengine-Webhook: ", webhook.Name()),
        std::string("Expect:")}) {
    headers = curl_slist_append(headers, h.c_str());
  }
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> owned(headers, curl_slist_free_all);
  Guard guard{options.allow_loopback, ""};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, webhook.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, delivery.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(delivery.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, OpenSocket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &guard);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(options.connect_timeout)));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(options.timeout)));
  const CURLcode rc = curl_easy_perform(c);
  if (!guard.refused.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("refused to connect to ", guard.refused, " (", webhook.url,
                                                    "): deliveries go to no loopback, link-local or multicast "
                                                    "address"));
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(absl::StrCat("no answer from ", webhook.url, " within ",
                                                    absl::FormatDuration(options.timeout)));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("cannot deliver to ", webhook.url, ": ", curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status > 299) {
    return absl::UnavailableError(absl::StrCat("HTTP ", status, " from ", webhook.url));
  }
  return absl::OkStatus();
}

}  // namespace mle::notify
