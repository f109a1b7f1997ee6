// The scheduling pass as one pure function: from the queue, what is held,
// the cluster, the quotas, the shares and the time, PlanPass decides which
// jobs start now and, for every job that waits, why (with numbers). The
// Scheduler calls it whenever a job may start and carries the plan out; the
// reason a job waits comes from the same decision that made it wait.
//
// The order of a pass (local executor):
//  1. Projects by fair share (fair_share.h): the project furthest below its
//     share first; after each start the order is looked at again. Within a
//     project: scheduling.priority, then age.
//  2. A job waits whose project already holds so much of a quota (quota.h)
//     of the job's region that the job would exceed it. What the project
//     holds in every region counts: the regions a cluster serves share its
//     hosts.
//  3. Otherwise it starts if it can be placed (placement.h) without delaying
//     the reservation. The first job that cannot be placed is the head: it
//     gets a reservation of what it needs at the earliest time that frees
//     (running jobs end at the latest by their maxRunningTime). A job behind
//     it may start only if the head would still fit at that time, i.e. if it
//     fits outside the reservation or its own maxRunningTime ends before.
//  4. Preemption (PlanInput::preemption): before it is given a reservation,
//     the head may preempt running jobs of lower priority (strictly: never
//     one of equal or higher priority, never one of an exempt project). If
//     jobs already stopping free enough, it waits for them and preempts
//     nothing more. Otherwise the candidates are taken lowest priority
//     first, then the most recently started (the least work lost), then by
//     key, until the head fits where they were; then each, from the last
//     taken, is kept running if the head still fits without stopping it.
//     The head then has a reservation from now of what they free, so that
//     nothing started behind it takes that; it starts in the pass after
//     they stopped, before any other job (PlanInput::claimants). Another
//     project's job is a candidate only by fair share
//     (PlanInput::preemption_for_share): the head's project is below its
//     share, and the victim's stays at or above its own without the job.
// With an executor that places jobs itself (Slurm) only the quotas apply:
// a job within them is handed over.
//
// Cost: jobs of the same shape (equal demand) that cannot be placed in a
// pass are decided once per shape (quota verdicts once per shape and
// region), and a reason is formatted once per shape, quota or project, not
// once per job; what remains per job is a step through its queue and one
// comparison with what it was told (bench/schedule_pass: 10,000 jobs).
// Thread-safe (no state); the inputs must not change during the call.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "absl/time/time.h"
#include "model/resources.h"
#include "scheduler/fair_share.h"
#include "scheduler/job_key.h"
#include "scheduler/placement.h"
#include "scheduler/quota.h"

namespace mle::scheduler {

// A waiting job as the planner sees it.
struct QueuedJob {
  JobKey key;
  std::string region;
  int32_t priority = 0;
  int64_t sequence = 0;  // submission order
  model::JobDemand demand;
  ResourceAmounts amounts;  // AmountsOf(demand)
  // Equal for jobs of equal demand, so of equal amounts too (the Scheduler
  // numbers demands from 0).
  int32_t shape = 0;
  absl::Duration max_running;  // maxRunningTime, or the 7-day default
  std::string reason;  // why it waits as its errorMessage says now (empty: not said)
};

// One project's queue in its order: priority (higher first), then
// submission. An order-statistics tree, so a job's position is O(log n).
using QueueOrder = std::tuple<int32_t, int64_t, JobKey>;  // (-priority, sequence, key)
using ProjectQueue = __gnu_pbds::tree<QueueOrder, const QueuedJob*, std::less<QueueOrder>, __gnu_pbds::rb_tree_tag,
                                      __gnu_pbds::tree_order_statistics_node_update>;
using Queues = std::map<std::string, ProjectQueue, std::less<>>;  // by project

// A job that holds resources: placed, or handed to an executor that places
// jobs itself (then its placement is empty).
struct HeldJob {
  const JobKey* key = nullptr;
  const std::string* region = nullptr;
  const model::JobDemand* demand = nullptr;
  const model::Placement* placement = nullptr;
  const ResourceAmounts* amounts = nullptr;
  absl::Time deadline;  // its maxRunningTime ends it then at the latest
  int32_t priority = 0;
  absl::Time started = absl::InfinitePast();  // when it started running (or now, if not yet)
  bool preemptible = false;  // of a project preemption may touch, and launched by the scheduler
  bool stopping = false;     // being stopped already (cancelled, timed out, preempted)
};

// What each project holds on this cluster's hosts, whatever region its jobs
// name: fair share and quotas both count it (the regions a cluster serves
// share its hosts, so a region's label never leaves a quota behind).
struct ProjectHolding {
  ResourceAmounts total;
};
using Holdings = std::map<std::string, ProjectHolding, std::less<>>;

struct PlanInput {
  const Queues& queues;
  const std::vector<HeldJob>& held;
  const Holdings& holdings;  // the sum of `held`, by project
  const model::Inventory& inventory;
  const Usage& usage;  // what `held` occupies, per host
  const Quotas& quotas;
  const Shares& shares;
  bool places_jobs = true;  // false: the executor places jobs; quotas only
  absl::Time now;
  bool preemption = false;  // a head may preempt jobs of lower priority (step 4)
  // And, across projects, a project below its fair share may preempt the
  // jobs of one above its share, as long as that one stays at or above it
  // (priority orders jobs within a project only).
  bool preemption_for_share = false;
  // Queued jobs that preempted others in an earlier pass: considered first,
  // in this order, so that what their victims freed goes to them.
  const std::vector<JobKey>* claimants = nullptr;
};

struct Plan {
  struct Start {
    const QueuedJob* job;
    model::Placement placement;  // empty when the executor places jobs
  };
  struct Wait {
    const QueuedJob* job;
    const std::string* reason;  // one of `reasons`
  };
  struct Reservation {
    const QueuedJob* job;
    absl::Time from;
  };
  std::vector<Start> starts;  // in the order decided
  // The jobs that wait for another reason than QueuedJob::reason says (the
  // others wait for the same one still): what to record, and nothing more.
  std::vector<Wait> new_reasons;
  int64_t waiting = 0;  // every job of the queues that does not start
  std::deque<std::string> reasons;
  std::optional<Reservation> reservation;  // the head, if it has one
  struct Preemption {
    const QueuedJob* job;              // the head that needs what they hold
    std::vector<const JobKey*> victims;  // to stop and queue again (in `held`'s keys)
  };
  std::optional<Preemption> preemption;  // at most one head preempts per pass
};

Plan PlanPass(const PlanInput& input);

// "14:20 UTC" on the day of `now`, "2023-11-15 14:20 UTC" on another day.
std::string FormatWhen(absl::Time t, absl::Time now);

}  // namespace mle::scheduler
