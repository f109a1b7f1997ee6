// The stall watch's policy (executor/stall_watch.h) as a table: what each
// look sees, and when the job is said stalled or moving again.
#include "executor/stall_watch.h"

#include <gtest/gtest.h>

namespace mle::executor {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1700000000);

TEST(StallWatchTest, SilenceForTheLimitIsAStallAndAnyMoveEndsIt) {
  struct Look {
    int seconds;        // since t0
    int64_t cpu;        // the replicas' CPU ticks
    int log_write;      // the newest log write, seconds since t0
    StallChange want;
  };
  const std::vector<Look> looks = {
      {0, 100, 0, StallChange::kNone},        // the first look starts the clock
      {5, 100, 0, StallChange::kNone},        // silent for 5 s
      {9, 100, 0, StallChange::kNone},        // 9 s: under the limit
      {10, 100, 0, StallChange::kStalled},    // 10 s of silence
      {15, 100, 0, StallChange::kNone},       // said once
      {16, 101, 0, StallChange::kMovingAgain},  // CPU moved
      {25, 101, 0, StallChange::kNone},
      {26, 101, 0, StallChange::kStalled},
      {27, 101, 27, StallChange::kMovingAgain},  // a log line
  };
  StallWatch w;
  for (const Look& l : looks) {
    EXPECT_EQ(Observe(w, l.cpu, t0 + absl::Seconds(l.log_write), t0 + absl::Seconds(l.seconds), absl::Seconds(10)),
              l.want)
        << "at " << l.seconds << " s";
  }
  StallWatch off;
  EXPECT_EQ(Observe(off, 1, t0, t0, absl::ZeroDuration()), StallChange::kNone);
  EXPECT_EQ(Observe(off, 1, t0, t0 + absl::Hours(100), absl::ZeroDuration()), StallChange::kNone) << "0: not watched";
}

TEST(StallWatchTest, TheJobsLabelsReplaceTheOperatorsPolicyAndSaySo) {
  model::Job job;
  StallPolicy p = StallPolicyOf(job, absl::Hours(1), false);
  EXPECT_EQ(p.after, absl::Hours(1));
  EXPECT_FALSE(p.fails);
  EXPECT_FALSE(p.by_label);
  job.labels = {{"mlengine-stall-after", "120"}, {"mlengine-stall-action", "fail"}};
  p = StallPolicyOf(job, absl::Hours(1), false);
  EXPECT_EQ(p.after, absl::Minutes(2));
  EXPECT_TRUE(p.fails);
  EXPECT_TRUE(p.by_label);

  StallWatch w;
  Observe(w, 1, t0, t0, absl::Minutes(2));
  const absl::Time now = t0 + absl::Minutes(3);
  EXPECT_EQ(DescribeStall(w, now),
            "its replicas wrote no log line and used no CPU for 3 min (since 2023-11-14T22:13:20.000000Z)");
  EXPECT_EQ(StallFailure(w, now, p, "slurm.stall_action"),
            "The job stalled: its replicas wrote no log line and used no CPU for 3 min (since 2023-11-14T22:13:20.000000Z). "
            "The job asks to be ended when stalled (its label mlengine-stall-action: fail).");
  p.by_label = false;
  const std::string failure = StallFailure(w, now, p, "slurm.stall_action");
  EXPECT_EQ(failure.substr(failure.find(". The ") + 2), "The operator's policy ends stalled jobs (slurm.stall_action: fail).");
  EXPECT_EQ(StallLookEvery(absl::Seconds(2)), absl::Milliseconds(500));
  EXPECT_EQ(StallLookEvery(absl::Hours(1)), absl::Seconds(30));
  EXPECT_EQ(StallLookEvery(absl::Milliseconds(100)), absl::Milliseconds(250));
}

TEST(StallWatchTest, AVerdictSaysTheStallOrEndsTheJobAsThePolicySays) {
  for (bool fails : {false, true}) {
    StallWatch w;
    const StallPolicy policy{absl::Seconds(10), fails, false};
    EXPECT_EQ(JudgeStall(w, 1, t0, t0, policy, "x.stall_action").kind, StallVerdict::Kind::kNone);
    const StallVerdict stalled = JudgeStall(w, 1, t0, t0 + absl::Seconds(10), policy, "x.stall_action");
    EXPECT_TRUE(stalled.stalled);
    EXPECT_EQ(stalled.kind, fails ? StallVerdict::Kind::kFail : StallVerdict::Kind::kNote);
    EXPECT_EQ(stalled.text.rfind(fails ? "The job stalled: " : "Stalled: its replicas wrote no log line", 0), 0u)
        << stalled.text;
    const StallVerdict moving = JudgeStall(w, 2, t0, t0 + absl::Seconds(11), policy, "x.stall_action");
    EXPECT_EQ(moving.kind, StallVerdict::Kind::kNote);
    EXPECT_EQ(moving.text, "") << "taken back";
    EXPECT_FALSE(moving.stalled);
  }
}

TEST(StallWatchTest, WhatAShimRecordsAndHowOftenItIsLookedAt) {
  ReplicaProgress p = ParseReplicaProgress("cpu_ticks 37\njoined 1\n");
  EXPECT_EQ(p.cpu_ticks, 37);
  EXPECT_EQ(p.joined, true);
  p = ParseReplicaProgress("cpu_ticks 5\n");
  EXPECT_EQ(p.cpu_ticks, 5);
  EXPECT_FALSE(p.joined.has_value()) << "no ports watched";
  EXPECT_EQ(ParseReplicaProgress("cpu_ticks 5\njoined 0\n").joined, false);
  EXPECT_FALSE(ParseReplicaProgress("").cpu_ticks.has_value());

  EXPECT_EQ(WatchEvery({absl::Hours(1), false, false}, absl::ZeroDuration()), absl::Seconds(30));
  EXPECT_EQ(WatchEvery({absl::Hours(1), false, false}, absl::Seconds(8)), absl::Seconds(2));
  EXPECT_EQ(WatchEvery({absl::ZeroDuration(), false, false}, absl::ZeroDuration()), absl::ZeroDuration());

  EXPECT_EQ(NotJoinedFailure({"master-replica-0", "worker-replica-0"}, absl::Seconds(8), "the job's ports 5000",
                             "local.join_timeout_seconds"),
            "The replicas master-replica-0, worker-replica-0 did not connect to the job's other replicas within 8 s "
            "of their start (no TCP connection on the job's ports 5000): a rendezvous that never completed (the "
            "operator's limit: local.join_timeout_seconds).");
}

}  // namespace
}  // namespace mle::executor
