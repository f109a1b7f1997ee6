// The scheduler's local placement path, deterministically: a fake clock, a
// behavioural recorder whose writes become durable only when the test says
// so (as the store's group commit would), and a fake executor that records
// what it was asked and reports what the test makes happen. Events are
// processed with RunPending on the test's thread; nothing sleeps.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

#include "model/job_state.h"

namespace mle::scheduler {
namespace {

using model::JobState;

// Applies updates as JobService does (the transition table decides) and
// holds each completion until Persist().
class Recorder final : public StateRecorder {
 public:
  void Record(const JobKey& key, const JobUpdate& update, Done done) override {
    JobState& state = states[key];
    absl::Status s = absl::OkStatus();
    if (update.attempt) attempts[key].push_back(*update.attempt);
    if (update.preempted_by) preempted_by[key] = *update.preempted_by;
    if (state != update.state) {
      if (model::CanTransition(state, update.state)) {
        state = update.state;
        history[key].push_back(update.state);
        if (!update.error_message.empty() || update.replace_message) messages[key] = update.error_message;
        flushed[key].push_back({update.state, update.flush});
      } else {
        s = absl::FailedPreconditionError("illegal");
        ++refused;
      }
    } else if (update.replace_message) {
      // Why a job still waits: the scheduler must only say it when it changed.
      if (messages[key] == update.error_message) ++repeated_messages;
      messages[key] = update.error_message;
      ++message_updates[key];
    }
    pending.push_back({std::move(done), s});
  }
  // Makes every recorded update durable (or fails them all with `status`).
  void Persist(absl::Status status = absl::OkStatus()) {
    std::deque<std::pair<Done, absl::Status>> now;
    now.swap(pending);
    for (auto& [done, s] : now) {
      if (done) done(s.ok() ? status : s);
    }
  }
  std::map<JobKey, JobState> states;
  std::map<JobKey, std::vector<JobState>> history;
  std::map<JobKey, std::vector<std::pair<JobState, bool>>> flushed;  // each move, and whether it asked for a flush
  std::map<JobKey, std::string> messages;
  std::map<JobKey, std::vector<model::Attempt>> attempts;
  std::map<JobKey, std::string> preempted_by;
  std::deque<std::pair<Done, absl::Status>> pending;
  int refused = 0;
  std::map<JobKey, int> message_updates;  // in the same state
  int repeated_messages = 0;
};

class FakeExecutor final : public executor::Executor {
 public:
  absl::Status CheckRunnable(const model::Job&) const override { return absl::OkStatus(); }
  bool PlacesJobs() const override { return places_jobs; }
  void Launch(const model::Job& job, const model::JobDemand&, const model::Placement&) override {
    launched.push_back(job.job_id);
    attempts_launched.push_back(absl::StrCat(job.job_id, "#", model::CurrentAttempt(job)));
  }
  void Cancel(const executor::JobRef& job, const std::string& reason) override {
    cancelled.push_back(job.job_id);
    cancel_reasons[job.job_id] = reason;
  }
  std::optional<model::Placement> Recover(const model::Job& job) override {
    recovered.push_back(job.job_id);
    auto it = runs.find(job.job_id);
    if (it == runs.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> launched, cancelled, recovered;
  std::vector<std::string> attempts_launched;  // "job#attempt"
  std::map<std::string, std::string> cancel_reasons;
  std::map<std::string, model::Placement> runs;  // what Recover finds
  bool places_jobs = false;  // like Slurm: the executor queues and places jobs
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() { Rebuild(Options(1)); }  // one job at a time

  static SchedulerOptions Options(int cpus, int tpu_v2_hosts = 0) {
    SchedulerOptions options;
    model::Host host;
    host.name = "localhost";
    host.cpu_milli = cpus * 1000;
    options.inventory.hosts.push_back(host);
    for (int i = 0; i < tpu_v2_hosts; ++i) {
      model::Host tpu;
      tpu.name = "v2-" + std::to_string(i);
      tpu.tpu_type = "TPU_V2";
      tpu.runs_replicas = false;
      options.inventory.hosts.push_back(tpu);
    }
    options.resources.machine_types.clear();
    options.resources.fallback = {1000, 0};
    return options;
  }
  void Rebuild(SchedulerOptions options) {
    scheduler_ = std::make_unique<Scheduler>(clock_, recorder_, &executor_, std::move(options));
  }

  model::Job Job(const std::string& id, int32_t priority = 0, std::string max_running = "",
                 JobState state = JobState::kQueued) {
    return JobOf("p", id, 1, priority, std::move(max_running), state);
  }
  // A job of `project` in us-central1 with `replicas` processes of one CPU.
  model::Job JobOf(const std::string& project, const std::string& id, int replicas, int32_t priority = 0,
                   std::string max_running = "", JobState state = JobState::kQueued) {
    model::Job j;
    j.project = project;
    j.job_id = id;
    j.sequence = ++sequence_;
    j.state = state;
    j.create_time = clock_.Now();
    model::TrainingInput t;
    t.scale_tier = replicas == 1 ? "BASIC" : "CUSTOM";
    t.master_type = t.worker_type = "n1-standard-4";
    t.worker_count = replicas - 1;
    t.region = "us-central1";
    t.scheduling = model::Scheduling{std::move(max_running), "", priority};
    j.training_input = t;
    recorder_.states[{project, id}] = state;
    return j;
  }
  // A TPU_V2_POD slice of `cores` cores.
  model::Job PodJob(const std::string& id, int64_t cores) {
    model::Job j = JobOf("p", id, 1);
    model::TrainingInput& t = *j.training_input;
    t.scale_tier = "CUSTOM";
    t.worker_type = "cloud_tpu";
    t.worker_count = 1;
    model::ReplicaConfig worker;
    worker.accelerator_config = model::AcceleratorConfig{cores, "TPU_V2_POD"};
    t.worker_config = worker;
    return j;
  }
  JobState State(const std::string& id) { return recorder_.states[{"p", id}]; }
  std::string Message(const std::string& id) { return recorder_.messages[{"p", id}]; }
  std::vector<JobState> History(const std::string& id) { return recorder_.history[{"p", id}]; }
  // Lets the control loop settle: events handled, writes made durable, and
  // what they caused handled too.
  void Settle() {
    for (int i = 0; i < 10; ++i) {
      scheduler_->RunPending();
      if (recorder_.pending.empty()) return;
      recorder_.Persist();
    }
  }

  common::FakeClock clock_;
  Recorder recorder_;
  FakeExecutor executor_;
  std::unique_ptr<Scheduler> scheduler_;
  int64_t sequence_ = 0;
};

TEST_F(SchedulerTest, AJobIsLaunchedOnlyOnceItsPreparingIsDurable) {
  scheduler_->Submit(Job("a"));
  scheduler_->RunPending();
  EXPECT_EQ(State("a"), JobState::kPreparing);
  EXPECT_TRUE(executor_.launched.empty()) << "launched before PREPARING was on disk: a crash would run it twice";
  recorder_.Persist();
  scheduler_->RunPending();
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"a"});
}

// A job whose replicas end with the machine needs its PREPARING and RUNNING
// only committed (after a machine crash it starts again from QUEUED); its end
// is flushed. An executor's whose jobs outlive the machine flush every move.
TEST_F(SchedulerTest, OnlyWhatOutlivesTheMachineIsFlushedToDisk) {
  using P = std::pair<JobState, bool>;
  // Submits `id` and runs it to `outcome`; the moves recorded and whether
  // each asked for a flush. An executor that places jobs says PREPARING.
  auto run = [this](const std::string& id, executor::Outcome outcome) {
    scheduler_->Submit(Job(id));
    Settle();
    if (executor_.places_jobs) scheduler_->JobPreparing({"p", id});
    scheduler_->JobStarted({"p", id});
    Settle();
    scheduler_->JobEnded({"p", id}, outcome, "");
    Settle();
    return recorder_.flushed[{"p", id}];
  };
  EXPECT_EQ(run("local", executor::Outcome::kSucceeded),
            (std::vector<P>{{JobState::kPreparing, false}, {JobState::kRunning, false}, {JobState::kSucceeded, true}}));
  executor_.places_jobs = true;
  Rebuild(Options(1));
  EXPECT_EQ(run("slurm", executor::Outcome::kFailed),
            (std::vector<P>{{JobState::kPreparing, true}, {JobState::kRunning, true}, {JobState::kFailed, true}}));
}

TEST_F(SchedulerTest, HigherPriorityFirstAndTheNextStartsWhenOneEnds) {
  scheduler_->Submit(Job("low_old", 0));
  scheduler_->Submit(Job("high", 500));
  scheduler_->Submit(Job("low_new", 0));
  Settle();
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"high"});
  EXPECT_EQ(scheduler_->QueuePosition({"p", "low_old"}), 1);
  EXPECT_EQ(scheduler_->QueuePosition({"p", "low_new"}), 2);
  scheduler_->JobStarted({"p", "high"});
  scheduler_->JobEnded({"p", "high"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(State("high"), JobState::kSucceeded);
  EXPECT_EQ(executor_.launched, (std::vector<std::string>{"high", "low_old"}));
  scheduler_->JobEnded({"p", "low_old"}, executor::Outcome::kFailed, "The replica master-replica-0 exited 3.");
  Settle();
  EXPECT_EQ(State("low_old"), JobState::kFailed);
  EXPECT_EQ(Message("low_old"), "The replica master-replica-0 exited 3.");
  EXPECT_EQ(executor_.launched.back(), "low_new");
  EXPECT_EQ(recorder_.refused, 0);
}

// The cluster view's snapshot follows the jobs: placed (preparing), running,
// ended; the queue counted per project.
TEST_F(SchedulerTest, SnapshotShowsPlacementsAndCountsPerProject) {
  using Counts = SchedulerSnapshot::ProjectCounts;
  scheduler_->Submit(Job("a"));
  scheduler_->Submit(JobOf("q", "b", 1));
  Settle();
  SchedulerSnapshot snap = scheduler_->Snapshot();
  ASSERT_EQ(snap.inventory.hosts.size(), 1u);
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].key, (JobKey{"p", "a"}));
  EXPECT_EQ(snap.jobs[0].placement.replicas.at("master-replica-0").host, "localhost");
  EXPECT_FALSE(snap.jobs[0].running);  // preparing: neither queued nor running
  EXPECT_EQ(snap.projects, (std::map<std::string, Counts>{{"q", {1, 0}}}));

  scheduler_->JobStarted({"p", "a"});
  Settle();
  snap = scheduler_->Snapshot();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_TRUE(snap.jobs[0].running);
  EXPECT_EQ(snap.projects, (std::map<std::string, Counts>{{"p", {0, 1}}, {"q", {1, 0}}}));

  scheduler_->JobEnded({"p", "a"}, executor::Outcome::kSucceeded, "");
  Settle();
  snap = scheduler_->Snapshot();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].key, (JobKey{"q", "b"}));
  EXPECT_TRUE(snap.projects.empty());
}

TEST_F(SchedulerTest, ACancelBeforeTheStartIsDurableNeverLaunches) {
  scheduler_->Submit(Job("a"));
  scheduler_->RunPending();  // PREPARING recorded, not yet durable
  scheduler_->Cancel({"p", "a"});
  scheduler_->RunPending();
  EXPECT_EQ(State("a"), JobState::kCancelling);
  EXPECT_TRUE(executor_.cancelled.empty()) << "nothing to stop: the executor never had it";
  Settle();
  EXPECT_TRUE(executor_.launched.empty());
  EXPECT_EQ(State("a"), JobState::kCancelled);
  scheduler_->Submit(Job("b"));
  Settle();
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"b"}) << "the cancelled job's resources were released";
}

TEST_F(SchedulerTest, AStartThatCannotBeRecordedIsNotLaunched) {
  scheduler_->Submit(Job("a"));
  scheduler_->RunPending();
  recorder_.Persist(absl::UnavailableError("disk full"));
  scheduler_->RunPending();
  EXPECT_TRUE(executor_.launched.empty());
  EXPECT_EQ(State("a"), JobState::kFailed);
  EXPECT_NE(Message("a").find("disk full"), std::string::npos) << Message("a");
}

TEST_F(SchedulerTest, MaxRunningTimeStopsTheJob) {
  scheduler_->Submit(Job("a", 0, "3600s"));
  Settle();
  scheduler_->JobStarted({"p", "a"});
  Settle();
  EXPECT_EQ(State("a"), JobState::kRunning);
  clock_.Advance(absl::Minutes(59));
  scheduler_->Tick();
  Settle();
  EXPECT_TRUE(executor_.cancelled.empty());
  clock_.Advance(absl::Minutes(2));
  scheduler_->Tick();
  Settle();
  ASSERT_EQ(executor_.cancelled, std::vector<std::string>{"a"});
  EXPECT_NE(executor_.cancel_reasons["a"].find("maxRunningTime"), std::string::npos) << executor_.cancel_reasons["a"];
  EXPECT_EQ(State("a"), JobState::kCancelling);
  scheduler_->JobEnded({"p", "a"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("a"), JobState::kCancelled);
  EXPECT_NE(Message("a").find("maxRunningTime"), std::string::npos);
}

TEST_F(SchedulerTest, AdoptTakesARunFoundOnDiskEvenIfTheDatabaseSaysQueued) {
  executor_.runs["found"] = model::Placement{{{"master-replica-0", {"localhost", {}}}}, {}, false};
  scheduler_->Adopt(Job("found"));  // QUEUED in the database, but it ran
  scheduler_->Adopt(Job("waiting"));
  Settle();
  EXPECT_EQ(executor_.recovered, (std::vector<std::string>{"found", "waiting"}));
  EXPECT_TRUE(executor_.launched.empty()) << "the adopted run holds the only slot; nothing starts twice";
  EXPECT_EQ(State("found"), JobState::kPreparing);
  EXPECT_EQ(State("waiting"), JobState::kQueued);
  EXPECT_EQ(scheduler_->QueuePosition({"p", "waiting"}), 1);
  scheduler_->JobStarted({"p", "found"});
  scheduler_->JobEnded({"p", "found"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(State("found"), JobState::kSucceeded);
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"waiting"});
}

TEST_F(SchedulerTest, AdoptWithNothingOnDiskPlacesTheJobAgain) {
  scheduler_->Adopt(Job("lost", 0, "", JobState::kPreparing));
  scheduler_->RunPending();
  EXPECT_EQ(History("lost").front(), JobState::kQueued);
  Settle();
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"lost"});
  EXPECT_EQ(State("lost"), JobState::kPreparing);
}

TEST_F(SchedulerTest, AdoptOfACancellingJobFinishesTheCancel) {
  executor_.runs["c"] = model::Placement{{{"master-replica-0", {"localhost", {}}}}, {}, false};
  scheduler_->Adopt(Job("c", 0, "", JobState::kCancelling));
  scheduler_->Adopt(Job("gone", 0, "", JobState::kCancelling));
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"c"});
  EXPECT_EQ(State("gone"), JobState::kCancelled);
  scheduler_->JobEnded({"p", "c"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("c"), JobState::kCancelled);
}

TEST_F(SchedulerTest, PodsAreRefusedAtSubmissionUntilAQuotaAllowsThem) {
  Rebuild(Options(4, 4));
  absl::Status refused = scheduler_->Admit(PodJob("pod", 32));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "This job can never run: it needs 32 TPU_V2_POD_CORES but the quota of project p in region us-central1 "
            "is 0 (TPU pod slices need a quota increase first). An operator raises it with "
            "quotas.projects.p.us-central1.TPU_V2_POD_CORES (or quotas.defaults.TPU_V2_POD_CORES for every project "
            "and region) in mlengined's configuration (quotas:), or with `mlengine admin quotas set FILE`.");

  EXPECT_EQ(scheduler_->SetQuotas({{{"TPU_V2_PODS", 32}}, {}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(scheduler_->Admit(PodJob("pod", 32)).ok()) << "a refused configuration changes nothing";
  ASSERT_TRUE(scheduler_->SetQuotas({{{"TPU_V2_POD_CORES", 32}}, {}}).ok());
  EXPECT_TRUE(scheduler_->Admit(PodJob("pod", 32)).ok()) << "submissions see new quotas at once";
  EXPECT_EQ(scheduler_->GetQuotas().defaults, (std::map<std::string, int64_t>{{"TPU_V2_POD_CORES", 32}}));
}

TEST_F(SchedulerTest, AJobWaitingForItsQuotaSaysWhyOnceAndStartsWhenItFrees) {
  SchedulerOptions options = Options(4);
  options.quotas = *Quotas::Compile({{}, {{"p", {{"us-central1", {{"JOBS", 1}}}}}}});
  Rebuild(std::move(options));
  scheduler_->Submit(Job("a"));
  scheduler_->Submit(Job("b"));
  Settle();
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"a"}) << "three CPUs are free, but the quota is used";
  EXPECT_EQ(State("b"), JobState::kQueued);
  EXPECT_EQ(Message("b"), "project quota JOBS 1 in us-central1: 1 in use by job a; it needs 1");
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    scheduler_->Tick();
    Settle();
  }
  EXPECT_EQ(recorder_.message_updates[(JobKey{"p", "b"})], 1) << "the reason did not change: nothing more to record";
  EXPECT_EQ(recorder_.repeated_messages, 0);
  scheduler_->JobStarted({"p", "a"});
  scheduler_->JobEnded({"p", "a"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(executor_.launched, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Message("b"), "") << "a started job no longer says why it waited";
}

TEST_F(SchedulerTest, AnExecutorThatPlacesJobsGetsThemOnlyWithinTheirQuota) {
  executor_.places_jobs = true;
  SchedulerOptions options = Options(1);
  options.quotas = *Quotas::Compile({{}, {{"p", {{"us-central1", {{"JOBS", 1}}}}}}});
  Rebuild(std::move(options));
  scheduler_->Submit(Job("a"));
  scheduler_->Submit(Job("b"));
  scheduler_->Submit(JobOf("q", "c", 1));
  Settle();
  EXPECT_EQ(executor_.launched, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(Message("b"), "project quota JOBS 1 in us-central1: 1 in use by job a; it needs 1");
  scheduler_->JobWaiting({"p", "a"}, "Waiting in the Slurm queue: Resources");
  Settle();
  EXPECT_EQ(Message("a"), "Waiting in the Slurm queue: Resources") << "the cluster's own reasons pass through";
  scheduler_->JobEnded({"p", "a"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(executor_.launched, (std::vector<std::string>{"a", "c", "b"}));
  EXPECT_EQ(Message("b"), "") << "handed over: the executor says why it waits now";
}

// Jobs of one shape and length that a project submits.
struct Workload {
  std::string project;
  int replicas;
  absl::Duration duration;
};

class FairShareSchedulerTest : public SchedulerTest {
 protected:
  // Runs the cluster in fake time, minute by minute: every job launched
  // starts at once and ends its workload's duration later. Returns what each
  // project held (CPU-minutes) while every project still had jobs waiting;
  // each submits `jobs` jobs of its workload, interleaved.
  std::map<std::string, int64_t> CpuMinutesWhileContested(const std::vector<Workload>& loads, int jobs) {
    struct Info {
      const Workload* load;
      absl::Time end;
    };
    std::map<std::string, Info> info;  // by job id
    std::map<std::string, int> waiting;
    for (int i = 0; i < jobs; ++i) {
      for (const auto& load : loads) {
        const std::string id = absl::StrCat(load.project, "_", i);
        info[id] = {&load, absl::InfinitePast()};
        ++waiting[load.project];
        const std::string max_running = absl::StrCat(absl::ToInt64Seconds(load.duration) + 60, "s");
        scheduler_->Submit(JobOf(load.project, id, load.replicas, 0, max_running));
      }
    }
    Settle();
    std::map<std::string, int64_t> cpu_minutes;
    std::set<std::string> running;
    size_t seen = 0;
    for (int minute = 0; minute < 100000; ++minute) {
      for (; seen < executor_.launched.size(); ++seen) {
        Info& job = info.at(executor_.launched[seen]);
        scheduler_->JobStarted({job.load->project, executor_.launched[seen]});
        job.end = clock_.Now() + job.load->duration;
        running.insert(executor_.launched[seen]);
        --waiting[job.load->project];
      }
      Settle();
      for (const auto& [project, n] : waiting) {
        if (n == 0) return cpu_minutes;
      }
      for (const auto& id : running) cpu_minutes[info.at(id).load->project] += info.at(id).load->replicas;
      clock_.Advance(absl::Minutes(1));
      for (auto it = running.begin(); it != running.end();) {
        const Info& job = info.at(*it);
        if (job.end > clock_.Now()) {
          ++it;
          continue;
        }
        scheduler_->JobEnded({job.load->project, *it}, executor::Outcome::kSucceeded, "");
        it = running.erase(it);
      }
      scheduler_->Tick();
      Settle();
    }
    ADD_FAILURE() << "the run did not end";
    return cpu_minutes;
  }
};

TEST_F(FairShareSchedulerTest, ProjectsGetTheClusterInProportionToTheirWeights) {
  struct Row {
    const char* name;
    std::map<std::string, int64_t> shares;
    double a_share;  // of the CPU-time
  };
  const Row rows[] = {{"equal", {}, 0.5}, {"two_to_one", {{"a", 2}}, 2.0 / 3}, {"one_to_three", {{"b", 3}}, 0.25}};
  for (const auto& row : rows) {
    Rebuild(Options(24));  // every row's shares come out in whole jobs
    ASSERT_TRUE(scheduler_->SetShares(row.shares).ok());
    executor_.launched.clear();
    // Different shapes and lengths: a runs 1-CPU jobs of 10 minutes, b 2-CPU jobs of 25.
    auto held = CpuMinutesWhileContested({{"a", 1, absl::Minutes(10)}, {"b", 2, absl::Minutes(25)}}, 300);
    const double total = static_cast<double>(held["a"] + held["b"]);
    ASSERT_GT(total, 24 * 60) << row.name << ": the run is too short to measure";
    const double a = static_cast<double>(held["a"]) / total;
    EXPECT_NEAR(a, row.a_share, 0.1 * row.a_share) << row.name << ": a " << held["a"] << ", b " << held["b"];
    EXPECT_NEAR(1 - a, 1 - row.a_share, 0.1 * (1 - row.a_share)) << row.name;
    EXPECT_EQ(recorder_.refused, 0);
  }
}

TEST_F(SchedulerTest, ALargeJobIsNotStarvedByAStreamOfSmallOnes) {
  Rebuild(Options(4));
  // Four 1-CPU jobs that end at minutes 10, 20, 30 and 40 (they may run an hour).
  for (int i = 0; i < 4; ++i) scheduler_->Submit(JobOf("p", "first_" + std::to_string(i), 1, 0, "3600s"));
  Settle();
  for (int i = 0; i < 4; ++i) scheduler_->JobStarted({"p", "first_" + std::to_string(i)});
  scheduler_->Submit(JobOf("p", "big", 4, 0, "3600s"));
  Settle();
  EXPECT_NE(Message("big").find("reserved for it from"), std::string::npos) << Message("big");
  // Then a stream of small jobs of 15 minutes, two every five minutes:
  // without a reservation, each freed CPU would go to one of them.
  std::map<std::string, absl::Time> ends;
  for (int i = 0; i < 4; ++i) ends["first_" + std::to_string(i)] = clock_.Now() + absl::Minutes(10 * (i + 1));
  size_t seen = executor_.launched.size();
  std::optional<absl::Duration> big_waited;
  const absl::Time submitted = clock_.Now();
  for (int minute = 1; minute <= 180 && !big_waited; ++minute) {
    clock_.Advance(absl::Minutes(1));
    if (minute % 5 == 0) {
      for (int k = 0; k < 2; ++k) scheduler_->Submit(JobOf("p", absl::StrCat("small_", minute, "_", k), 1, 0, "3600s"));
    }
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > clock_.Now()) {
        ++it;
        continue;
      }
      scheduler_->JobEnded({"p", it->first}, executor::Outcome::kSucceeded, "");
      it = ends.erase(it);
    }
    scheduler_->Tick();
    Settle();
    for (; seen < executor_.launched.size(); ++seen) {
      const std::string& id = executor_.launched[seen];
      scheduler_->JobStarted({"p", id});
      if (id == "big") big_waited = clock_.Now() - submitted;
      ends[id] = clock_.Now() + absl::Minutes(15);
    }
    Settle();
  }
  ASSERT_TRUE(big_waited) << "the large job never started: " << Message("big");
  EXPECT_EQ(*big_waited, absl::Minutes(40)) << "it starts when the last job it waited for ends";
}

// Interruptions (scheduler/interruption.h, plan.h step 4).

TEST_F(SchedulerTest, APreemptedJobIsQueuedAgainAndRunsAsItsNextAttempt) {
  scheduler_->Submit(Job("low", 0));
  Settle();
  scheduler_->JobStarted({"p", "low"});
  Settle();
  clock_.Advance(absl::Minutes(5));
  scheduler_->Submit(Job("same", 0));  // equal priority: never preempts
  Settle();
  EXPECT_TRUE(executor_.cancelled.empty());
  scheduler_->Submit(Job("urgent", 5));
  scheduler_->RunPending();
  EXPECT_TRUE(executor_.cancelled.empty()) << "stopped before its preemption was durable: a restart would lose it";
  Settle();
  ASSERT_EQ(executor_.cancelled, std::vector<std::string>{"low"});
  EXPECT_EQ(State("low"), JobState::kRunning) << "it is being stopped, not cancelled";
  EXPECT_EQ((recorder_.preempted_by[{"p", "low"}]), "p/urgent");
  EXPECT_EQ(Message("low"),
            "Preempted by job urgent (priority 5): its replicas are being stopped (SIGTERM, then their grace period); "
            "the job is then queued again and runs as attempt 2.");
  EXPECT_EQ(Message("urgent"), "needs 1 CPU; 0 free: preempting job low (priority 0) for it; it starts once that job stops");

  clock_.Advance(absl::Seconds(3));
  scheduler_->JobEnded({"p", "low"}, executor::Outcome::kFailed, "The replica master-replica-0 was terminated by signal SIGTERM.");
  Settle();
  EXPECT_EQ(History("low"), (std::vector<JobState>{JobState::kPreparing, JobState::kRunning, JobState::kQueued}));
  ASSERT_EQ((recorder_.attempts[{"p", "low"}].size()), 1u);
  const model::Attempt& first = recorder_.attempts[{"p", "low"}][0];
  EXPECT_EQ(first.number, 1);
  EXPECT_EQ(first.end, model::AttemptEnd::kPreempted);
  EXPECT_EQ(first.message, "Preempted by job urgent (priority 5)");
  EXPECT_EQ(first.hosts, std::vector<std::string>{"localhost"});
  EXPECT_EQ(first.end_time - *first.start_time, absl::Seconds(3) + absl::Minutes(5));
  EXPECT_EQ(executor_.attempts_launched, (std::vector<std::string>{"low#1", "urgent#1"})) << "urgent first";
  EXPECT_EQ(scheduler_->QueuePosition({"p", "low"}), 1) << "it keeps its place by priority and age: before same";

  scheduler_->JobStarted({"p", "urgent"});
  scheduler_->JobEnded({"p", "urgent"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(executor_.attempts_launched, (std::vector<std::string>{"low#1", "urgent#1", "low#2"}));
  scheduler_->JobStarted({"p", "low"});
  scheduler_->JobEnded({"p", "low"}, executor::Outcome::kSucceeded, "");
  Settle();
  EXPECT_EQ(State("low"), JobState::kSucceeded);
  ASSERT_EQ((recorder_.attempts[{"p", "low"}].size()), 2u);
  EXPECT_EQ((recorder_.attempts[{"p", "low"}][1].number), 2);
  EXPECT_EQ((recorder_.attempts[{"p", "low"}][1].end), model::AttemptEnd::kSucceeded);
  EXPECT_EQ(recorder_.refused, 0);
}

TEST_F(SchedulerTest, ACancelWhileBeingPreemptedEndsTheJobCancelled) {
  scheduler_->Submit(Job("low", 0));
  Settle();
  scheduler_->JobStarted({"p", "low"});
  scheduler_->Submit(Job("urgent", 5));
  Settle();
  ASSERT_EQ(executor_.cancelled, std::vector<std::string>{"low"});
  scheduler_->Cancel({"p", "low"});
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"low"}) << "one stop is under way already";
  scheduler_->JobEnded({"p", "low"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("low"), JobState::kCancelled);
  EXPECT_EQ((recorder_.attempts[{"p", "low"}].back().end), model::AttemptEnd::kCancelled);
  EXPECT_EQ(executor_.launched.back(), "urgent");
  EXPECT_EQ(recorder_.refused, 0);
}

TEST_F(SchedulerTest, ACancelBeforeThePreemptionIsDurableStillStopsTheJob) {
  scheduler_->Submit(Job("low", 0));
  Settle();
  scheduler_->JobStarted({"p", "low"});
  Settle();
  scheduler_->Submit(Job("urgent", 5));
  scheduler_->RunPending();  // the preemption's note is written, not yet durable
  scheduler_->Cancel({"p", "low"});
  scheduler_->RunPending();
  EXPECT_TRUE(executor_.cancelled.empty());
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"low"}) << "the stop goes out once the note is durable";
  scheduler_->JobEnded({"p", "low"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("low"), JobState::kCancelled);
  EXPECT_EQ(recorder_.refused, 0);
}

TEST_F(SchedulerTest, AJobBeingPreemptedWhenMlenginedRestartedIsStoppedAndQueuedAgain) {
  executor_.runs["low"] = model::Placement{{{"master-replica-0", {"localhost", {}}}}, {}, false};
  model::Job low = Job("low", 0, "", JobState::kRunning);
  low.preempted_by = "p/urgent";
  low.error_message = "Preempted by job urgent (priority 5): ...";
  scheduler_->Adopt(low);
  scheduler_->Adopt(Job("urgent", 5));
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"low"});
  scheduler_->JobEnded({"p", "low"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("low"), JobState::kQueued);
  EXPECT_EQ((recorder_.attempts[{"p", "low"}].back().end), model::AttemptEnd::kPreempted);
  EXPECT_EQ(executor_.launched, std::vector<std::string>{"urgent"});
}

TEST_F(SchedulerTest, InfrastructureFailuresAreRetriedUpToTheLimitAndTrainerFailuresOnlyWhenAsked) {
  SchedulerOptions options = Options(1);
  options.retries.infrastructure = 2;
  Rebuild(options);
  scheduler_->Submit(Job("lost"));
  for (int i = 0; i < 3; ++i) {
    Settle();
    scheduler_->JobStarted({"p", "lost"});
    scheduler_->JobEnded({"p", "lost"}, executor::Outcome::kLost, "The node went down.");
    Settle();
  }
  EXPECT_EQ(executor_.attempts_launched, (std::vector<std::string>{"lost#1", "lost#2", "lost#3"}));
  EXPECT_EQ(State("lost"), JobState::kFailed);
  EXPECT_EQ(Message("lost"), "The node went down. (attempt 3; no retry left of 2)");
  ASSERT_EQ((recorder_.attempts[{"p", "lost"}].size()), 3u);
  for (const auto& a : recorder_.attempts[{"p", "lost"}]) EXPECT_EQ(a.end, model::AttemptEnd::kInfrastructure);

  scheduler_->Submit(Job("crash"));
  Settle();
  scheduler_->JobEnded({"p", "crash"}, executor::Outcome::kFailed, "Traceback ...");
  Settle();
  EXPECT_EQ(State("crash"), JobState::kFailed) << "a failure of the trainer is not retried unless asked";

  model::Job asks = Job("asks");
  asks.labels = {{"mlengine-retry-failures", "true"}, {"mlengine-retries", "1"}};
  scheduler_->Submit(asks);
  Settle();
  scheduler_->JobEnded({"p", "asks"}, executor::Outcome::kOutOfMemory, "out of memory");
  Settle();
  EXPECT_EQ(State("asks"), JobState::kPreparing) << "retried once";
  scheduler_->JobEnded({"p", "asks"}, executor::Outcome::kOutOfMemory, "out of memory");
  Settle();
  EXPECT_EQ(State("asks"), JobState::kFailed);
  EXPECT_EQ((recorder_.attempts[{"p", "asks"}].back().end), model::AttemptEnd::kOutOfMemory);
  EXPECT_EQ(recorder_.refused, 0);
}

TEST(InterruptionTest, EachEndIsClassifiedByWhatTheSchedulerAskedThenByTheOutcome) {
  using E = model::AttemptEnd;
  using O = executor::Outcome;
  struct Case {
    O outcome;
    std::optional<E> stop;
    E want;
  };
  for (const Case& c : std::vector<Case>{
           {O::kSucceeded, std::nullopt, E::kSucceeded},
           {O::kSucceeded, E::kPreempted, E::kSucceeded},  // it finished before the stop landed
           {O::kFailed, E::kPreempted, E::kPreempted},     // its exit under SIGTERM is the preemption's
           {O::kStopped, E::kTimedOut, E::kTimedOut},
           {O::kLost, E::kCancelled, E::kCancelled},
           {O::kFailed, std::nullopt, E::kFailed},
           {O::kOutOfMemory, std::nullopt, E::kOutOfMemory},
           {O::kStalled, std::nullopt, E::kStalled},
           {O::kNotJoined, std::nullopt, E::kNotJoined},
           {O::kLost, std::nullopt, E::kInfrastructure},
       }) {
    EXPECT_EQ(ClassifyEnd(c.outcome, c.stop), c.want) << static_cast<int>(c.outcome);
  }
  RetryPolicy policy;
  policy.infrastructure = 3;
  model::Job job;
  EXPECT_EQ(RetriesOf(job, policy).limit, 3);
  job.labels = {{"mlengine-retries", "0"}, {"mlengine-retry-failures", "true"}};
  EXPECT_EQ(RetriesOf(job, policy).limit, 0);
  EXPECT_TRUE(RetriesOf(job, policy).trainer_failures);
}

// Where the executor places jobs (Slurm), a job waiting there for resources
// preempts running jobs of its project of lower priority one at a time.
TEST_F(SchedulerTest, AJobStarvedInTheExecutorsQueuePreemptsOneLowerPriorityJobAtATime) {
  executor_.places_jobs = true;
  Rebuild(Options(1));
  for (const auto& [id, priority] : std::vector<std::pair<std::string, int>>{{"old", 0}, {"new", 0}, {"same", 5}}) {
    scheduler_->Submit(Job(id, priority));
    Settle();
    scheduler_->JobPreparing({"p", id});
    scheduler_->JobStarted({"p", id});
    Settle();
    clock_.Advance(absl::Minutes(1));
  }
  scheduler_->Submit(Job("urgent", 5));
  Settle();
  ASSERT_EQ(executor_.launched.back(), "urgent") << "handed over at once";
  scheduler_->JobWaiting({"p", "urgent"}, "Waiting in the Slurm queue: Resources");
  scheduler_->JobStarved({"p", "urgent"}, true);
  Settle();
  clock_.Advance(absl::Seconds(2));
  scheduler_->Tick();
  Settle();
  EXPECT_TRUE(executor_.cancelled.empty()) << "Slurm gets 3 s to place it first";
  clock_.Advance(absl::Seconds(1));
  scheduler_->Tick();
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"new"}) << "the most recent of priority 0; never same (5)";
  clock_.Advance(absl::Seconds(10));
  scheduler_->Tick();
  Settle();
  EXPECT_EQ(executor_.cancelled, std::vector<std::string>{"new"}) << "one at a time: new is still stopping";

  scheduler_->JobEnded({"p", "new"}, executor::Outcome::kStopped, "");
  Settle();
  EXPECT_EQ(State("new"), JobState::kQueued);
  EXPECT_EQ((recorder_.attempts[{"p", "new"}].back().end), model::AttemptEnd::kPreempted);
  EXPECT_EQ(executor_.attempts_launched.back(), "new#2") << "handed over again as attempt 2";
  scheduler_->Tick();
  Settle();
  EXPECT_EQ(executor_.cancelled.size(), 1u) << "a pause after a victim went";
  clock_.Advance(absl::Seconds(3));
  scheduler_->Tick();
  Settle();
  EXPECT_EQ(executor_.cancelled, (std::vector<std::string>{"new", "old"})) << "still starved: the next one";
  scheduler_->JobEnded({"p", "old"}, executor::Outcome::kStopped, "");
  scheduler_->JobPreparing({"p", "urgent"});
  Settle();
  clock_.Advance(absl::Seconds(10));
  scheduler_->Tick();
  Settle();
  EXPECT_EQ(executor_.cancelled.size(), 2u) << "placed: it preempts no more";
  EXPECT_EQ(recorder_.refused, 0);
}

TEST(InterruptionTest, TheNextVictimInAnExecutorThatPlacesJobs) {
  const JobKey head{"p", "head"}, a{"p", "a"}, b{"p", "b"}, other{"q", "o"};
  const absl::Time t0 = absl::UnixEpoch();
  auto cand = [&](const JobKey& k, int32_t prio, int minutes, bool preemptible = true, bool stopping = false) {
    return RunningCandidate{&k, prio, t0 + absl::Minutes(minutes), preemptible, stopping};
  };
  EXPECT_EQ(NextVictim(head, 5, {cand(a, 0, 1), cand(b, 0, 2)}), 1u) << "the most recently started";
  EXPECT_EQ(NextVictim(head, 5, {cand(a, 1, 1), cand(b, 2, 2)}), 0u) << "the lowest priority first";
  EXPECT_EQ(NextVictim(head, 5, {cand(a, 5, 1), cand(other, 0, 2)}), std::nullopt) << "equal priority; another project";
  EXPECT_EQ(NextVictim(head, 5, {cand(a, 0, 1, false)}), std::nullopt) << "exempt";
  EXPECT_EQ(NextVictim(head, 5, {cand(a, 0, 1), cand(other, 0, 2, true, true)}), std::nullopt)
      << "a job is being stopped: wait for it";
}

}  // namespace
}  // namespace mle::scheduler
