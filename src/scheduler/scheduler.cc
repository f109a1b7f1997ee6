#include "scheduler/scheduler.h"

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/time_format.h"
#include "obs/metrics.h"

namespace mle::scheduler {

using model::JobState;

namespace {

JobKey KeyOf(const model::Job& job) { return {job.project, job.job_id}; }
JobKey KeyOf(const executor::JobRef& ref) { return {ref.project, ref.job_id}; }

std::optional<absl::Duration> SchedulingDuration(const model::Job& job, bool running) {
  if (!job.training_input || !job.training_input->scheduling) return std::nullopt;
  const auto& s = *job.training_input->scheduling;
  const std::string& text = running ? s.max_running_time : s.max_wait_time;
  if (text.empty()) return std::nullopt;
  return common::ParseDuration(text);
}

// AI Platform's default limit on running time: 7 days.
constexpr absl::Duration kDefaultMaxRunningTime = absl::Hours(24 * 7);

}  // namespace

Scheduler::Scheduler(common::Clock& clock, StateRecorder& recorder, executor::Executor* executor,
                     SchedulerOptions options)
    : clock_(clock), recorder_(recorder), executor_(executor), options_(std::move(options)) {}

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

absl::Status Scheduler::Admit(const model::Job& job) const {
  if (executor_ == nullptr) return absl::OkStatus();
  if (auto s = executor_->CheckRunnable(job); !s.ok()) return s;
  if (executor_->PlacesJobs()) return absl::OkStatus();  // CheckRunnable asked the cluster
  return CheckFeasible(DemandOf(job, options_.resources), options_.inventory);
}

void Scheduler::Submit(const model::Job& job) {
  Enqueue(job);
  Post(PlaceEvent{});
}
void Scheduler::Cancel(const JobKey& key) { Post(CancelEvent{key}); }
void Scheduler::Adopt(const model::Job& job) { Post(AdoptEvent{job}); }
void Scheduler::Tick() { Post(TickEvent{}); }
void Scheduler::JobStarted(const executor::JobRef& job) { Post(StartedEvent{KeyOf(job)}); }
void Scheduler::JobWaiting(const executor::JobRef& job, const std::string& reason) {
  Post(WaitingEvent{KeyOf(job), reason});
}
void Scheduler::JobPreparing(const executor::JobRef& job) { Post(PreparingEvent{KeyOf(job)}); }
void Scheduler::JobEnded(const executor::JobRef& job, executor::Outcome outcome, const std::string& message) {
  Post(EndedEvent{KeyOf(job), outcome, message});
}

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
  if (std::holds_alternative<PlaceEvent>(e)) {
    TryPlace();
  } else if (const auto* c = std::get_if<CancelEvent>(&e)) {
    Stop(c->key, "Cancelled by a user request.");
  } else if (const auto* a = std::get_if<AdoptEvent>(&e)) {
    OnAdopt(a->job);
  } else if (std::holds_alternative<TickEvent>(e)) {
    OnTick();
  } else if (const auto* st = std::get_if<StartedEvent>(&e)) {
    auto it = active_.find(st->key);
    if (it == active_.end() || it->second.running) return;
    it->second.running = true;
    it->second.waiting = false;
    it->second.running_since = clock_.Now();
    if (!it->second.stop_requested) recorder_.Record(st->key, {JobState::kRunning, "", true});
  } else if (const auto* en = std::get_if<EndedEvent>(&e)) {
    OnEnded(*en);
  } else if (const auto* w = std::get_if<WaitingEvent>(&e)) {
    auto it = active_.find(w->key);
    if (it == active_.end() || it->second.stop_requested) return;
    if (!it->second.waiting) it->second.enqueue_time = clock_.Now();  // requeued: wait again
    it->second.waiting = true;
    it->second.running = false;
    recorder_.Record(w->key, {JobState::kQueued, w->reason, true});
  } else if (const auto* p = std::get_if<PreparingEvent>(&e)) {
    auto it = active_.find(p->key);
    if (it == active_.end() || it->second.stop_requested) return;
    it->second.waiting = false;
    recorder_.Record(p->key, {JobState::kPreparing, "", true});
  } else if (const auto* l = std::get_if<LaunchEvent>(&e)) {
    OnLaunch(*l);
  } else if (const auto* b = std::get_if<BarrierEvent>(&e)) {
    b->reached();
  }
}

void Scheduler::Drain() {
  std::promise<void> reached;
  Post(BarrierEvent{[&reached] { reached.set_value(); }});
  reached.get_future().wait();
}

void Scheduler::OnAdopt(const model::Job& job) {
  const JobKey key = KeyOf(job);
  // Whatever the database says, a run the executor finds on disk is the
  // job's run: adopt it rather than start a second one.
  std::optional<model::Placement> placement = executor_ ? executor_->Recover(job) : std::nullopt;
  if (!placement) {
    // Nothing of it runs: place it again (or finish a cancel).
    if (job.state == JobState::kCancelling) {
      recorder_.Record(key, {JobState::kCancelled, ""});
    } else {
      if (job.state != JobState::kQueued) recorder_.Record(key, {JobState::kQueued, ""});
      Enqueue(job);
      TryPlace();
    }
    return;
  }
  Active active;
  active.job = job;
  active.demand = DemandOf(job, options_.resources);
  active.placement = *placement;
  active.launched = true;
  active.running = job.state == JobState::kRunning || job.state == JobState::kCancelling;
  // An executor that queues jobs itself may hold it in its queue still.
  active.waiting = job.state == JobState::kQueued && executor_->PlacesJobs();
  if (job.state == JobState::kQueued && !executor_->PlacesJobs()) {
    // Its start was not recorded before the crash, but it did start.
    recorder_.Record(key, {JobState::kPreparing, ""});
  }
  active.enqueue_time = job.create_time.value_or(clock_.Now());
  active.max_wait = SchedulingDuration(job, false);
  active.running_since = job.start_time.value_or(clock_.Now());
  active.max_running = SchedulingDuration(job, true).value_or(kDefaultMaxRunningTime);
  usage_.Add(active.demand, active.placement);
  active_[key] = std::move(active);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    active_keys_.insert(key);
  }
  if (job.state == JobState::kCancelling) Stop(key, job.error_message);
}

void Scheduler::OnLaunch(const LaunchEvent& e) {
  auto it = active_.find(e.key);
  if (it == active_.end() || it->second.launched) return;
  Active& a = it->second;
  if (!e.recorded.ok()) {
    // Nothing was started; without a durable PREPARING nothing may be.
    return OnEnded({e.key, executor::Outcome::kFailed,
                    absl::StrCat("mlengined could not record the start of the job, so it was not started: ",
                                 e.recorded.message())});
  }
  if (a.stop_requested) return OnEnded({e.key, executor::Outcome::kStopped, a.stop_reason});
  a.launched = true;
  executor_->Launch(a.job, a.demand, a.placement);
}

void Scheduler::Enqueue(const model::Job& job) {
  const JobKey key = KeyOf(job);
  Queued q;
  q.job = job;
  q.demand = DemandOf(job, options_.resources);
  if (job.training_input && job.training_input->scheduling) {
    q.priority = job.training_input->scheduling->priority.value_or(0);
  }
  q.enqueue_time = job.create_time.value_or(clock_.Now());
  q.max_wait = SchedulingDuration(job, false);
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (queued_.count(key) || active_keys_.count(key)) return;
  order_.insert({-q.priority, job.sequence, key});
  queued_.emplace(key, std::move(q));
}

void Scheduler::RemoveQueued(const JobKey& key) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = queued_.find(key);
  if (it == queued_.end()) return;
  order_.erase({-it->second.priority, it->second.job.sequence, key});
  queued_.erase(it);
}

void Scheduler::TryPlace() {
  if (executor_ == nullptr) return;
  obs::ScopedTimer pass_timer(obs::Metrics::Default().SchedulingPass());
  if (executor_->PlacesJobs()) return HandOver();
  std::vector<JobKey> to_start;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (const auto& [neg_priority, sequence, key] : order_) {
      const Queued& q = queued_.at(key);
      obs::ScopedTimer placement_timer(obs::Metrics::Default().Placement());
      auto placement = Place(q.demand, options_.inventory, usage_);
      if (!placement) continue;  // not yet; a smaller job behind may fit
      usage_.Add(q.demand, *placement);
      Active active;
      active.job = q.job;
      active.demand = q.demand;
      active.placement = *std::move(placement);
      active.max_running = SchedulingDuration(q.job, true).value_or(kDefaultMaxRunningTime);
      active_[key] = std::move(active);
      active_keys_.insert(key);
      to_start.push_back(key);
    }
  }
  for (const auto& key : to_start) {
    RemoveQueued(key);
    // Launched once PREPARING is durable (OnLaunch), never before.
    recorder_.Record(key, {JobState::kPreparing, ""},
                     [this, key](absl::Status s) { Post(LaunchEvent{key, std::move(s)}); });
  }
}

void Scheduler::HandOver() {
  std::vector<JobKey> to_start;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (const auto& [neg_priority, sequence, key] : order_) {
      const Queued& q = queued_.at(key);
      Active active;
      active.job = q.job;
      active.demand = q.demand;
      active.max_running = SchedulingDuration(q.job, true).value_or(kDefaultMaxRunningTime);
      active.waiting = true;
      active.enqueue_time = q.enqueue_time;
      active.max_wait = q.max_wait;
      active_[key] = std::move(active);
      active_keys_.insert(key);
      to_start.push_back(key);
    }
  }
  for (const auto& key : to_start) {
    RemoveQueued(key);
    Active& a = active_.at(key);
    a.launched = true;  // QUEUED in the executor's own queue; it records its submission itself
    executor_->Launch(a.job, a.demand, a.placement);
  }
}

void Scheduler::Stop(const JobKey& key, const std::string& reason) {
  bool was_queued = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    was_queued = queued_.count(key) > 0;
  }
  if (was_queued) {
    RemoveQueued(key);
    recorder_.Record(key, {JobState::kCancelling, reason});
    recorder_.Record(key, {JobState::kCancelled, reason});
    return;
  }
  auto it = active_.find(key);
  if (it == active_.end()) {
    // Not ours (e.g. never submitted because no executor): nothing runs.
    recorder_.Record(key, {JobState::kCancelled, ""});
    return;
  }
  if (it->second.stop_requested) return;
  it->second.stop_requested = true;
  it->second.stop_reason = reason;
  recorder_.Record(key, {JobState::kCancelling, reason});
  // Not yet launched: OnLaunch ends it without starting anything.
  if (it->second.launched) executor_->Cancel({key.project, key.job_id}, reason);
}

void Scheduler::OnEnded(const EndedEvent& e) {
  auto it = active_.find(e.key);
  if (it == active_.end()) return;
  Active a = std::move(it->second);
  active_.erase(it);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    active_keys_.erase(e.key);
  }
  usage_.Remove(a.demand, a.placement);
  switch (e.outcome) {
    case executor::Outcome::kSucceeded:
      // A master that finished before the stop landed still succeeded.
      recorder_.Record(e.key, {JobState::kSucceeded, ""});
      break;
    case executor::Outcome::kStopped:
      recorder_.Record(e.key, {a.stop_state, a.stop_reason});
      break;
    case executor::Outcome::kFailed:
    case executor::Outcome::kLost:
      if (a.stop_requested) {
        recorder_.Record(e.key, {a.stop_state, a.stop_reason});
      } else {
        recorder_.Record(e.key, {JobState::kFailed, e.message});
      }
      break;
  }
  TryPlace();
}

void Scheduler::OnTick() {
  const absl::Time now = clock_.Now();
  std::vector<std::pair<JobKey, absl::Duration>> expired;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (const auto& [key, q] : queued_) {
      if (q.max_wait && now - q.enqueue_time >= *q.max_wait) expired.emplace_back(key, *q.max_wait);
    }
  }
  for (const auto& [key, max_wait] : expired) {
    Stop(key, absl::StrCat("The job was not started within its scheduling.maxWaitTime (",
                           common::FormatDuration(max_wait), ") and was cancelled."));
  }
  std::vector<std::pair<JobKey, std::string>> overdue;
  for (const auto& [key, a] : active_) {
    if (a.waiting && !a.stop_requested && a.max_wait && now - a.enqueue_time >= *a.max_wait) {
      overdue.emplace_back(key, absl::StrCat("The job was not started within its scheduling.maxWaitTime (",
                                             common::FormatDuration(*a.max_wait), ") and was cancelled."));
      continue;
    }
    if (a.running && !a.stop_requested && a.max_running && now - a.running_since >= *a.max_running) {
      overdue.emplace_back(key, absl::StrCat("The job ran longer than its scheduling.maxRunningTime (",
                                             common::FormatDuration(*a.max_running), ") and was cancelled."));
    }
  }
  for (const auto& [key, reason] : overdue) Stop(key, reason);
  TryPlace();
}

std::optional<int64_t> Scheduler::QueuePosition(const JobKey& key) const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = queued_.find(key);
  if (it == queued_.end()) return std::nullopt;
  return static_cast<int64_t>(order_.order_of_key({-it->second.priority, it->second.job.sequence, key})) + 1;
}

}  // namespace mle::scheduler
