// The stall watch as pure policy, for both executors: a running job whose
// replicas wrote no log line and used no CPU for its limit is stalled
// (docs/interruptions.md). Each look gives what was seen (the CPU time of
// the job's replicas, the newest write of their logs); the watch says when
// the job became stalled and when it moved again. The limit and action are
// the operator's unless the job's labels set its own (model/job.h).
// Plain values; no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "model/job.h"

namespace mle::executor {

struct StallPolicy {
  absl::Duration after;  // 0: not watched
  bool fails = false;    // end it, rather than only say so
  bool by_label = false; // the job's own (its labels), not the operator's
};
StallPolicy StallPolicyOf(const model::Job& job, absl::Duration operator_after, bool operator_fails);

struct StallWatch {
  absl::Time last_activity = absl::InfinitePast();
  int64_t cpu_ticks = -1;  // last seen; -1 before the first look
  absl::Time log_mtime = absl::InfinitePast();
  bool stalled = false;
};
enum class StallChange { kNone, kStalled, kMovingAgain };
StallChange Observe(StallWatch& watch, int64_t cpu_ticks, absl::Time newest_log, absl::Time now, absl::Duration limit);

// "its replicas wrote no log line and used no CPU for 2 min (since ...)".
std::string DescribeStall(const StallWatch& watch, absl::Time now);
// The job's errorMessage when the policy ends it.
std::string StallFailure(const StallWatch& watch, absl::Time now, const StallPolicy& policy,
                         const std::string& operator_key);

// "45 s", "31 min", "2.5 h".
std::string FormatSpan(absl::Duration d);

// How often to look, for the shortest limit of the running jobs: a few
// times per limit, from 250 ms to 30 s.
absl::Duration StallLookEvery(absl::Duration shortest);

}  // namespace mle::executor
