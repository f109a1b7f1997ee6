// The shim's fork server (shim/fork_server.h) through mlengined's end of it
// (executor/shim_forks.h), with the real mlengine-replica: a forked shim
// runs its program as an executed one does, shows its own command line and
// environment in /proc, leads its own session before its pid is known, and
// runs on when the server goes. And the wire format, table-driven.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "executor/shim_forks.h"
#include "rundir/file_io.h"
#include "shim/fork_protocol.h"

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Decoded {
  bool ok;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

TEST(ForkProtocolTest, RequestsDecodeAsEncodedAndMalformedOnesAreRefused) {
  const std::vector<std::vector<std::string>> argvs = {
      {"shim"},
      {"shim", "--", "python3", "-m", "t", "--spec", "[1,2]", "", "a=b", "it's \"quoted\""},
  };
  for (const auto& argv : argvs) {
    const std::vector<std::string> env = {"A=1", "EMPTY=", "SPEC=line one\nline two"};
    const std::string wire = shim::EncodeForkRequest(argv, env);
    std::vector<std::string> got_argv, got_env;
    ASSERT_TRUE(shim::DecodeForkRequest(wire.data(), wire.size(), &got_argv, &got_env));
    EXPECT_EQ(got_argv, argv);
    EXPECT_EQ(got_env, env);
  }
  const std::vector<std::string> refused = {
      std::string(""),                         // nothing
      std::string("2\0shim\0", 7),             // fewer arguments than it says
      std::string("0\0", 2),                   // no argv[0]
      std::string("x\0shim\0", 7),             // a count that is not a number
      std::string("1\0shim\0NOEQUALS\0", 16),  // a variable without '='
      std::string("1\0shim\0=x\0", 10),        // a variable without a name
      std::string("1\0shim\0A=1", 10),         // the last string not terminated
  };
  for (const auto& wire : refused) {
    std::vector<std::string> a, e;
    EXPECT_FALSE(shim::DecodeForkRequest(wire.data(), wire.size(), &a, &e)) << "accepted " << wire.size() << " bytes";
  }
}

class ShimForkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_shim_fork_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto server = ShimForkServer::Start(MLE_SHIM);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> ShimArgv(const std::string& script) const {
    return {MLE_SHIM, "--log", (dir_ / "log").string(), "--exit", (dir_ / "exit").string(), "--cwd", dir_.string(),
            "--grace", "5", "--", "/bin/sh", "-c", script};
  }

  // Waits for the shim's end on its pidfd (it is not ours to waitpid).
  static bool Ended(int pidfd, int timeout_ms) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) == 1;
  }

  fs::path dir_;
  std::unique_ptr<ShimForkServer> server_;
};

TEST_F(ShimForkServerTest, AForkedShimRunsItsProgramAndShowsItsOwnCommandLineAndEnvironment) {
  auto forked = server_->Fork(ShimArgv("echo \"$GREETING\"; sleep 0.3"),
                              {{"GREETING", "hello"}, {"PATH", "/usr/bin:/bin"}, {"MLENGINE_RUN_DIR", dir_.string()}});
  ASSERT_TRUE(forked.ok()) << forked.status();
  std::string cmdline = Slurp("/proc/" + std::to_string(forked->pid) + "/cmdline");
  std::string environ_text = Slurp("/proc/" + std::to_string(forked->pid) + "/environ");
  for (char& c : cmdline) c = c == '\0' ? ' ' : c;
  EXPECT_NE(cmdline.find(std::string(MLE_SHIM) + " --log " + (dir_ / "log").string()), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find("--fork-server"), std::string::npos) << cmdline;
  EXPECT_NE(environ_text.find(std::string("MLENGINE_RUN_DIR=") + dir_.string() + '\0'), std::string::npos);
  EXPECT_EQ(environ_text.find("MLENGINE_FORK_ROOM"), std::string::npos);
  // Its own session, and not this process's child.
  EXPECT_EQ(::getsid(forked->pid), forked->pid);
  EXPECT_EQ(::waitpid(forked->pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  ASSERT_TRUE(Ended(forked->pidfd, 10000));
  ::close(forked->pidfd);
  EXPECT_EQ(Slurp((dir_ / "exit").string()), "exit 0\n");
  EXPECT_NE(Slurp((dir_ / "log").string()).find("\tO\thello\n"), std::string::npos) << Slurp((dir_ / "log").string());
}

// The shim leads its session before its pid is known: a stop signalled to
// the group right after the start (as a cancel does) reaches it, and
// nothing of its program is left. (A stop that comes before the shim's
// handlers are set kills it without an exit record, as for an executed
// shim; the executor counts that as killed.)
TEST_F(ShimForkServerTest, AStopSignalledToTheShimsGroupAtOnceReachesIt) {
  const std::string program = "sleep 30." + std::to_string(::getpid());
  auto forked = server_->Fork(ShimArgv("exec " + program), {{"PATH", "/usr/bin:/bin"}});
  ASSERT_TRUE(forked.ok()) << forked.status();
  ASSERT_EQ(::kill(-forked->pid, SIGTERM), 0) << std::strerror(errno);
  ASSERT_TRUE(Ended(forked->pidfd, 10000));
  ::close(forked->pidfd);
  const std::string exit_record = Slurp((dir_ / "exit").string());
  EXPECT_TRUE(exit_record.empty() || exit_record == "signal 15\n") << exit_record;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string cmdline = Slurp((e.path() / "cmdline").string());
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    EXPECT_EQ(cmdline.find(program), std::string::npos) << "left running: " << e.path();
  }
}

TEST_F(ShimForkServerTest, TooLargeARequestIsRefusedAndTheServerServesTheNext) {
  auto refused = server_->Fork(ShimArgv("true"), {{"HUGE", std::string(300 * 1024, 'x')}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(server_->usable());
  auto forked = server_->Fork(ShimArgv("true"), {{"PATH", "/usr/bin:/bin"}});
  ASSERT_TRUE(forked.ok()) << forked.status();
  ASSERT_TRUE(Ended(forked->pidfd, 10000));
  ::close(forked->pidfd);
  EXPECT_EQ(Slurp((dir_ / "exit").string()), "exit 0\n");
}

TEST_F(ShimForkServerTest, ShimsRunOnWhenTheServerGoes) {
  auto forked = server_->Fork(ShimArgv("sleep 0.5"), {{"PATH", "/usr/bin:/bin"}});
  ASSERT_TRUE(forked.ok()) << forked.status();
  server_.reset();  // mlengined's end closes: the server exits and is reaped
  EXPECT_EQ(::kill(forked->pid, 0), 0);
  ASSERT_TRUE(Ended(forked->pidfd, 10000));
  ::close(forked->pidfd);
  EXPECT_EQ(Slurp((dir_ / "exit").string()), "exit 0\n");
}

}  // namespace
}  // namespace mle::executor
