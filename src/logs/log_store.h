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
  std::string trial_id;   // the trial of a tuning job it came from; "" otherwise
  bool is_stderr = false;
  std::string message;
};

struct LogPage {
  std::vector<LogEntry> entries;
  std::string next_page_token;
  bool at_end = false;  // every complete line written so far has been returned
};

// One job's run read as part of a stream: a tuning job's stream is its
// trials' jobs, each entry marked with its trial.
struct LogSource {
  std::string job_id;
  std::string trial_id;  // "" for a job of its own
  int attempt = 1;       // its run of that attempt (common::JobRunDir)
};

class LogReader {
 public:
  explicit LogReader(std::string runs_dir) : runs_dir_(std::move(runs_dir)) {}

  // Where the runs' directories are (common/run_layout.h).
  const std::string& runs_dir() const { return runs_dir_; }

  // The same over several runs merged in time order (a tuning job's trials).
  absl::StatusOr<LogPage> Read(const std::string& project, const std::vector<LogSource>& sources,
                               const std::string& page_token, const std::string& task_name, size_t max_entries) const;
  std::string EndToken(const std::string& project, const std::vector<LogSource>& sources) const;

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
