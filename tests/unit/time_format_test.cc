#include "common/time_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

// The fast path writes what absl::FormatTime's pattern does, for instants
// across the years a job may carry, leap days and the microsecond edges.
TEST(TimestampTest, Rfc3339MatchesAbslFormatTime) {
  auto absl_form = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(absl::ToUnixMicros(t)),
                            absl::UTCTimeZone());
  };
  std::vector<absl::Time> times = {
      absl::UnixEpoch(),
      absl::FromUnixMicros(-1),
      absl::FromUnixMicros(1),
      absl::FromUnixNanos(1700000000123456789),  // sub-microsecond: cut, as before
      absl::FromCivil(absl::CivilSecond(2024, 2, 29, 23, 59, 59), absl::UTCTimeZone()) + absl::Microseconds(999999),
      absl::FromCivil(absl::CivilSecond(1, 1, 1, 0, 0, 0), absl::UTCTimeZone()),
      absl::FromCivil(absl::CivilSecond(9999, 12, 31, 23, 59, 59), absl::UTCTimeZone()),
      absl::FromCivil(absl::CivilSecond(10000, 1, 1, 0, 0, 0), absl::UTCTimeZone()),
      absl::FromCivil(absl::CivilSecond(-1, 6, 1, 0, 0, 0), absl::UTCTimeZone()),
      absl::InfiniteFuture(),
      absl::InfinitePast(),
  };
  uint64_t x = 88172645463325252ULL;  // xorshift: a fixed spread of instants, 1900 to 2100
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const int64_t span = int64_t{200} * 365 * 86400 * 1000000;
    times.push_back(absl::FromUnixMicros(-int64_t{70} * 365 * 86400 * 1000000 + static_cast<int64_t>(x % span)));
  }
  for (absl::Time t : times) ASSERT_EQ(FormatRfc3339(t), absl_form(t)) << absl::ToUnixMicros(t);
}

}  // namespace
}  // namespace mle::common
