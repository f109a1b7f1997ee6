// Starting programs: the one place mlengine spawns or execs a process (the
// server's replicas and helpers, the Slurm launcher's srun steps and replica,
// the CLI's setup.py and local trainers).
//
// What a child gets, whatever the caller's state:
//   - exactly the descriptors it is given: stdin, stdout and stderr as asked;
//     every other descriptor is closed in the child, FD_CLOEXEC or not (the
//     server's listening socket, the store, pidfds, epoll, pipes of other
//     children never leak into a trainer or a pip);
//   - an empty signal mask and every signal at its default disposition;
//   - the environment and working directory given, or the caller's;
//   - the caller's process group, a new one it leads, or a new session.
//
// Spawn and Exec are thread-safe (posix_spawn; nothing shared). A Subprocess
// is owned by one thread. RunCommand is thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mle::common {

// Where one of the child's standard descriptors comes from or goes to.
struct Stdio {
  enum class Kind {
    kInherit,       // the caller's own descriptor of that number
    kNull,          // /dev/null
    kPipe,          // stdout/stderr only: a pipe whose read end the Subprocess owns
    kFile,          // `path`, opened by the caller before the spawn (output: created 0644, truncated or appended)
    kFd,            // a copy of the caller's `fd` (not taken over); 0-2 mean the child's, as set so far
    kSameAsStdout,  // stderr only: wherever stdout goes
  };
  Kind kind = Kind::kInherit;
  std::string path;     // kFile
  bool append = false;  // kFile, for output
  int fd = -1;          // kFd

  static Stdio Inherit() { return Stdio(); }
  static Stdio Null() { return Stdio(Kind::kNull); }
  static Stdio Pipe() { return Stdio(Kind::kPipe); }
  static Stdio File(std::string path, bool append = false) {
    Stdio s(Kind::kFile);
    s.path = std::move(path);
    s.append = append;
    return s;
  }
  static Stdio Fd(int fd) {
    Stdio s(Kind::kFd);
    s.fd = fd;
    return s;
  }
  static Stdio SameAsStdout() { return Stdio(Kind::kSameAsStdout); }

  Stdio() = default;
  explicit Stdio(Kind k) : kind(k) {}
};

enum class ProcessGroup {
  kInherit,     // the caller's process group (a terminal's Ctrl-C reaches both)
  kNewGroup,    // a new process group led by the child (setpgid(0, 0))
  kNewSession,  // a new session and process group led by the child (setsid())
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on the caller's PATH when it has no '/'
  std::optional<std::map<std::string, std::string>> env;  // nullopt: the caller's environment
  std::string cwd;                                        // empty: the caller's working directory
  ProcessGroup group = ProcessGroup::kInherit;
  Stdio in = Stdio::Null();  // kInherit, kNull, kFile or kFd
  Stdio out = Stdio::Inherit();
  Stdio err = Stdio::Inherit();
};

// A started child. Unless released, it is killed (SIGKILL, to its whole
// group when it leads one) and reaped when the Subprocess is destroyed, so
// none is left behind as an orphan or a zombie. Move-only.
class Subprocess {
 public:
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Read ends of kPipe outputs; -1 otherwise or once closed. Owned here.
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }
  void CloseStdout();
  void CloseStderr();

  // Blocks until the child ends: its exit code, or 128 + the signal that
  // ended it; 1 when it is not this object's to reap (released, or reaped by
  // someone else).
  int Wait();
  // The same without blocking: nullopt while it runs.
  std::optional<int> TryWait();
  bool exited() const { return exit_code_.has_value(); }
  // Once exited: the signal that ended it, or 0 when it exited by itself.
  int term_signal() const { return term_signal_; }

  // Sends `sig` to the child's process group when it leads one (kNewGroup,
  // kNewSession), else to the child. Nothing once it has been reaped.
  void Signal(int sig) const;

  // Gives up ownership: the caller now reaps the child (waitpid, a pidfd);
  // it is neither killed nor waited for here. Pipes stay owned here.
  pid_t Release();

 private:
  friend absl::StatusOr<Subprocess> Spawn(const SpawnOptions& options);
  Subprocess() = default;
  void Reaped(int wait_status);
  // What the destructor does: closes the pipes, kills and reaps an unreleased child.
  void Discard();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool leads_group_ = false;
  std::optional<int> exit_code_;
  int term_signal_ = 0;
};

// Starts argv[0] as described by `options`. UNAVAILABLE when it cannot be
// started (no such program, a file that cannot be opened; the message says
// which), INVALID_ARGUMENT for options that make no sense (empty argv, a pipe
// for stdin, stdout to "where stdout goes").
absl::StatusOr<Subprocess> Spawn(const SpawnOptions& options);

// Replaces the calling process with argv[0], on the same terms as Spawn
// (every descriptor above 2 closed, signals reset, group, cwd, stdio but no
// pipes). Returns only on failure, with the process partly changed
// (descriptors redirected, close-on-exec set): the caller should exit.
// For a single-threaded caller about to become another program.
absl::Status Exec(const SpawnOptions& options);

// Running a helper command to completion (pip, python -m venv, nvidia-smi,
// the Slurm commands, setup.py): output captured (stdout and stderr together,
// the last `max_output` bytes kept); stdin /dev/null; killed after `timeout`
// (its whole process group when it has its own).
struct CommandResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string output;  // stdout + stderr, interleaved, tail-trimmed
};

struct CommandOptions {
  std::string cwd;                                        // empty = inherit
  std::optional<std::map<std::string, std::string>> env;  // nullopt = inherit
  absl::Duration timeout = absl::Minutes(10);             // absl::InfiniteDuration() for none
  size_t max_output = 64 * 1024;
  // kNewGroup: a timeout kills whatever it started too. kInherit: a
  // terminal's Ctrl-C reaches it as it reaches the caller (the CLI).
  ProcessGroup group = ProcessGroup::kNewGroup;
};

// UNAVAILABLE when the program cannot be started (message says why).
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

// Variables the dynamic loader or libc act on at a program's start (glibc's
// UNSECURE_ENVVARS, which it drops for setuid programs), and any LD_*: a
// root process that starts a job's program must not take them from the job.
bool IsLoaderVariable(const std::string& name);

// The current environment as a map.
std::map<std::string, std::string> CurrentEnvironment();
// The current environment with `overrides` set on top.
std::map<std::string, std::string> CurrentEnvironmentWith(const std::map<std::string, std::string>& overrides);

// Finds `program` on PATH (or returns it when it contains a '/'); nullopt if absent.
std::optional<std::string> FindProgram(const std::string& program);

}  // namespace mle::common
