#include "tuning/space.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>
#include <variant>

#include "absl/strings/str_cat.h"

namespace mle::tuning {
namespace {

// std::to_chars without a format is the shortest text that reads back to the
// same double (fixed or scientific, whichever is shorter).
std::string ShortestRoundTrip(double d) {
  char buf[64];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), d);
  if (r.ec != std::errc()) return absl::StrCat(d);  // cannot happen: 64 chars hold any double
  return std::string(buf, r.ptr);
}

}  // namespace

std::string FormatValue(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return absl::StrCat(*i);
  if (const auto* d = std::get_if<double>(&v)) return ShortestRoundTrip(*d);
  return std::get<std::string>(v);
}

}  // namespace mle::tuning
