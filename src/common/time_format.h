// Wire formats of time used by Google APIs: RFC 3339 timestamps
// ("2024-01-02T03:04:05.123456Z") and protobuf durations ("7200s", "1.5s").
// Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mle::common {

// Formats t in UTC with a trailing Z and microseconds ("...T03:04:05.000000Z").
std::string FormatRfc3339(absl::Time t);
// Parses an RFC 3339 timestamp; nullopt when malformed.
std::optional<absl::Time> ParseRfc3339(absl::string_view s);

// Parses "<seconds>[.<fraction>]s" as protobuf's JSON mapping does; nullopt
// when malformed or negative.
std::optional<absl::Duration> ParseDuration(absl::string_view s);
// Formats as "<seconds>s" (with a fraction when needed).
std::string FormatDuration(absl::Duration d);

}  // namespace mle::common
