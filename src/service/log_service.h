// LogService: a job's logs for `jobs stream-logs` and the console: pages of
// entries in time order, and long polls that wait (up to 30 s) for new lines
// of a job that is still going.
//
// A waiting request wakes when a replica writes: its job's run directory
// and replica directories are watched (logs/dir_watch.h, inotify), and a
// write there re-reads the requests that watch it at once, one read for
// every request at the same place (a thousand followers of one job read the
// new lines once). One poller thread serves them all; it also re-reads every
// request each 100 ms, for what a watch cannot see: a job's end (its state),
// a tuning job's new trials, a log on another machine's file system.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "logs/dir_watch.h"
#include "logs/log_store.h"
#include "service/job_service.h"

namespace mle::service {

struct LogRequest {
  std::string page_token;  // "" = from the start; "end" = from now on
  std::string task_name;   // "" = every replica
  std::string trial_id;    // a tuning job's: "" = every trial
  absl::Duration wait = absl::ZeroDuration();
};

struct LogResult {
  logs::LogPage page;
  bool job_ended = false;  // the job is final and every line has been returned
};

class LogService {
 public:
  using Callback = std::function<void(absl::StatusOr<LogResult>)>;
  LogService(const JobService& jobs, logs::LogReader reader);
  ~LogService();

  void Read(const std::string& project, const std::string& job_id, LogRequest request, Callback done);

 private:
  struct Waiter {
    std::string project, job_id;
    LogRequest request;
    absl::Time deadline;
    Callback done;
    std::vector<std::string> dirs;  // watched for it (each once in watch_)
  };
  // The page (empty when there is nothing yet and the caller may wait);
  // `sources`: the runs it read (a tuning job's trials), for WatchDirs.
  absl::StatusOr<LogResult> ReadOnce(const std::string& project, const std::string& job_id,
                                     const LogRequest& request, std::vector<logs::LogSource>* sources) const;
  // Watches the directories the runs' lines are written in; returns them.
  // `all_watched_before` (optional): every one of them was watched already.
  std::vector<std::string> WatchDirs(const std::string& project, const std::vector<logs::LogSource>& sources,
                                     bool* all_watched_before = nullptr);
  void OnDirChange(const std::string& dir, const std::string& name, bool made_dir);
  void Poll();

  const JobService& jobs_;
  const logs::LogReader reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Waiter> waiters_;
  std::set<std::string> written_;  // directories written in since the poller last looked
  uint64_t changes_ = 0;           // writes seen by the watch, ever
  bool stopping_ = false;
  std::unique_ptr<logs::DirWatch> watch_;  // after what its callback uses; before the poller
  std::thread poller_;
};

}  // namespace mle::service
