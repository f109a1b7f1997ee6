#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <future>

#include <set>

#include "absl/strings/str_cat.h"
#include "common/time_format.h"
#include "obs/log.h"
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

std::string RegionOf(const model::Job& job) { return job.training_input ? job.training_input->region : ""; }

// What makes two demands place and count against quotas alike (not the
// replicas' names).
std::string ShapeKey(const model::JobDemand& d) {
  std::string key = absl::StrCat(d.tpu_accelerator, ":", d.tpu_cores, ":", d.tpu_type, ":", d.tpu_hosts);
  for (const auto& r : d.replicas) {
    absl::StrAppend(&key, "|", r.cpu_milli, ",", r.memory_mib, ",", r.gpu_type, ",", r.gpu_count);
  }
  return key;
}

// How long a job waits in the executor's queue for resources before it
// preempts, and the pause after each victim went: the executor's own
// scheduler (Slurm's backfill, every second here) first gets its chance.
constexpr absl::Duration kExecutorPreemptAfter = absl::Seconds(3);

int32_t PriorityOf(const model::Job& job) {
  if (!job.training_input || !job.training_input->scheduling) return 0;
  return job.training_input->scheduling->priority.value_or(0);
}

}  // namespace

Scheduler::Scheduler(common::Clock& clock, StateRecorder& recorder, executor::Executor* executor,
                     SchedulerOptions options)
    : clock_(clock),
      recorder_(recorder),
      executor_(executor),
      options_(std::move(options)),
      admitted_quotas_(std::make_shared<const Quotas>(options_.quotas)),
      admitted_shares_(std::make_shared<const Shares>(options_.shares)),
      quotas_(admitted_quotas_),
      shares_(admitted_shares_) {}

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
  const model::JobDemand demand = DemandOf(job, options_.resources);
  if (executor_ != nullptr) {
    if (auto s = executor_->CheckRunnable(job); !s.ok()) return s;
    // An executor that places jobs asked its cluster in CheckRunnable.
    if (!executor_->PlacesJobs()) {
      if (auto s = CheckFeasible(demand, options_.inventory); !s.ok()) return s;
    }
  }
  std::shared_ptr<const Quotas> quotas;
  {
    std::lock_guard<std::mutex> lock(policy_mu_);
    quotas = admitted_quotas_;
  }
  return CheckQuotaNever(*quotas, job.project, RegionOf(job), AmountsOf(demand));
}

absl::Status Scheduler::SetQuotas(QuotaSpec spec) {
  auto compiled = Quotas::Compile(std::move(spec));
  if (!compiled.ok()) return compiled.status();
  auto quotas = std::make_shared<const Quotas>(*std::move(compiled));
  {
    std::lock_guard<std::mutex> lock(policy_mu_);
    admitted_quotas_ = quotas;
  }
  Post(PolicyEvent{quotas, nullptr});
  return absl::OkStatus();
}

absl::Status Scheduler::SetShares(std::map<std::string, int64_t> weights) {
  auto compiled = Shares::Compile(std::move(weights));
  if (!compiled.ok()) return compiled.status();
  auto shares = std::make_shared<const Shares>(*std::move(compiled));
  {
    std::lock_guard<std::mutex> lock(policy_mu_);
    admitted_shares_ = shares;
  }
  Post(PolicyEvent{nullptr, shares});
  return absl::OkStatus();
}

QuotaSpec Scheduler::GetQuotas() const {
  std::lock_guard<std::mutex> lock(policy_mu_);
  return admitted_quotas_->spec();
}

std::map<std::string, int64_t> Scheduler::GetShares() const {
  std::lock_guard<std::mutex> lock(policy_mu_);
  const auto& w = admitted_shares_->weights();
  return {w.begin(), w.end()};
}

void Scheduler::Submit(const model::Job& job) {
  Enqueue(job);
  Post(PlaceEvent{});
}
void Scheduler::Cancel(const JobKey& key, std::string reason) { Post(CancelEvent{key, std::move(reason)}); }
void Scheduler::Adopt(const model::Job& job) { Post(AdoptEvent{job}); }
void Scheduler::Tick() { Post(TickEvent{}); }
void Scheduler::JobStarted(const executor::JobRef& job) { Post(StartedEvent{KeyOf(job)}); }
void Scheduler::JobWaiting(const executor::JobRef& job, const std::string& reason) {
  Post(WaitingEvent{KeyOf(job), reason});
}
void Scheduler::JobPreparing(const executor::JobRef& job) { Post(PreparingEvent{KeyOf(job)}); }
void Scheduler::JobNote(const executor::JobRef& job, const std::string& note) { Post(NoteEvent{KeyOf(job), note}); }
void Scheduler::JobStarved(const executor::JobRef& job, bool starved) { Post(StarvedEvent{KeyOf(job), starved}); }
void Scheduler::JobHosts(const executor::JobRef& job, const std::vector<std::string>& hosts) {
  Post(HostsEvent{KeyOf(job), hosts});
}
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
    HandleBatch(batch);
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
    HandleBatch(batch);
  }
}

void Scheduler::HandleBatch(const std::deque<Event>& batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    // A burst of submissions needs one pass, after the last of them.
    const bool another_pass_follows =
        i + 1 < batch.size() && std::holds_alternative<PlaceEvent>(batch[i + 1]);
    if (std::holds_alternative<PlaceEvent>(batch[i]) && another_pass_follows) continue;
    Handle(batch[i]);
  }
}

void Scheduler::Handle(const Event& e) {
  if (std::holds_alternative<PlaceEvent>(e)) {
    TryPlace();
  } else if (const auto* c = std::get_if<CancelEvent>(&e)) {
    Stop(c->key, c->reason, model::AttemptEnd::kCancelled);
  } else if (const auto* a = std::get_if<AdoptEvent>(&e)) {
    OnAdopt(a->job);
  } else if (std::holds_alternative<TickEvent>(e)) {
    OnTick();
  } else if (const auto* st = std::get_if<StartedEvent>(&e)) {
    auto it = active_.find(st->key);
    if (it == active_.end() || it->second.running) return;
    it->second.running = true;
    it->second.waiting = false;
    it->second.starved_since.reset();
    it->second.running_since = clock_.Now();
    SetView(st->key, true, false);
    if (!it->second.stop_requested) {
      recorder_.Record(st->key, {JobState::kRunning, "", true, /*flush=*/executor_->PlacesJobs()});
    }
  } else if (const auto* en = std::get_if<EndedEvent>(&e)) {
    OnEnded(*en);
  } else if (const auto* w = std::get_if<WaitingEvent>(&e)) {
    auto it = active_.find(w->key);
    if (it == active_.end() || it->second.stop_requested) return;
    if (!it->second.waiting) it->second.enqueue_time = clock_.Now();  // requeued: wait again
    it->second.waiting = true;
    it->second.running = false;
    SetView(w->key, false, true);
    recorder_.Record(w->key, {JobState::kQueued, w->reason, true});
  } else if (const auto* note = std::get_if<NoteEvent>(&e)) {
    // Said of a running job only, and never once it is being stopped (the
    // stop's reason is what it will say).
    auto it = active_.find(note->key);
    if (it == active_.end() || !it->second.running || it->second.stop_requested) return;
    recorder_.Record(note->key, {JobState::kRunning, note->note, true, /*flush=*/false});
  } else if (const auto* p = std::get_if<PreparingEvent>(&e)) {
    auto it = active_.find(p->key);
    if (it == active_.end() || it->second.stop_requested) return;
    it->second.waiting = false;
    it->second.starved_since.reset();
    SetView(p->key, false, false);
    recorder_.Record(p->key, {JobState::kPreparing, "", true});
  } else if (const auto* l = std::get_if<LaunchEvent>(&e)) {
    OnLaunch(*l);
  } else if (const auto* b = std::get_if<BarrierEvent>(&e)) {
    b->reached();
  } else if (const auto* st = std::get_if<StarvedEvent>(&e)) {
    auto it = active_.find(st->key);
    if (it == active_.end() || !it->second.waiting) return;
    if (!st->starved) {
      it->second.starved_since.reset();
    } else if (!it->second.starved_since) {
      it->second.starved_since = clock_.Now();
    }
  } else if (const auto* hosts = std::get_if<HostsEvent>(&e)) {
    if (auto it = active_.find(hosts->key); it != active_.end()) it->second.hosts = hosts->hosts;
  } else if (const auto* pre = std::get_if<PreemptEvent>(&e)) {
    auto it = active_.find(pre->key);
    // Whatever the stop is now (a cancel may have taken the preemption over
    // while its note was being written), it goes out once that is durable.
    if (it == active_.end() || !it->second.launched || !it->second.preempted) return;
    executor_->Cancel({pre->key.project, pre->key.job_id}, it->second.stop_reason);
  } else if (const auto* policy = std::get_if<PolicyEvent>(&e)) {
    if (policy->quotas) quotas_ = policy->quotas;
    if (policy->shares) shares_ = policy->shares;
    TryPlace();
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
  active.region = RegionOf(job);
  active.amounts = AmountsOf(active.demand);
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
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    active_keys_.insert(key);
  }
  Active& held = Hold(key, std::move(active));
  if (job.state == JobState::kCancelling) {
    Stop(key, job.error_message);
  } else if (!job.preempted_by.empty()) {
    // It was being stopped for a preemption: stop it (again) and queue it
    // again once it stopped.
    const size_t slash = job.preempted_by.find('/');
    MarkPreempted(held, job.preempted_by.substr(0, slash) == key.project
                            ? absl::StrCat("job ", job.preempted_by.substr(slash + 1))
                            : "a job of a project below its fair share");
    executor_->Cancel({key.project, key.job_id}, held.stop_reason);
  }
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

void Scheduler::Enqueue(const model::Job& job, bool again) {
  const JobKey key = KeyOf(job);
  Queued q;
  q.key = key;
  q.region = RegionOf(job);
  if (job.training_input && job.training_input->scheduling) {
    q.priority = job.training_input->scheduling->priority.value_or(0);
  }
  q.sequence = job.sequence;
  q.demand = DemandOf(job, options_.resources);
  q.amounts = AmountsOf(q.demand);
  q.max_running = SchedulingDuration(job, true).value_or(kDefaultMaxRunningTime);
  // A job queued again after a restart may still say why it waited.
  if (job.state == JobState::kQueued) q.reason = job.error_message;
  q.job = job;
  // maxWaitTime counts from its creation, and again from a requeue.
  q.enqueue_time = again ? clock_.Now() : job.create_time.value_or(clock_.Now());
  q.max_wait = SchedulingDuration(job, false);
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (queued_.count(key) || active_keys_.count(key)) return;
  q.shape = ShapeOf(q.demand);
  Queued& queued = queued_.emplace(key, std::move(q)).first->second;
  queues_[key.project].insert({{-queued.priority, queued.sequence, key}, &queued});
}

int32_t Scheduler::ShapeOf(const model::JobDemand& demand) {
  return shapes_.emplace(ShapeKey(demand), static_cast<int32_t>(shapes_.size())).first->second;
}

void Scheduler::RemoveQueued(const JobKey& key) {
  auto it = queued_.find(key);
  if (it == queued_.end()) return;
  auto queue = queues_.find(key.project);
  queue->second.erase({-it->second.priority, it->second.sequence, key});
  if (queue->second.empty()) queues_.erase(queue);
  queued_.erase(it);
  std::erase(claimants_, key);
}

Scheduler::Active& Scheduler::Hold(const JobKey& key, Active a) {
  usage_.Add(a.demand, a.placement);
  ProjectHolding& holding = holdings_[key.project];
  holding.total.Add(a.amounts);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    placed_view_[key] = {a.placement, a.running, a.waiting};
  }
  return active_[key] = std::move(a);
}

Scheduler::Active Scheduler::Release(std::map<JobKey, Active>::iterator it) {
  Active a = std::move(it->second);
  const JobKey key = it->first;
  const std::string& project = key.project;
  active_.erase(it);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    placed_view_.erase(key);
  }
  usage_.Remove(a.demand, a.placement);
  auto holding = holdings_.find(project);
  holding->second.total.Subtract(a.amounts);
  if (holding->second.total == ResourceAmounts{}) holdings_.erase(holding);
  return a;
}

std::vector<HeldJob> Scheduler::HeldJobs() const {
  const absl::Time now = clock_.Now();
  std::vector<HeldJob> held;
  held.reserve(active_.size());
  for (const auto& [key, a] : active_) {
    // Not started yet: it starts about now.
    const absl::Time start = a.running ? a.running_since : now;
    HeldJob h{&key, &a.region, &a.demand, &a.placement, &a.amounts, start + a.max_running};
    h.priority = PriorityOf(a.job);
    h.started = start;
    h.preemptible = !options_.preemption.exempt_projects.contains(key.project);
    h.stopping = a.stop_requested;
    held.push_back(h);
  }
  return held;
}

void Scheduler::TryPlace() {
  if (executor_ == nullptr) return;
  obs::ScopedTimer pass_timer(obs::Metrics::Default().SchedulingPass());
  const bool places_jobs = !executor_->PlacesJobs();
  const std::vector<HeldJob> held = HeldJobs();
  std::vector<std::pair<JobKey, std::string>> reasons;
  std::vector<std::pair<Queued, model::Placement>> starts;
  std::optional<std::pair<QueuedJob, std::vector<JobKey>>> preemption;  // the head, its victims
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    const auto plan_start = std::chrono::steady_clock::now();
    Plan plan = PlanPass({.queues = queues_,
                          .held = held,
                          .holdings = holdings_,
                          .inventory = options_.inventory,
                          .usage = usage_,
                          .quotas = *quotas_,
                          .shares = *shares_,
                          .places_jobs = places_jobs,
                          .now = clock_.Now(),
                          .preemption = options_.preemption.enabled,
                          .preemption_for_share = options_.preemption.for_share,
                          .claimants = &claimants_});
    if (places_jobs) {
      obs::Metrics::Default().Placement().Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count());
    }
    for (const auto& w : plan.new_reasons) {
      Queued& q = queued_.at(w.job->key);
      q.reason = *w.reason;
      reasons.emplace_back(q.key, q.reason);
    }
    if (plan.preemption) {
      std::vector<JobKey> victims;
      for (const JobKey* v : plan.preemption->victims) victims.push_back(*v);
      preemption.emplace(*plan.preemption->job, std::move(victims));
      if (std::find(claimants_.begin(), claimants_.end(), preemption->first.key) == claimants_.end()) {
        claimants_.push_back(preemption->first.key);
      }
    }
    for (auto& start : plan.starts) {
      const JobKey key = start.job->key;
      starts.emplace_back(queued_.at(key), std::move(start.placement));
      RemoveQueued(key);
      active_keys_.insert(key);
    }
  }
  if (preemption) {
    for (const JobKey& victim : preemption->second) Preempt(victim, preemption->first);
  }
  // Why a job waits is told again by the next pass: never worth a flush.
  for (const auto& [key, reason] : reasons) recorder_.Record(key, {JobState::kQueued, reason, true, /*flush=*/false});
  for (auto& [q, placement] : starts) {
    Active active;
    active.job = std::move(q.job);
    active.demand = std::move(q.demand);
    active.region = std::move(q.region);
    active.amounts = q.amounts;
    active.placement = std::move(placement);
    active.max_running = q.max_running;
    if (!places_jobs) {
      // Waiting in the executor's own queue now; maxWaitTime still applies.
      active.waiting = true;
      active.enqueue_time = q.enqueue_time;
      active.max_wait = q.max_wait;
    }
    Active& a = Hold(q.key, std::move(active));
    if (places_jobs) {
      // Launched once PREPARING is durable (OnLaunch), never before.
      recorder_.Record(q.key, {JobState::kPreparing, "", true, /*flush=*/false},
                       [this, key = q.key](absl::Status s) { Post(LaunchEvent{key, std::move(s)}); });
    } else {
      // The executor records its submission and says why the job waits there.
      if (!q.reason.empty()) recorder_.Record(q.key, {JobState::kQueued, "", true});
      a.launched = true;
      executor_->Launch(a.job, a.demand, a.placement);
    }
  }
}

void Scheduler::Stop(const JobKey& key, const std::string& reason, model::AttemptEnd end) {
  bool was_queued = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    was_queued = queued_.count(key) > 0;
    RemoveQueued(key);
  }
  if (was_queued) {
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
  Active& a = it->second;
  // A job being preempted may still be cancelled or time out: it then ends
  // so rather than being queued again (it is being stopped already).
  const bool preempting = a.stop_requested && a.stop_end == model::AttemptEnd::kPreempted;
  if (a.stop_requested && !preempting) return;
  a.stop_requested = true;
  a.stop_reason = reason;
  a.stop_end = end;
  recorder_.Record(key, {JobState::kCancelling, reason});
  // Not yet launched: OnLaunch ends it without starting anything.
  if (a.launched && !preempting) executor_->Cancel({key.project, key.job_id}, reason);
}

void Scheduler::MarkPreempted(Active& a, const std::string& by) {
  a.stop_requested = true;
  a.preempted = true;
  a.stop_end = model::AttemptEnd::kPreempted;
  a.preempted_by = absl::StrCat("Preempted by ", by);
  a.stop_reason = absl::StrCat(a.preempted_by, ": its replicas are being stopped (SIGTERM, then their grace period); "
                               "the job is then queued again and runs as attempt ",
                               model::CurrentAttempt(a.job) + 1, ".");
}

void Scheduler::Preempt(const JobKey& victim, const QueuedJob& head) {
  auto it = active_.find(victim);
  if (it == active_.end() || it->second.stop_requested) return;
  Active& a = it->second;
  MarkPreempted(a, head.key.project == victim.project
                       ? absl::StrCat("job ", head.key.job_id, " (priority ", head.priority, ")")
                       : "a job of a project below its fair share");
  obs::Log("scheduler").info("preempting {}/{} (priority {}) for {}/{} (priority {})", victim.project, victim.job_id,
                             PriorityOf(a.job), head.key.project, head.key.job_id, head.priority);
  JobUpdate note{a.running ? JobState::kRunning : JobState::kPreparing, a.stop_reason, true};
  note.preempted_by = absl::StrCat(head.key.project, "/", head.key.job_id);
  // Stopped once that is durable: a restart in between still queues it again.
  recorder_.Record(victim, note, [this, victim](absl::Status) { Post(PreemptEvent{victim}); });
}

model::Attempt Scheduler::EndedAttempt(const Active& a, model::AttemptEnd end, const std::string& message) const {
  model::Attempt attempt;
  attempt.number = model::CurrentAttempt(a.job);
  if (a.running) attempt.start_time = a.running_since;
  attempt.end_time = clock_.Now();
  std::set<std::string> hosts(a.hosts.begin(), a.hosts.end());
  for (const auto& [task, r] : a.placement.replicas) hosts.insert(r.host);
  for (const auto& h : a.placement.tpu_hosts) hosts.insert(h);
  attempt.hosts.assign(hosts.begin(), hosts.end());
  attempt.end = end;
  attempt.message = message;
  return attempt;
}

void Scheduler::Requeue(const JobKey& key, Active a, model::Attempt attempt, const std::string& message) {
  JobUpdate update{JobState::kQueued, message, true};
  update.attempt = attempt;
  recorder_.Record(key, update);
  a.job.attempts.push_back(std::move(attempt));
  a.job.state = JobState::kQueued;
  a.job.error_message = message;
  a.job.preempted_by.clear();
  Enqueue(a.job, /*again=*/true);
}

void Scheduler::OnEnded(const EndedEvent& e) {
  auto it = active_.find(e.key);
  if (it == active_.end()) return;
  Active a = Release(it);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    active_keys_.erase(e.key);
  }
  const model::AttemptEnd end =
      ClassifyEnd(e.outcome, a.stop_requested ? std::optional<model::AttemptEnd>(a.stop_end) : std::nullopt);
  obs::Metrics::Default().AttemptsEnded(std::string(model::AttemptEndName(end))).Increment();
  const int number = model::CurrentAttempt(a.job);
  // A victim has gone (whatever it ended as): the next may be chosen soon.
  if (a.preempted) executor_preempt_quiet_until_ = clock_.Now() + kExecutorPreemptAfter;
  if (end == model::AttemptEnd::kPreempted) {
    obs::Metrics::Default().Requeues("preempted").Increment();
    const std::string when = FormatWhen(clock_.Now(), clock_.Now());
    model::Attempt attempt = EndedAttempt(a, end, a.preempted_by);
    Requeue(e.key, std::move(a), std::move(attempt),
            absl::StrCat("Attempt ", number, " was preempted at ", when, " (", e.key.job_id,
                         " is queued again; attempt ", number + 1, " starts from the beginning of its program and "
                         "may resume from its checkpoint)."));
    return TryPlace();
  }
  // A failure is retried when the infrastructure caused it, or the job asks.
  const JobRetries retries = RetriesOf(a.job, options_.retries);
  const bool retryable = end == model::AttemptEnd::kInfrastructure ||
                         (retries.trainer_failures && !a.stop_requested && executor::IsTrainerFailure(e.outcome));
  const int retried = static_cast<int>(std::count_if(a.job.attempts.begin(), a.job.attempts.end(), [](const auto& x) {
    return x.end != model::AttemptEnd::kPreempted;
  }));
  if (retryable && retried < retries.limit) {
    obs::Metrics::Default().Requeues("retried").Increment();
    model::Attempt attempt = EndedAttempt(a, end, e.message);
    Requeue(e.key, std::move(a), std::move(attempt),
            absl::StrCat("Attempt ", number, " ended (", std::string(model::AttemptEndName(end)), "): ", e.message,
                         " Retried (", retried + 1, " of at most ", retries.limit, "): attempt ", number + 1,
                         " is queued."));
    return TryPlace();
  }
  JobUpdate update{JobState::kFailed, e.message};
  std::string said = e.message;
  if (end == model::AttemptEnd::kSucceeded) {
    // A master that finished before the stop landed still succeeded; what
    // was said of it while it ran (it looked stalled) goes.
    update = {JobState::kSucceeded, "", true};
    said.clear();
  } else if (a.stop_requested) {
    update = {a.stop_state, a.stop_reason};
    said = a.stop_reason;
  } else if (retryable) {
    update.error_message = said =
        retries.limit > 0
            ? absl::StrCat(e.message, " (attempt ", number, "; no retry left of ", retries.limit, ")")
            : absl::StrCat(e.message, " Not retried: the job's label mlengine-retries or the operator's "
                                      "scheduling.max_retries is 0.");
  }
  update.attempt = EndedAttempt(a, end, said);
  recorder_.Record(e.key, update);
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
    Stop(key,
         absl::StrCat("The job was not started within its scheduling.maxWaitTime (", common::FormatDuration(max_wait),
                      ") and was cancelled."),
         model::AttemptEnd::kTimedOut);
  }
  std::vector<std::pair<JobKey, std::string>> overdue;
  for (const auto& [key, a] : active_) {
    if (a.waiting && !a.stop_requested && a.max_wait && now - a.enqueue_time >= *a.max_wait) {
      overdue.emplace_back(key, absl::StrCat("The job was not started within its scheduling.maxWaitTime (",
                                             common::FormatDuration(*a.max_wait), ") and was cancelled."));
      continue;
    }
    if (a.running && !a.stop_requested && now - a.running_since >= a.max_running) {
      overdue.emplace_back(key, absl::StrCat("The job ran longer than its scheduling.maxRunningTime (",
                                             common::FormatDuration(a.max_running), ") and was cancelled."));
    }
  }
  for (const auto& [key, reason] : overdue) Stop(key, reason, model::AttemptEnd::kTimedOut);
  if (executor_ != nullptr && executor_->PlacesJobs() && options_.preemption.enabled) PreemptInTheExecutor(now);
  TryPlace();
}

void Scheduler::PreemptInTheExecutor(absl::Time now) {
  if (now < executor_preempt_quiet_until_) return;
  std::vector<const std::pair<const JobKey, Active>*> heads;
  std::vector<RunningCandidate> running;
  for (const auto& entry : active_) {
    const Active& a = entry.second;
    if (a.waiting && !a.stop_requested && a.starved_since && now - *a.starved_since >= kExecutorPreemptAfter) {
      heads.push_back(&entry);
    }
    if (a.running || a.stop_requested) {
      running.push_back({&entry.first, PriorityOf(a.job), a.running_since,
                         !options_.preemption.exempt_projects.contains(entry.first.project), a.stop_requested});
    }
  }
  // The highest priority first, then the oldest.
  std::sort(heads.begin(), heads.end(), [](const auto* x, const auto* y) {
    return std::make_tuple(-PriorityOf(x->second.job), x->second.job.sequence) <
           std::make_tuple(-PriorityOf(y->second.job), y->second.job.sequence);
  });
  for (const auto* head : heads) {
    const int32_t priority = PriorityOf(head->second.job);
    auto victim = NextVictim(head->first, priority, running);
    if (!victim) continue;
    QueuedJob q;
    q.key = head->first;
    q.priority = priority;
    executor_preempt_quiet_until_ = absl::InfiniteFuture();  // until the victim has gone (OnEnded)
    Preempt(*running[*victim].key, q);
    return;
  }
}

void Scheduler::SetView(const JobKey& key, bool running, bool waiting) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = placed_view_.find(key);
  if (it == placed_view_.end()) return;
  it->second.running = running;
  it->second.waiting = waiting;
}

SchedulerSnapshot Scheduler::Snapshot() const {
  SchedulerSnapshot out;
  out.inventory = options_.inventory;
  std::lock_guard<std::mutex> lock(queue_mu_);
  for (const auto& [project, queue] : queues_) out.projects[project].queued += static_cast<int64_t>(queue.size());
  out.jobs.reserve(placed_view_.size());
  for (const auto& [key, view] : placed_view_) {
    out.jobs.push_back({key, view.placement, view.running});
    if (view.running) ++out.projects[key.project].running;
    if (view.waiting) ++out.projects[key.project].queued;
  }
  return out;
}

std::optional<int64_t> Scheduler::QueuePosition(const JobKey& key) const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  auto it = queued_.find(key);
  if (it == queued_.end()) return std::nullopt;
  const ProjectQueue& queue = queues_.at(key.project);
  return static_cast<int64_t>(queue.order_of_key({-it->second.priority, it->second.sequence, key})) + 1;
}

}  // namespace mle::scheduler
