#include "common/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace mle::common {
namespace {

constexpr int kFirstNonStdFd = 3;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Descriptors the caller opened for a spawn, closed when it is done.
class FdList {
 public:
  FdList() = default;
  FdList(const FdList&) = delete;
  FdList& operator=(const FdList&) = delete;
  ~FdList() {
    for (int& fd : fds_) CloseFd(fd);
  }
  void Add(int fd) { fds_.push_back(fd); }

 private:
  std::vector<int> fds_;
};

// argv and envp as execve wants them; the strings are owned here.
class ExecArgs {
 public:
  explicit ExecArgs(const SpawnOptions& options) : args_(options.argv) {
    for (auto& a : args_) argv_.push_back(a.data());
    argv_.push_back(nullptr);
    if (options.env) {
      for (const auto& [k, v] : *options.env) env_.push_back(absl::StrCat(k, "=", v));
      for (auto& e : env_) envp_.push_back(e.data());
      envp_.push_back(nullptr);
    }
    has_env_ = options.env.has_value();
  }
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return has_env_ ? envp_.data() : environ; }
  const char* file() const { return argv_[0]; }
  bool search_path() const { return args_[0].find('/') == std::string::npos; }

 private:
  std::vector<std::string> args_, env_;
  std::vector<char*> argv_, envp_;
  bool has_env_ = false;
};

absl::Status CheckOptions(const SpawnOptions& options, bool allow_pipes) {
  if (options.argv.empty() || options.argv[0].empty()) return absl::InvalidArgumentError("no command to run");
  using Kind = Stdio::Kind;
  if (options.in.kind == Kind::kPipe || options.in.kind == Kind::kSameAsStdout) {
    return absl::InvalidArgumentError("stdin can be inherited, /dev/null, a file or a descriptor");
  }
  if (options.out.kind == Kind::kSameAsStdout) return absl::InvalidArgumentError("stdout cannot go to stdout");
  if (!allow_pipes && (options.out.kind == Kind::kPipe || options.err.kind == Kind::kPipe)) {
    return absl::InvalidArgumentError("a process that execs has nobody to read its pipes");
  }
  for (const Stdio* s : {&options.in, &options.out, &options.err}) {
    if (s->kind == Kind::kFd && s->fd < 0) return absl::InvalidArgumentError("negative descriptor for stdio");
  }
  return absl::OkStatus();
}

std::string CannotRun(const SpawnOptions& options, int err) {
  return absl::StrCat("cannot run ", options.argv[0], options.cwd.empty() ? "" : absl::StrCat(" in ", options.cwd),
                      ": ", std::strerror(err));
}

// Opens the file of a kFile or kNull target for descriptor `target` (0 reads,
// 1 and 2 write), close-on-exec; the caller owns the result.
absl::StatusOr<int> OpenStdioFile(const Stdio& s, int target) {
  const std::string path = s.kind == Stdio::Kind::kNull ? "/dev/null" : s.path;
  const int flags = target == STDIN_FILENO ? O_RDONLY
                    : s.kind == Stdio::Kind::kNull ? O_WRONLY
                                                   : O_WRONLY | O_CREAT | (s.append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  return fd;
}

// RAII for posix_spawn's two option objects.
struct SpawnAttributes {
  SpawnAttributes() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

// The caller's descriptor that becomes the child's `target` for `s`; -1 to
// leave `target` as it is (kInherit). Descriptors opened here are added to
// `opened` (the child gets its own copy); a pipe's read end, the caller's to
// keep, goes to `*read_end`.
absl::StatusOr<int> StdioSource(const Stdio& s, int target, FdList& opened, int* read_end) {
  switch (s.kind) {
    case Stdio::Kind::kInherit:
      return -1;
    case Stdio::Kind::kNull:
    case Stdio::Kind::kFile: {
      auto fd = OpenStdioFile(s, target);
      if (fd.ok()) opened.Add(*fd);
      return fd;
    }
    case Stdio::Kind::kFd:
      return s.fd;
    case Stdio::Kind::kPipe: {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(errno)));
      *read_end = p[0];
      opened.Add(p[1]);
      return p[1];
    }
    case Stdio::Kind::kSameAsStdout:
      return STDOUT_FILENO;
  }
  return absl::InternalError("unknown stdio kind");
}

// Adds the file action that gives the child `s` as descriptor `target`.
absl::Status AddStdioAction(const Stdio& s, int target, posix_spawn_file_actions_t* actions, FdList& opened,
                            int* read_end) {
  auto source = StdioSource(s, target, opened, read_end);
  if (!source.ok()) return source.status();
  if (*source < 0) return absl::OkStatus();
  // (A source equal to `target` loses its close-on-exec flag: glibc >= 2.29.)
  if (const int rc = posix_spawn_file_actions_adddup2(actions, *source, target); rc != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn file action: ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

// Exec's counterpart of AddStdioAction: makes `s` descriptor `target` now.
absl::Status RedirectNow(const Stdio& s, int target) {
  FdList opened;
  int no_pipes = -1;
  auto source = StdioSource(s, target, opened, &no_pipes);
  if (!source.ok()) return source.status();
  if (*source < 0) return absl::OkStatus();
  if (*source == target) {
    // dup2 would leave a close-on-exec flag in place.
    const int flags = ::fcntl(target, F_GETFD);
    if (flags < 0 || ::fcntl(target, F_SETFD, flags & ~FD_CLOEXEC) != 0) {
      return absl::UnavailableError(absl::StrCat("descriptor ", target, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  while (::dup2(*source, target) < 0) {
    if (errno != EINTR) return absl::UnavailableError(absl::StrCat("dup2 to ", target, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Sets FD_CLOEXEC on every descriptor from `first` up.
absl::Status CloseOnExecFrom(int first) {
  if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return absl::OkStatus();
  // Kernels before 5.11: walk /proc/self/fd.
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return absl::UnavailableError(absl::StrCat("/proc/self/fd: ", std::strerror(errno)));
  absl::Status status;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name || fd < first || fd == ::dirfd(dir)) continue;
    const int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
    if (flags >= 0 && ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC) != 0 && status.ok()) {
      status = absl::UnavailableError(absl::StrCat("descriptor ", fd, ": ", std::strerror(errno)));
    }
  }
  ::closedir(dir);
  return status;
}

}  // namespace

// ---- Subprocess ----

Subprocess::Subprocess(Subprocess&& o) noexcept { *this = std::move(o); }

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    Discard();
    pid_ = std::exchange(o.pid_, -1);
    out_fd_ = std::exchange(o.out_fd_, -1);
    err_fd_ = std::exchange(o.err_fd_, -1);
    leads_group_ = o.leads_group_;
    exit_code_ = o.exit_code_;
    term_signal_ = o.term_signal_;
  }
  return *this;
}

Subprocess::~Subprocess() { Discard(); }

void Subprocess::Discard() {
  CloseFd(out_fd_);
  CloseFd(err_fd_);
  if (pid_ > 0 && !exit_code_) {
    Signal(SIGKILL);
    Wait();
  }
  pid_ = -1;
}

void Subprocess::CloseStdout() { CloseFd(out_fd_); }
void Subprocess::CloseStderr() { CloseFd(err_fd_); }

void Subprocess::Reaped(int wait_status) {
  if (WIFEXITED(wait_status)) {
    exit_code_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    term_signal_ = WTERMSIG(wait_status);
    exit_code_ = 128 + term_signal_;
  } else {
    exit_code_ = 1;
  }
}

int Subprocess::Wait() {
  if (exit_code_) return *exit_code_;
  if (pid_ <= 0) {  // released or moved from: never waitpid(-1), which reaps any child
    exit_code_ = 1;
    return 1;
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) {
      exit_code_ = 1;  // ECHILD: not ours to reap any more
      return 1;
    }
  }
  Reaped(status);
  return *exit_code_;
}

std::optional<int> Subprocess::TryWait() {
  if (exit_code_ || pid_ <= 0) return Wait();
  int status = 0;
  const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
  if (reaped == pid_) {
    Reaped(status);
  } else if (reaped < 0 && errno == ECHILD) {
    exit_code_ = 1;  // reaped by someone else
  }
  return exit_code_;
}

void Subprocess::Signal(int sig) const {
  if (pid_ <= 0 || exit_code_) return;
  ::kill(leads_group_ ? -pid_ : pid_, sig);
}

pid_t Subprocess::Release() { return std::exchange(pid_, -1); }

// ---- Spawn and Exec ----

absl::StatusOr<Subprocess> Spawn(const SpawnOptions& options) {
  if (auto s = CheckOptions(options, /*allow_pipes=*/true); !s.ok()) return s;
  SpawnAttributes sa;
  FdList parent_copies;  // files opened and pipe write ends: the child has its own
  Subprocess child;      // owns the pipes' read ends from here on
  int unused = -1;
  if (auto s = AddStdioAction(options.in, STDIN_FILENO, &sa.actions, parent_copies, &unused); !s.ok()) return s;
  if (auto s = AddStdioAction(options.out, STDOUT_FILENO, &sa.actions, parent_copies, &child.out_fd_); !s.ok()) {
    return s;
  }
  if (auto s = AddStdioAction(options.err, STDERR_FILENO, &sa.actions, parent_copies, &child.err_fd_); !s.ok()) {
    return s;
  }
  // Nothing else: whatever the parent holds, FD_CLOEXEC or not.
  int rc = posix_spawn_file_actions_addclosefrom_np(&sa.actions, kFirstNonStdFd);
  if (rc == 0 && !options.cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(&sa.actions, options.cwd.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("posix_spawn file action: ", std::strerror(rc)));

  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&sa.attr, &none);
  posix_spawnattr_setsigdefault(&sa.attr, &all);
  switch (options.group) {
    case ProcessGroup::kInherit:
      break;
    case ProcessGroup::kNewGroup:
      flags |= POSIX_SPAWN_SETPGROUP;
      posix_spawnattr_setpgroup(&sa.attr, 0);
      break;
    case ProcessGroup::kNewSession:
      flags |= POSIX_SPAWN_SETSID;
      break;
  }
  posix_spawnattr_setflags(&sa.attr, flags);

  const ExecArgs args(options);
  pid_t pid = -1;
  rc = args.search_path() ? ::posix_spawnp(&pid, args.file(), &sa.actions, &sa.attr, args.argv(), args.envp())
                          : ::posix_spawn(&pid, args.file(), &sa.actions, &sa.attr, args.argv(), args.envp());
  if (rc != 0) return absl::UnavailableError(CannotRun(options, rc));
  child.pid_ = pid;
  child.leads_group_ = options.group != ProcessGroup::kInherit;
  return child;
}

absl::Status Exec(const SpawnOptions& options) {
  if (auto s = CheckOptions(options, /*allow_pipes=*/false); !s.ok()) return s;
  const ExecArgs args(options);
  if (auto s = RedirectNow(options.in, STDIN_FILENO); !s.ok()) return s;
  if (auto s = RedirectNow(options.out, STDOUT_FILENO); !s.ok()) return s;
  if (auto s = RedirectNow(options.err, STDERR_FILENO); !s.ok()) return s;
  if (auto s = CloseOnExecFrom(kFirstNonStdFd); !s.ok()) return s;
  if (options.group == ProcessGroup::kNewGroup && ::setpgid(0, 0) != 0) {
    return absl::UnavailableError(absl::StrCat("setpgid: ", std::strerror(errno)));
  }
  if (options.group == ProcessGroup::kNewSession && ::setsid() < 0) {
    return absl::UnavailableError(absl::StrCat("setsid: ", std::strerror(errno)));
  }
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
    return absl::UnavailableError(CannotRun(options, errno));
  }
  // Handlers are reset by exec itself; ignored signals and the mask are not.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (args.search_path()) {
    ::execvpe(args.file(), args.argv(), args.envp());
  } else {
    ::execve(args.file(), args.argv(), args.envp());
  }
  return absl::UnavailableError(CannotRun(options, errno));
}

// ---- RunCommand ----

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.env = options.env;
  spawn.cwd = options.cwd;
  spawn.group = options.group;
  spawn.in = Stdio::Null();
  spawn.out = Stdio::Pipe();
  spawn.err = Stdio::SameAsStdout();
  auto child = Spawn(spawn);
  if (!child.ok()) return child.status();

  CommandResult result;
  const absl::Time deadline = absl::Now() + options.timeout;
  // Trims to the tail, letting the buffer grow to twice the limit between trims.
  auto trim = [&](size_t slack) {
    if (result.output.size() > options.max_output && result.output.size() - options.max_output > slack) {
      result.output.erase(0, result.output.size() - options.max_output);
    }
  };
  char buf[8192];
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      result.timed_out = true;
      child->Signal(SIGKILL);
      break;
    }
    pollfd p{child->stdout_fd(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n <= 0) continue;  // EINTR or a second gone: check the deadline
    const ssize_t got = ::read(child->stdout_fd(), buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    result.output.append(buf, static_cast<size_t>(got));
    trim(options.max_output);
  }
  child->CloseStdout();
  child->Wait();
  trim(0);
  result.signal = child->term_signal();
  if (result.signal == 0) result.exit_code = child->Wait();
  return result;
}

// ---- environment and PATH ----

bool IsLoaderVariable(const std::string& name) {
  static const std::set<std::string> kNames = {"GCONV_PATH",       "GETCONF_DIR", "HOSTALIASES",  "LOCALDOMAIN",
                                               "LOCPATH",          "MALLOC_TRACE", "NIS_PATH",    "NLSPATH",
                                               "RESOLV_HOST_CONF", "RES_OPTIONS",  "TMPDIR",      "TZDIR"};
  return name.rfind("LD_", 0) == 0 || name.rfind("GLIBC_TUNABLES", 0) == 0 || kNames.count(name) > 0;
}

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::map<std::string, std::string> CurrentEnvironmentWith(const std::map<std::string, std::string>& overrides) {
  auto env = CurrentEnvironment();
  for (const auto& [k, v] : overrides) env[k] = v;
  return env;
}

std::optional<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) == 0) return program;
    return std::nullopt;
  }
  const char* path = ::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace mle::common
