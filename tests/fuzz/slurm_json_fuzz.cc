// Fuzzes the parsers of Slurm's JSON output on the same bytes: `squeue
// --json` / `scontrol show job --json` (ParseJobsJson) and `sinfo --json`
// (ParseNodesJson), in both the 22.05 and the 23.02+ shapes. Errors must be
// INVALID_ARGUMENT or UNAVAILABLE (what the executor handles); parsed jobs
// have an id and a state, parsed nodes a name, and every job's state maps.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "executor/slurm/slurm_parsers.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "slurm_json_fuzz: %s\n", what.c_str());
  std::abort();
}

void CheckError(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument && s.code() != absl::StatusCode::kUnavailable) {
    Fail("unexpected error " + s.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace slurm = mle::executor::slurm;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto jobs = slurm::ParseJobsJson(text); jobs.ok()) {
    for (const auto& j : *jobs) {
      if (j.job_id <= 0 || j.state.empty()) Fail("a job without an id or a state was accepted");
      const slurm::MappedState mapped = slurm::MapSlurmState(j.state, j.state_reason);
      if (mapped.state == mle::model::JobState::kUnspecified && mapped.message.empty()) {
        Fail("the state " + j.state + " maps to nothing, silently");
      }
    }
  } else {
    CheckError(jobs.status());
  }

  if (auto nodes = slurm::ParseNodesJson(text); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.name.empty()) Fail("a node without a name was accepted");
    }
  } else {
    CheckError(nodes.status());
  }
  return 0;
}
