// LogService: a job's logs for `jobs stream-logs` and the console: pages of
// entries in time order, and long polls that wait (up to 30 s) for new lines
// of a job that is still going. Waiting requests are re-checked by one poller
// thread every 100 ms, so a thousand followers cost one thread.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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
  };
  // The page, or nullopt when there is nothing yet and the caller may wait.
  absl::StatusOr<LogResult> ReadOnce(const std::string& project, const std::string& job_id,
                                     const LogRequest& request) const;
  void Poll();

  const JobService& jobs_;
  const logs::LogReader reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Waiter> waiters_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace mle::service
