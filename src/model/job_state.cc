#include "model/job_state.h"

#include <array>
#include <utility>

namespace mle::model {
namespace {

using S = JobState;

constexpr std::array<std::pair<S, std::string_view>, 8> kNames = {{
    {S::kUnspecified, "STATE_UNSPECIFIED"},
    {S::kQueued, "QUEUED"},
    {S::kPreparing, "PREPARING"},
    {S::kRunning, "RUNNING"},
    {S::kSucceeded, "SUCCEEDED"},
    {S::kFailed, "FAILED"},
    {S::kCancelling, "CANCELLING"},
    {S::kCancelled, "CANCELLED"},
}};

// Every allowed edge of the job state machine. Anything else is a bug.
constexpr std::array<std::pair<S, S>, 15> kTransitions = {{
    {S::kUnspecified, S::kQueued},     // accepted
    {S::kQueued, S::kPreparing},       // placed: resources reserved
    {S::kQueued, S::kFailed},          // can never be placed
    {S::kQueued, S::kCancelling},      // cancel, or maxWaitTime
    {S::kPreparing, S::kRunning},      // all replicas started
    {S::kPreparing, S::kFailed},       // a replica could not start
    {S::kPreparing, S::kCancelling},   // cancel, or maxWaitTime
    {S::kPreparing, S::kQueued},       // requeued after losing its hosts
    {S::kRunning, S::kSucceeded},      // every replica exited 0
    {S::kRunning, S::kFailed},         // a replica failed
    {S::kRunning, S::kCancelling},     // cancel, or maxRunningTime
    {S::kRunning, S::kQueued},         // requeued (preemption, node loss)
    {S::kCancelling, S::kCancelled},   // every replica stopped
    {S::kCancelling, S::kFailed},      // a replica failed while stopping
    {S::kCancelling, S::kSucceeded},   // it finished before the stop landed
}};

}  // namespace

std::string_view JobStateName(JobState s) {
  for (const auto& [state, name] : kNames) {
    if (state == s) return name;
  }
  return "STATE_UNSPECIFIED";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (const auto& [state, n] : kNames) {
    if (n == name) return state;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) {
  return s == S::kSucceeded || s == S::kFailed || s == S::kCancelled;
}

bool IsCancellable(JobState s) {
  return s == S::kQueued || s == S::kPreparing || s == S::kRunning;
}

bool CanTransition(JobState from, JobState to) {
  for (const auto& [f, t] : kTransitions) {
    if (f == from && t == to) return true;
  }
  return false;
}

}  // namespace mle::model
