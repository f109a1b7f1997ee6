#include "absl/strings/string_view.h"
#include "common/time_format.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"

namespace mle::common {

std::string FormatRfc3339(absl::Time t) {
  // Always six fraction digits (proto3 JSON uses 0, 3, 6 or 9).
  t = absl::FromUnixMicros(absl::ToUnixMicros(t));
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilSecond c = absl::ToCivilSecond(t, utc);
  if (t == absl::InfiniteFuture() || t == absl::InfinitePast() || c.year() < 1000 || c.year() > 9999) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, utc);
  }
  // Each job written or answered formats its times: absl::FormatTime (and
  // absl::StrFormat) read their pattern every time, at a few thousand
  // instructions a call; absl::StrCat's padded numbers take a tenth of that.
  const int64_t micros = absl::ToInt64Microseconds(t - absl::FromCivil(c, utc));
  return absl::StrCat(absl::Dec(c.year(), absl::kZeroPad4), "-", absl::Dec(c.month(), absl::kZeroPad2), "-",
                      absl::Dec(c.day(), absl::kZeroPad2), "T", absl::Dec(c.hour(), absl::kZeroPad2), ":",
                      absl::Dec(c.minute(), absl::kZeroPad2), ":", absl::Dec(c.second(), absl::kZeroPad2), ".",
                      absl::Dec(micros, absl::kZeroPad6), "Z");
}

std::optional<absl::Time> ParseRfc3339(absl::string_view s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(s), &t, &err)) {
    return std::nullopt;
  }
  return t;
}

std::optional<absl::Duration> ParseDuration(absl::string_view s) {
  if (s.size() < 2 || s.back() != 's') return std::nullopt;
  s.remove_suffix(1);
  absl::string_view whole = s, frac;
  if (auto dot = s.find('.'); dot != absl::string_view::npos) {
    whole = s.substr(0, dot);
    frac = s.substr(dot + 1);
    if (frac.empty() || frac.size() > 9) return std::nullopt;
  }
  if (whole.empty() || whole.size() > 12) return std::nullopt;
  for (char c : whole) if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  for (char c : frac) if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  int64_t secs = 0;
  if (!absl::SimpleAtoi(whole, &secs)) return std::nullopt;
  int64_t nanos = 0;
  if (!frac.empty()) {
    std::string padded(frac);
    padded.resize(9, '0');
    if (!absl::SimpleAtoi(padded, &nanos)) return std::nullopt;
  }
  return absl::Seconds(secs) + absl::Nanoseconds(nanos);
}

std::string FormatDuration(absl::Duration d) {
  int64_t nanos = absl::ToInt64Nanoseconds(d);
  int64_t secs = nanos / 1000000000;
  int64_t rem = nanos % 1000000000;
  if (rem == 0) return absl::StrCat(secs, "s");
  std::string frac = absl::StrFormat("%09d", rem);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return absl::StrCat(secs, ".", frac, "s");
}

}  // namespace mle::common
