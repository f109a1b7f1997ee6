// Client: a typed HTTP client of one mlengined (ml v1 jobs, job logs, and the
// storage API of docs/runtime-contract.md), over libcurl. The only place in
// the CLI that speaks HTTP; replies are returned as parsed JSON.
//
// Errors: a server that cannot be reached gives kUnavailable with a message
// that says how to start one; an API error gives the server's canonical code
// and a message "STATUS: message" followed by one "  field: description" line
// per google.rpc.BadRequest field violation.
//
// Owns one curl handle (connections are reused); not thread-safe. Call
// curl_global_init before the first Client is made (main does).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/config.h"

namespace mle::cli {

using Query = std::vector<std::pair<std::string, std::string>>;

// Percent-encodes every byte except RFC 3986 unreserved ones ('/' too).
std::string UrlEncode(const std::string& s);

// Turns an HTTP error reply into a status as described above.
absl::Status ApiError(long http_status, const std::string& body);

// Whether (and how) to draw a progress bar on stderr for uploads/downloads.
enum class Progress { kNever, kAuto /* stderr is a TTY and the file > 1 MiB */ };

class Client {
 public:
  explicit Client(Connection connection);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Connection& connection() const { return connection_; }

  // A JSON call: path starts with '/', e.g. "/v1/projects/p/jobs".
  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path, const Query& query = {},
                                      const std::optional<nlohmann::json>& body = std::nullopt,
                                      long timeout_s = 120);

  // ml v1 jobs.
  absl::StatusOr<nlohmann::json> CreateJob(const nlohmann::json& job);
  // Every check CreateJob's server makes, nothing created (validateOnly).
  absl::Status ValidateJob(const nlohmann::json& job);
  absl::StatusOr<nlohmann::json> GetJob(const std::string& job_id);
  absl::StatusOr<nlohmann::json> ListJobs(const std::string& filter, int page_size, const std::string& page_token);
  absl::StatusOr<nlohmann::json> CancelJob(const std::string& job_id);
  absl::StatusOr<nlohmann::json> PatchJob(const std::string& job_id, const nlohmann::json& body,
                                          const std::string& update_mask);
  // GET /v1/projects/{p}/jobs/{j}/logs (long poll up to wait_seconds);
  // `trial_id`: one trial of a tuning job.
  absl::StatusOr<nlohmann::json> ReadLogs(const std::string& job_id, const std::string& page_token,
                                          const std::string& task_name, int wait_seconds,
                                          const std::string& trial_id = "");

  // GET .../logs?alt=sse: follows the log in one streamed response, passing
  // each server-sent event's type ("" for a page) and data to `on_event`
  // until the server ends the stream or `on_event` returns false.
  // UNIMPLEMENTED where the server answers with something else (it does
  // not stream).
  absl::Status FollowLogs(const std::string& job_id, const std::string& page_token, const std::string& task_name,
                          const std::string& trial_id,
                          const std::function<bool(const std::string&, const nlohmann::json&)>& on_event);

  // Storage.
  absl::StatusOr<nlohmann::json> UploadFile(const std::string& bucket, const std::string& object,
                                            const std::string& local_path, Progress progress);
  // Streams an object's bytes to `sink` (called with each chunk). On an HTTP
  // error nothing is passed to the sink.
  absl::Status Download(const std::string& bucket, const std::string& object,
                        const std::function<bool(const char*, size_t)>& sink, Progress progress);
  absl::StatusOr<nlohmann::json> GetObject(const std::string& bucket, const std::string& object);
  absl::StatusOr<nlohmann::json> ListObjects(const std::string& bucket, const std::string& prefix,
                                             const std::string& delimiter, const std::string& page_token);
  absl::Status DeleteObject(const std::string& bucket, const std::string& object);
  absl::StatusOr<nlohmann::json> CreateBucket(const std::string& bucket);
  absl::StatusOr<nlohmann::json> GetBucket(const std::string& bucket);
  absl::StatusOr<nlohmann::json> ListBuckets(const std::string& page_token);

 private:
  struct Exchange;
  absl::Status Perform(Exchange& exchange);
  std::string Url(const std::string& path, const Query& query) const;
  std::string JobPath(const std::string& job_id) const;

  Connection connection_;
  void* curl_;  // CURL*
};

}  // namespace mle::cli
