#include "service/log_service.h"

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <string_view>
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
// A follower that is behind is looked at again this soon.
constexpr auto kCatchUp = std::chrono::milliseconds(5);
// From this many pages to send at once, two threads send them.
constexpr size_t kSplitSends = 64;

// Requests at the same place read the same page (the key points into them).
using ReadKey = std::tuple<std::string_view, std::string_view, std::string_view, std::string_view, std::string_view>;
}  // namespace

LogService::LogService(const JobService& jobs, logs::LogReader reader)
    : jobs_(jobs), reader_(std::move(reader)), sender_(1, common::WorkerPool::OnStop::kDrain) {
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
    if (w.follower) {
      w.follower->End(absl::UnavailableError("mlengined is shutting down"));
    } else {
      w.done(absl::UnavailableError("mlengined is shutting down"));
    }
  }
}

std::shared_ptr<const std::string> SharedPage::Encoded(
    const std::string& format, const std::function<std::string(const LogResult&)>& encode) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [f, bytes] : encoded_) {
    if (f == format) return bytes;
  }
  auto bytes = std::make_shared<const std::string>(encode(result_));
  encoded_.emplace_back(format, bytes);
  return bytes;
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
  Waiter w;
  w.project = project;
  w.job_id = job_id;
  w.request = std::move(request);
  w.deadline = deadline;
  w.done = std::move(done);
  w.dirs = std::move(dirs);
  waiters_.push_back(std::move(w));
}

absl::Status LogService::Follow(const std::string& project, const std::string& job_id, LogRequest request,
                                std::shared_ptr<LogFollower> follower) {
  uint64_t changes_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes_before = changes_;
  }
  std::vector<logs::LogSource> sources;
  auto result = ReadOnce(project, job_id, request, &sources);
  if (!result.ok()) return result.status();
  const absl::Time now = absl::Now();
  Waiter w;
  w.project = project;
  w.job_id = job_id;
  w.request = std::move(request);
  w.deadline = now + kMaxFollow;
  w.follower = std::move(follower);
  // The first page now (even empty: the reader learns where it is).
  std::vector<Outgoing> out;
  const bool stays = Deliver(w, result, [&] { return std::make_shared<const SharedPage>(*result); }, now, out);
  Send(out);
  if (!stays) return absl::OkStatus();
  w.dirs = WatchDirs(project, sources);
  std::lock_guard<std::mutex> lock(mu_);
  // A line written since the first read (or more than its first page held)
  // is read by the poller at once.
  if (changes_ != changes_before && !w.dirs.empty()) written_.insert(w.dirs.front());
  if (w.behind) followers_behind_ = true;
  waiters_.push_back(std::move(w));
  cv_.notify_one();
  return absl::OkStatus();
}

bool LogService::Deliver(Waiter& w, const absl::StatusOr<LogResult>& result,
                         const std::function<std::shared_ptr<const SharedPage>()>& shared, absl::Time now,
                         std::vector<Outgoing>& out) {
  if (w.follower->Gone()) return false;
  if (!result.ok()) {
    out.push_back({w.follower, nullptr, result.status()});
    return false;
  }
  const bool news = !result->page.entries.empty() || result->job_ended;
  if (news || !w.sent || now - w.last_sent >= kHeartbeat) {
    if (!w.follower->Ready()) {
      w.behind = true;  // it is sent this when it has taken its last page
      return true;
    }
    w.sent = true;
    w.last_sent = now;
    w.request.page_token = result->page.next_page_token;
    w.behind = !result->page.at_end;
    if (result->job_ended) {
      out.push_back({w.follower, shared(), absl::OkStatus()});
      return false;
    }
    out.push_back({w.follower, shared(), std::nullopt});
  }
  if (now >= w.deadline) {
    out.push_back({w.follower, nullptr, absl::OkStatus()});
    return false;
  }
  return true;
}

void LogService::Send(std::vector<Outgoing>& out) {
  auto send = [&out](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      Outgoing& o = out[i];
      if (o.page) o.follower->Send(std::move(o.page));
      if (o.end) o.follower->End(*o.end);
    }
  };
  // Each page is a write to a socket, most of its cost the kernel's: a
  // thousand followers are served by two threads at once.
  const size_t half = out.size() / 2;
  std::promise<void> helped;
  if (out.size() >= kSplitSends && sender_.Post([&] {
        send(0, half);
        helped.set_value();
      })) {
    send(half, out.size());
    helped.get_future().wait();
  } else {
    send(0, out.size());
  }
  out.clear();
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
    const auto wake_at =
        followers_behind_ ? std::min(next_tick, std::chrono::steady_clock::now() + kCatchUp) : next_tick;
    cv_.wait_until(lock, wake_at, [&] { return stopping_ || !written_.empty(); });
    if (stopping_) return;
    const bool tick = std::chrono::steady_clock::now() >= next_tick;
    if (tick) next_tick = std::chrono::steady_clock::now() + kTick;
    std::set<std::string> written;
    written.swap(written_);
    followers_behind_ = false;
    if (waiters_.empty()) continue;
    // On a tick every request is read again; on a write, those that watch
    // where it was written; and followers that are behind.
    std::list<Waiter> batch;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto next = std::next(it);
      const bool touched = tick || it->behind || std::any_of(it->dirs.begin(), it->dirs.end(), [&](const std::string& d) {
                             return written.count(d) > 0;
                           });
      if (touched) batch.splice(batch.end(), waiters_, it);
      it = next;
    }
    if (batch.empty()) continue;
    lock.unlock();
    struct Read {
      absl::StatusOr<LogResult> result;
      std::vector<logs::LogSource> sources;
      std::shared_ptr<const SharedPage> shared;  // made for the first follower
    };
    // Each place read once: first every read (nothing changes the requests
    // the keys point into meanwhile), then every answer.
    std::map<ReadKey, Read> read;
    std::vector<Read*> read_of;
    read_of.reserve(batch.size());
    for (auto& w : batch) {
      if (w.follower && !w.follower->Gone() && !w.follower->Ready()) {
        read_of.push_back(nullptr);  // still taking its last page: looked at again soon
        continue;
      }
      const ReadKey key{w.project, w.job_id, w.request.page_token, w.request.task_name, w.request.trial_id};
      auto found = read.find(key);
      if (found == read.end()) {
        Read once;
        once.result = ReadOnce(w.project, w.job_id, w.request, &once.sources);
        found = read.emplace(key, std::move(once)).first;
      }
      read_of.push_back(&found->second);
    }
    std::vector<Outgoing> out;  // the followers' pages, sent once all are read
    const absl::Time now = absl::Now();
    bool behind = false;
    size_t i = 0;
    for (auto it = batch.begin(); it != batch.end(); ++i) {
      Waiter& w = *it;
      Read* r = read_of[i];
      if (r == nullptr) {
        w.behind = true;
        behind = true;
        ++it;
        continue;
      }
      const absl::StatusOr<LogResult>& result = r->result;
      bool stays = false;
      if (w.follower) {
        stays = Deliver(w, result, [r] {
          if (!r->shared) r->shared = std::make_shared<const SharedPage>(*r->result);
          return r->shared;
        }, now, out);
      } else if (!result.ok() || !result->page.entries.empty() || result->job_ended || now >= w.deadline) {
        w.done(result);
      } else {
        stays = true;
      }
      if (!stays) {
        for (const auto& dir : w.dirs) watch_->Remove(dir);
        it = batch.erase(it);
        continue;
      }
      // A job whose run directory did not exist yet when its follower
      // began to wait: watched from the first tick that finds it.
      if (w.dirs.empty() && result.ok()) w.dirs = WatchDirs(w.project, r->sources);
      behind = behind || w.behind;
      ++it;
    }
    Send(out);
    lock.lock();
    followers_behind_ = followers_behind_ || behind;
    waiters_.splice(waiters_.end(), batch);
  }
}

}  // namespace mle::service
