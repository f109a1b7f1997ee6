// The scheduler: owns the queue of jobs waiting for resources, the resources
// in use, and the jobs it handed to the executor. One thread owns all of
// that state; the service and the executor post typed events to it (Submit,
// Cancel, Adopt, Tick, and the executor's Started/Ended). It never writes job
// state itself: every decision goes out through StateRecorder, which the
// service applies durably and checks against the state machine.
//
// With an executor that queues and places jobs itself (Slurm:
// Executor::PlacesJobs), the scheduler hands every job over at once, in
// priority order, and records what the executor reports (waiting and why,
// preparing, running, ended); deadlines are still enforced here.
//
// Policy (local executor): jobs are considered in priority order (scheduling.priority, higher
// first, then oldest); each is placed as a gang (every replica and TPU host,
// or nothing) by the pure functions of placement.h. A job that does not fit
// now waits; a smaller job behind it may start (backfill). maxWaitTime and
// maxRunningTime are enforced on Tick.
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
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "executor/executor.h"
#include "model/job.h"
#include "model/resources.h"
#include "scheduler/placement.h"

namespace mle::scheduler {

struct JobKey {
  std::string project;
  std::string job_id;
  auto operator<=>(const JobKey&) const = default;
};

// A decision about one job, to be recorded durably by the service.
struct JobUpdate {
  model::JobState state;
  std::string error_message;  // empty = leave as is (unless replace_message)
  // Set errorMessage to error_message even when empty; with the job's
  // current state, an update of the message alone (why a job still waits).
  bool replace_message = false;
};

class StateRecorder {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~StateRecorder() = default;
  // Applies the update if the state machine allows it (otherwise
  // FAILED_PRECONDITION, and the refusal is logged: it is a bug), and makes
  // it durable. `done` (optional) is called once the update is on disk, or
  // with the error; from any thread.
  virtual void Record(const JobKey& key, const JobUpdate& update, Done done = nullptr) = 0;
};

struct SchedulerOptions {
  model::Inventory inventory;
  ResourceTable resources = ResourceTable::Defaults();
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
  // job can never run here (and what the cluster has). Thread-safe, pure.
  absl::Status Admit(const model::Job& job) const;

  // Events.
  void Submit(const model::Job& job);  // a QUEUED job to place (queued at once: it has a position)
  void Cancel(const JobKey& key);      // the job is CANCELLING
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

  // Processes every posted event now, on the calling thread (tests).
  void RunPending();

  // 1-based place in the queue; nullopt when not queued.
  std::optional<int64_t> QueuePosition(const JobKey& key) const;

 private:
  struct PlaceEvent {};
  struct CancelEvent { JobKey key; };
  struct AdoptEvent { model::Job job; };
  struct TickEvent {};
  struct StartedEvent { JobKey key; };
  struct WaitingEvent { JobKey key; std::string reason; };
  struct PreparingEvent { JobKey key; };
  struct EndedEvent { JobKey key; executor::Outcome outcome; std::string message; };
  // The job's PREPARING is durable (or could not be made so): launch it now.
  struct LaunchEvent { JobKey key; absl::Status recorded; };
  struct BarrierEvent { std::function<void()> reached; };
  using Event = std::variant<PlaceEvent, CancelEvent, AdoptEvent, TickEvent, StartedEvent, EndedEvent,
                             WaitingEvent, PreparingEvent, LaunchEvent, BarrierEvent>;

  struct Queued {
    model::Job job;
    model::JobDemand demand;
    int32_t priority = 0;
    absl::Time enqueue_time;
    std::optional<absl::Duration> max_wait;
  };
  struct Active {
    model::Job job;
    model::JobDemand demand;
    model::Placement placement;
    bool running = false;
    // Given to the executor (Launch, or found again by Recover). A placed
    // job is not until its PREPARING is durable.
    bool launched = false;
    absl::Time running_since;
    std::optional<absl::Duration> max_running;
    bool stop_requested = false;
    std::string stop_reason;
    model::JobState stop_state = model::JobState::kCancelled;
    // Handed to an executor that queues jobs itself (PlacesJobs) and not yet
    // given its nodes: maxWaitTime still applies.
    bool waiting = false;
    absl::Time enqueue_time;
    std::optional<absl::Duration> max_wait;
  };

  void Post(Event e);
  void Handle(const Event& e);
  void Loop();
  void Enqueue(const model::Job& job);
  void RemoveQueued(const JobKey& key);
  void TryPlace();
  void HandOver();  // PlacesJobs executors: every queued job goes to the executor now
  void Stop(const JobKey& key, const std::string& reason);
  void OnEnded(const EndedEvent& e);
  void OnAdopt(const model::Job& job);
  void OnLaunch(const LaunchEvent& e);
  void OnTick();

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

  // The queue in order (priority desc, then oldest first) as an
  // order-statistics tree, so a job's position is O(log n) for readers.
  // Written only by the event-processing thread; guarded for readers.
  using Order = std::tuple<int32_t, int64_t, JobKey>;  // (-priority, sequence, key)
  using OrderTree = __gnu_pbds::tree<Order, __gnu_pbds::null_type, std::less<Order>,
                                     __gnu_pbds::rb_tree_tag,
                                     __gnu_pbds::tree_order_statistics_node_update>;
  mutable std::mutex queue_mu_;
  OrderTree order_;
  std::map<JobKey, Queued> queued_;
  std::set<JobKey> active_keys_;  // keys of active_, for Submit on other threads

  // Owned by the event-processing thread.
  std::map<JobKey, Active> active_;
  Usage usage_;
};

}  // namespace mle::scheduler
