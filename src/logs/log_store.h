// LogReader: reads the durable per-replica logs of a job (written by
// mlengine-replica under the runs directory, see common/run_layout.h) as one
// time-ordered stream of entries, in pages. A page token records how far
// each replica's log was read, so following a job is "read again with the
// token you were given". Thread-safe (reads files only; no state).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::logs {

struct LogEntry {
  std::string timestamp;  // RFC 3339, as written
  std::string task_name;  // master-replica-0, ...
  bool is_stderr = false;
  std::string message;
};

struct LogPage {
  std::vector<LogEntry> entries;
  std::string next_page_token;
  bool at_end = false;  // every complete line written so far has been returned
};

class LogReader {
 public:
  explicit LogReader(std::string runs_dir) : runs_dir_(std::move(runs_dir)) {}

  // Entries after `page_token` ("" = from the beginning), of one task when
  // `task_name` is set, at most `max_entries`. INVALID_ARGUMENT for a token
  // that is not one of ours.
  absl::StatusOr<LogPage> Read(const std::string& project, const std::string& job_id, const std::string& page_token,
                               const std::string& task_name, size_t max_entries) const;
  // A token pointing at the current end of every log ("only new lines").
  std::string EndToken(const std::string& project, const std::string& job_id) const;

 private:
  std::string runs_dir_;
};

}  // namespace mle::logs
