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

}  // namespace
}  // namespace mle::executor
