// The scheduler: owns the queue of jobs waiting for resources and decides
// when each starts. One thread owns all scheduler state; the service and the
// executors post typed events to it (Submit, Cancel, Tick). It never writes
// state itself: every decision about a job goes out through StateRecorder,
// which the service applies durably.
//
// In this version no executor is attached yet: jobs wait in the queue in
// priority order (higher `scheduling.priority` first, then oldest), with
// their position reported as jobPosition; cancel and maxWaitTime end them.
// The Executor seam arrives with the local executor.
//
// Thread-safe: every public method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "absl/time/time.h"
#include "common/clock.h"
#include "model/job.h"

namespace mle::scheduler {

struct JobKey {
  std::string project;
  std::string job_id;
  auto operator<=>(const JobKey&) const = default;
};

// A decision about one job, to be recorded durably by the service.
struct JobUpdate {
  model::JobState state;
  std::string error_message;  // empty = leave as is
};

class StateRecorder {
 public:
  virtual ~StateRecorder() = default;
  // Applies the update if the state machine allows it; ignores it otherwise.
  virtual void Record(const JobKey& key, const JobUpdate& update) = 0;
};

class Scheduler {
 public:
  Scheduler(common::Clock& clock, StateRecorder& recorder);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the control-loop thread (production). Tests instead call
  // RunPending() to process posted events on their own thread.
  void Start();
  void Stop();

  // Events.
  void Submit(const model::Job& job);      // a QUEUED job to place
  void Cancel(const JobKey& key);          // the job is CANCELLING
  void Tick();                             // time moved: check deadlines

  // Processes every posted event now, on the calling thread (tests).
  void RunPending();

  // 1-based place in the queue; nullopt when not queued.
  std::optional<int64_t> QueuePosition(const JobKey& key) const;

 private:
  struct SubmitEvent { model::Job job; };
  struct CancelEvent { JobKey key; };
  struct TickEvent {};
  using Event = std::variant<SubmitEvent, CancelEvent, TickEvent>;

  struct Queued {
    JobKey key;
    int32_t priority;
    int64_t sequence;
    absl::Time enqueue_time;
    std::optional<absl::Duration> max_wait;
  };

  void Post(Event e);
  void Handle(const Event& e);
  void Loop();

  common::Clock& clock_;
  StateRecorder& recorder_;

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
};

}  // namespace mle::scheduler
