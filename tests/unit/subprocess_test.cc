// common/subprocess: every way of starting a program gives the child exactly
// the descriptors it asked for (the parent holds an extra non-CLOEXEC file
// and a non-CLOEXEC listening socket, as mlengined's Asio listener is), the
// process group asked for, and default signals; RunCommand captures, trims,
// times out and kills the group. The child is tests/helpers/fd_report.
#include "common/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace mle::common {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// What fd_report wrote.
struct Report {
  std::map<int, std::string> fds;  // descriptor -> readlink target
  pid_t pid = -1, pgid = -1, sid = -1;
  std::string sig_blocked, sig_ignored;

  std::vector<int> Numbers() const {
    std::vector<int> out;
    for (const auto& [fd, target] : fds) out.push_back(fd);
    return out;
  }
};

Report ReadReport(const std::string& path) {
  Report r;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (f[0] == "fd" && f.size() == 3) {
      int fd = -1;
      if (absl::SimpleAtoi(f[1], &fd)) r.fds[fd] = f[2];
    } else if (f[0] == "pid") {
      r.pid = std::stoi(f[1]);
    } else if (f[0] == "pgid") {
      r.pgid = std::stoi(f[1]);
    } else if (f[0] == "sid") {
      r.sid = std::stoi(f[1]);
    } else if (absl::StartsWith(line, "SigBlk:")) {
      r.sig_blocked = std::string(absl::StripAsciiWhitespace(line.substr(7)));
    } else if (absl::StartsWith(line, "SigIgn:")) {
      r.sig_ignored = std::string(absl::StripAsciiWhitespace(line.substr(7)));
    }
  }
  return r;
}

std::string LinkOf(int fd) {
  std::error_code ec;
  return fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
}

int BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// A TCP socket listening on 127.0.0.1:`port` (0: any), without CLOEXEC; -1 on failure.
int Listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 8) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

SpawnOptions Command(std::vector<std::string> argv) {
  SpawnOptions o;
  o.argv = std::move(argv);
  return o;
}

class SubprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "subprocess_test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern).string();
    // What a careless parent holds: a file and a listening socket, both
    // inheritable across exec.
    leaked_file_ = ::open((dir_ + "/leaked").c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(leaked_file_, 3);
    listener_ = Listen(0);
    ASSERT_GE(listener_, 3);
    // And a signal blocked, two ignored.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    ASSERT_EQ(::sigprocmask(SIG_BLOCK, &usr1, &old_mask_), 0);
    old_usr2_ = ::signal(SIGUSR2, SIG_IGN);
    old_pipe_ = ::signal(SIGPIPE, SIG_IGN);
  }
  void TearDown() override {
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    ::signal(SIGUSR2, old_usr2_);
    ::signal(SIGPIPE, old_pipe_);
    if (leaked_file_ >= 0) ::close(leaked_file_);
    if (listener_ >= 0) ::close(listener_);
    fs::remove_all(dir_);
  }

  std::string dir_;
  int leaked_file_ = -1;
  int listener_ = -1;
  sigset_t old_mask_;
  sighandler_t old_usr2_ = SIG_DFL;
  sighandler_t old_pipe_ = SIG_DFL;
};

// What the child's descriptor 1 or 2 should point at.
std::string ExpectedTarget(const Stdio& s, int fd, const std::string& stdout_target) {
  switch (s.kind) {
    case Stdio::Kind::kInherit: return LinkOf(fd);
    case Stdio::Kind::kNull: return "/dev/null";
    case Stdio::Kind::kFile: return s.path;
    case Stdio::Kind::kPipe: return "pipe:";  // a prefix
    case Stdio::Kind::kFd: return LinkOf(s.fd);
    case Stdio::Kind::kSameAsStdout: return stdout_target;
  }
  return "";
}

struct ModeCase {
  std::string name;
  ProcessGroup group;
  Stdio in, out, err;  // a kFile path is relative to the test's directory
};

std::vector<ModeCase> ModeCases() {
  return {
      {"all_inherited", ProcessGroup::kInherit, Stdio::Inherit(), Stdio::Inherit(), Stdio::Inherit()},
      {"group_pipe_merged", ProcessGroup::kNewGroup, Stdio::Null(), Stdio::Pipe(), Stdio::SameAsStdout()},
      {"session_file_null", ProcessGroup::kNewSession, Stdio::Null(), Stdio::File("out.txt"), Stdio::Null()},
      {"group_null_pipe", ProcessGroup::kNewGroup, Stdio::Null(), Stdio::Null(), Stdio::Pipe()},
      {"session_two_pipes", ProcessGroup::kNewSession, Stdio::Null(), Stdio::Pipe(), Stdio::Pipe()},
      {"inherit_appended_file_to_both", ProcessGroup::kInherit, Stdio::Null(), Stdio::File("log", true),
       Stdio::SameAsStdout()},
  };
}

// The child holds exactly 0, 1 and 2, each what was asked; it is in the
// group asked for; its signals are at their defaults.
void CheckReport(const Report& r, const ModeCase& c, const std::string& dir) {
  EXPECT_THAT(r.Numbers(), ElementsAre(0, 1, 2)) << c.name << ": the child has descriptors it was not given";
  auto absolute = [&](Stdio s) {
    if (s.kind == Stdio::Kind::kFile) s.path = dir + "/" + s.path;
    return s;
  };
  EXPECT_THAT(r.fds.count(0) ? r.fds.at(0) : "", StartsWith(ExpectedTarget(absolute(c.in), 0, ""))) << c.name;
  const std::string out = ExpectedTarget(absolute(c.out), 1, "");
  EXPECT_THAT(r.fds.count(1) ? r.fds.at(1) : "", StartsWith(out)) << c.name;
  EXPECT_THAT(r.fds.count(2) ? r.fds.at(2) : "", StartsWith(ExpectedTarget(absolute(c.err), 2, r.fds.count(1) ? r.fds.at(1) : "")))
      << c.name;
  if (c.out.kind == Stdio::Kind::kPipe && c.err.kind == Stdio::Kind::kPipe) {
    EXPECT_NE(r.fds.at(1), r.fds.at(2)) << c.name << ": stdout and stderr are separate pipes";
  }
  switch (c.group) {
    case ProcessGroup::kInherit:
      EXPECT_EQ(r.pgid, ::getpgrp()) << c.name;
      EXPECT_EQ(r.sid, ::getsid(0)) << c.name;
      break;
    case ProcessGroup::kNewGroup:
      EXPECT_EQ(r.pgid, r.pid) << c.name;
      EXPECT_EQ(r.sid, ::getsid(0)) << c.name;
      break;
    case ProcessGroup::kNewSession:
      EXPECT_EQ(r.pgid, r.pid) << c.name;
      EXPECT_EQ(r.sid, r.pid) << c.name;
      break;
  }
  EXPECT_EQ(r.sig_blocked, "0000000000000000") << c.name;
  // glibc's posix_spawn leaves its own two real-time signals (32, 33: thread
  // cancellation and setxid) ignored in the child; every other one is at its
  // default.
  uint64_t ignored = 0;
  ASSERT_TRUE(absl::SimpleHexAtoi(r.sig_ignored, &ignored)) << c.name << ": " << r.sig_ignored;
  constexpr uint64_t kGlibcInternal = (uint64_t{1} << (32 - 1)) | (uint64_t{1} << (33 - 1));
  EXPECT_EQ(ignored & ~kGlibcInternal, 0u) << c.name << ": ignored signals " << r.sig_ignored;
}

// fd_report run as `c` says, its report and kFile outputs in `dir`.
SpawnOptions ReportOptions(const ModeCase& c, const std::string& dir) {
  SpawnOptions options;
  options.argv = {MLE_FD_REPORT, dir + "/" + c.name + ".report"};
  options.group = c.group;
  options.in = c.in;
  options.out = c.out;
  options.err = c.err;
  for (Stdio* s : {&options.out, &options.err}) {
    if (s->kind == Stdio::Kind::kFile) s->path = dir + "/" + s->path;
  }
  options.cwd = dir;
  return options;
}

TEST_F(SubprocessTest, SpawnGivesOnlyTheDescriptorsAsked) {
  for (const ModeCase& c : ModeCases()) {
    auto child = Spawn(ReportOptions(c, dir_));
    ASSERT_TRUE(child.ok()) << c.name << ": " << child.status();
    EXPECT_EQ(child->stdout_fd() >= 0, c.out.kind == Stdio::Kind::kPipe) << c.name;
    EXPECT_EQ(child->stderr_fd() >= 0, c.err.kind == Stdio::Kind::kPipe) << c.name;
    EXPECT_EQ(child->Wait(), 0) << c.name;
    CheckReport(ReadReport(dir_ + "/" + c.name + ".report"), c, dir_);
  }
}

TEST_F(SubprocessTest, StdinFromADescriptor) {
  SpawnOptions options;
  options.argv = {MLE_FD_REPORT, dir_ + "/report"};
  options.in = Stdio::Fd(leaked_file_);
  auto child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->Wait(), 0);
  Report r = ReadReport(dir_ + "/report");
  EXPECT_THAT(r.Numbers(), ElementsAre(0, 1, 2));
  EXPECT_EQ(r.fds[0], dir_ + "/leaked");  // the descriptor given, as 0 only
}

TEST_F(SubprocessTest, ExecGivesOnlyTheDescriptorsAsked) {
  for (const ModeCase& c : ModeCases()) {
    if (c.out.kind == Stdio::Kind::kPipe || c.err.kind == Stdio::Kind::kPipe) continue;  // nobody to read them
    const SpawnOptions options = ReportOptions(c, dir_);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      absl::Status s = Exec(options);
      std::fprintf(stderr, "exec: %s\n", s.ToString().c_str());
      ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << c.name << ": status " << status;
    CheckReport(ReadReport(dir_ + "/" + c.name + ".report"), c, dir_);
  }
}

TEST_F(SubprocessTest, ExecRefusesPipesAndReportsAMissingProgram) {
  SpawnOptions options;
  options.argv = {MLE_FD_REPORT, dir_ + "/report"};
  options.out = Stdio::Pipe();
  EXPECT_EQ(Exec(options).code(), absl::StatusCode::kInvalidArgument);
  // A missing program fails before anything of this process is changed but
  // its descriptors' close-on-exec flags: run it in a child all the same.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SpawnOptions missing;
    missing.argv = {dir_ + "/no-such-program"};
    absl::Status s = Exec(missing);
    const bool as_expected = s.code() == absl::StatusCode::kUnavailable &&
                             s.message().find("no-such-program") != absl::string_view::npos;
    ::_exit(as_expected ? 42 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << status;
}

// The bug this fixes: a child that inherits mlengined's listening socket keeps
// the port after mlengined is gone, so a restarted server cannot listen.
TEST_F(SubprocessTest, ListeningPortFreeForARestartWhileTheChildRuns) {
  const int port = BoundPort(listener_);
  // Control: a child started by a bare posix_spawn keeps the port.
  {
    int gate[2];
    ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, gate[0], 0);
    char* argv[] = {const_cast<char*>("cat"), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawnp(&pid, "cat", &actions, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(gate[0]);
    const int second = Listen(port);
    const int err = errno;
    if (second >= 0) ::close(second);
    ::close(gate[1]);  // cat ends
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_EQ(second, -1) << "the control child did not keep the port";
    EXPECT_EQ(err, EADDRINUSE);
  }
  // Spawn: the child runs (blocked reading a pipe) while the parent's socket
  // is closed and the port bound again.
  int gate[2];
  ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
  SpawnOptions options;
  options.argv = {"cat"};
  options.in = Stdio::Fd(gate[0]);
  options.group = ProcessGroup::kNewSession;
  auto child = Spawn(options);
  ASSERT_TRUE(child.ok()) << child.status();
  ::close(gate[0]);
  ::close(listener_);
  listener_ = Listen(port);
  EXPECT_GE(listener_, 0) << "port " << port << " is still held: " << std::strerror(errno);
  EXPECT_FALSE(child->TryWait().has_value());  // the child really was still running
  ::close(gate[1]);
  EXPECT_EQ(child->Wait(), 0);
}

TEST_F(SubprocessTest, SpawnErrors) {
  struct Case {
    std::string name;
    SpawnOptions options;
    absl::StatusCode code;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({"empty argv", Command({}), absl::StatusCode::kInvalidArgument, "no command"});
  cases.push_back({"missing program", Command({dir_ + "/missing"}), absl::StatusCode::kUnavailable, "cannot run"});
  cases.push_back({"missing on PATH", Command({"mlengine-no-such-program"}), absl::StatusCode::kUnavailable, "cannot run"});
  cases.push_back({"missing cwd", Command({"true"}), absl::StatusCode::kUnavailable, "nowhere"});
  cases.back().options.cwd = dir_ + "/nowhere";
  cases.push_back({"unopenable file", Command({"true"}), absl::StatusCode::kUnavailable, "cannot open"});
  cases.back().options.out = Stdio::File(dir_ + "/no/dir/out");
  cases.push_back({"stdin pipe", Command({"true"}), absl::StatusCode::kInvalidArgument, "stdin"});
  cases.back().options.in = Stdio::Pipe();
  cases.push_back({"stdout to stdout", Command({"true"}), absl::StatusCode::kInvalidArgument, "stdout"});
  cases.back().options.out = Stdio::SameAsStdout();
  for (const auto& c : cases) {
    auto child = Spawn(c.options);
    ASSERT_FALSE(child.ok()) << c.name;
    EXPECT_EQ(child.status().code(), c.code) << c.name << ": " << child.status();
    EXPECT_THAT(std::string(child.status().message()), HasSubstr(c.says)) << c.name;
  }
}

TEST_F(SubprocessTest, ExitCodesSignalsAndRelease) {
  auto exits = Spawn(Command({"sh", "-c", "exit 7"}));
  ASSERT_TRUE(exits.ok());
  EXPECT_EQ(exits->Wait(), 7);
  EXPECT_EQ(exits->term_signal(), 0);

  auto killed = Spawn(Command({"sh", "-c", "kill -TERM $$"}));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->Wait(), 128 + SIGTERM);
  EXPECT_EQ(killed->term_signal(), SIGTERM);

  // Released: the caller reaps it; the Subprocess neither kills nor waits.
  pid_t pid = -1;
  {
    auto released = Spawn(Command({"sh", "-c", "exit 5"}));
    ASSERT_TRUE(released.ok());
    pid = released->Release();
    EXPECT_EQ(released->pid(), -1);
    EXPECT_EQ(released->Wait(), 1);  // not its to reap: the caller's waitpid below gets it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 5);
}

TEST_F(SubprocessTest, DestroyingAnUnreleasedChildKillsItsGroup) {
  int gate[2];
  ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
  pid_t pid = -1;
  {
    SpawnOptions options = Command({"cat"});
    options.group = ProcessGroup::kNewGroup;
    options.in = Stdio::Fd(gate[0]);
    auto child = Spawn(options);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
  }
  // Reaped by the destructor: no such child any more.
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  ::close(gate[0]);
  ::close(gate[1]);
}

// ---- RunCommand ----

TEST_F(SubprocessTest, RunCommandTable) {
  struct Case {
    std::string name;
    std::vector<std::string> argv;
    CommandOptions options;
    int exit_code;
    int signal;
    std::string output;
  };
  CommandOptions defaults, tail, env, cwd;
  tail.max_output = 4;
  env.env = std::map<std::string, std::string>{{"GREETING", "hi"}};
  cwd.cwd = dir_;
  std::vector<Case> cases = {
      {"interleaved", {"sh", "-c", "echo out; echo err >&2; echo out2"}, defaults, 0, 0, "out\nerr\nout2\n"},
      {"exit code", {"sh", "-c", "echo bye; exit 3"}, defaults, 3, 0, "bye\n"},
      {"signal", {"sh", "-c", "kill -TERM $$"}, defaults, -1, SIGTERM, ""},
      {"tail kept", {"printf", "0123456789"}, tail, 0, 0, "6789"},
      {"environment", {"sh", "-c", "echo \"$GREETING\""}, env, 0, 0, "hi\n"},
      {"working directory", {"pwd"}, cwd, 0, 0, dir_ + "\n"},
      {"stdin is /dev/null", {"cat"}, defaults, 0, 0, ""},
  };
  for (const auto& c : cases) {
    auto r = RunCommand(c.argv, c.options);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
    EXPECT_EQ(r->exit_code, c.exit_code) << c.name;
    EXPECT_EQ(r->signal, c.signal) << c.name;
    EXPECT_FALSE(r->timed_out) << c.name;
    EXPECT_EQ(r->output, c.output) << c.name;
  }
  EXPECT_EQ(RunCommand({dir_ + "/missing"}).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SubprocessTest, RunCommandGivesOnlyItsPipe) {
  auto r = RunCommand({MLE_FD_REPORT, dir_ + "/report"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  Report report = ReadReport(dir_ + "/report");
  EXPECT_THAT(report.Numbers(), ElementsAre(0, 1, 2));
  EXPECT_EQ(report.fds[0], "/dev/null");
  EXPECT_THAT(report.fds[1], StartsWith("pipe:"));
  EXPECT_EQ(report.fds[2], report.fds[1]);
  EXPECT_EQ(report.pgid, report.pid);  // its own group
}

TEST_F(SubprocessTest, RunCommandTimeoutKillsTheWholeGroup) {
  // The grandchild keeps the pipe open, so only the timeout ends the run.
  CommandOptions options;
  options.timeout = absl::Seconds(2);
  auto r = RunCommand({"sh", "-c", "sleep 600 & echo $!; wait"}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  int grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r->output), &grandchild)) << r->output;
  // Its pidfd becomes readable when it has ended (no such process: ended and reaped).
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, grandchild, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1) << "the grandchild survived the timeout";
    ::close(pidfd);
  } else {
    EXPECT_EQ(errno, ESRCH);
  }
}

TEST(EnvironmentTest, CurrentEnvironmentWithOverrides) {
  ::setenv("MLE_SUBPROCESS_TEST", "old", 1);
  auto env = CurrentEnvironmentWith({{"MLE_SUBPROCESS_TEST", "new"}, {"MLE_SUBPROCESS_ADDED", "1"}});
  EXPECT_EQ(env["MLE_SUBPROCESS_TEST"], "new");
  EXPECT_EQ(env["MLE_SUBPROCESS_ADDED"], "1");
  EXPECT_EQ(env.count("PATH"), CurrentEnvironment().count("PATH"));
  ::unsetenv("MLE_SUBPROCESS_TEST");
}

}  // namespace
}  // namespace mle::common
