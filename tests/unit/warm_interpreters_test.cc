// WarmInterpreters with the real warm interpreter (python3 -m mlengine._warm
// --serve) and the real mlengine-replica (--warm): a replica forked by the
// runtime's interpreter writes its log and exit file as a cold one does;
// an interpreter that ended is started again; let go, it ends.
#include "executor/warm_interpreters.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rundir/replica_files.h"

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

class WarmInterpretersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_warm_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "code" / "probe");
    std::ofstream(dir_ / "code" / "probe" / "__init__.py") << "";
    std::ofstream(dir_ / "code" / "probe" / "main.py")
        << "import os, sys\nprint('hello', sys.argv[1:], os.environ['PROBE'], flush=True)\nsys.exit(7)\n";
    std::ofstream(dir_ / "spec.json") << "{\"module\": \"probe.main\", \"args\": [\"a\"], \"cwd\": \""
                                      << (dir_ / "code").string()
                                      << "\", \"env\": {\"PATH\": \"/usr/bin:/bin\", \"PROBE\": \"warm\"}}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<WarmInterpreters> Make() {
    return std::make_unique<WarmInterpreters>(
        (dir_ / "warm").string(),
        std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", MLE_PYTHON_DIR}},
        std::map<std::string, WarmRuntimeSpec>{{"py", {"/usr/bin/python3", {"json"}}}});
  }
  // Bounded wait until `path` exists (the interpreter binds its socket once ready).
  static bool Appears(const fs::path& path) {
    for (int i = 0; i < 3000 && !fs::exists(path); ++i) ::usleep(10000);
    return fs::exists(path);
  }
  // Runs a replica through the shim; its exit status.
  int RunReplica(const std::string& socket) {
    std::vector<std::string> args = {MLE_SHIM, "--log", (dir_ / "log").string(), "--exit", (dir_ / "exit").string(),
                                     "--cwd", (dir_ / "code").string(), "--warm", socket, "--spec",
                                     (dir_ / "spec.json").string(), "--note", "warm!", "--",
                                     "/usr/bin/python3", "-c", "print('cold'); raise SystemExit(9)"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, MLE_SHIM, nullptr, nullptr, argv.data(), environ) != 0) return -1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
  }
  std::vector<std::string> Log() {
    std::ifstream in(dir_ / "log");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(rundir::ParseLogLine(line).text);
    return out;
  }

  fs::path dir_;
};

TEST_F(WarmInterpretersTest, AReplicaForkedByTheWarmInterpreterIsRecordedAsAColdOne) {
  auto warm = Make();
  warm->Start();
  const std::string socket = warm->SocketFor("py");
  EXPECT_EQ(socket, (dir_ / "warm" / "py.sock").string());
  EXPECT_EQ(warm->SocketFor("other"), "") << "a runtime without warm starts";
  ASSERT_TRUE(Appears(socket));
  EXPECT_EQ(RunReplica(socket), 7);
  EXPECT_EQ(Log(), (std::vector<std::string>{"warm!", "hello ['a'] warm"}));
  EXPECT_EQ(rundir::ReadExit((dir_ / "exit").string())->value(), (rundir::ReplicaExit{false, 7}));
}

TEST_F(WarmInterpretersTest, WithoutItTheReplicaStartsCold) {
  EXPECT_EQ(RunReplica((dir_ / "warm" / "none.sock").string()), 9);
  const auto log = Log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].rfind("mlengine: cold start: the runtime's warm interpreter is not running", 0), 0u) << log[0];
  EXPECT_EQ(log[1], "cold");
}

TEST_F(WarmInterpretersTest, WhatItCannotMakeFreshStartsCold) {
  std::ofstream(dir_ / "spec.json") << "{\"module\": \"probe.main\", \"cwd\": \"" << (dir_ / "code").string()
                                    << "\", \"env\": {\"PYTHONHASHSEED\": \"7\", \"PROBE\": \"x\"}}\n";
  auto warm = Make();
  warm->Start();
  ASSERT_TRUE(Appears(warm->SocketFor("py")));
  EXPECT_EQ(RunReplica(warm->SocketFor("py")), 9) << "PROGRAM, started cold";
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "mlengine: cold start: PYTHONHASHSEED differs from the warm interpreter's", "cold"}));
}

TEST_F(WarmInterpretersTest, LetGoItEnds) {
  const fs::path socket = dir_ / "warm" / "py.sock";
  {
    auto warm = Make();
    warm->Start();
    ASSERT_TRUE(Appears(socket));
  }
  for (int i = 0; i < 3000 && fs::exists(socket); ++i) ::usleep(10000);
  EXPECT_FALSE(fs::exists(socket)) << "it stopped serving";
  int status = 0;
  for (int i = 0; i < 3000 && ::waitpid(-1, &status, WNOHANG) == 0; ++i) ::usleep(10000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "and ended (no replica ran)";
}

}  // namespace
}  // namespace mle::executor
