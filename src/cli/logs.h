// `jobs stream-logs`: follows a job's log through mlengined's logs API
// (GET /v1/projects/{p}/jobs/{j}/logs?alt=sse, one streamed response; the
// long poll with waitSeconds where a server does not stream) and prints one "TIMESTAMP TASK_NAME MESSAGE" line per entry (stdout and stderr
// lines of the replicas alike) until the server says jobEnded.
// Not thread-safe (uses the Client).
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "cli/client.h"

namespace mle::cli {

struct StreamLogsOptions {
  std::string task_name;      // only this replica, e.g. worker-replica-0
  std::string trial_id;       // a tuning job's: only this trial
  int polling_interval_s = 10;  // long poll only: longest wait per request (server caps at 30)
  bool since_now = false;     // skip the lines already written
};

// "2024-01-02T03:04:05.123Z master-replica-0 hello"; a trial's line:
// "2024-01-02T03:04:05.123Z master-replica-0 trial=3 hello"
std::string FormatLogEntry(const nlohmann::json& entry);

absl::Status StreamLogs(Client& client, const std::string& job_id, const StreamLogsOptions& options,
                        std::FILE* out);

}  // namespace mle::cli
