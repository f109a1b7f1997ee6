#include "cli/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace mle::cli {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int ExitCodeFromWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

absl::StatusOr<Child> Child::Start(const ProcessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to run");
  // Environment: ours, with options.env set on top.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  auto cleanup = [&] {
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) CloseFd(*fd);
  };
  if (options.out == Stdio::kPipe && ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (options.err == Stdio::kPipe && !options.merge_stderr && ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    cleanup();
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.out == Stdio::kPipe) {
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  } else if (options.out == Stdio::kNull) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  }
  if (options.merge_stderr) {
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  } else if (options.err == Stdio::kPipe) {
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  } else if (options.err == Stdio::kNull) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);

  pid_t pid = -1;
  int rc = options.argv[0].find('/') == std::string::npos
               ? ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data())
               : ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  if (rc != 0) {
    cleanup();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", options.argv[0],
                     options.cwd.empty() ? "" : absl::StrCat(" in ", options.cwd), ": ", std::strerror(rc)));
  }
  Child child;
  child.pid_ = pid;
  child.out_fd_ = out_pipe[0];
  child.err_fd_ = err_pipe[0];
  child.group_ = options.new_process_group;
  return child;
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    CloseFd(out_fd_);
    CloseFd(err_fd_);
    pid_ = o.pid_;
    out_fd_ = o.out_fd_;
    err_fd_ = o.err_fd_;
    group_ = o.group_;
    exit_code_ = o.exit_code_;
    o.pid_ = -1;
    o.out_fd_ = -1;
    o.err_fd_ = -1;
  }
  return *this;
}

Child::~Child() {
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  if (pid_ > 0 && !exit_code_) {
    // Never leave a zombie or an orphan behind.
    Signal(SIGKILL);
    Wait();
  }
}

void Child::CloseStdout() { CloseFd(out_fd_); }
void Child::CloseStderr() { CloseFd(err_fd_); }

int Child::Wait() {
  if (exit_code_) return *exit_code_;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) {
      exit_code_ = 1;
      return 1;
    }
  }
  exit_code_ = ExitCodeFromWaitStatus(status);
  return *exit_code_;
}

std::optional<int> Child::TryWait() {
  if (exit_code_) return exit_code_;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_code_ = ExitCodeFromWaitStatus(status);
  return exit_code_;
}

void Child::Signal(int sig) const {
  if (pid_ <= 0 || exit_code_) return;
  if (group_) {
    ::kill(-pid_, sig);
  } else {
    ::kill(pid_, sig);
  }
}

absl::StatusOr<CaptureResult> RunAndCapture(ProcessOptions options) {
  options.out = Stdio::kPipe;
  options.merge_stderr = true;
  auto child = Child::Start(options);
  if (!child.ok()) return child.status();
  CaptureResult result;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(child->stdout_fd(), buf, sizeof(buf));
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  result.exit_code = child->Wait();
  return result;
}

}  // namespace mle::cli
