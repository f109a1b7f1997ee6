// Running a helper command to completion (pip, python -m venv, nvidia-smi):
// argv, environment and working directory explicit; output captured (stdout
// and stderr together, the last `max_output` bytes kept); a timeout after
// which the whole process group is killed. Not for replicas: those go through
// the executor. Thread-safe (no shared state).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mle::common {

struct CommandResult {
  int exit_code = -1;   // when it exited
  int signal = 0;       // when a signal ended it
  bool timed_out = false;
  std::string output;   // stdout + stderr, interleaved, tail-trimmed
};

struct CommandOptions {
  std::string cwd;                                   // empty = inherit
  std::optional<std::map<std::string, std::string>> env;  // nullopt = inherit
  absl::Duration timeout = absl::Minutes(10);
  size_t max_output = 64 * 1024;
};

// UNAVAILABLE when the program cannot be started (message says why).
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

// The current environment as a map.
std::map<std::string, std::string> CurrentEnvironment();

// Finds `program` on PATH (or returns it when it contains a '/'); nullopt if absent.
std::optional<std::string> FindProgram(const std::string& program);

}  // namespace mle::common
