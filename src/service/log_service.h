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
//
// A follower (Follow: a streamed response) is sent each page as it is
// written, without asking again: the poller reads once for every follower
// at the same place and hands them all the same SharedPage, which the edge
// encodes once. A follower still taking its last page is sent the next one
// when it has (checked every few milliseconds while it is behind), so a slow
// reader never has more than one page queued.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/worker_pool.h"
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

// A page as every follower at the same place gets it; the edge encodes it
// once (Encoded), not once per follower. Thread-safe.
class SharedPage {
 public:
  explicit SharedPage(LogResult result) : result_(std::move(result)) {}
  const LogResult& result() const { return result_; }
  // encode(result()), made once per `format` and kept.
  std::shared_ptr<const std::string> Encoded(const std::string& format,
                                             const std::function<std::string(const LogResult&)>& encode) const;

 private:
  const LogResult result_;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> encoded_;
};

// One who follows a job's log as it is written (a streamed response). Called
// from the poller's thread (and from Follow's caller, for the first page).
class LogFollower {
 public:
  virtual ~LogFollower() = default;
  // Whether it can take a page now: false while it is still delivering its last.
  virtual bool Ready() const = 0;
  // Whether its reader has gone: it is dropped.
  virtual bool Gone() const = 0;
  // The next page: new lines, or none after a quiet while (LogService::
  // kHeartbeat, so its reader knows it is still followed); the last has
  // result().job_ended.
  virtual void Send(std::shared_ptr<const SharedPage> page) = 0;
  // The follow is over: OK after the job's last line or at kMaxFollow (the
  // reader may follow again from its last page's token), else an error.
  virtual void End(absl::Status status) = 0;
};

class LogService {
 public:
  using Callback = std::function<void(absl::StatusOr<LogResult>)>;
  // A quiet follower is sent an empty page this often.
  static constexpr absl::Duration kHeartbeat = absl::Seconds(15);
  // A follow ends after this long (the caller's access is checked again
  // when it follows again).
  static constexpr absl::Duration kMaxFollow = absl::Minutes(10);

  LogService(const JobService& jobs, logs::LogReader reader);
  ~LogService();

  void Read(const std::string& project, const std::string& job_id, LogRequest request, Callback done);
  // Follows the log from request.page_token (request.wait is not used) until
  // the job has ended and every line was sent. The first page is read now:
  // an error there (no such job, a bad token) is returned and nothing is
  // sent; otherwise the follower gets its pages from then on.
  absl::Status Follow(const std::string& project, const std::string& job_id, LogRequest request,
                      std::shared_ptr<LogFollower> follower);

 private:
  struct Waiter {
    std::string project, job_id;
    LogRequest request;
    absl::Time deadline;
    Callback done;
    std::vector<std::string> dirs;  // watched for it (each once in watch_)
    // A follower instead of `done`: when it was last sent a page, and
    // whether it is behind (more lines are there than its last page held).
    std::shared_ptr<LogFollower> follower;
    absl::Time last_sent = absl::InfinitePast();
    bool sent = false;  // any page
    bool behind = false;
  };
  // What a follower is sent: a page, its end, or both (the page first).
  struct Outgoing {
    std::shared_ptr<LogFollower> follower;
    std::shared_ptr<const SharedPage> page;  // or none
    std::optional<absl::Status> end;
  };
  // Gives a follower the page read at its place, if it can take it now (in
  // `out`); false when its follow is over (ended, gone, or at kMaxFollow).
  bool Deliver(Waiter& w, const absl::StatusOr<LogResult>& result,
               const std::function<std::shared_ptr<const SharedPage>()>& shared, absl::Time now,
               std::vector<Outgoing>& out);
  // Sends `out` (on two threads when it is long); empties it.
  void Send(std::vector<Outgoing>& out);
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
  bool followers_behind_ = false;  // a waiting follower is behind: the poller looks again soon
  common::WorkerPool sender_;  // sends half of a long batch of pages
  std::unique_ptr<logs::DirWatch> watch_;  // after what its callback uses; before the poller
  std::thread poller_;
};

}  // namespace mle::service
