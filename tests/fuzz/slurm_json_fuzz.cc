// Fuzzes the parser of Slurm's JSON output: `sinfo --json`
// (ParseNodesJson), in both the 22.05 and the 23.02+ shapes. Errors must be
// INVALID_ARGUMENT or UNAVAILABLE (what the executor handles); parsed nodes
// have a name.
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

  if (auto nodes = slurm::ParseNodesJson(text); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.name.empty()) Fail("a node without a name was accepted");
    }
  } else {
    CheckError(nodes.status());
  }
  return 0;
}
