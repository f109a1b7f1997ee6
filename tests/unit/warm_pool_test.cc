// WarmPool with the real mlengine-replica and the real warm interpreter
// (python3 -m mlengine._warm): pooled shims are started, a claim turns one
// into a replica (log, exit file, exit status as a cold start would give),
// the pool refills, and nothing is left when the pool goes.
#include "executor/warm_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rundir/replica_files.h"

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_warm_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "code" / "probe");
    std::ofstream(dir_ / "code" / "probe" / "__init__.py") << "";
    std::ofstream(dir_ / "code" / "probe" / "main.py")
        << "import os, sys\nprint('hello', sys.argv[1:], os.environ['PROBE'], flush=True)\nsys.exit(7)\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  WarmPoolOptions Options(int size) {
    WarmPoolOptions o;
    o.shim = MLE_SHIM;
    o.dir = (dir_ / "warm").string();
    o.env = {{"PATH", "/usr/bin:/bin"}, {"PYTHONPATH", MLE_PYTHON_DIR}, {"PYTHONUNBUFFERED", "1"},
             {"MLE_WARM_TEST", dir_.string()}};
    o.runtimes["py"] = {{"/usr/bin/python3", "-m", "mlengine._warm", "--preload", "json", "--control-fd", "3",
                         "--ready-fd", "4"},
                        size};
    return o;
  }
  WarmClaim ClaimFor(const std::string& name) {
    WarmClaim c;
    c.log_path = (dir_ / (name + ".log")).string();
    c.exit_path = (dir_ / (name + ".exit")).string();
    c.grace_seconds = 1;
    c.spec = "{\"module\": \"probe.main\", \"args\": [\"a\"], \"cwd\": \"" + (dir_ / "code").string() +
             "\", \"env\": {\"PATH\": \"/usr/bin:/bin\", \"PROBE\": \"" + name + "\"}}";
    return c;
  }
  // Claims (bounded wait while the interpreters import).
  absl::StatusOr<pid_t> ClaimWhenReady(WarmPool& pool, const WarmClaim& c) {
    absl::StatusOr<pid_t> pid = absl::UnavailableError("never tried");
    for (int i = 0; i < 3000 && absl::IsUnavailable((pid = pool.Claim("py", c)).status()); ++i) ::usleep(10000);
    return pid;
  }
  // Live processes whose environment names this test's directory.
  int Leftovers() {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(e.path() / "environ");
      std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ifstream stat(e.path() / "stat");
      std::string line;
      std::getline(stat, line);
      if (line.find(") Z ") == std::string::npos && env.find("MLE_WARM_TEST=" + dir_.string()) != std::string::npos) ++n;
    }
    return n;
  }

  fs::path dir_;
};

TEST_F(WarmPoolTest, AClaimedShimRunsTheReplicaAndThePoolRefills) {
  WarmPool pool(Options(2));
  pool.Fill();
  EXPECT_EQ(pool.Pooled("py"), 2);
  auto pid = ClaimWhenReady(pool, ClaimFor("first"));
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(pool.Pooled("py"), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid) << "the claimed shim is the caller's child";
  EXPECT_EQ(WEXITSTATUS(status), 7);
  std::ifstream log(dir_ / "first.log");
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(rundir::ParseLogLine(line).text, "hello ['a'] first");
  EXPECT_EQ(rundir::ReadExit((dir_ / "first.exit").string())->value(), (rundir::ReplicaExit{false, 7}));
  pool.Fill();
  EXPECT_EQ(pool.Pooled("py"), 2);
}

TEST_F(WarmPoolTest, NothingIsLeftWhenThePoolGoes) {
  {
    WarmPool pool(Options(2));
    pool.Fill();
    ASSERT_TRUE(ClaimWhenReady(pool, ClaimFor("warmup")).ok());  // both started; one is a replica now
    int status = 0;
    ::wait(&status);
  }
  EXPECT_EQ(Leftovers(), 0);
}

TEST_F(WarmPoolTest, ARuntimeWithoutAPoolIsNotFound) {
  WarmPool pool(Options(1));
  EXPECT_TRUE(absl::IsNotFound(pool.Claim("other", ClaimFor("x")).status()));
}

}  // namespace
}  // namespace mle::executor
