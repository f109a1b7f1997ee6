#include "scheduler/interruption.h"

#include <tuple>

#include "absl/strings/numbers.h"

namespace mle::scheduler {

JobRetries RetriesOf(const model::Job& job, const RetryPolicy& policy) {
  JobRetries r;
  r.limit = policy.infrastructure;
  if (auto it = job.labels.find(model::kRetriesLabel); it != job.labels.end()) {
    int n = 0;
    if (absl::SimpleAtoi(it->second, &n) && n >= 0 && n <= model::kMaxRetries) r.limit = n;
  }
  if (auto it = job.labels.find(model::kRetryFailuresLabel); it != job.labels.end()) r.trainer_failures = it->second == "true";
  return r;
}

std::optional<size_t> NextVictim(const JobKey& head, int32_t priority, const std::vector<RunningCandidate>& running) {
  std::optional<size_t> best;
  for (size_t i = 0; i < running.size(); ++i) {
    const RunningCandidate& c = running[i];
    if (c.stopping) return std::nullopt;  // what it frees may be enough: wait
    if (!c.preemptible || c.key->project != head.project || c.priority >= priority) continue;
    if (!best) {
      best = i;
      continue;
    }
    const RunningCandidate& b = running[*best];
    if (std::tie(c.priority, b.started, *c.key) < std::tie(b.priority, c.started, *b.key)) best = i;
  }
  return best;
}

model::AttemptEnd ClassifyEnd(executor::Outcome outcome, std::optional<model::AttemptEnd> stop) {
  using E = model::AttemptEnd;
  using O = executor::Outcome;
  if (outcome == O::kSucceeded) return E::kSucceeded;  // it finished before any stop landed
  if (stop) return *stop;  // whatever the replicas did while they were being stopped
  switch (outcome) {
    case O::kSucceeded: return E::kSucceeded;
    case O::kFailed: return E::kFailed;
    case O::kOutOfMemory: return E::kOutOfMemory;
    case O::kStalled: return E::kStalled;
    case O::kNotJoined: return E::kNotJoined;
    case O::kLost: return E::kInfrastructure;
    case O::kStopped: return E::kCancelled;  // not asked for by the scheduler: someone stopped it
  }
  return E::kFailed;
}

}  // namespace mle::scheduler
