// What happens when a job is interrupted, as pure policy: which attempts
// are run again (retries), and how an ended attempt is classified
// (model::AttemptEnd). The Scheduler applies them; preemption's choice of
// victims is the planner's (plan.h, step 4). docs/interruptions.md says it
// for trainers and operators. Pure functions and plain values.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "executor/executor.h"
#include "model/job.h"
#include "scheduler/job_key.h"

namespace mle::scheduler {

// When a job that cannot be placed may stop others (plan.h, step 4).
struct PreemptionPolicy {
  bool enabled = true;        // scheduling.preemption.enabled
  bool for_share = false;     // scheduling.preemption.fair_share: across projects, by fair share
  std::set<std::string, std::less<>> exempt_projects;  // their jobs are never preempted
};

// How often a job's attempt is run again after it ended without succeeding
// (besides preemptions, which never count): an infrastructure failure
// (executor::Outcome::kLost) up to `infrastructure` times; a failure of the
// trainer itself only when the job asks (its label mlengine-retry-failures:
// "true"), within the same limit. A job's label mlengine-retries (0-10)
// replaces the limit.
struct RetryPolicy {
  int infrastructure = 2;  // scheduling.max_retries
};

// The job's own retry settings (RetryPolicy): its limit, and whether a
// failure of the trainer is retried. Labels that do not parse were refused
// at submission (validate::ValidateLabels); here they read as the default.
struct JobRetries {
  int limit = 0;
  bool trainer_failures = false;
};
JobRetries RetriesOf(const model::Job& job, const RetryPolicy& policy);

// Preemption where the executor places jobs itself (Slurm), which mlengine
// cannot plan: a job that has waited in the executor's queue for resources
// (JobStarved) for a while preempts running jobs one at a time, each only
// once the one before it has gone and the job still waits. The next victim
// for `head` (of priority `priority`): a job of its project of strictly
// lower priority, not exempt, the lowest priority first, then the most
// recently started, then by key; none while any job is being stopped.
struct RunningCandidate {
  const JobKey* key = nullptr;
  int32_t priority = 0;
  absl::Time started;
  bool preemptible = false;
  bool stopping = false;
};
std::optional<size_t> NextVictim(const JobKey& head, int32_t priority, const std::vector<RunningCandidate>& running);

// Pure: how an attempt that ended with `outcome` is classified, given what
// the scheduler asked of it (a stop of kind `stop`, if any).
model::AttemptEnd ClassifyEnd(executor::Outcome outcome, std::optional<model::AttemptEnd> stop);

}  // namespace mle::scheduler
