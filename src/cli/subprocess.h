// Child processes for the CLI (setup.py sdist, local training): start with
// posix_spawn in a chosen directory and environment, with stdout/stderr
// inherited, piped, or discarded; optionally in a new process group so the
// whole tree can be signalled. A Child is owned by one thread; not
// thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::cli {

enum class Stdio { kInherit, kPipe, kNull };

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::string cwd;                // empty: the CLI's working directory
  std::map<std::string, std::string> env;  // set on top of the CLI's environment
  Stdio out = Stdio::kInherit;
  Stdio err = Stdio::kInherit;
  bool merge_stderr = false;  // stderr goes where stdout goes
  bool new_process_group = false;
};

class Child {
 public:
  static absl::StatusOr<Child> Start(const ProcessOptions& options);
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  int stdout_fd() const { return out_fd_; }  // -1 unless piped
  int stderr_fd() const { return err_fd_; }  // -1 unless piped
  void CloseStdout();
  void CloseStderr();

  // Blocks until the child exits; the exit code, or 128+signal.
  int Wait();
  // The exit code if the child has exited, else nullopt (does not block).
  std::optional<int> TryWait();
  bool exited() const { return exit_code_.has_value(); }
  // Sends `sig` to the child (its whole process group when it has one).
  void Signal(int sig) const;

 private:
  Child() = default;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool group_ = false;
  std::optional<int> exit_code_;
};

struct CaptureResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr, interleaved
};

// Runs to completion, collecting stdout and stderr together.
absl::StatusOr<CaptureResult> RunAndCapture(ProcessOptions options);

// Decodes a waitpid status: exit code, or 128+signal.
int ExitCodeFromWaitStatus(int status);

}  // namespace mle::cli
