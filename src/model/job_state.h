// Job states of the `ml` v1 API and the table of allowed transitions.
// The table is the single authority: every state change in the service goes
// through CanTransition(). Pure and thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace mle::model {

enum class JobState {
  kUnspecified,
  kQueued,      // accepted, waiting for resources
  kPreparing,   // resources reserved, replicas being provisioned
  kRunning,     // replicas started
  kSucceeded,   // all replicas ended well (terminal)
  kFailed,      // a replica failed or could not start (terminal)
  kCancelling,  // cancel requested, replicas being stopped
  kCancelled,   // stopped on request or by a scheduling limit (terminal)
};

// Wire name, e.g. "QUEUED".
std::string_view JobStateName(JobState s);
// Inverse of JobStateName; nullopt for unknown names.
std::optional<JobState> ParseJobState(std::string_view name);

bool IsTerminal(JobState s);
// True when a cancel request is accepted in state s.
bool IsCancellable(JobState s);
// True when the state machine allows moving from `from` to `to`.
bool CanTransition(JobState from, JobState to);

}  // namespace mle::model
