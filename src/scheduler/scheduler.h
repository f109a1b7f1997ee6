// The scheduler: owns the queue of jobs waiting for resources, the resources
// in use, and the jobs it handed to the executor. One thread owns all of
// that state; the service and the executor post typed events to it (Submit,
// Cancel, Adopt, Tick, and the executor's Started/Ended). It never writes job
// state itself: every decision goes out through StateRecorder, which the
// service applies durably and checks against the state machine.
//
// With an executor that queues and places jobs itself (Slurm:
// Executor::PlacesJobs), the scheduler hands every job within its
// project's quota over at once, in priority order, and records what the executor reports (waiting and why,
// preparing, running, ended); deadlines are still enforced here.
//
// Policy: one pure function, PlanPass (plan.h), decides every pass: quotas
// per project and region (quota.h), fair share between projects
// (fair_share.h), then scheduling.priority and age within a project; each
// job is placed as a gang (every replica and TPU host, or nothing) by the
// pure functions of placement.h. A job that does not fit now waits; the
// first such job gets a reservation, and a smaller job behind it may start
// only if it does not delay that (backfill). Every waiting job's
// errorMessage says why, recorded when the reason changes. With an executor
// that places jobs itself, only the quotas apply before the hand-over.
// maxWaitTime and maxRunningTime are enforced on Tick.
//
// A placed job goes to the executor only once its PREPARING is durable: a
// crash can never leave a job that ran but is recorded as QUEUED (and would
// run again). After a restart, every unfinished job is offered to the
// executor first (Adopt): a run found on disk is adopted whatever the
// database says; only a job with no run is queued again.
//
// Thread-safe: every public method may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "executor/executor.h"
#include "model/job.h"
#include "model/resources.h"
#include "scheduler/fair_share.h"
#include "scheduler/interruption.h"
#include "scheduler/job_key.h"
#include "scheduler/placement.h"
#include "scheduler/plan.h"
#include "scheduler/quota.h"

namespace mle::scheduler {

// A decision about one job, to be recorded durably by the service.
struct JobUpdate {
  model::JobState state;
  std::string error_message;  // empty = leave as is (unless replace_message)
  // Set errorMessage to error_message even when empty; with the job's
  // current state, an update of the message alone (why a job still waits).
  bool replace_message = false;
  // On disk before `done` (it survives a crash of the machine), or only
  // committed (it survives mlengined's own crash; the next flushed write
  // carries it). A job the scheduler places (local replicas, which end with
  // the machine) needs only the latter for PREPARING, RUNNING and why it
  // waits: after a machine crash it starts again from QUEUED anyway.
  bool flush = true;
  // The attempt that ended with this update (the job's end, or its requeue
  // after a preemption or an infrastructure failure): appended to the
  // job's attempts, once per number.
  std::optional<model::Attempt> attempt = std::nullopt;
  // The job is being preempted by this job (its id; "" for another
  // project's): stored, so that a restart still queues it again.
  std::optional<std::string> preempted_by = std::nullopt;
};

class StateRecorder {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~StateRecorder() = default;
  // Applies the update if the state machine allows it (otherwise
  // FAILED_PRECONDITION, and the refusal is logged: it is a bug), and makes
  // it durable (as update.flush says). `done` (optional) is called once the
  // update is stored, or with the error; from any thread.
  virtual void Record(const JobKey& key, const JobUpdate& update, Done done = nullptr) = 0;
};

struct SchedulerOptions {
  model::Inventory inventory;
  ResourceTable resources = ResourceTable::Defaults();
  Quotas quotas;  // by default: no TPU pod cores, nothing else limited
  Shares shares;  // by default: every project weighs 1
  PreemptionPolicy preemption;
  RetryPolicy retries;
};



// What the scheduler holds at one moment, for the cluster view (read-only).
struct SchedulerSnapshot {
  struct PlacedJob {
    JobKey key;
    model::Placement placement;  // empty for an executor that places jobs itself
    bool running = false;        // started (not preparing, not waiting in the executor's queue)
  };
  struct ProjectCounts {
    int64_t queued = 0;   // waiting here, or in the executor's own queue
    int64_t running = 0;
    bool operator==(const ProjectCounts&) const = default;
  };
  model::Inventory inventory;
  std::vector<PlacedJob> jobs;  // every job holding resources, by key
  std::map<std::string, ProjectCounts> projects;  // projects with a job queued or running
};

class Scheduler final : public executor::ExecutorEvents {
 public:
  // `executor` may be null: jobs then wait in the queue (used by tests of the
  // queue alone).
  Scheduler(common::Clock& clock, StateRecorder& recorder, executor::Executor* executor,
            SchedulerOptions options = {});
  ~Scheduler() override;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the control-loop thread (production). Tests instead call
  // RunPending() to process posted events on their own thread.
  void Start();
  void Stop();

  // Admission at submission time: OK, or FAILED_PRECONDITION saying why the
  // job can never run here (what the cluster has), or never within its
  // project's quota in its region (which quota, and the key that raises it).
  // Thread-safe, pure.
  absl::Status Admit(const model::Job& job) const;

  // The operator's quotas and shares, replaced at runtime (admin API): the
  // spec is compiled here (INVALID_ARGUMENT naming the bad key, and nothing
  // changes) and applies to submissions at once and to the queue from the
  // next pass (posted). Jobs already running are never stopped for it.
  absl::Status SetQuotas(QuotaSpec spec);
  absl::Status SetShares(std::map<std::string, int64_t> weights);
  QuotaSpec GetQuotas() const;
  std::map<std::string, int64_t> GetShares() const;

  // Events.
  void Submit(const model::Job& job);  // a QUEUED job to place (queued at once: it has a position)
  // The job is CANCELLING; `reason` (who asked) is what it will say.
  void Cancel(const JobKey& key, std::string reason = "Cancelled by a user request.");
  void Adopt(const model::Job& job);   // after a restart: any unfinished job (see above)
  void Tick();                         // time moved: check deadlines

  // Blocks until every event posted before the call has been handled (by
  // the control-loop thread, which must be running). For start-up: serve
  // only once recovery has been applied.
  void Drain();

  // executor::ExecutorEvents
  void JobStarted(const executor::JobRef& job) override;
  void JobWaiting(const executor::JobRef& job, const std::string& reason) override;
  void JobPreparing(const executor::JobRef& job) override;
  void JobEnded(const executor::JobRef& job, executor::Outcome outcome, const std::string& message) override;
  void JobNote(const executor::JobRef& job, const std::string& note) override;
  void JobHosts(const executor::JobRef& job, const std::vector<std::string>& hosts) override;
  void JobStarved(const executor::JobRef& job, bool starved) override;

  // Processes every posted event now, on the calling thread (tests).
  void RunPending();

  // The inventory, every placed job and the counts per project, consistent
  // with each other (taken under the queue's lock; O(jobs placed + projects)).
  SchedulerSnapshot Snapshot() const;

  // 1-based place in its project's queue (priority, then age; between
  // projects fair share decides); nullopt when not queued.
  std::optional<int64_t> QueuePosition(const JobKey& key) const;

 private:
  struct PlaceEvent {};
  struct CancelEvent { JobKey key; std::string reason; };
  struct AdoptEvent { model::Job job; };
  struct TickEvent {};
  struct StartedEvent { JobKey key; };
  struct WaitingEvent { JobKey key; std::string reason; };
  struct PreparingEvent { JobKey key; };
  struct EndedEvent { JobKey key; executor::Outcome outcome; std::string message; };
  struct NoteEvent { JobKey key; std::string note; };
  struct HostsEvent { JobKey key; std::vector<std::string> hosts; };
  struct StarvedEvent { JobKey key; bool starved; };
  // The job's PREPARING is durable (or could not be made so): launch it now.
  struct LaunchEvent { JobKey key; absl::Status recorded; };
  struct BarrierEvent { std::function<void()> reached; };
  struct PolicyEvent { std::shared_ptr<const Quotas> quotas; std::shared_ptr<const Shares> shares; };
  // A preemption's note is durable: stop the job now.
  struct PreemptEvent { JobKey key; };
  using Event = std::variant<PlaceEvent, CancelEvent, AdoptEvent, TickEvent, StartedEvent, EndedEvent,
                             WaitingEvent, PreparingEvent, LaunchEvent, BarrierEvent, PolicyEvent, NoteEvent,
                             PreemptEvent, HostsEvent, StarvedEvent>;

  // The planner's view of a waiting job, and what the scheduler keeps beside it.
  struct Queued : QueuedJob {
    model::Job job;
    absl::Time enqueue_time;
    std::optional<absl::Duration> max_wait;
  };
  struct Active {
    model::Job job;
    model::JobDemand demand;
    std::string region;
    ResourceAmounts amounts;  // what it holds of its project's quota
    model::Placement placement;
    bool running = false;
    // Given to the executor (Launch, or found again by Recover). A placed
    // job is not until its PREPARING is durable.
    bool launched = false;
    absl::Time running_since;
    absl::Duration max_running;
    std::vector<std::string> hosts;  // where it ran, as an executor that places jobs said (JobHosts)
    // Waiting in the executor's queue for resources others hold, since
    // (JobStarved): it may preempt (PreemptInTheExecutor).
    std::optional<absl::Time> starved_since;
    bool stop_requested = false;
    std::string stop_reason;
    model::JobState stop_state = model::JobState::kCancelled;
    model::AttemptEnd stop_end = model::AttemptEnd::kCancelled;  // kPreempted: queued again once stopped
    bool preempted = false;  // chosen as a victim (even if a cancel then took over)
    std::string preempted_by;  // "Preempted by job b (priority 5)": its attempt's message
    // Handed to an executor that queues jobs itself (PlacesJobs) and not yet
    // given its nodes: maxWaitTime still applies.
    bool waiting = false;
    absl::Time enqueue_time;
    std::optional<absl::Duration> max_wait;
  };

  void Post(Event e);
  void HandleBatch(const std::deque<Event>& batch);
  void Handle(const Event& e);
  void Loop();
  void Enqueue(const model::Job& job, bool again = false);
  void RemoveQueued(const JobKey& key);  // with queue_mu_ held
  int32_t ShapeOf(const model::JobDemand& demand);  // with queue_mu_ held
  // Makes `a` active: its resources and quota are held until Release (the
  // caller keeps active_keys_).
  Active& Hold(const JobKey& key, Active a);
  Active Release(std::map<JobKey, Active>::iterator it);
  // Keeps placed_view_ in step with a job's running and waiting flags.
  void SetView(const JobKey& key, bool running, bool waiting);
  std::vector<HeldJob> HeldJobs() const;
  void TryPlace();
  void Stop(const JobKey& key, const std::string& reason,
            model::AttemptEnd end = model::AttemptEnd::kCancelled);
  // Marks `a` as being stopped for a preemption by `by` ("job b (priority 5)").
  void MarkPreempted(Active& a, const std::string& by);
  // Stops `victim` for `head` (a plan's preemption); it is queued again.
  void Preempt(const JobKey& victim, const QueuedJob& head);
  // The attempt of `a` that ended now, as `end` says.
  model::Attempt EndedAttempt(const Active& a, model::AttemptEnd end, const std::string& message) const;
  // Puts an ended attempt's job back in the queue (QUEUED, attempt + 1).
  void Requeue(const JobKey& key, Active a, model::Attempt attempt, const std::string& message);
  void OnEnded(const EndedEvent& e);
  void OnAdopt(const model::Job& job);
  void OnLaunch(const LaunchEvent& e);
  void OnTick();
  // Preemption where the executor places jobs (interruption.h, NextVictim).
  void PreemptInTheExecutor(absl::Time now);

  common::Clock& clock_;
  StateRecorder& recorder_;
  executor::Executor* executor_;
  const SchedulerOptions options_;

  // Event queue (any thread).
  std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::deque<Event> events_;
  bool stopping_ = false;
  std::thread thread_;

  // The queue, per project in its order (plan.h). Enqueue writes it from
  // any thread; the event-processing thread plans on it and removes jobs.
  // All guarded by queue_mu_.
  mutable std::mutex queue_mu_;
  Queues queues_;
  std::map<JobKey, Queued> queued_;
  std::set<JobKey> active_keys_;  // keys of active_, for Submit on other threads
  std::map<std::string, int32_t> shapes_;  // demands numbered for the planner (QueuedJob::shape)
  // Queued jobs that preempted others, in the order they did: they take
  // what their victims free before anyone else (PlanInput::claimants).
  std::vector<JobKey> claimants_;
  // Owned by the event-processing thread: no preemption in an executor that
  // places jobs before then (one victim at a time, and a pause after it).
  absl::Time executor_preempt_quiet_until_ = absl::InfinitePast();
  // What Snapshot reports of the active jobs: a copy the event-processing
  // thread keeps up to date (Hold, Release, started, waiting).
  struct PlacedView {
    model::Placement placement;
    bool running = false;
    bool waiting = false;
  };
  std::map<JobKey, PlacedView> placed_view_;

  // What Admit and the getters read (guarded by policy_mu_); the loop
  // keeps its own copy below, replaced by a PolicyEvent.
  mutable std::mutex policy_mu_;
  std::shared_ptr<const Quotas> admitted_quotas_;
  std::shared_ptr<const Shares> admitted_shares_;

  // Owned by the event-processing thread.
  std::map<JobKey, Active> active_;
  Usage usage_;
  Holdings holdings_;  // what active_ holds, by project and region
  std::shared_ptr<const Quotas> quotas_;
  std::shared_ptr<const Shares> shares_;
};

}  // namespace mle::scheduler
