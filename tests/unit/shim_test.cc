// mlengine-replica, the real binary: whatever a replica starts (children,
// daemons that double-fork, helpers in sessions of their own, processes that
// ignore SIGTERM), nothing is left once the shim has exited: neither when
// the replica's program ends by itself, nor when the shim is told to stop.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rundir/file_io.h"
#include "rundir/replica_files.h"

namespace {

namespace fs = std::filesystem;

// Every live process whose command line contains `marker`.
std::vector<pid_t> ProcessesWith(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmdline = ss.str();
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    std::ifstream stat(e.path() / "stat");
    std::string stat_line;
    std::getline(stat, stat_line);
    const bool zombie = stat_line.find(") Z ") != std::string::npos;
    if (!zombie && cmdline.find(marker) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// Starts the real mlengine-replica with `argv` (argv[0] included) and `env`
// (nullptr: this process's environment); 0 when it could not be started.
pid_t SpawnShim(std::vector<std::string> argv, std::vector<std::string>* env = nullptr) {
  auto pointers = [](std::vector<std::string>& words) {
    std::vector<char*> out;
    for (auto& w : words) out.push_back(w.data());
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = env != nullptr ? pointers(*env) : std::vector<char*>();
  pid_t pid = 0;
  if (::posix_spawn(&pid, MLE_SHIM, nullptr, nullptr, args.data(), env != nullptr ? envp.data() : environ) != 0) {
    return 0;
  }
  return pid;
}

// How the trainer leaves something behind. Each script starts its helper,
// which runs `sleep MARKER`, says "ready" on the FIFO $READY, and then either
// exits (the program ends by itself) or keeps running (the shim is stopped).
struct Escape {
  std::string name;
  std::string spawn;  // shell that starts the helper; MARKER is replaced
};

const std::vector<Escape> kEscapes = {
    {"background_child", "sleep MARKER &"},
    {"setsid_helper", "setsid sleep MARKER &"},
    {"double_fork", "( (sleep MARKER &) & )"},
    {"setsid_nohup_closed_output", "setsid nohup sleep MARKER >/dev/null 2>&1 </dev/null &"},
    {"ignores_sigterm_in_own_session", "setsid sh -c 'trap \"\" TERM; sleep MARKER; sleep MARKER' &"},
    {"python_daemon",
     "/usr/bin/python3 -c 'import os,sys,time\n"
     "if os.fork(): sys.exit(0)\n"
     "os.setsid()\n"
     "if os.fork(): sys.exit(0)\n"
     "os.closerange(0, 3)\n"
     "os.execvp(\"sleep\", [\"sleep\", \"MARKER\"])' &"},
};

class ShimTest : public ::testing::TestWithParam<std::tuple<Escape, bool>> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_shim_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work");
    fifo_ = (dir_ / "ready").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
  }
  void TearDown() override {
    for (pid_t p : ProcessesWith(marker_)) ::kill(p, SIGKILL);
    fs::remove_all(dir_);
  }

  pid_t StartShim(const std::string& script) {
    std::vector<std::string> argv = {MLE_SHIM, "--log", (dir_ / "log").string(), "--exit", (dir_ / "exit").string(),
                                     "--cwd", (dir_ / "work").string(), "--grace", "1", "--",
                                     "/bin/sh", "-c", script};
    std::vector<std::string> env = {"READY=" + fifo_, "GO=" + (dir_ / "go").string(), "PATH=/usr/bin:/bin"};
    const pid_t pid = SpawnShim(std::move(argv), &env);
    EXPECT_NE(pid, 0);
    return pid;
  }
  // Blocks until the script writes its line to the FIFO.
  std::string WaitReady() {
    std::ifstream in(fifo_);
    std::string line;
    std::getline(in, line);
    return line;
  }
  int WaitExit(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }

  static int counter_;
  fs::path dir_;
  std::string fifo_;
  std::string marker_ = "4242." + std::to_string(::getpid());
};
int ShimTest::counter_ = 0;

TEST_P(ShimTest, NothingOutlivesTheReplica) {
  const auto& [escape, stop_the_shim] = GetParam();
  std::string spawn = escape.spawn;
  for (size_t at; (at = spawn.find("MARKER")) != std::string::npos;) spawn.replace(at, 6, marker_);
  // The helper is started, then the program says it is ready and either ends
  // (exit 0, once the test has seen the helper: until then the shim has no
  // reason to end anything) or keeps running until the shim is stopped.
  const std::string script = spawn + "\nsleep 0.2; echo ready > \"$READY\"\n" +
                             (stop_the_shim ? "sleep 600\n" : "while [ ! -e \"$GO\" ]; do sleep 0.02; done; exit 0\n");
  const pid_t shim = StartShim(script);
  ASSERT_EQ(WaitReady(), "ready");
  ASSERT_FALSE(ProcessesWith(marker_).empty()) << "the helper should be running: " << escape.name;
  if (stop_the_shim) {
    ASSERT_EQ(::kill(shim, SIGTERM), 0);
  } else {
    std::ofstream((dir_ / "go").string()) << "go\n";
  }
  const int status = WaitExit(shim);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(ProcessesWith(marker_), std::vector<pid_t>{}) << escape.name << ": a process outlived its replica";
  auto exit = mle::rundir::ReadExit((dir_ / "exit").string());
  ASSERT_TRUE(exit.ok() && exit->has_value()) << "the shim records how the program ended";
  if (stop_the_shim) {
    EXPECT_TRUE((*exit)->signaled) << "stopped by SIGTERM";
    EXPECT_EQ((*exit)->value, SIGTERM);
  } else {
    EXPECT_TRUE((*exit)->Succeeded());
  }
}

INSTANTIATE_TEST_SUITE_P(Escapes, ShimTest, ::testing::Combine(::testing::ValuesIn(kEscapes), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_stopped" : "_ended");
                         });

// The shim ends as soon as its program does, even when the program closed
// its output long before: the end of output wakes the shim, but the program
// cannot be reaped yet, and the shim used to sleep out its poll timeout
// (100 ms) before looking again. Every job's slot was held that long.
//
// Timed against a peer in the same run: the same program keeping its output
// open to the end, whose end of output and exit come together. What the
// shim's own exit costs (tens of ms under a sanitizer's leak check, more on a
// loaded host) is in both, so the difference is only the late notice: about
// 60 ms (100 - 40) for a shim that slept out its timeout, about 0 for one
// that did not.
TEST(ShimEndTest, TheShimEndsWhenItsProgramDoesNotAPollTimeoutLater) {
  const fs::path dir = fs::temp_directory_path() / ("mle_shim_end_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "work");
  const std::string fifo = (dir / "ready").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Milliseconds from the program's "ready" to the shim's exit.
  auto run = [&](const std::string& script) -> double {
    std::vector<std::string> argv = {MLE_SHIM, "--log", (dir / "log").string(), "--exit", (dir / "exit").string(),
                                     "--cwd", (dir / "work").string(), "--", "/bin/sh", "-c", script};
    std::vector<std::string> env = {"READY=" + fifo, "PATH=/usr/bin:/bin"};
    const pid_t shim = SpawnShim(std::move(argv), &env);
    EXPECT_NE(shim, 0);
    if (shim == 0) return 1e9;
    std::string line;
    {
      std::ifstream in(fifo);
      std::getline(in, line);
    }
    EXPECT_EQ(line, "ready");
    const auto ready = std::chrono::steady_clock::now();
    int status = 0;
    while (::waitpid(shim, &status, 0) < 0 && errno == EINTR) {
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ready).count();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return ms;
  };
  // The output ends, the program says so, and it exits 40 ms later.
  const std::string closed_early = "exec >/dev/null 2>&1; echo ready > \"$READY\"; sleep 0.04";
  // The same, its output open until it exits.
  const std::string open_to_the_end = "echo ready > \"$READY\"; sleep 0.04";
  double best_closed = 1e9, best_open = 1e9;
  for (int attempt = 0; attempt < 5 && (attempt < 2 || best_closed - best_open >= 30); ++attempt) {
    best_closed = std::min(best_closed, run(closed_early));
    best_open = std::min(best_open, run(open_to_the_end));
  }
  EXPECT_LT(best_closed - best_open, 30) << "the shim noticed its program's end late: " << best_closed
                                         << " ms against " << best_open << " ms when output and exit came together";
  fs::remove_all(dir);
}

TEST(ShimLogTest, LinesAreWrittenInTheFormatRundirReads) {
  const fs::path dir = fs::temp_directory_path() / ("mle_shim_log_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "work");
  std::vector<std::string> argv = {MLE_SHIM, "--log", (dir / "log").string(), "--exit", (dir / "exit").string(),
                                   "--cwd", (dir / "work").string(), "--", "/bin/sh", "-c",
                                   "echo out; echo err >&2; printf partial; exit 3"};
  // Whole seconds: the log's stamp is read from the real-time clock.
  const absl::Time began = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()));
  const pid_t pid = SpawnShim(std::move(argv));
  ASSERT_NE(pid, 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const absl::Time ended = absl::Now();
  std::ifstream in(dir / "log");
  std::vector<mle::rundir::LogLine> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(mle::rundir::ParseLogLine(line));
  ASSERT_EQ(lines.size(), 3u);
  std::multiset<std::pair<bool, std::string>> got;
  for (const auto& l : lines) {
    EXPECT_EQ(l.time.size(), 27u) << l.time;  // 2026-01-01T00:00:00.000000Z
    // RFC 3339 in UTC, when the line was read.
    absl::Time at;
    std::string error;
    ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, l.time, &at, &error)) << l.time << ": " << error;
    EXPECT_GE(at, began) << l.time;
    EXPECT_LE(at, ended) << l.time;
    got.insert({l.is_stderr, l.text});
  }
  EXPECT_EQ(got, (std::multiset<std::pair<bool, std::string>>{{false, "out"}, {true, "err"}, {false, "partial"}}));
  EXPECT_EQ(mle::rundir::ReadExit((dir / "exit").string())->value(), (mle::rundir::ReplicaExit{false, 3}));
  fs::remove_all(dir);
}

// Container replicas (--container NAME --podman PODMAN): the shim stops and
// removes the container through podman. A behavioural fake podman records
// its calls; its `stop` ends the "container" (the program) with SIGTERM, as
// podman's does through the container's init.
class ShimContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_shim_container_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work");
    podman_ = (dir_ / "podman").string();
    std::ofstream(podman_) << "#!/bin/sh\n"
                              "echo \"$*\" >> " << (dir_ / "calls").string() << "\n"
                              "if [ \"$1\" = stop ]; then kill -TERM \"$(cat " << (dir_ / "pid").string() << ")\"; fi\n";
    fs::permissions(podman_, fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the shim with `script` as the "podman run" program; `stop`: SIGTERM
  // the shim once the program has started. Returns podman's recorded calls.
  std::vector<std::string> Run(const std::string& script, bool stop) {
    const std::string pid_file = (dir_ / "pid").string();
    const std::string fifo = (dir_ / "ready").string();
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // The program records its pid (for the fake's stop), says it runs, then
    // does what `script` says.
    std::vector<std::string> argv = {MLE_SHIM, "--log", (dir_ / "log").string(), "--exit", (dir_ / "exit").string(),
                                     "--cwd", (dir_ / "work").string(), "--grace", "1", "--container", "mle-c1",
                                     "--podman", podman_, "--", "/bin/sh", "-c",
                                     "echo $$ > " + pid_file + "; echo ready > " + fifo + "; " + script};
    const pid_t pid = SpawnShim(std::move(argv));
    EXPECT_NE(pid, 0);
    {
      std::ifstream ready(fifo);  // blocks until the program runs
      std::string line;
      std::getline(ready, line);
      EXPECT_EQ(line, "ready");
    }
    if (stop) ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::vector<std::string> calls;
    std::ifstream in(dir_ / "calls");
    for (std::string line; std::getline(in, line);) calls.push_back(line);
    return calls;
  }

  static int counter_;
  fs::path dir_;
  std::string podman_;
};
int ShimContainerTest::counter_ = 0;

TEST_F(ShimContainerTest, AStopGoesThroughPodmanAndTheContainerIsRemoved) {
  EXPECT_EQ(Run("exec sleep 600", /*stop=*/true),
            (std::vector<std::string>{"stop -t 1 mle-c1", "rm -f -t 0 --ignore mle-c1"}));
  EXPECT_TRUE(mle::rundir::ReadExit((dir_ / "exit").string())->value().signaled);
}

TEST_F(ShimContainerTest, PodmanRunThatEndsByItselfRemovedItsOwnContainer) {
  EXPECT_EQ(Run("exit 3", /*stop=*/false), std::vector<std::string>{});
  EXPECT_EQ(mle::rundir::ReadExit((dir_ / "exit").string())->value(), (mle::rundir::ReplicaExit{false, 3}));
}

TEST_F(ShimContainerTest, APodmanErrorMayLeaveAContainerSoItIsRemoved) {
  EXPECT_EQ(Run("exit 125", /*stop=*/false), std::vector<std::string>{"rm -f -t 0 --ignore mle-c1"});
}

TEST_F(ShimContainerTest, ContainerAndPodmanGoTogether) {
  std::vector<std::string> argv = {MLE_SHIM, "--log", (dir_ / "log").string(), "--exit", (dir_ / "exit").string(),
                                   "--container", "x", "--", "/bin/true"};
  const pid_t pid = SpawnShim(std::move(argv));
  ASSERT_NE(pid, 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);  // usage
}

}  // namespace
