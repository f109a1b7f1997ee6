// CommandRunner: the one seam through which the Slurm executor touches the
// cluster (sbatch, squeue, scancel, scontrol). Production code uses
// SubprocessCommandRunner; tests supply their own runner returning captured
// Slurm output. Implementations must be thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mle::executor::slurm {

struct RunResult {
  int exit_code = -1;  // exit status; -1 when ended by a signal or timeout
  std::string output;  // stdout + stderr
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs argv to completion. UNAVAILABLE when it cannot start or times out;
  // a non-zero exit is a RunResult, not an error.
  virtual absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv) = 0;
};

// Runs commands as child processes (mle::common::RunCommand), with extra
// environment (e.g. SLURM_CONF) added to the current one. Thread-safe.
class SubprocessCommandRunner : public CommandRunner {
 public:
  explicit SubprocessCommandRunner(std::map<std::string, std::string> extra_env = {},
                                   absl::Duration timeout = absl::Seconds(60));
  absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv) override;

 private:
  const std::map<std::string, std::string> extra_env_;
  const absl::Duration timeout_;
};

}  // namespace mle::executor::slurm
