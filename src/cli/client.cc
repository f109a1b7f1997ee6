#include "cli/client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/bytes.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/gcs_path.h"
#include "cli/sse.h"
#include "common/status.h"

namespace mle::cli {
namespace {

using nlohmann::json;

constexpr int64_t kProgressThreshold = 1 << 20;  // draw bars for files larger than 1 MiB

// What an error response stands for: the google.rpc.Code it names, else its HTTP status's.
absl::StatusCode ErrorCode(const std::string& name, long http_status) {
  auto code = common::CodeFromName(name);
  if (code && *code != absl::StatusCode::kOk) return *code;
  return common::CodeForHttpStatus(static_cast<int>(http_status));
}


}  // namespace

// A one-line progress bar on stderr, redrawn at most every 100 ms. Not in
// the anonymous namespace: Client::Exchange (a class of external linkage)
// holds a pointer to one.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled) {}
  ~ProgressBar() {
    if (drawn_) std::fputs("\n", stderr);
  }
  void Update(int64_t done, int64_t total) {
    if (!enabled_ || total <= kProgressThreshold) return;
    auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    if (drawn_ && done == last_done_) return;
    last_ = now;
    last_done_ = done;
    drawn_ = true;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * static_cast<double>(done) / static_cast<double>(total));
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s / %s", label_.c_str(), bar.c_str(),
                 static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)),
                 common::HumanBytes(done).c_str(), common::HumanBytes(total).c_str());
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  int64_t last_done_ = -1;
  std::chrono::steady_clock::time_point last_;
};

namespace {

bool ProgressEnabled(Progress p) { return p == Progress::kAuto && ::isatty(STDERR_FILENO) == 1; }

}  // namespace

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::Status ApiError(long http_status, const std::string& body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("error") || !doc["error"].is_object()) {
    std::string text(absl::StripAsciiWhitespace(body));
    if (text.size() > 2000) text = text.substr(0, 2000) + "...";
    return absl::Status(ErrorCode("", http_status),
                        absl::StrCat("HTTP ", http_status, text.empty() ? "" : ": ", text));
  }
  const json& error = doc["error"];
  std::string status_name = error.value("status", "");
  std::string message = error.contains("message") && error["message"].is_string() ? error["message"].get<std::string>() : "";
  std::vector<std::pair<std::string, std::string>> violations;
  if (error.contains("details") && error["details"].is_array()) {
    for (const auto& d : error["details"]) {
      if (!d.is_object() || !d.contains("fieldViolations") || !d["fieldViolations"].is_array()) continue;
      for (const auto& v : d["fieldViolations"]) {
        if (!v.is_object()) continue;
        violations.emplace_back(v.value("field", ""), v.value("description", ""));
      }
    }
  }
  // mlengined repeats the violations in the message ("Summary. f: d; f2: d2");
  // print the summary once and each violation on its own line.
  if (!violations.empty()) {
    const std::string first = absl::StrCat(violations[0].first, ": ");
    if (auto pos = message.find(first); pos != std::string::npos && pos > 0) {
      message = std::string(absl::StripAsciiWhitespace(message.substr(0, pos)));
    }
  }
  std::string text = status_name.empty() ? message : absl::StrCat(status_name, ": ", message);
  for (const auto& [field, description] : violations) absl::StrAppend(&text, "\n  ", field, ": ", description);
  if (http_status == 401) {
    absl::StrAppend(&text,
                    "\n(sign in with the token your operator gave you: `mlengine auth login EMAIL "
                    "--token-file=FILE`; or give one with --token, --token-file or MLENGINE_TOKEN. The operator "
                    "of a local server uses its DATA_DIR/admin.token)");
  }
  return absl::Status(ErrorCode(status_name, http_status), text);
}

struct Client::Exchange {
  std::string method;
  std::string url;
  long timeout_s = 120;
  bool json_body = false;
  std::string body;               // request body (when no upload file)
  std::FILE* upload = nullptr;    // streamed request body
  int64_t upload_size = 0;
  std::function<bool(const char*, size_t)> sink;  // streamed 2xx response body
  ProgressBar* progress = nullptr;
  bool download_progress = false;
  // Results.
  long http_status = 0;
  std::string content_type;  // of the response, lowercase
  std::string response;  // whole body (error bodies always land here)
  bool sink_failed = false;
};

Client::Client(Connection connection) : connection_(std::move(connection)), curl_(curl_easy_init()) {}

Client::~Client() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string Client::Url(const std::string& path, const Query& query) const {
  std::string url = connection_.endpoint + path;
  std::vector<std::string> parts;
  for (const auto& [k, v] : query) parts.push_back(absl::StrCat(UrlEncode(k), "=", UrlEncode(v)));
  if (!parts.empty()) absl::StrAppend(&url, "?", absl::StrJoin(parts, "&"));
  return url;
}

std::string Client::JobPath(const std::string& job_id) const {
  return absl::StrCat("/v1/projects/", UrlEncode(connection_.project), "/jobs/", UrlEncode(job_id));
}

absl::Status Client::Perform(Exchange& ex) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return absl::InternalError("cannot initialise libcurl");
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, ex.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  if (ex.timeout_s > 0) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, ex.timeout_s);
  } else {
    // Large transfers: no overall limit, but give up on a stalled connection.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 120L);
  }
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);

  struct curl_slist* headers = nullptr;
  std::string auth;
  if (!connection_.token.empty()) {
    auth = absl::StrCat("Authorization: Bearer ", connection_.token);
    headers = curl_slist_append(headers, auth.c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  headers = curl_slist_append(headers, "User-Agent: mlengine-cli");
  if (ex.json_body) headers = curl_slist_append(headers, "Content-Type: application/json");
  if (ex.upload != nullptr) headers = curl_slist_append(headers, "Content-Type: application/octet-stream");

  if (ex.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else if (ex.upload != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_READDATA, ex.upload);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, +[](char* buf, size_t size, size_t n, void* file) -> size_t {
      return std::fread(buf, size, n, static_cast<std::FILE*>(file));
    });
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(ex.upload_size));
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, ex.method.c_str());
    if (ex.method != "DELETE" || !ex.body.empty()) {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, ex.body.c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(ex.body.size()));
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ex);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
    auto* ex = static_cast<Exchange*>(user);
    const size_t bytes = size * n;
    // http_status comes from the status line (header callback below), which
    // has been read by the time any body byte arrives.
    if (ex->sink && ex->http_status >= 200 && ex->http_status < 300) {
      if (!ex->sink(data, bytes)) {
        ex->sink_failed = true;
        return 0;  // aborts the transfer
      }
      return bytes;
    }
    ex->response.append(data, bytes);
    return bytes;
  });
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &ex);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
    auto* ex = static_cast<Exchange*>(user);
    std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
      auto sp = line.find(' ');
      if (sp != std::string::npos) ex->http_status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
      ex->content_type.clear();
    }
    const std::string lower = absl::AsciiStrToLower(line);
    if (absl::StartsWith(lower, "content-type:")) {
      ex->content_type = std::string(absl::StripAsciiWhitespace(lower.substr(13)));
    }
    return size * n;
  });
  if (ex.progress != nullptr) {
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &ex);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION,
                     +[](void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) -> int {
                       auto* ex = static_cast<Exchange*>(user);
                       if (ex->download_progress) {
                         if (ex->http_status >= 200 && ex->http_status < 300) ex->progress->Update(dlnow, dltotal);
                       } else {
                         ex->progress->Update(ulnow, ultotal);
                       }
                       return 0;
                     });
  }

  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 0) ex.http_status = code;

  if (rc != CURLE_OK) {
    if (ex.sink_failed) return absl::DataLossError("cannot write the downloaded data");
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_OPERATION_TIMEDOUT ||
        rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) {
      std::string why;
      long os_errno = 0;
      curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
      if (rc == CURLE_COULDNT_CONNECT && os_errno != 0) {
        why = std::strerror(static_cast<int>(os_errno));
        if (!why.empty()) why[0] = absl::ascii_tolower(why[0]);
      } else {
        why = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
      }
      if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) {
        return absl::UnavailableError(absl::StrCat(
            "cannot reach mlengined at ", connection_.endpoint, ": ", why,
            "; start it with `mlengined --data-dir DIR` or set MLENGINE_API_ENDPOINT (endpoint from ",
            connection_.endpoint_source, ")"));
      }
      return absl::UnavailableError(absl::StrCat("request to mlengined at ", connection_.endpoint, " failed: ", why));
    }
    return absl::UnavailableError(absl::StrCat("request to ", ex.url, " failed: ",
                                               error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc)));
  }
  if (ex.http_status < 200 || ex.http_status >= 300) return ApiError(ex.http_status, ex.response);
  return absl::OkStatus();
}

absl::StatusOr<json> Client::Call(const std::string& method, const std::string& path, const Query& query,
                                  const std::optional<json>& body, long timeout_s) {
  Exchange ex;
  ex.method = method;
  ex.url = Url(path, query);
  ex.timeout_s = timeout_s;
  if (body) {
    ex.json_body = true;
    ex.body = body->dump();
  }
  if (auto s = Perform(ex); !s.ok()) return s;
  if (absl::StripAsciiWhitespace(ex.response).empty()) return json::object();
  json doc = json::parse(ex.response, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InternalError(absl::StrCat("mlengined answered ", method, " ", path, " with a body that is not JSON"));
  }
  return doc;
}

absl::StatusOr<json> Client::CreateJob(const json& job) {
  return Call("POST", absl::StrCat("/v1/projects/", UrlEncode(connection_.project), "/jobs"), {}, job);
}

absl::Status Client::ValidateJob(const json& job) {
  return Call("POST", absl::StrCat("/v1/projects/", UrlEncode(connection_.project), "/jobs"),
              {{"validateOnly", "true"}}, job)
      .status();
}

absl::StatusOr<json> Client::GetJob(const std::string& job_id) { return Call("GET", JobPath(job_id)); }

absl::StatusOr<json> Client::ListJobs(const std::string& filter, int page_size, const std::string& page_token) {
  Query q;
  if (!filter.empty()) q.emplace_back("filter", filter);
  if (page_size > 0) q.emplace_back("pageSize", std::to_string(page_size));
  if (!page_token.empty()) q.emplace_back("pageToken", page_token);
  return Call("GET", absl::StrCat("/v1/projects/", UrlEncode(connection_.project), "/jobs"), q);
}

absl::StatusOr<json> Client::CancelJob(const std::string& job_id) {
  return Call("POST", JobPath(job_id) + ":cancel", {}, json::object());
}

absl::StatusOr<json> Client::PatchJob(const std::string& job_id, const json& body, const std::string& update_mask) {
  return Call("PATCH", JobPath(job_id), {{"updateMask", update_mask}}, body);
}

absl::StatusOr<json> Client::ReadLogs(const std::string& job_id, const std::string& page_token,
                                      const std::string& task_name, int wait_seconds, const std::string& trial_id) {
  Query q;
  if (!page_token.empty()) q.emplace_back("pageToken", page_token);
  if (!task_name.empty()) q.emplace_back("taskName", task_name);
  if (!trial_id.empty()) q.emplace_back("trialId", trial_id);
  if (wait_seconds > 0) q.emplace_back("waitSeconds", std::to_string(wait_seconds));
  return Call("GET", JobPath(job_id) + "/logs", q, std::nullopt, wait_seconds + 60);
}

absl::Status Client::FollowLogs(const std::string& job_id, const std::string& page_token, const std::string& task_name,
                                const std::string& trial_id,
                                const std::function<bool(const std::string&, const json&)>& on_event) {
  Query q{{"alt", "sse"}};
  if (!page_token.empty()) q.emplace_back("pageToken", page_token);
  if (!task_name.empty()) q.emplace_back("taskName", task_name);
  if (!trial_id.empty()) q.emplace_back("trialId", trial_id);
  Exchange ex;
  ex.method = "GET";
  ex.url = Url(JobPath(job_id) + "/logs", q);
  ex.timeout_s = 0;  // as long as the job runs (the server sends a heartbeat while it is quiet)
  bool stopped = false;
  bool not_a_stream = false;
  std::string bad_event;
  SseParser parser([&](const std::string& type, const std::string& data) {
    auto event = json::parse(data, nullptr, false);
    if (event.is_discarded() || !event.is_object()) {
      bad_event = data.substr(0, 200);
      return false;
    }
    if (!on_event(type, event)) {
      stopped = true;
      return false;
    }
    return true;
  });
  ex.sink = [&](const char* bytes, size_t n) {
    if (!absl::StartsWith(ex.content_type, "text/event-stream")) {
      not_a_stream = true;
      return false;
    }
    return parser.Feed(std::string_view(bytes, n));
  };
  absl::Status st = Perform(ex);
  if (not_a_stream || (st.ok() && !absl::StartsWith(ex.content_type, "text/event-stream"))) {
    return absl::UnimplementedError("mlengined answered alt=sse with something other than an event stream");
  }
  if (!bad_event.empty()) {
    return absl::DataLossError(absl::StrCat("mlengined sent an event that is not a JSON object: ", bad_event));
  }
  if (stopped) return absl::OkStatus();
  return st;
}

absl::StatusOr<json> Client::UploadFile(const std::string& bucket, const std::string& object,
                                        const std::string& local_path, Progress progress) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(local_path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", local_path, ": ", ec.message()));
  std::FILE* file = std::fopen(local_path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", local_path, ": ", std::strerror(errno)));
  ProgressBar bar(absl::StrCat("Uploading ", BaseName(local_path)), ProgressEnabled(progress));
  Exchange ex;
  ex.method = "POST";
  ex.url = Url(absl::StrCat("/upload/storage/v1/b/", UrlEncode(bucket), "/o"),
               {{"uploadType", "media"}, {"name", object}});
  ex.timeout_s = 0;
  ex.upload = file;
  ex.upload_size = static_cast<int64_t>(size);
  ex.progress = &bar;
  absl::Status s = Perform(ex);
  std::fclose(file);
  if (!s.ok()) return s;
  json doc = json::parse(ex.response, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return json::object();
  return doc;
}

absl::Status Client::Download(const std::string& bucket, const std::string& object,
                              const std::function<bool(const char*, size_t)>& sink, Progress progress) {
  ProgressBar bar(absl::StrCat("Downloading ", BaseName(object)), ProgressEnabled(progress));
  Exchange ex;
  ex.method = "GET";
  ex.url = Url(absl::StrCat("/storage/v1/b/", UrlEncode(bucket), "/o/", UrlEncode(object)), {{"alt", "media"}});
  ex.timeout_s = 0;
  ex.sink = sink;
  ex.progress = &bar;
  ex.download_progress = true;
  return Perform(ex);
}

absl::StatusOr<json> Client::GetObject(const std::string& bucket, const std::string& object) {
  return Call("GET", absl::StrCat("/storage/v1/b/", UrlEncode(bucket), "/o/", UrlEncode(object)));
}

absl::StatusOr<json> Client::ListObjects(const std::string& bucket, const std::string& prefix,
                                         const std::string& delimiter, const std::string& page_token) {
  Query q;
  if (!prefix.empty()) q.emplace_back("prefix", prefix);
  if (!delimiter.empty()) q.emplace_back("delimiter", delimiter);
  if (!page_token.empty()) q.emplace_back("pageToken", page_token);
  return Call("GET", absl::StrCat("/storage/v1/b/", UrlEncode(bucket), "/o"), q);
}

absl::Status Client::DeleteObject(const std::string& bucket, const std::string& object) {
  return Call("DELETE", absl::StrCat("/storage/v1/b/", UrlEncode(bucket), "/o/", UrlEncode(object))).status();
}

absl::StatusOr<json> Client::CreateBucket(const std::string& bucket) {
  return Call("POST", "/storage/v1/b", {{"project", connection_.project}}, json{{"name", bucket}});
}

absl::StatusOr<json> Client::GetBucket(const std::string& bucket) {
  return Call("GET", "/storage/v1/b/" + UrlEncode(bucket), {});
}

absl::StatusOr<json> Client::ListBuckets(const std::string& page_token) {
  Query q{{"project", connection_.project}};
  if (!page_token.empty()) q.emplace_back("pageToken", page_token);
  return Call("GET", "/storage/v1/b", q);
}

}  // namespace mle::cli
