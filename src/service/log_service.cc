#include "service/log_service.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "service/job_runs.h"

namespace mle::service {

namespace {
constexpr size_t kPageEntries = 1000;
constexpr absl::Duration kMaxWait = absl::Seconds(30);
}  // namespace

LogService::LogService(const JobService& jobs, logs::LogReader reader) : jobs_(jobs), reader_(std::move(reader)) {
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
  for (auto& w : left) w.done(absl::UnavailableError("mlengined is shutting down"));
}

absl::StatusOr<LogResult> LogService::ReadOnce(const std::string& project, const std::string& job_id,
                                               const LogRequest& request) const {
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
  LogResult result;
  result.job_ended = final_state && page->at_end;
  result.page = *std::move(page);
  return result;
}

void LogService::Read(const std::string& project, const std::string& job_id, LogRequest request, Callback done) {
  auto result = ReadOnce(project, job_id, request);
  if (!result.ok() || !result->page.entries.empty() || result->job_ended || request.wait <= absl::ZeroDuration()) {
    return done(std::move(result));
  }
  // Nothing new yet: wait from where this read ended.
  request.page_token = result->page.next_page_token;
  const absl::Time deadline = absl::Now() + std::min(request.wait, kMaxWait);
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.push_back({project, job_id, std::move(request), deadline, std::move(done)});
  cv_.notify_one();
}

void LogService::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; });
    if (stopping_) return;
    if (waiters_.empty()) continue;
    std::list<Waiter> batch;
    batch.swap(waiters_);
    lock.unlock();
    std::list<Waiter> keep;
    const absl::Time now = absl::Now();
    for (auto& w : batch) {
      auto result = ReadOnce(w.project, w.job_id, w.request);
      if (!result.ok() || !result->page.entries.empty() || result->job_ended || now >= w.deadline) {
        w.done(std::move(result));
      } else {
        keep.push_back(std::move(w));
      }
    }
    lock.lock();
    waiters_.splice(waiters_.end(), keep);
  }
}

}  // namespace mle::service
