// The stall watch as pure policy, for both executors: a running job whose
// replicas wrote no log line and used no CPU for its limit is stalled
// (docs/interruptions.md). Each look gives what was seen (the CPU time of
// the job's replicas, the newest write of their logs); the watch says when
// the job became stalled and when it moved again. The limit and action are
// the operator's unless the job's labels set its own (model/job.h).
// Plain values; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// What one look means for the job (Observe, then the policy): nothing, a
// note for its errorMessage ("Stalled: ..."; "" takes it back), or its end
// with this message.
struct StallVerdict {
  enum class Kind { kNone, kNote, kFail } kind = Kind::kNone;
  std::string text;
  bool stalled = false;  // it became stalled at this look (for the metric)
};
StallVerdict JudgeStall(StallWatch& watch, int64_t cpu_ticks, absl::Time newest_log, absl::Time now,
                        const StallPolicy& policy, const std::string& operator_key);

// What a replica's shim records (mlengine-replica --progress): its CPU time,
// and with --join-ports whether it connected (absent: not watched).
struct ReplicaProgress {
  std::optional<int64_t> cpu_ticks;
  std::optional<bool> joined;
};
ReplicaProgress ParseReplicaProgress(std::string_view text);

// How often the shims record and the watch looks for a job with `stall`
// and a join deadline `join` (0: none): a few times per the shorter limit;
// 0 when neither applies.
absl::Duration WatchEvery(const StallPolicy& stall, absl::Duration join);

// The errorMessage of a job whose replicas `missing` had not connected within
// `timeout`: `seen` says how that was seen ("the job's ports 5000, 5001"),
// `operator_key` which setting it was.
std::string NotJoinedFailure(const std::vector<std::string>& missing, absl::Duration timeout, const std::string& seen,
                             const std::string& operator_key);

// "45 s", "31 min", "2.5 h".
std::string FormatSpan(absl::Duration d);

// How often to look, for the shortest limit of the running jobs: a few
// times per limit, from 250 ms to 30 s.
absl::Duration StallLookEvery(absl::Duration shortest);

}  // namespace mle::executor
