#include "service/log_service.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "common/status.h"
#include "service/job_runs.h"

namespace mle::service {

namespace {
namespace fs = std::filesystem;

constexpr size_t kPageEntries = 1000;
constexpr absl::Duration kMaxWait = absl::Seconds(30);
// Every waiting request is read again this often, watched or not.
constexpr auto kTick = std::chrono::milliseconds(100);

// Requests at the same place read the same page.
using ReadKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;
ReadKey KeyOf(const std::string& project, const std::string& job_id, const LogRequest& r) {
  return {project, job_id, r.page_token, r.task_name, r.trial_id};
}
}  // namespace

LogService::LogService(const JobService& jobs, logs::LogReader reader) : jobs_(jobs), reader_(std::move(reader)) {
  watch_ = std::make_unique<logs::DirWatch>(
      [this](const std::string& dir, const std::string& name, bool made_dir) { OnDirChange(dir, name, made_dir); });
  poller_ = std::thread([this] { Poll(); });
}

LogService::~LogService() {
  std::list<Waiter> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    left.swap(waiters_);
  }
  cv_.notify_all();
  poller_.join();
  for (auto& w : left) {
    for (const auto& dir : w.dirs) watch_->Remove(dir);
    w.done(absl::UnavailableError("mlengined is shutting down"));
  }
}

absl::StatusOr<LogResult> LogService::ReadOnce(const std::string& project, const std::string& job_id,
                                               const LogRequest& request,
                                               std::vector<logs::LogSource>* sources_out) const {
  // The state first: if the job is final now, every line it will ever have is on disk.
  auto job = jobs_.GetJob(project, job_id);
  if (!job.ok()) return job.status();
  const bool final_state = model::IsTerminal(job->state);
  // A tuning job's log is its trials'.
  auto sources = RunSourcesOf(jobs_, project, *job, request.trial_id);
  if (!sources.ok()) return sources.status();
  const std::string token = request.page_token == "end" ? reader_.EndToken(project, *sources) : request.page_token;
  auto page = reader_.Read(project, *sources, token, request.task_name, kPageEntries);
  if (!page.ok()) return page.status();
  *sources_out = *std::move(sources);
  LogResult result;
  result.job_ended = final_state && page->at_end;
  result.page = *std::move(page);
  return result;
}

std::vector<std::string> LogService::WatchDirs(const std::string& project,
                                               const std::vector<logs::LogSource>& sources,
                                               bool* all_watched_before) {
  std::vector<std::string> dirs;
  bool all_before = true;
  auto add = [&](const std::string& dir) {
    bool before = false;
    if (!watch_->Add(dir, &before)) return false;
    all_before = all_before && before;
    dirs.push_back(dir);
    return true;
  };
  for (const auto& source : sources) {
    // The run's directory (a replica's directory made later shows there)
    // and each replica's (its log is written there).
    const std::string run_dir = common::JobRunDir(reader_.runs_dir(), project, source.job_id, source.attempt);
    if (!add(run_dir)) continue;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
      std::error_code type_ec;
      if (!entry.is_directory(type_ec) || entry.is_symlink(type_ec)) continue;
      add(entry.path().string());
    }
  }
  if (all_watched_before != nullptr) *all_watched_before = all_before && !dirs.empty();
  return dirs;
}

void LogService::Read(const std::string& project, const std::string& job_id, LogRequest request, Callback done) {
  uint64_t changes_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes_before = changes_;
  }
  std::vector<logs::LogSource> sources;
  auto result = ReadOnce(project, job_id, request, &sources);
  if (!result.ok() || !result->page.entries.empty() || result->job_ended || request.wait <= absl::ZeroDuration()) {
    return done(std::move(result));
  }
  // Nothing new yet: wait from where this read ended, watching where the
  // next line will be written; a line written before the watch began is
  // found by reading once more.
  request.page_token = result->page.next_page_token;
  // (Where every directory was watched already, by other followers, a line
  // written since the first read was seen by the watch: no second read,
  // the poller reads this request at once instead.)
  bool watched_before = false;
  std::vector<std::string> dirs = WatchDirs(project, sources, &watched_before);
  if (!watched_before) {
    result = ReadOnce(project, job_id, request, &sources);
    if (!result.ok() || !result->page.entries.empty() || result->job_ended) {
      for (const auto& dir : dirs) watch_->Remove(dir);
      return done(std::move(result));
    }
  }
  const absl::Time deadline = absl::Now() + std::min(request.wait, kMaxWait);
  std::lock_guard<std::mutex> lock(mu_);
  if (changes_ != changes_before && !dirs.empty()) {
    written_.insert(dirs.front());
    cv_.notify_one();
  }
  waiters_.push_back({project, job_id, std::move(request), deadline, std::move(done), std::move(dirs)});
}

void LogService::OnDirChange(const std::string& dir, const std::string& name, bool made_dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (made_dir && !name.empty()) {
    // A new replica's directory in a watched run: its waiters watch it too.
    const std::string child = dir + "/" + name;
    for (auto& w : waiters_) {
      if (std::find(w.dirs.begin(), w.dirs.end(), dir) == w.dirs.end()) continue;
      if (std::find(w.dirs.begin(), w.dirs.end(), child) != w.dirs.end()) continue;
      if (watch_->Add(child)) w.dirs.push_back(child);
    }
  }
  written_.insert(dir);
  ++changes_;
  cv_.notify_one();
}

void LogService::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next_tick = std::chrono::steady_clock::now() + kTick;
  for (;;) {
    cv_.wait_until(lock, next_tick, [&] { return stopping_ || !written_.empty(); });
    if (stopping_) return;
    const bool tick = std::chrono::steady_clock::now() >= next_tick;
    if (tick) next_tick = std::chrono::steady_clock::now() + kTick;
    std::set<std::string> written;
    written.swap(written_);
    if (waiters_.empty()) continue;
    // On a tick every request is read again; on a write, those that watch
    // where it was written.
    std::list<Waiter> batch;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto next = std::next(it);
      const bool touched = tick || std::any_of(it->dirs.begin(), it->dirs.end(),
                                               [&](const std::string& d) { return written.count(d) > 0; });
      if (touched) batch.splice(batch.end(), waiters_, it);
      it = next;
    }
    if (batch.empty()) continue;
    lock.unlock();
    std::list<Waiter> keep;
    struct Read {
      absl::StatusOr<LogResult> result;
      std::vector<logs::LogSource> sources;
    };
    std::map<ReadKey, Read> read;
    const absl::Time now = absl::Now();
    for (auto& w : batch) {
      const ReadKey key = KeyOf(w.project, w.job_id, w.request);
      auto found = read.find(key);
      if (found == read.end()) {
        Read once;
        once.result = ReadOnce(w.project, w.job_id, w.request, &once.sources);
        found = read.emplace(key, std::move(once)).first;
      }
      const absl::StatusOr<LogResult>& result = found->second.result;
      if (!result.ok() || !result->page.entries.empty() || result->job_ended || now >= w.deadline) {
        for (const auto& dir : w.dirs) watch_->Remove(dir);
        w.done(result);
      } else {
        // A job whose run directory did not exist yet when its follower
        // began to wait: watched from the first tick that finds it.
        if (w.dirs.empty()) w.dirs = WatchDirs(w.project, found->second.sources);
        keep.push_back(std::move(w));
      }
    }
    lock.lock();
    waiters_.splice(waiters_.end(), keep);
  }
}

}  // namespace mle::service
