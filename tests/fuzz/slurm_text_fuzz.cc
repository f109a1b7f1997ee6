// Fuzzes the parsers of Slurm's plain-text output on the same bytes:
// `sbatch --parsable` (ParseSbatchParsable), GRES lists (ParseGres),
// hostlists (ExpandHostlist), squeue's table (ParseJobsTable, with and
// without names) and the state mapping (MapSlurmState, first line as the
// state, the rest as the reason). Properties: a parsed job has an id and a
// state that maps (to a state or with a message), a job of an unnamed
// listing no name, and errors are INVALID_ARGUMENT; a parsed sbatch
// job id is positive; an expanded hostlist stays within its 65536 hosts and
// its names carry no bracket or comma; GRES counts are never negative for
// an input whose numbers all are not.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "executor/slurm/slurm_parsers.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "slurm_text_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace slurm = mle::executor::slurm;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  for (const bool named : {false, true}) {
    auto jobs = slurm::ParseJobsTable(text, named);
    if (!jobs.ok()) {
      if (jobs.status().code() != absl::StatusCode::kInvalidArgument) Fail("unexpected error " + jobs.status().ToString());
      continue;
    }
    for (const auto& j : *jobs) {
      if (j.job_id <= 0 || j.state.empty()) Fail("a job without an id or a state was accepted");
      if (!named && !j.name.empty()) Fail("a job of an unnamed listing has a name");
      const slurm::MappedState mapped = slurm::MapSlurmState(j.state, j.state_reason);
      if (mapped.state == mle::model::JobState::kUnspecified && mapped.message.empty()) {
        Fail("the state " + j.state + " maps to nothing, silently");
      }
    }
  }

  if (auto sub = slurm::ParseSbatchParsable(text); sub.ok() && sub->job_id <= 0) Fail("a job id <= 0 was accepted");

  const bool has_minus = text.find('-') != absl::string_view::npos;
  for (const auto& [name, count] : slurm::ParseGres(text)) {
    if (count < 0 && !has_minus) Fail("GRES " + name + " has a negative count");
  }

  if (auto hosts = slurm::ExpandHostlist(text); hosts.ok()) {
    if (hosts->size() > 65536) Fail("a hostlist expanded past 65536 hosts");
    for (const auto& h : *hosts) {
      if (h.find_first_of("[],") != std::string::npos) Fail("an expanded host name \"" + h + "\" keeps [ ] or ,");
    }
  }

  const size_t eol = text.find('\n');
  const absl::string_view state = text.substr(0, eol);
  const absl::string_view reason = eol == absl::string_view::npos ? absl::string_view() : text.substr(eol + 1);
  const slurm::MappedState mapped = slurm::MapSlurmState(state, reason);
  if (mapped.state == mle::model::JobState::kUnspecified && mapped.message.empty()) {
    Fail("an unknown Slurm state was mapped without a message");
  }
  return 0;
}
