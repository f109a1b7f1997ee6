#include "executor/slurm/slurm_commands.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/subprocess.h"

namespace mle::executor::slurm {

SubprocessCommandRunner::SubprocessCommandRunner(std::map<std::string, std::string> extra_env,
                                                 absl::Duration timeout)
    : extra_env_(std::move(extra_env)), timeout_(timeout) {}

absl::StatusOr<RunResult> SubprocessCommandRunner::Run(const std::vector<std::string>& argv) {
  common::CommandOptions options;
  options.timeout = timeout_;
  // squeue lists every job the controller knows (finished ones too, until
  // MinJobAge): keep all of it, never a truncated listing.
  options.max_output = size_t{512} << 20;
  if (!extra_env_.empty()) {
    auto env = common::CurrentEnvironment();
    for (const auto& [k, v] : extra_env_) env[k] = v;
    options.env = std::move(env);
  }
  auto result = common::RunCommand(argv, options);
  if (!result.ok()) return result.status();
  if (result->timed_out) {
    return absl::UnavailableError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` timed out after ", absl::FormatDuration(timeout_)));
  }
  RunResult out;
  out.exit_code = result->signal != 0 ? -1 : result->exit_code;
  out.output = std::move(result->output);
  return out;
}

}  // namespace mle::executor::slurm
