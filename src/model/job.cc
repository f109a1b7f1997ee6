#include "model/job.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mle::model {
namespace {

constexpr std::array<std::pair<AttemptEnd, std::string_view>, 9> kAttemptEnds = {{
    {AttemptEnd::kSucceeded, "SUCCEEDED"},
    {AttemptEnd::kFailed, "FAILED"},
    {AttemptEnd::kOutOfMemory, "OUT_OF_MEMORY"},
    {AttemptEnd::kPreempted, "PREEMPTED"},
    {AttemptEnd::kInfrastructure, "INFRASTRUCTURE"},
    {AttemptEnd::kTimedOut, "TIMED_OUT"},
    {AttemptEnd::kCancelled, "CANCELLED"},
    {AttemptEnd::kStalled, "STALLED"},
    {AttemptEnd::kNotJoined, "NOT_JOINED"},
}};

}  // namespace

std::string_view AttemptEndName(AttemptEnd e) {
  for (const auto& [end, name] : kAttemptEnds) {
    if (end == e) return name;
  }
  return "FAILED";
}

std::optional<AttemptEnd> ParseAttemptEnd(std::string_view name) {
  for (const auto& [end, n] : kAttemptEnds) {
    if (n == name) return end;
  }
  return std::nullopt;
}

std::string JobName(const Job& job) {
  return absl::StrCat("projects/", job.project, "/jobs/", job.job_id);
}

}  // namespace mle::model
