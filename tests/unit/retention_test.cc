// Retention's policy (service/retention.h): what is cut for its age, then
// the oldest until the rest fits the size budget; never what is in use.
#include "service/retention.h"

#include <gtest/gtest.h>

namespace mle::service {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

RetentionItem Item(const std::string& id, int64_t bytes, absl::Duration age, bool in_use = false) {
  return {id, bytes, kNow - age, in_use};
}

TEST(PlanRetention, Table) {
  const std::vector<RetentionItem> items = {
      Item("a", 100, absl::Hours(72)), Item("b", 300, absl::Hours(48)), Item("c", 200, absl::Hours(24)),
      Item("d", 400, absl::Hours(1)), Item("running", 1000, absl::Hours(100), /*in_use=*/true)};
  struct Case {
    std::string name;
    RetentionBudget budget;
    std::vector<std::string> cut;
    int64_t bytes;
    int64_t past_age;
  };
  const std::vector<Case> cases = {
      {"no budget: nothing", {}, {}, 0, 0},
      {"older than 36 h", {absl::Hours(36), std::nullopt}, {"a", "b"}, 400, 2},
      {"age 0: every ended one", {absl::ZeroDuration(), std::nullopt}, {"a", "b", "c", "d"}, 1000, 4},
      // 2000 in all, 1000 of it in use: the oldest go until 1600 is left.
      {"1600 bytes", {std::nullopt, 1600}, {"a", "b"}, 400, 0},
      {"the budget fits", {std::nullopt, 2000}, {}, 0, 0},
      // What is in use is never cut, even when it alone is over.
      {"0 bytes", {std::nullopt, 0}, {"a", "b", "c", "d"}, 1000, 0},
      {"both", {absl::Hours(60), 1500}, {"a", "b", "c"}, 600, 1},
  };
  for (const auto& c : cases) {
    const RetentionCut cut = PlanRetention(items, c.budget, kNow);
    EXPECT_EQ(cut.ids, c.cut) << c.name;
    EXPECT_EQ(cut.bytes, c.bytes) << c.name;
    EXPECT_EQ(cut.past_age, c.past_age) << c.name;
  }
}

TEST(PlanRetention, TheOldestFirstWhateverTheOrderGiven) {
  const std::vector<RetentionItem> items = {Item("new", 10, absl::Hours(1)), Item("old", 10, absl::Hours(9)),
                                            Item("mid", 10, absl::Hours(5))};
  EXPECT_EQ(PlanRetention(items, {std::nullopt, 10}, kNow).ids, (std::vector<std::string>{"old", "mid"}));
}

}  // namespace
}  // namespace mle::service
