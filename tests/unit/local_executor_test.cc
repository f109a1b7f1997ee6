// LocalExecutor recovery after a restart, with real mlengine-replica
// processes: a start that was cut short is ended and handed back for a new
// placement (never run twice); a complete one is adopted.
#include "executor/local_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/run_layout.h"
#include "rundir/replica_files.h"

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

class Events : public ExecutorEvents {
 public:
  void JobStarted(const JobRef&) override { ++started; }
  void JobWaiting(const JobRef&, const std::string&) override {}
  void JobPreparing(const JobRef&) override {}
  void JobEnded(const JobRef&, Outcome, const std::string&) override { ++ended; }
  int started = 0, ended = 0;
};

struct Fixture {
  Fixture() {
    root = fs::temp_directory_path() / ("mle_exec_test_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "runs");
    options.runs_dir = (root / "runs").string();
    options.shim = MLE_SHIM;
    options.gcs_root = (root / "buckets").string();
  }
  ~Fixture() {
    executor.reset();
    fs::remove_all(root);
  }
  LocalExecutor& Executor() {
    cache = std::make_unique<runtime::PackageCache>((root / "envs").string());
    executor = std::make_unique<LocalExecutor>(options, runtime::RuntimeCatalog(), *cache);
    executor->SetEvents(&events);
    return *executor;
  }
  // Starts a real replica (sleeping) for task `task` of job p/j, as the executor would.
  pid_t StartReplica(const std::string& task) {
    const std::string job_dir = common::JobRunDir(options.runs_dir, "p", "j");
    fs::create_directories(common::ReplicaDir(job_dir, task) + "/work");
    std::vector<std::string> argv = {options.shim, "--log", common::ReplicaLogPath(job_dir, task), "--exit",
                                     common::ReplicaExitPath(job_dir, task), "--cwd",
                                     common::ReplicaDir(job_dir, task) + "/work", "--", "sleep", "60"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = 0;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);  // as the executor spawns replicas
    EXPECT_EQ(::posix_spawn(&pid, options.shim.c_str(), nullptr, &attr, args.data(), environ), 0);
    posix_spawnattr_destroy(&attr);
    // Until it has exec'd, /proc shows the test's own command line.
    for (int i = 0; i < 500; ++i) {
      std::stringstream cmdline;
      cmdline << std::ifstream("/proc/" + std::to_string(pid) + "/cmdline").rdbuf();
      if (cmdline.str().find("mlengine-replica") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pid;
  }
  fs::path root;
  LocalExecutorOptions options;
  Events events;
  std::unique_ptr<runtime::PackageCache> cache;
  std::unique_ptr<LocalExecutor> executor;
};

bool Gone(pid_t pid) {
  // Reap if it is our child; then check it no longer exists.
  for (int i = 0; i < 200; ++i) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid || ::kill(pid, 0) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

model::Job RunningJob() {
  model::Job job;
  job.project = "p";
  job.job_id = "j";
  job.state = model::JobState::kRunning;
  return job;
}

std::string JobDir(const Fixture& f) { return common::JobRunDir(f.options.runs_dir, "p", "j"); }

rundir::RunManifest Manifest(rundir::RunManifest::Stage stage, std::vector<std::pair<std::string, pid_t>> replicas) {
  rundir::RunManifest m;
  m.stage = stage;
  for (const auto& [task, pid] : replicas) m.replicas.push_back({task, "localhost", {}, pid});
  return m;
}

TEST(LocalExecutorRecoverTest, StartCutShortIsEndedAndPlacedAgain) {
  Fixture f;
  LocalExecutor& executor = f.Executor();
  const pid_t pid = f.StartReplica("master-replica-0");
  // The server died after spawning the master and before the worker.
  ASSERT_TRUE(rundir::WriteManifest(JobDir(f), Manifest(rundir::RunManifest::Stage::kStarting,
                                                        {{"master-replica-0", 0}, {"worker-replica-0", 0}}))
                  .ok());
  EXPECT_FALSE(executor.Recover(RunningJob()).has_value());
  EXPECT_TRUE(Gone(pid)) << "the half-started replica must not keep running";
  EXPECT_EQ(f.events.ended, 0);
}

TEST(LocalExecutorRecoverTest, StartWhoseReplicasAllRunIsAdoptedEvenIfNotMarkedStarted) {
  Fixture f;
  LocalExecutor& executor = f.Executor();
  const pid_t pid = f.StartReplica("master-replica-0");
  // Spawned, but the server died before it wrote the pid: found by its run directory.
  ASSERT_TRUE(
      rundir::WriteManifest(JobDir(f), Manifest(rundir::RunManifest::Stage::kStarting, {{"master-replica-0", 0}})).ok());
  model::Job queued = RunningJob();
  queued.state = model::JobState::kQueued;  // the database never heard of the start
  auto placement = executor.Recover(queued);
  ASSERT_TRUE(placement.has_value()) << "a replica that runs is adopted, never started a second time";
  EXPECT_EQ(::kill(pid, 0), 0);
  EXPECT_EQ(f.events.started, 1);
  executor.Cancel({"p", "j"}, "test over");
  EXPECT_TRUE(Gone(pid));
}

TEST(LocalExecutorRecoverTest, CompleteStartIsAdopted) {
  Fixture f;
  LocalExecutor& executor = f.Executor();
  const pid_t pid = f.StartReplica("master-replica-0");
  ASSERT_TRUE(
      rundir::WriteManifest(JobDir(f), Manifest(rundir::RunManifest::Stage::kStarted, {{"master-replica-0", pid}})).ok());
  auto placement = executor.Recover(RunningJob());
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->replicas.count("master-replica-0"), 1u);
  EXPECT_EQ(::kill(pid, 0), 0) << "an adopted replica keeps running";
  executor.Cancel({"p", "j"}, "test over");
  EXPECT_TRUE(Gone(pid));
}

TEST(LocalExecutorRecoverTest, NoManifestMeansNothingStartedAndLeftoversEnd) {
  Fixture f;
  LocalExecutor& executor = f.Executor();
  const pid_t pid = f.StartReplica("master-replica-0");  // no manifest at all
  EXPECT_FALSE(executor.Recover(RunningJob()).has_value());
  EXPECT_TRUE(Gone(pid));
}

}  // namespace
}  // namespace mle::executor
