#include "scheduler/scheduler.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/time_format.h"

namespace mle::scheduler {

Scheduler::Scheduler(common::Clock& clock, StateRecorder& recorder)
    : clock_(clock), recorder_(recorder) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    stopping_ = true;
    events_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Submit(const model::Job& job) { Post(SubmitEvent{job}); }
void Scheduler::Cancel(const JobKey& key) { Post(CancelEvent{key}); }
void Scheduler::Tick() { Post(TickEvent{}); }

void Scheduler::Post(Event e) {
  std::lock_guard<std::mutex> lock(events_mu_);
  events_.push_back(std::move(e));
  events_cv_.notify_one();
}

void Scheduler::RunPending() {
  for (;;) {
    std::deque<Event> batch;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      batch.swap(events_);
    }
    if (batch.empty()) return;
    for (const auto& e : batch) Handle(e);
  }
}

void Scheduler::Loop() {
  for (;;) {
    std::deque<Event> batch;
    {
      std::unique_lock<std::mutex> lock(events_mu_);
      // Wake at least once a second to check time-based limits.
      events_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || !events_.empty(); });
      if (stopping_) return;
      batch.swap(events_);
    }
    if (batch.empty()) batch.push_back(TickEvent{});
    for (const auto& e : batch) Handle(e);
  }
}

void Scheduler::Handle(const Event& e) {
  if (const auto* s = std::get_if<SubmitEvent>(&e)) {
    const model::Job& job = s->job;
    JobKey key{job.project, job.job_id};
    Queued q{key, 0, job.sequence, job.create_time.value_or(clock_.Now()), std::nullopt};
    if (job.training_input && job.training_input->scheduling) {
      const auto& sch = *job.training_input->scheduling;
      q.priority = sch.priority.value_or(0);
      if (!sch.max_wait_time.empty()) q.max_wait = common::ParseDuration(sch.max_wait_time);
    }
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queued_.count(key)) return;
    order_.insert({-q.priority, q.sequence, key});
    queued_.emplace(key, std::move(q));
    return;
  }
  if (const auto* c = std::get_if<CancelEvent>(&e)) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (auto it = queued_.find(c->key); it != queued_.end()) {
        order_.erase({-it->second.priority, it->second.sequence, it->first});
        queued_.erase(it);
      }
    }
    // Nothing of the job runs (no executor holds it), so the stop is complete.
    recorder_.Record(c->key, {model::JobState::kCancelled, ""});
    return;
  }
  // Tick: enforce maxWaitTime on queued jobs.
  const absl::Time now = clock_.Now();
  std::vector<JobKey> expired;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (auto it = queued_.begin(); it != queued_.end();) {
      const Queued& q = it->second;
      if (q.max_wait && now - q.enqueue_time >= *q.max_wait) {
        expired.push_back(q.key);
        order_.erase({-q.priority, q.sequence, q.key});
        it = queued_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& key : expired) {
    const std::string why = "The job was not started within its scheduling.maxWaitTime and was cancelled.";
    recorder_.Record(key, {model::JobState::kCancelling, why});
    recorder_.Record(key, {model::JobState::kCancelled, why});
  }
}

std::optional<int64_t> Scheduler::QueuePosition(const JobKey& key) const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = queued_.find(key);
  if (it == queued_.end()) return std::nullopt;
  return static_cast<int64_t>(order_.order_of_key({-it->second.priority, it->second.sequence, key})) + 1;
}

}  // namespace mle::scheduler
