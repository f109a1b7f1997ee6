#include "common/time_format.h"

#include <gtest/gtest.h>

namespace mle::common {
namespace {

TEST(DurationTest, ParsesProtobufDurations) {
  struct Case { const char* text; std::optional<absl::Duration> want; };
  const Case cases[] = {
      {"7200s", absl::Seconds(7200)},
      {"1800s", absl::Seconds(1800)},
      {"0s", absl::ZeroDuration()},
      {"1.5s", absl::Milliseconds(1500)},
      {"0.000000001s", absl::Nanoseconds(1)},
      {"7200", std::nullopt},
      {"s", std::nullopt},
      {"-5s", std::nullopt},
      {"2h", std::nullopt},
      {"1.s", std::nullopt},
      {"1.0000000001s", std::nullopt},
      {"abc s", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(ParseDuration(c.text), c.want) << c.text;
}

TEST(DurationTest, FormatsRoundTrip) {
  EXPECT_EQ(mle::common::FormatDuration(absl::Seconds(7200)), "7200s");
  EXPECT_EQ(mle::common::FormatDuration(absl::Milliseconds(1500)), "1.5s");
}

TEST(TimestampTest, Rfc3339RoundTrip) {
  absl::Time t = absl::FromUnixMicros(1700000000123456);
  std::string s = FormatRfc3339(t);
  EXPECT_EQ(s, "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(ParseRfc3339(s), t);
  EXPECT_EQ(FormatRfc3339(absl::FromUnixSeconds(1700000000)), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(ParseRfc3339("yesterday"), std::nullopt);
}

}  // namespace
}  // namespace mle::common
