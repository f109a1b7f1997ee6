// SlurmExecutor against a behavioural fake of Slurm's commands (FakeSlurm:
// sbatch queues a job, the test moves it through Slurm's states, squeue
// --json reports them in Slurm 22.05's shape, scancel cancels, a command can
// fail as when slurmctld is down). Checks what the scheduler is told, that
// polling is one squeue per round, that nothing is submitted twice after a
// restart, and how endings are explained. sacctmgr keeps associations
// (accounts, their users, GrpJobs/GrpTRES) as slurmdbd would, or fails as
// without accounting. Deterministic: the executor runs
// no threads here, the test runs each poll round (PollOnce) and moves a
// FakeClock; nothing sleeps or waits.
#include "executor/slurm/slurm_executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/run_layout.h"
#include "model/demand.h"
#include "rundir/slurm_files.h"

namespace mle::executor::slurm {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(MLE_TEST_DATA) + "/slurm/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FakeSlurm : public CommandRunner {
 public:
  struct FakeJob {
    std::string name;
    std::string state = "PENDING";
    std::string reason = "None";
    std::string nodes;
    std::string account;
    std::string user = "mle";  // who submitted it (the executor's user, unless a test says otherwise)
  };
  // What slurmdbd keeps: (account, user) -> limits; user "" is the account's own.
  std::map<std::pair<std::string, std::string>, AccountLimits> assoc = {{{"root", ""}, {}}, {{"root", "root"}, {}}};
  absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv) override {
    if (argv[0] == "sbatch") WaitAtTheGate();
    std::lock_guard<std::mutex> lock(mu_);
    calls[argv[0]]++;
    if (fail.count(argv[0])) return RunResult{1, argv[0] + ": error: Unable to contact slurm controller (connect failure)"};
    if (argv[0] == "sinfo") {
      auto doc = nlohmann::json::parse(ReadData("sinfo.json"));
      for (auto& n : doc["nodes"]) {
        if (n["name"] == down_node) {
          n["state"] = "down";
          n["state_flags"] = {"NOT_RESPONDING"};
        }
      }
      return RunResult{0, doc.dump()};
    }
    if (argv[0] == "sbatch") {
      if (refuse) return RunResult{1, "sbatch: error: Batch job submission failed: Invalid account"};
      std::ifstream in(argv.back());
      std::string script((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      FakeJob j;
      auto at = script.find("--job-name=");
      j.name = script.substr(at + 11, script.find('\n', at) - at - 11);
      if (auto a = script.find("--account="); a != std::string::npos) {
        j.account = script.substr(a + 10, script.find('\n', a) - a - 10);
        if (!assoc.count({j.account, ""})) {
          return RunResult{1, "sbatch: error: Batch job submission failed: Invalid account or account/partition "
                              "combination specified"};
        }
      }
      if (sbatch_times_out && !sbatch_queues_anyway) return absl::UnavailableError("sbatch timed out after 60 s");
      jobs[++last_id] = j;
      scripts[last_id] = script;
      if (sbatch_times_out) return absl::UnavailableError("sbatch timed out after 60 s");
      return RunResult{0, absl::StrCat(last_id, "\n")};
    }
    if (argv[0] == "scancel") {
      for (size_t i = 1; i < argv.size(); ++i) jobs[std::stoll(argv[i])].state = "CANCELLED";
      return RunResult{0, ""};
    }
    if (argv[0] == "squeue") {
      // `squeue -h -t all -O FIELDS [--user=u,...] [--name=a,b]`: a line per job, as kSqueueFields says.
      std::optional<std::set<std::string>> names, users;
      for (const auto& a : argv) {
        if (absl::StartsWith(a, "--name=")) {
          std::set<std::string> asked = absl::StrSplit(a.substr(7), ',');
          names = std::move(asked);
        }
        if (absl::StartsWith(a, "--user=")) {
          std::set<std::string> asked = absl::StrSplit(a.substr(7), ',');
          users = std::move(asked);
        }
      }
      std::string out;
      for (const auto& [id, j] : jobs) {
        if (names && !names->count(j.name)) continue;
        if (users && !users->count(j.user)) continue;
        absl::StrAppend(&out, id, "|N/A|N/A|", j.account.empty() ? "(null)" : j.account, "|", j.state, "|",
                        j.reason.empty() ? "None" : j.reason, "|", j.nodes, names ? "|" + j.name : "", "\n");
      }
      return RunResult{0, out};
    }
    if (argv[0] == "sacctmgr") return Sacctmgr(argv);
    return RunResult{127, "unknown command"};
  }
  // The sacctmgr calls the executor makes: show assoc (-nP, format=Account,
  // User,GrpJobs,GrpTRES), add account, add user, modify account ... set.
  RunResult Sacctmgr(const std::vector<std::string>& argv) {
    sacctmgr_calls.push_back(absl::StrJoin(argv, " "));
    if (argv.size() >= 4 && argv[2] == "show" && argv[3] == "assoc") {
      std::string out;
      for (const auto& [key, l] : assoc) {
        absl::StrAppend(&out, key.first, "|", key.second, "|", l.grp_jobs ? std::to_string(*l.grp_jobs) : "", "|",
                        FormatTres(l.grp_tres), "\n");
      }
      return RunResult{0, out};
    }
    if (argv.size() >= 5 && argv[2] == "add" && argv[3] == "account") {
      if (assoc.count({argv[4], ""})) return RunResult{1, " Nothing new added."};
      assoc[{argv[4], ""}] = {};
      return RunResult{0, " Adding Account(s)\n"};
    }
    if (argv.size() >= 6 && argv[2] == "add" && argv[3] == "user" && absl::StartsWith(argv[5], "Account=")) {
      const std::string account = argv[5].substr(8);
      if (!assoc.count({account, ""})) return RunResult{1, " The account doesn't exist."};
      assoc[{account, argv[4]}];
      return RunResult{0, " Associations =\n"};
    }
    if (argv.size() >= 8 && argv[2] == "modify" && argv[3] == "account" && argv[6] == "set") {
      auto it = assoc.find({argv[5].substr(5), ""});  // name=<account>
      if (it == assoc.end()) return RunResult{1, " Nothing modified"};
      for (size_t i = 7; i < argv.size(); ++i) {
        std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
        if (kv.first == "GrpJobs") {
          const int64_t n = std::stoll(kv.second);
          it->second.grp_jobs = n < 0 ? std::nullopt : std::optional<int64_t>(n);
        } else if (kv.first == "GrpTRES") {
          for (absl::string_view item : absl::StrSplit(kv.second, ',')) {
            std::pair<std::string, std::string> t = absl::StrSplit(item, '=');
            if (std::stoll(t.second) < 0) {
              it->second.grp_tres.erase(t.first);
            } else {
              it->second.grp_tres[t.first] = std::stoll(t.second);
            }
          }
        } else {
          return RunResult{1, " Unknown option: " + argv[i]};
        }
      }
      return RunResult{0, " Modified account associations...\n"};
    }
    return RunResult{1, "sacctmgr: unknown command"};
  }
  void Set(int64_t id, std::string state, std::string reason = "None", std::string nodes = "") {
    std::lock_guard<std::mutex> lock(mu_);
    jobs[id].state = std::move(state);
    jobs[id].reason = std::move(reason);
    jobs[id].nodes = std::move(nodes);
  }
  void Forget(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.erase(id);
  }
  // A job another user of the cluster submits (sbatch as that user).
  int64_t SubmitAs(const std::string& user, const std::string& name, const std::string& state) {
    std::lock_guard<std::mutex> lock(mu_);
    FakeJob j;
    j.name = name;
    j.user = user;
    j.state = state;
    jobs[++last_id] = j;
    return last_id;
  }
  int Calls(const std::string& cmd) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls[cmd];
  }
  // With a gate of N, an sbatch waits (at most two seconds) until N have
  // been in flight at once: submissions made one at a time never open it.
  void WaitAtTheGate() {
    std::unique_lock<std::mutex> lock(gate_mu_);
    if (gate == 0) return;
    ++in_flight;
    most_in_flight = std::max(most_in_flight, in_flight);
    gate_cv_.notify_all();
    gate_cv_.wait_for(lock, std::chrono::seconds(2), [&] { return opened = opened || in_flight >= gate; });
    --in_flight;
    ++through_gate;
    gate_cv_.notify_all();
  }
  // Until `n` sbatch calls have passed the gate.
  void WaitThroughGate(int n) {
    std::unique_lock<std::mutex> lock(gate_mu_);
    gate_cv_.wait_for(lock, std::chrono::seconds(60), [&] { return through_gate >= n; });
  }

  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int gate = 0;            // guarded by gate_mu_
  int in_flight = 0;       // guarded by gate_mu_
  int most_in_flight = 0;  // guarded by gate_mu_
  int through_gate = 0;    // guarded by gate_mu_
  bool opened = false;     // guarded by gate_mu_

  std::mutex mu_;
  std::map<int64_t, FakeJob> jobs;
  std::map<int64_t, std::string> scripts;
  std::map<std::string, int> calls;
  std::vector<std::string> sacctmgr_calls;
  int64_t last_id = 100;
  bool refuse = false;
  bool sbatch_times_out = false;      // the runner gives up on sbatch ...
  bool sbatch_queues_anyway = false;  // ... which queued the job all the same
  std::set<std::string> fail;  // these commands fail as when slurmctld is down
  std::string down_node;  // sinfo reports it down, not responding
};

// Records what the executor reports, in order (from any thread).
class Events : public ExecutorEvents {
 public:
  void JobStarted(const JobRef& j) override { Add("started " + j.job_id); }
  void JobWaiting(const JobRef& j, const std::string& reason) override { Add("waiting " + j.job_id + ": " + reason); }
  void JobPreparing(const JobRef& j) override { Add("preparing " + j.job_id); }
  void JobNote(const JobRef& j, const std::string& note) override { Add("note " + j.job_id + ": " + note); }
  void JobHosts(const JobRef& j, const std::vector<std::string>& hosts) override {
    Add(absl::StrCat("hosts ", j.job_id, ": ", absl::StrJoin(hosts, ",")));
  }
  void JobEnded(const JobRef& j, Outcome o, const std::string& message) override {
    static const char* kNames[] = {"succeeded", "failed", "stopped", "lost", "out of memory", "stalled", "not joined"};
    Add(absl::StrCat("ended ", j.job_id, " ", kNames[static_cast<int>(o)], ": ", message));
  }
  // What was reported since the last Take().
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }

 private:
  void Add(std::string event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

model::Job BasicJob(const std::string& id) {
  model::Job j;
  j.project = "p";
  j.job_id = id;
  model::TrainingInput t;
  t.scale_tier = "BASIC";
  t.runtime_version = "rt";
  t.python_module = "trainer.task";
  j.training_input = t;
  return j;
}

// The executor with no threads of its own: Launch submits at once, and a
// round of polling happens only when the test calls Poll().
struct Fixture {
  Fixture() {
    root = fs::temp_directory_path() / absl::StrCat("slurm-exec-test-", ::getpid(), "-", counter++);
    fs::create_directories(root);
    runtimes = *runtime::RuntimeCatalog::FromYaml("runtimes:\n  - {name: rt, python: /usr/bin/python3, python_version: '3.11', tpu_capable: true}\n");
    cache = std::make_unique<runtime::PackageCache>((root / "envs").string());
    Start();
  }
  ~Fixture() {
    executor.reset();
    fs::remove_all(root);
  }
  void Start() {
    SlurmExecutorOptions o;
    o.runs_dir = (root / "runs").string();
    o.launcher = "/bin/launch";
    o.shim = "/bin/shim";
    o.gcs_root = (root / "buckets").string();
    o.settings.requeue = requeue;
    o.settings.accounts = accounts;
    o.user = "mle";
    o.requeue_wait = absl::Seconds(20);
    o.background_threads = threads;
    o.submit_concurrency = submit_concurrency;
    o.stall_after = stall_after;
    o.stall_fails = stall_fails;
    o.join_timeout = join_timeout;
    auto e = SlurmExecutor::Create(o, runtimes, *cache, slurm, clock);
    ASSERT_TRUE(e.ok()) << e.status();
    executor = *std::move(e);
    executor->SetEvents(&events);
  }
  void Launch(const model::Job& job) {
    executor->Launch(job, model::DemandOf(job, model::ResourceTable::Defaults()), {});
  }
  // One round of polling; what it reported.
  std::vector<std::string> Poll() {
    executor->PollOnce();
    return events.Take();
  }
  std::string RunDir(const std::string& id) { return common::JobRunDir((root / "runs").string(), "p", id); }
  void StartReplicaLogs(const std::string& id) {
    fs::create_directories(RunDir(id) + "/master-replica-0");
    std::ofstream(common::ReplicaLogPath(RunDir(id), "master-replica-0")) << "";
  }
  // What the replica's shim records of its CPU time (mlengine-replica --progress).
  void WriteProgress(const std::string& id, int64_t ticks) {
    std::ofstream(common::ReplicaProgressPath(RunDir(id), "master-replica-0")) << "cpu_ticks " << ticks << "\n";
  }
  void WriteOutcome(const std::string& id, rundir::RunOutcome outcome) {
    ASSERT_TRUE(rundir::WriteRunOutcome(RunDir(id), outcome).ok());
  }

  static inline int counter = 0;
  bool threads = false;  // the executor's own submission and polling threads
  int submit_concurrency = 4;
  bool requeue = false;
  absl::Duration stall_after = absl::ZeroDuration();
  bool stall_fails = false;
  absl::Duration join_timeout = absl::ZeroDuration();
  AccountMode accounts = AccountMode::kNone;
  fs::path root;
  runtime::RuntimeCatalog runtimes;
  std::unique_ptr<runtime::PackageCache> cache;
  FakeSlurm slurm;
  common::FakeClock clock;
  Events events;
  std::unique_ptr<SlurmExecutor> executor;
};

using Reported = std::vector<std::string>;
const std::string kSubmitted = "Submitted to Slurm; waiting for it to schedule the job";
const std::string kWaitingNone = "Waiting in the Slurm queue";

TEST(SlurmExecutorTest, PendingThenRunningThenTheLaunchersOutcome) {
  Fixture f;
  f.Launch(BasicJob("a"));
  EXPECT_EQ(f.events.Take(), Reported{"waiting a: " + kSubmitted});
  f.slurm.Set(101, "PENDING", "Resources");
  EXPECT_EQ(f.Poll(), Reported{"waiting a: Waiting in the Slurm queue: Resources (the nodes it needs are in use by "
                               "other jobs)"});
  EXPECT_EQ(f.Poll(), Reported{});  // nothing new to say
  f.slurm.Set(101, "RUNNING", "None", "tpuhost2");
  EXPECT_EQ(f.Poll(), Reported{"preparing a"});  // allocated; replicas not started yet
  f.StartReplicaLogs("a");
  EXPECT_EQ(f.Poll(), Reported{"started a"});
  f.WriteOutcome("a", {false, "The replica master-replica-0 exited with a non-zero status of 3."});
  f.slurm.Set(101, "FAILED", "NonZeroExitCode", "tpuhost2");
  EXPECT_EQ(f.Poll(), Reported{"ended a failed: The replica master-replica-0 exited with a non-zero status of 3."});
  // The batch script it submitted, and the job it left for the launcher.
  EXPECT_THAT(f.slurm.scripts[101], HasSubstr("#SBATCH --job-name=mle-p-a\n"));
  EXPECT_THAT(f.slurm.scripts[101], HasSubstr("exec '/bin/launch' '--run-dir' '" + f.RunDir("a") + "'"));
  auto launch = rundir::ReadLaunchJob(f.RunDir("a"));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(launch->job_id, "a");
  ASSERT_EQ(launch->components.size(), 1u);
  EXPECT_EQ(launch->components[0].tasks, std::vector<std::string>{"master-replica-0"});
  EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
}

// sbatch waits on slurmctld (tens of milliseconds on a busy host): jobs
// created together are handed over side by side, not one after another.
TEST(SlurmExecutorTest, JobsAreSubmittedSideBySide) {
  Fixture f;
  f.executor.reset();
  f.threads = true;
  f.Start();
  {
    std::lock_guard<std::mutex> lock(f.slurm.gate_mu_);
    f.slurm.gate = 2;
  }
  for (int i = 0; i < 8; ++i) f.Launch(BasicJob(absl::StrCat("j", i)));
  f.slurm.WaitThroughGate(8);
  f.executor.reset();
  EXPECT_EQ(f.slurm.Calls("sbatch"), 8);
  std::lock_guard<std::mutex> lock(f.slurm.gate_mu_);
  EXPECT_GE(f.slurm.most_in_flight, 2);
}

TEST(SlurmExecutorTest, AJobThatRanBetweenTwoPollsStillStartsBeforeItEnds) {
  Fixture f;
  f.Launch(BasicJob("a"));
  EXPECT_EQ(f.Poll(), (Reported{"waiting a: " + kSubmitted, "waiting a: " + kWaitingNone}));
  f.StartReplicaLogs("a");
  f.WriteOutcome("a", {true, ""});
  f.slurm.Set(101, "COMPLETED", "None", "tpuhost1");
  EXPECT_EQ(f.Poll(), (Reported{"preparing a", "started a", "ended a succeeded: "}));
}

TEST(SlurmExecutorTest, OneSqueuePerRoundForAllJobs) {
  Fixture f;
  for (const char* id : {"a", "b", "c", "d"}) f.Launch(BasicJob(id));
  f.events.Take();
  f.Poll();
  for (const char* id : {"a", "b", "c", "d"}) {
    f.StartReplicaLogs(id);
    f.WriteOutcome(id, {true, ""});
  }
  for (int64_t id = 101; id <= 104; ++id) f.slurm.Set(id, "COMPLETED", "None", "tpuhost1");
  const int before = f.slurm.Calls("squeue");
  Reported ended;
  for (const auto& e : f.Poll()) {
    if (absl::StartsWith(e, "ended")) ended.push_back(e);
  }
  EXPECT_EQ(ended, (Reported{"ended a succeeded: ", "ended b succeeded: ", "ended c succeeded: ",
                             "ended d succeeded: "}));
  EXPECT_EQ(f.slurm.Calls("squeue") - before, 1);  // one round, one squeue, four jobs
  EXPECT_EQ(f.slurm.Calls("sbatch"), 4);
  EXPECT_EQ(f.Poll(), Reported{});  // nothing tracked: no squeue either
  EXPECT_EQ(f.slurm.Calls("squeue") - before, 1);
}

TEST(SlurmExecutorTest, CancelIsOneScancelAndEndsStopped) {
  Fixture f;
  f.Launch(BasicJob("a"));
  f.Launch(BasicJob("b"));
  f.events.Take();
  f.Poll();
  f.executor->Cancel({"p", "a"}, "Cancelled by a user request.");
  f.executor->Cancel({"p", "b"}, "Cancelled by a user request.");
  // The scancel goes out before the round's squeue, which sees it.
  EXPECT_EQ(f.Poll(), (Reported{"ended a stopped: Cancelled by a user request.",
                                "ended b stopped: Cancelled by a user request."}));
  EXPECT_EQ(f.slurm.jobs[101].state, "CANCELLED");
  EXPECT_EQ(f.slurm.Calls("scancel"), 1);
}

TEST(SlurmExecutorTest, AFailedScancelIsSentAgain) {
  Fixture f;
  f.Launch(BasicJob("a"));
  f.events.Take();
  f.Poll();
  f.slurm.fail.insert("scancel");
  f.executor->Cancel({"p", "a"}, "Cancelled by a user request.");
  EXPECT_EQ(f.Poll(), Reported{});
  f.slurm.fail.clear();
  EXPECT_EQ(f.Poll(), Reported{"ended a stopped: Cancelled by a user request."});
  EXPECT_EQ(f.slurm.Calls("scancel"), 2);
}

TEST(SlurmExecutorTest, RestartFindsTheJobAndNeverSubmitsTwice) {
  Fixture f;
  f.Launch(BasicJob("a"));
  f.Poll();
  f.slurm.Set(101, "RUNNING", "None", "tpuhost1");
  f.StartReplicaLogs("a");
  EXPECT_EQ(f.Poll(), (Reported{"preparing a", "started a"}));
  f.executor.reset();  // mlengined stops; the Slurm job runs on
  f.Start();
  model::Job job = BasicJob("a");
  job.state = model::JobState::kRunning;
  EXPECT_TRUE(f.executor->Recover(job).has_value());
  // A QUEUED job handed over again after a restart is adopted, not resubmitted.
  f.Launch(BasicJob("a"));
  f.WriteOutcome("a", {true, ""});
  f.slurm.Set(101, "COMPLETED", "None", "tpuhost1");
  EXPECT_THAT(f.Poll(), testing::Contains("ended a succeeded: "));
  EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
  // A crash between sbatch and recording the id: found by its name.
  fs::remove(rundir::SlurmJobIdPath(f.RunDir("a")));
  f.slurm.Set(101, "RUNNING", "None", "tpuhost1");
  EXPECT_TRUE(f.executor->Recover(job).has_value());
  EXPECT_EQ(f.Poll(), Reported{});  // found as it was: RUNNING
  EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
  EXPECT_EQ(*rundir::ReadSlurmJobId(f.RunDir("a")), 101);  // recorded now
  // Nothing of an unknown job: the scheduler may place it.
  EXPECT_FALSE(f.executor->Recover(BasicJob("never")).has_value());
  // A Slurm job that completed without running anything is not a success.
  f.Launch(BasicJob("empty"));
  f.Poll();
  f.slurm.Set(102, "COMPLETED", "None", "tpuhost1");
  EXPECT_THAT(f.Poll(), testing::Contains(HasSubstr("ended empty failed: The Slurm job 102 completed without "
                                                    "starting any replica")));
}

// A crash between sbatch and recording the Slurm job id leaves only the
// `submitting` marker; the restarted server looks the job up by name. When
// squeue fails, that lookup says nothing: it must neither submit the job
// again nor give it up, but look again at the next rounds.
TEST(SlurmExecutorTest, AFailedLookupByNameNeitherSubmitsAgainNorGivesUp) {
  for (const bool recovered : {false, true}) {
    SCOPED_TRACE(recovered ? "adopted (PREPARING)" : "handed over again (QUEUED)");
    Fixture f;
    f.Launch(BasicJob("a"));
    EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
    fs::remove(rundir::SlurmJobIdPath(f.RunDir("a")));  // the crash
    f.executor.reset();
    f.Start();
    f.events.Take();
    f.slurm.fail.insert("squeue");  // slurmctld does not answer
    if (recovered) {
      model::Job job = BasicJob("a");
      job.state = model::JobState::kPreparing;
      EXPECT_TRUE(f.executor->Recover(job).has_value());  // still ours
    } else {
      f.Launch(BasicJob("a"));
    }
    EXPECT_EQ(f.events.Take(), Reported{});
    EXPECT_EQ(f.Poll(), Reported{});
    EXPECT_EQ(f.Poll(), Reported{});
    EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
    // Slurm answers again: the job is found, tracked and its id recorded.
    f.slurm.fail.clear();
    if (recovered) {
      f.slurm.Set(101, "RUNNING", "None", "tpuhost1");  // as mlengined last saw it: PREPARING
      EXPECT_EQ(f.Poll(), Reported{});
    } else {
      f.slurm.Set(101, "PENDING", "Priority");
      EXPECT_EQ(f.Poll(), (Reported{"waiting a: " + kSubmitted, "waiting a: Waiting in the Slurm queue: Priority "
                                                                "(jobs of higher priority are ahead of it)"}));
    }
    EXPECT_EQ(*rundir::ReadSlurmJobId(f.RunDir("a")), 101);
    f.WriteOutcome("a", {true, ""});
    f.StartReplicaLogs("a");
    f.slurm.Set(101, "COMPLETED", "None", "tpuhost1");
    EXPECT_THAT(f.Poll(), testing::Contains("ended a succeeded: "));
    EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
  }
}

// The lookup succeeds and Slurm has no such job: sbatch never accepted it,
// so it is submitted now (once).
TEST(SlurmExecutorTest, AJobSlurmNeverAcceptedIsSubmittedOnce) {
  Fixture f;
  f.Launch(BasicJob("a"));
  fs::remove(rundir::SlurmJobIdPath(f.RunDir("a")));
  f.slurm.Forget(101);
  f.executor.reset();
  f.Start();
  f.events.Take();
  f.slurm.fail.insert("squeue");
  f.Launch(BasicJob("a"));
  EXPECT_EQ(f.Poll(), Reported{});
  f.slurm.fail.clear();
  EXPECT_EQ(f.Poll(), Reported{"waiting a: " + kSubmitted});
  EXPECT_EQ(f.slurm.Calls("sbatch"), 2);
  EXPECT_EQ(*rundir::ReadSlurmJobId(f.RunDir("a")), 102);
  EXPECT_EQ(f.Poll(), Reported{"waiting a: " + kWaitingNone});
  EXPECT_EQ(f.slurm.Calls("sbatch"), 2);
}

// On a shared cluster another user may give a job the name mlengine gave
// one (the names are not secret: `squeue` shows them). A lookup by name
// after a crash between sbatch and recording the id adopts only a job of
// mlengined's own user: with ours gone, the job is submitted again, never
// tied to the other user's job (whose state would become its own).
TEST(SlurmExecutorTest, ALookupByNameNeverAdoptsAnotherUsersJob) {
  for (const bool ours_there : {true, false}) {
    SCOPED_TRACE(ours_there ? "ours still queued" : "ours never accepted");
    Fixture f;
    f.Launch(BasicJob("a"));
    const std::string name = f.slurm.jobs[101].name;
    fs::remove(rundir::SlurmJobIdPath(f.RunDir("a")));  // the crash
    if (!ours_there) f.slurm.Forget(101);
    const int64_t foreign = f.slurm.SubmitAs("mallory", name, "RUNNING");  // newer than ours
    f.executor.reset();
    f.Start();
    f.events.Take();
    f.Launch(BasicJob("a"));
    f.Poll();
    EXPECT_EQ(f.slurm.Calls("sbatch"), ours_there ? 1 : 2);
    const int64_t recorded = rundir::ReadSlurmJobId(f.RunDir("a"))->value_or(0);
    EXPECT_NE(recorded, foreign);
    EXPECT_EQ(recorded, ours_there ? 101 : foreign + 1);
    // The foreign job ending says nothing of ours.
    f.slurm.Set(foreign, "FAILED", "None", "tpuhost1");
    for (const std::string& e : f.Poll()) EXPECT_THAT(e, testing::Not(HasSubstr("ended a")));
  }
}

// sbatch timed out: Slurm may or may not have queued the job. Looked up by
// name, it is tracked if it is there and fails with sbatch's error if not;
// either way it is submitted once.
TEST(SlurmExecutorTest, AnSbatchWhoseAnswerIsLostIsLookedUp) {
  for (const bool queued : {true, false}) {
    SCOPED_TRACE(queued ? "queued" : "not queued");
    Fixture f;
    f.slurm.sbatch_times_out = true;
    f.slurm.sbatch_queues_anyway = queued;
    f.Launch(BasicJob("a"));
    EXPECT_EQ(f.events.Take(), Reported{});
    if (queued) {
      EXPECT_EQ(f.Poll(), (Reported{"waiting a: " + kSubmitted, "waiting a: " + kWaitingNone}));
      EXPECT_EQ(*rundir::ReadSlurmJobId(f.RunDir("a")), 101);
    } else {
      EXPECT_EQ(f.Poll(), Reported{"ended a failed: Slurm did not accept the job: sbatch timed out after 60 s"});
    }
    EXPECT_EQ(f.slurm.Calls("sbatch"), 1);
  }
}

TEST(SlurmExecutorTest, NodeFailureAndForgottenJobsAreExplained) {
  Fixture f;
  f.Launch(BasicJob("a"));
  f.Launch(BasicJob("b"));
  f.Poll();
  // Slurm says NODE_FAIL but no node is down any more: Slurm's words and the nodes.
  f.slurm.Set(101, "NODE_FAIL", "None", "tpuhost3");
  EXPECT_EQ(f.Poll(),
            Reported{"ended a lost: A node of the Slurm job failed (Slurm job 101, NODE_FAIL, nodes tpuhost3)."});
  // Not listed: two rounds of grace, then the files decide.
  f.slurm.Forget(102);
  EXPECT_EQ(f.Poll(), Reported{});
  EXPECT_EQ(f.Poll(), Reported{});
  EXPECT_EQ(f.Poll(), Reported{"ended b lost: Slurm no longer knows its job 102 and the job left no outcome; see " +
                               rundir::SlurmOutputPath(f.RunDir("b"), 102)});
}

TEST(SlurmExecutorTest, ALostNodeIsNamedWithWhatRanThere) {
  Fixture f;
  f.Launch(BasicJob("a"));
  f.Poll();
  ASSERT_TRUE(rundir::WriteSlurmPlacement(f.RunDir("a"), {{"master-replica-0", "tpuhost1"},
                                                          {"worker-replica-0", "tpuhost2"},
                                                          {"worker-replica-1", "tpuhost3"}})
                  .ok());
  f.slurm.down_node = "tpuhost3";
  f.slurm.Set(101, "NODE_FAIL", "NodeDown", "tpuhost[1-3]");
  EXPECT_EQ(f.Poll(), (Reported{"hosts a: tpuhost1,tpuhost2,tpuhost3",
                                "ended a lost: Slurm node tpuhost3 (worker-replica-1) stopped responding, so Slurm "
                                "ended the job (NODE_FAIL, Slurm job 101)."}))
      << "where it ran (for its attempt's record), then how it ended";
}

TEST(SlurmExecutorTest, WithRequeueANodeFailureIsNotTheEnd) {
  Fixture f;
  f.executor.reset();
  f.requeue = true;
  f.Start();
  f.Launch(BasicJob("a"));
  f.Launch(BasicJob("b"));
  f.Poll();
  f.slurm.Set(101, "RUNNING", "None", "tpuhost1");
  f.slurm.Set(102, "RUNNING", "None", "tpuhost2");
  f.StartReplicaLogs("a");
  f.StartReplicaLogs("b");
  f.Poll();
  // What squeue shows for a moment; the launcher may record the loss.
  f.slurm.Set(101, "NODE_FAIL", "NodeDown", "tpuhost1");
  f.slurm.Set(102, "NODE_FAIL", "NodeDown", "tpuhost2");
  f.WriteOutcome("a", {false, "The replica master-replica-0 was lost."});
  EXPECT_EQ(f.Poll(), Reported{});
  f.clock.Advance(absl::Seconds(19));
  EXPECT_EQ(f.Poll(), Reported{});  // still within requeue_wait
  // a: Slurm requeues it, and its earlier outcome is set aside.
  f.slurm.Set(101, "PENDING", "BeginTime");
  EXPECT_EQ(f.Poll(), Reported{"waiting a: Slurm requeued the job (once: a node failed or it was preempted). Waiting "
                               "in the Slurm queue: BeginTime (its start time has not come)"});
  EXPECT_EQ(*rundir::ReadRunOutcome(f.RunDir("a")), std::nullopt);
  EXPECT_TRUE(fs::exists(f.RunDir("a") + "/outcome.run1"));
  // b: Slurm did not requeue it within requeue_wait: it ended.
  f.clock.Advance(absl::Seconds(1));
  EXPECT_EQ(f.Poll(),
            Reported{"ended b lost: A node of the Slurm job failed (NodeDown) (Slurm job 102, NODE_FAIL, nodes "
                     "tpuhost2)."});
}

TEST(SlurmExecutorTest, RefusalsReachTheUser) {
  Fixture f;
  f.slurm.refuse = true;
  f.Launch(BasicJob("a"));
  EXPECT_EQ(f.events.Take(), Reported{"ended a failed: Slurm refused the job: sbatch: error: Batch job submission "
                                      "failed: Invalid account"});
  model::Job pod = BasicJob("pod");
  pod.training_input->scale_tier = "CUSTOM";
  pod.training_input->master_type = "n1-highcpu-16";
  pod.training_input->worker_type = "cloud_tpu";
  pod.training_input->worker_count = 1;
  model::ReplicaConfig rc;
  rc.accelerator_config = model::AcceleratorConfig{256, "TPU_V3_POD"};
  pod.training_input->worker_config = rc;
  absl::Status s = f.executor->CheckRunnable(pod);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("it needs 32 TPU hosts (TPU_V3_POD with 256 cores)"));
  model::Job missing = BasicJob("m");
  missing.training_input->runtime_version = "2.11";
  EXPECT_THAT(std::string(f.executor->CheckRunnable(missing).message()), HasSubstr("Runtime version 2.11 is not installed"));
}

scheduler::Quotas CompileQuotas(const std::string& project, std::map<std::string, int64_t> limits) {
  scheduler::QuotaSpec spec;
  if (!project.empty()) spec.projects[project]["us-central1"] = std::move(limits);
  auto q = scheduler::Quotas::Compile(spec);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? *q : scheduler::Quotas();
}

TEST(SlurmExecutorTest, PerProjectAccountsCarryTheQuotasAndSlurmsLimitIsExplained) {
  Fixture f;
  f.accounts = AccountMode::kPerProject;
  f.Start();
  ASSERT_TRUE(f.executor->MirrorQuotas(CompileQuotas("p", {{"JOBS", 1}, {"CPUS", 2}})).ok());
  using Key = std::pair<std::string, std::string>;
  EXPECT_EQ(f.slurm.assoc.at(Key("mle-p", "")), (AccountLimits{1, {{"cpu", 2}}}));
  EXPECT_TRUE(f.slurm.assoc.count(Key("mle-p", "mle")));

  f.Launch(BasicJob("a"));
  EXPECT_EQ(f.events.Take(), Reported{"waiting a: " + kSubmitted});
  EXPECT_THAT(f.slurm.scripts[101], HasSubstr("#SBATCH --account=mle-p\n"));
  f.slurm.Set(101, "PENDING", "AssocGrpJobsLimit");
  EXPECT_EQ(f.Poll(), Reported{"waiting a: Waiting in the Slurm queue: the project's Slurm account mle-p is at its "
                               "limit of 1 running job (AssocGrpJobsLimit)"});

  // A project with no quota of its own gets its account (and no limits) at its first job, once.
  model::Job other = BasicJob("b");
  other.project = "Q.2";
  f.Launch(other);
  EXPECT_THAT(f.slurm.scripts[102], HasSubstr("#SBATCH --account=mle-q_2\n"));
  EXPECT_EQ(f.slurm.assoc.at(Key("mle-q_2", "")), AccountLimits{});
  EXPECT_TRUE(f.slurm.assoc.count(Key("mle-q_2", "mle")));
  const size_t calls = f.slurm.sacctmgr_calls.size();
  other.job_id = "c";
  f.Launch(other);
  EXPECT_EQ(f.slurm.sacctmgr_calls.size(), calls);

  // Quotas removed: the limits are cleared; set again: back, for the accounts
  // made at submission too.
  ASSERT_TRUE(f.executor->MirrorQuotas(CompileQuotas("", {})).ok());
  EXPECT_EQ(f.slurm.assoc.at(Key("mle-p", "")), AccountLimits{});
  ASSERT_TRUE(f.executor->MirrorQuotas(CompileQuotas("Q.2", {{"CPUS", 4}})).ok());
  EXPECT_EQ(f.slurm.assoc.at(Key("mle-q_2", "")), (AccountLimits{std::nullopt, {{"cpu", 4}}}));
  EXPECT_EQ(f.slurm.assoc.at(Key("mle-p", "")), AccountLimits{});
}

TEST(SlurmExecutorTest, PerProjectAccountsNeedAccounting) {
  Fixture f;
  f.accounts = AccountMode::kPerProject;
  f.slurm.fail.insert("sacctmgr");
  SlurmExecutorOptions o;
  o.runs_dir = (f.root / "runs").string();
  o.settings.accounts = AccountMode::kPerProject;
  o.background_threads = false;
  auto e = SlurmExecutor::Create(o, f.runtimes, *f.cache, f.slurm, f.clock);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("per_project needs Slurm's accounting (slurmdbd"));
}

TEST(SlurmExecutorTest, AnAccountThatCannotBeMadeFailsTheJobSayingWhy) {
  Fixture f;
  f.accounts = AccountMode::kPerProject;
  f.Start();
  f.slurm.fail.insert("sacctmgr");
  f.Launch(BasicJob("a"));
  EXPECT_THAT(f.events.Take(),
              ElementsAre(HasSubstr("ended a failed: the project's Slurm account mle-p is not ready: `sacctmgr -nP "
                                    "show assoc format=Account,User,GrpJobs,GrpTRES` exited with 1")));
  EXPECT_EQ(f.slurm.Calls("sbatch"), 0);
}

TEST(SlurmExecutorTest, WithoutPerProjectAccountsNoSacctmgr) {
  Fixture f;
  ASSERT_TRUE(f.executor->MirrorQuotas(CompileQuotas("p", {{"JOBS", 1}})).ok());
  f.Launch(BasicJob("a"));
  EXPECT_THAT(f.slurm.scripts[101], Not(HasSubstr("--account")));
  EXPECT_EQ(f.slurm.Calls("sacctmgr"), 0);
}

// The stall watch under Slurm: what each replica's shim records of its CPU
// time, and its log, read after each poll.
TEST(SlurmExecutorTest, ASilentRunningJobIsFlaggedTakenBackAndWithFailEnded) {
  for (bool fails : {false, true}) {
    Fixture f;
    f.stall_after = absl::Seconds(10);
    f.stall_fails = fails;
    f.Start();
    f.Launch(BasicJob("a"));
    f.events.Take();
    auto launch = rundir::ReadLaunchJob(f.RunDir("a"));
    ASSERT_TRUE(launch.ok()) << launch.status();
    EXPECT_EQ(launch->progress_every_ms, 2500) << "the shims record a few times per limit";
    f.slurm.Set(101, "RUNNING", "None", "tpuhost2");
    f.StartReplicaLogs("a");
    f.WriteProgress("a", 5);
    EXPECT_EQ(f.Poll(), (Reported{"preparing a", "started a"}));
    f.clock.Advance(absl::Seconds(6));
    EXPECT_EQ(f.Poll(), Reported{});
    f.clock.Advance(absl::Seconds(5));
    if (!fails) {
      const Reported stalled = f.Poll();
      ASSERT_EQ(stalled.size(), 1u);
      EXPECT_EQ(stalled[0].rfind("note a: Stalled: its replicas wrote no log line and used no CPU for 11 s (since ", 0),
                0u)
          << stalled[0];
      f.WriteProgress("a", 6);  // it used CPU again
      f.clock.Advance(absl::Seconds(3));
      EXPECT_EQ(f.Poll(), Reported{"note a: "});
      continue;
    }
    EXPECT_EQ(f.Poll(), Reported{}) << "the stop goes out with the next round";
    const Reported ended = f.Poll();
    ASSERT_EQ(ended.size(), 1u) << ::testing::PrintToString(ended);
    EXPECT_EQ(ended[0].rfind("ended a stalled: The job stalled: its replicas wrote no log line and used no CPU for 11 s (", 0),
              0u)
        << ended[0];
    EXPECT_NE(ended[0].find("(slurm.stall_action: fail)."), std::string::npos) << ended[0];
    EXPECT_EQ(f.slurm.Calls("scancel"), 1);
  }
}

TEST(SlurmExecutorTest, ReplicasThatNeverConnectFailTheJobNamingThem) {
  Fixture f;
  f.join_timeout = absl::Seconds(8);
  f.Start();
  model::Job job = BasicJob("a");
  job.training_input->scale_tier = "CUSTOM";
  job.training_input->master_type = job.training_input->worker_type = "n1-standard-4";
  job.training_input->worker_count = 1;
  f.Launch(job);
  f.events.Take();
  auto launch = rundir::ReadLaunchJob(f.RunDir("a"));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_TRUE(launch->watch_joins);
  EXPECT_EQ(launch->progress_every_ms, 2000);
  f.slurm.Set(101, "RUNNING", "None", "tpuhost[1-2]");
  for (const char* task : {"master-replica-0", "worker-replica-0"}) {
    fs::create_directories(f.RunDir("a") + "/" + task);
    std::ofstream(common::ReplicaLogPath(f.RunDir("a"), task)) << "";
  }
  auto progress = [&](const char* task, int joined) {
    std::ofstream(common::ReplicaProgressPath(f.RunDir("a"), task)) << "cpu_ticks 1\njoined " << joined << "\n";
  };
  progress("master-replica-0", 1);
  progress("worker-replica-0", 0);
  EXPECT_EQ(f.Poll(), (Reported{"preparing a", "started a"}));
  f.clock.Advance(absl::Seconds(7));
  EXPECT_EQ(f.Poll(), Reported{});
  f.clock.Advance(absl::Seconds(2));
  EXPECT_EQ(f.Poll(), Reported{}) << "the stop goes out with the next round";
  EXPECT_EQ(f.Poll(), Reported{"ended a not joined: The replica worker-replica-0 did not connect to the job's other "
                               "replicas within 8 s of their start (no TCP connection on the job's ports, as their "
                               "shims saw it on their nodes): a rendezvous that never completed (the operator's "
                               "limit: slurm.join_timeout_seconds)."});
}

}  // namespace
}  // namespace mle::executor::slurm
