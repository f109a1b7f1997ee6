#include "executor/stall_watch.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/time_format.h"

namespace mle::executor {
std::string FormatSpan(absl::Duration d) {
  if (d < absl::Minutes(2)) return absl::StrCat(absl::ToInt64Seconds(d), " s");
  if (d < absl::Hours(2)) return absl::StrCat(absl::ToInt64Minutes(d), " min");
  return absl::StrFormat("%.1f h", absl::ToDoubleHours(d));
}

StallPolicy StallPolicyOf(const model::Job& job, absl::Duration operator_after, bool operator_fails) {
  StallPolicy p{operator_after, operator_fails, false};
  if (auto it = job.labels.find(model::kStallAfterLabel); it != job.labels.end()) {
    int64_t seconds = 0;
    if (absl::SimpleAtoi(it->second, &seconds) && seconds >= 0) {
      p.after = absl::Seconds(seconds);
      p.by_label = true;
    }
  }
  if (auto it = job.labels.find(model::kStallActionLabel); it != job.labels.end()) {
    p.fails = it->second == "fail";
    p.by_label = true;
  }
  return p;
}

StallChange Observe(StallWatch& w, int64_t cpu_ticks, absl::Time newest_log, absl::Time now, absl::Duration limit) {
  const bool moved = w.cpu_ticks >= 0 && (cpu_ticks != w.cpu_ticks || newest_log != w.log_mtime);
  if (w.cpu_ticks < 0 || moved) w.last_activity = now;
  w.cpu_ticks = cpu_ticks;
  w.log_mtime = newest_log;
  if (moved && w.stalled) {
    w.stalled = false;
    return StallChange::kMovingAgain;
  }
  if (w.stalled || limit <= absl::ZeroDuration() || now - w.last_activity < limit) return StallChange::kNone;
  w.stalled = true;
  return StallChange::kStalled;
}

std::string DescribeStall(const StallWatch& w, absl::Time now) {
  return absl::StrCat("its replicas wrote no log line and used no CPU for ", FormatSpan(now - w.last_activity), " (since ",
                      common::FormatRfc3339(w.last_activity), ")");
}

std::string StallFailure(const StallWatch& w, absl::Time now, const StallPolicy& policy,
                         const std::string& operator_key) {
  return absl::StrCat("The job stalled: ", DescribeStall(w, now), ". ",
                      policy.by_label ? "The job asks to be ended when stalled (its label mlengine-stall-action: fail)."
                                      : absl::StrCat("The operator's policy ends stalled jobs (", operator_key,
                                                     ": fail)."));
}

StallVerdict JudgeStall(StallWatch& w, int64_t cpu_ticks, absl::Time newest_log, absl::Time now,
                        const StallPolicy& policy, const std::string& operator_key) {
  switch (Observe(w, cpu_ticks, newest_log, now, policy.after)) {
    case StallChange::kNone:
      return {};
    case StallChange::kMovingAgain:
      return {StallVerdict::Kind::kNote, "", false};
    case StallChange::kStalled:
      if (policy.fails) return {StallVerdict::Kind::kFail, StallFailure(w, now, policy, operator_key), true};
      return {StallVerdict::Kind::kNote, absl::StrCat("Stalled: ", DescribeStall(w, now), "."), true};
  }
  return {};
}

ReplicaProgress ParseReplicaProgress(std::string_view text) {
  ReplicaProgress p;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    int64_t n = 0;
    if (absl::ConsumePrefix(&line, "cpu_ticks ") && absl::SimpleAtoi(line, &n)) p.cpu_ticks = n;
    if (absl::ConsumePrefix(&line, "joined ") && absl::SimpleAtoi(line, &n)) p.joined = n != 0;
  }
  return p;
}

absl::Duration WatchEvery(const StallPolicy& stall, absl::Duration join) {
  absl::Duration shortest = absl::InfiniteDuration();
  if (stall.after > absl::ZeroDuration()) shortest = stall.after;
  if (join > absl::ZeroDuration()) shortest = std::min(shortest, join);
  return shortest == absl::InfiniteDuration() ? absl::ZeroDuration() : StallLookEvery(shortest);
}

std::string NotJoinedFailure(const std::vector<std::string>& missing, absl::Duration timeout, const std::string& seen,
                             const std::string& operator_key) {
  return absl::StrCat("The replica", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "),
                      " did not connect to the job's other replicas within ", FormatSpan(timeout),
                      " of their start (no TCP connection on ", seen,
                      "): a rendezvous that never completed (the operator's limit: ", operator_key, ").");
}

absl::Duration StallLookEvery(absl::Duration shortest) {
  return std::clamp(shortest / 4, absl::Milliseconds(250), absl::Seconds(30));
}

}  // namespace mle::executor
