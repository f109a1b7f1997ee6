// Hyperparameter tuning jobs: the pure policy (tuning_job.h) as tables, and
// the coordinator with its real collaborators (JobService on SQLite in a
// temp dir, the scheduler without an executor, a fake clock): the test plays
// the executor by recording the trials' states and writing the metric files
// their masters would write.
#include "service/tuning_job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "db/store.h"
#include "service/job_service.h"
#include "service/job_studies.h"
#include "service/tuning_coordinator.h"
#include "service_fixture.h"

namespace mle::service {
namespace {

namespace fs = std::filesystem;
using model::HyperparameterOutput;
using model::HyperparameterSpec;
using model::JobState;

HyperparameterSpec Spec(int32_t max_trials, int32_t parallel, std::optional<int32_t> max_failed = std::nullopt) {
  HyperparameterSpec h;
  h.goal = "MAXIMIZE";
  h.max_trials = max_trials;
  h.max_parallel_trials = parallel;
  h.max_failed_trials = max_failed;
  model::ParameterSpec lr;
  lr.parameter_name = "learning_rate";
  lr.type = "DOUBLE";
  lr.min_value = 0.0001;
  lr.max_value = 0.1;
  lr.scale_type = "UNIT_LOG_SCALE";
  model::ParameterSpec units;
  units.parameter_name = "hidden_units";
  units.type = "INTEGER";
  units.min_value = 8;
  units.max_value = 64;
  h.params = {lr, units};
  return h;
}

HyperparameterOutput Trial(const std::string& id, JobState state, std::optional<double> metric = std::nullopt) {
  HyperparameterOutput t;
  t.trial_id = id;
  t.state = state;
  t.hyperparameters = {{"learning_rate", "0.01"}, {"hidden_units", "16"}};
  if (metric) {
    t.final_metric = model::HyperparameterMetric{100, *metric};
    t.all_metrics = {{100, *metric}};
  }
  return t;
}

// --- The policy, one case per row ------------------------------------------

struct PlanCase {
  std::string name;
  HyperparameterSpec spec;
  std::vector<HyperparameterOutput> trials;
  int32_t inherited = 0;
  bool cancelling = false;
  bool exhausted = false;
  int32_t start = 0;
  std::vector<std::string> stop;
  std::optional<JobState> finish;
};

TEST(PlanTuningTest, Table) {
  const auto S = JobState::kSucceeded, F = JobState::kFailed, R = JobState::kRunning, Q = JobState::kQueued,
             C = JobState::kCancelled, X = JobState::kCancelling;
  const std::vector<PlanCase> cases = {
      {"fresh job starts maxParallelTrials", Spec(10, 3), {}, 0, false, false, 3, {}, {}},
      {"never more than maxTrials", Spec(2, 5), {}, 0, false, false, 2, {}, {}},
      {"a free slot is filled", Spec(10, 3), {Trial("1", S, 1), Trial("2", R), Trial("3", Q)}, 0, false, false, 1, {}, {}},
      {"all slots busy", Spec(10, 2), {Trial("1", R), Trial("2", Q)}, 0, false, false, 0, {}, {}},
      {"last trials running: wait", Spec(2, 2), {Trial("1", S, 1), Trial("2", R)}, 0, false, false, 0, {}, {}},
      {"all done: succeeded", Spec(2, 2), {Trial("1", S, 1), Trial("2", F)}, 0, false, false, 0, {}, S},
      {"all done, none succeeded: failed", Spec(2, 1, 5), {Trial("1", F), Trial("2", F)}, 0, false, false, 0, {}, F},
      {"infeasible trials still succeed the job", Spec(1, 1), {Trial("1", S)}, 0, false, false, 0, {}, S},
      {"maxFailedTrials reached: stop the rest", Spec(10, 3, 2), {Trial("1", F), Trial("2", F), Trial("3", R)}, 0, false, false, 0, {"3"}, {}},
      {"maxFailedTrials reached, nothing running: fail", Spec(10, 3, 2), {Trial("1", F), Trial("2", F)}, 0, false, false, 0, {}, F},
      {"unset maxFailedTrials: 3 failures before a success", Spec(10, 3), {Trial("1", F), Trial("2", F), Trial("3", F)}, 0, false, false, 0, {}, F},
      {"unset maxFailedTrials: failures after a success go on", Spec(10, 3), {Trial("1", S, 1), Trial("2", F), Trial("3", F), Trial("4", F)}, 0, false, false, 3, {}, {}},
      {"unset maxFailedTrials: half of maxTrials does not fail it", Spec(6, 1), {Trial("1", S, 1), Trial("2", F), Trial("3", F), Trial("4", F)}, 0, false, false, 1, {}, {}},
      {"unset maxFailedTrials: more than half fails it", Spec(6, 1), {Trial("1", S, 1), Trial("2", F), Trial("3", F), Trial("4", F), Trial("5", F)}, 0, false, false, 0, {}, F},
      {"inherited failures are not this job's", Spec(6, 2, 1), {Trial("1", F), Trial("2", S, 1)}, 2, false, false, 2, {}, {}},
      {"inherited trials count towards maxTrials", Spec(3, 2), {Trial("1", S, 1), Trial("2", S, 2)}, 2, false, false, 1, {}, {}},
      {"cancel stops what runs", Spec(10, 3), {Trial("1", S, 1), Trial("2", R), Trial("3", Q)}, 0, true, false, 0, {"2", "3"}, {}},
      {"cancel waits for stopping trials", Spec(10, 3), {Trial("2", X)}, 0, true, false, 0, {}, {}},
      {"cancel ends when nothing runs", Spec(10, 3), {Trial("1", S, 1), Trial("2", C)}, 0, true, false, 0, {}, C},
      {"exhausted grid ends the job", Spec(10, 3), {Trial("1", S, 1)}, 0, false, true, 0, {}, S},
  };
  for (const auto& c : cases) {
    TuningState state{c.trials, c.inherited, c.cancelling, c.exhausted, "", ""};
    TuningStep step = PlanTuning(c.spec, state);
    EXPECT_EQ(step.start, c.start) << c.name;
    EXPECT_EQ(step.stop, c.stop) << c.name;
    EXPECT_EQ(step.finish, c.finish) << c.name;
    if (step.finish == JobState::kFailed) {
      EXPECT_FALSE(step.message.empty()) << c.name;
    }
  }
}

TEST(TuningJobTest, TrialJobCarriesItsParametersTrialAndDirectory) {
  model::Job parent;
  parent.project = "p";
  parent.job_id = "tune";
  parent.labels = {{"team", "a"}};
  model::TrainingInput t;
  t.python_module = "trainer.task";
  t.args = {"--epochs", "3"};
  t.job_dir = "gs://b/out/";
  t.hyperparameters = Spec(4, 2);
  parent.training_input = t;
  model::Job trial = TrialJobOf(parent, "7", {{"hidden_units", "32"}, {"learning_rate", "0.001"}});
  EXPECT_EQ(trial.job_id, "tune.7");
  EXPECT_EQ(trial.trial_of, "tune");
  EXPECT_EQ(trial.trial_id, "7");
  EXPECT_TRUE(model::IsTrialJob(trial));
  EXPECT_FALSE(model::IsTuningJob(trial));
  EXPECT_FALSE(trial.training_input->hyperparameters.has_value());
  // Spec order, after the job's own args.
  EXPECT_EQ(trial.training_input->args,
            (std::vector<std::string>{"--epochs", "3", "--learning_rate=0.001", "--hidden_units=32"}));
  EXPECT_EQ(trial.training_input->job_dir, "gs://b/out/7");
  EXPECT_EQ(trial.labels, parent.labels);
}

TEST(TuningJobTest, StudyTrialsReadValuesByTypeAndStates) {
  HyperparameterSpec h = Spec(10, 2);
  h.goal = "MINIMIZE";
  HyperparameterOutput stopped = Trial("3", JobState::kSucceeded, 0.5);
  stopped.is_trial_stopped_early = true;
  auto trials = StudyTrialsOf(h, {Trial("1", JobState::kSucceeded, 0.9), Trial("2", JobState::kRunning), stopped,
                                  Trial("4", JobState::kFailed), Trial("5", JobState::kSucceeded)});
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(std::get<double>(trials[0].params.at("learning_rate")), 0.01);
  EXPECT_EQ(std::get<int64_t>(trials[0].params.at("hidden_units")), 16);
  EXPECT_EQ(trials[0].state, tuning::TrialState::kCompleted);
  EXPECT_EQ(trials[0].final_measurement->metrics.at(kDefaultMetricTag), 0.9);
  EXPECT_EQ(trials[1].state, tuning::TrialState::kActive);
  EXPECT_EQ(trials[2].state, tuning::TrialState::kStopped);
  EXPECT_EQ(trials[3].state, tuning::TrialState::kInfeasible);
  EXPECT_EQ(trials[4].state, tuning::TrialState::kInfeasible) << "reported nothing";
  EXPECT_EQ(StudySpecOf(h).metrics.front().goal, tuning::Goal::kMinimize);
}

TEST(TuningJobTest, SortedBestFirstFollowsTheGoal) {
  HyperparameterSpec h = Spec(10, 2);
  std::vector<HyperparameterOutput> trials = {Trial("1", JobState::kSucceeded, 0.2), Trial("2", JobState::kFailed),
                                              Trial("3", JobState::kSucceeded, 0.9), Trial("4", JobState::kSucceeded, 0.5)};
  auto ids = [](const std::vector<HyperparameterOutput>& v) {
    std::vector<std::string> out;
    for (const auto& t : v) out.push_back(t.trial_id);
    return out;
  };
  EXPECT_EQ(ids(SortedBestFirst(h, trials)), (std::vector<std::string>{"3", "4", "1", "2"}));
  h.goal = "MINIMIZE";
  EXPECT_EQ(ids(SortedBestFirst(h, trials)), (std::vector<std::string>{"1", "4", "3", "2"}));
}

// --- The coordinator ---------------------------------------------------------

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_tuning_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "runs");
    Open();
  }
  void TearDown() override {
    Close();
    fs::remove_all(dir_);
  }
  void Open() {
    store_ = *db::OpenSqliteStore({(dir_ / "mlengine.db").string(), true});
    service_ = std::make_unique<JobService>(*store_, clock_, validate::Config::Defaults());
    scheduler_ = std::make_unique<scheduler::Scheduler>(clock_, *service_, nullptr);
    tuning_ = std::make_unique<TuningCoordinator>(*service_, TuningOptions{(dir_ / "runs").string()});
    service_->AttachScheduler(scheduler_.get());
    service_->AttachTuning(tuning_.get());
    ASSERT_TRUE(service_->Recover().ok());
    Settle();
  }
  void Close() {
    tuning_.reset();
    scheduler_.reset();
    service_.reset();
    store_.reset();
  }
  // Lets every write land and every event be handled.
  void Settle() {
    for (int i = 0; i < 6; ++i) {
      std::promise<void> written;
      store_->Commit({}, [&](absl::Status) { written.set_value(); });
      written.get_future().wait();
      scheduler_->RunPending();
      tuning_->RunPending();
    }
  }
  model::Job TuningJob(const std::string& id, HyperparameterSpec h) {
    model::Job j = mle::testing::BasicPackageJob(id);
    j.training_input->hyperparameters = std::move(h);
    return j;
  }
  absl::StatusOr<model::Job> Create(model::Job job) {
    std::promise<absl::StatusOr<model::Job>> p;
    service_->CreateJob("proj", std::move(job), [&](absl::StatusOr<model::Job> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    Settle();
    return r;
  }
  model::Job Get(const std::string& id) { return *service_->GetJob("proj", id); }
  std::vector<std::string> TrialStates(const std::string& id) {
    std::vector<std::string> out;
    const model::Job job = Get(id);
    for (const auto& t : job.training_output->trials) {
      out.push_back(absl::StrCat(t.trial_id, ":", std::string(model::JobStateName(t.state))));
    }
    return out;
  }
  // What the scheduler and executor would record for a trial.
  void Move(const std::string& job, const std::string& trial, std::initializer_list<JobState> states,
            const std::string& message = "") {
    for (JobState s : states) {
      service_->Record({"proj", model::TrialJobId(job, trial)}, {s, message, false});
    }
    Settle();
  }
  // What the trial's master reports (hypertune's format).
  void Report(const std::string& job, const std::string& trial, std::vector<std::pair<int, double>> values) {
    const std::string path = common::ReplicaMetricPath(
        common::JobRunDir((dir_ / "runs").string(), "proj", model::TrialJobId(job, trial)), "master-replica-0");
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path);
    for (auto [step, v] : values) {
      out << "{\"checkpoint_path\": \"\", \"global_step\": \"" << step << "\", \"timestamp\": 1.5, "
          << "\"training/hptuning/metric\": \"" << v << "\", \"trial\": \"" << trial << "\"}\n";
    }
  }

  fs::path dir_;
  common::FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<JobService> service_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<TuningCoordinator> tuning_;
};

TEST_F(CoordinatorTest, TrialsRunAsHiddenJobsAndTheBestComesFirst) {
  HyperparameterSpec h = Spec(3, 2);
  h.algorithm = "RANDOM_SEARCH";
  auto created = Create(TuningJob("tune", h));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->training_output->is_hyperparameter_tuning_job);
  EXPECT_EQ(TrialStates("tune"), (std::vector<std::string>{"1:QUEUED", "2:QUEUED"})) << "maxParallelTrials at once";
  // Trials are jobs the scheduler queues, but not the user's to list.
  EXPECT_EQ(scheduler_->QueuePosition({"proj", "tune.1"}), 1);
  EXPECT_EQ(service_->ListJobs("proj", {})->jobs.size(), 1u);
  EXPECT_EQ(service_->GetJob("proj", "tune.1").status().code(), absl::StatusCode::kNotFound);
  const auto trial_jobs = service_->TrialJobsOf({"proj", "tune"});
  ASSERT_EQ(trial_jobs.size(), 2u);
  EXPECT_EQ(trial_jobs[0].training_input->args.size(), 2u);  // --learning_rate=..., --hidden_units=...

  Move("tune", "1", {JobState::kPreparing, JobState::kRunning});
  EXPECT_EQ(Get("tune").state, JobState::kRunning) << "as far along as its furthest trial";
  Report("tune", "1", {{10, 0.5}, {20, 0.7}});
  Move("tune", "1", {JobState::kSucceeded});
  EXPECT_EQ(TrialStates("tune"), (std::vector<std::string>{"1:SUCCEEDED", "2:QUEUED", "3:QUEUED"}));
  Move("tune", "2", {JobState::kPreparing, JobState::kRunning});
  Report("tune", "2", {{20, 0.9}});
  Move("tune", "2", {JobState::kSucceeded});
  Move("tune", "3", {JobState::kPreparing, JobState::kRunning, JobState::kSucceeded});  // reports nothing

  model::Job done = Get("tune");
  EXPECT_EQ(done.state, JobState::kSucceeded);
  const auto& trials = done.training_output->trials;
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].trial_id, "2") << "best first";
  EXPECT_EQ(trials[0].final_metric->objective_value, 0.9);
  EXPECT_EQ(trials[1].trial_id, "1");
  EXPECT_EQ(trials[1].final_metric->training_step, 20);
  EXPECT_EQ(trials[1].all_metrics.size(), 2u);
  EXPECT_EQ(trials[2].trial_id, "3");
  EXPECT_FALSE(trials[2].final_metric.has_value()) << "infeasible, not a crash";
  EXPECT_EQ(done.training_output->completed_trial_count, 3);
}

TEST_F(CoordinatorTest, FailedTrialsFailTheJobWithTheReason) {
  auto created = Create(TuningJob("tune", Spec(5, 1, 2)));
  ASSERT_TRUE(created.ok()) << created.status();
  Move("tune", "1", {JobState::kPreparing, JobState::kFailed}, "The replica master 0 exited with status 1.");
  Move("tune", "2", {JobState::kPreparing, JobState::kFailed}, "The replica master 0 exited with status 2.");
  model::Job done = Get("tune");
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_NE(done.error_message.find("2 trials failed (maxFailedTrials is 2)"), std::string::npos) << done.error_message;
  EXPECT_NE(done.error_message.find("Trial 2: The replica master 0 exited with status 2."), std::string::npos);
  EXPECT_EQ(done.training_output->trials.size(), 2u);
}

TEST_F(CoordinatorTest, CancelStopsEveryTrial) {
  auto created = Create(TuningJob("tune", Spec(6, 3)));
  ASSERT_TRUE(created.ok());
  Move("tune", "1", {JobState::kPreparing, JobState::kRunning});
  std::promise<absl::Status> cancelled;
  service_->CancelJob("proj", "tune", [&](absl::Status s) { cancelled.set_value(s); });
  ASSERT_TRUE(cancelled.get_future().get().ok());
  Settle();
  for (const auto& t : service_->TrialJobsOf({"proj", "tune"})) {
    EXPECT_EQ(t.state, JobState::kCancelled) << t.job_id << ": queued trials end at once";
  }
  // The running one is stopped by the scheduler's executor; here, by hand.
  auto running = service_->TrialJobsOf({"proj", "tune"});
  Move("tune", "1", {JobState::kCancelled});
  model::Job done = Get("tune");
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(done.training_output->trials.size(), 3u) << "no new trial after the cancel";
}

TEST_F(CoordinatorTest, EarlyStoppingStopsATrialBelowTheMedian) {
  HyperparameterSpec h = Spec(5, 1);
  h.enable_trial_early_stopping = true;
  h.algorithm = "RANDOM_SEARCH";
  ASSERT_TRUE(Create(TuningJob("tune", h)).ok());
  for (std::string id : {"1", "2", "3"}) {
    Move("tune", id, {JobState::kPreparing, JobState::kRunning});
    Report("tune", id, {{10, 0.6}, {20, 0.8}});
    Move("tune", id, {JobState::kSucceeded});
  }
  Move("tune", "4", {JobState::kPreparing, JobState::kRunning});
  Report("tune", "4", {{10, 0.1}});
  tuning_->Tick();
  Settle();
  // Stopped (here at once: the scheduler, with no executor, holds no run of it).
  EXPECT_EQ(service_->TrialJobsOf({"proj", "tune"})[3].state, JobState::kCancelled);
  const model::Job job = Get("tune");
  const auto& out = job.training_output->trials;
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[3].trial_id, "4");
  EXPECT_TRUE(out[3].is_trial_stopped_early);
  EXPECT_EQ(out[3].state, JobState::kSucceeded);
  EXPECT_EQ(out[3].final_metric->objective_value, 0.1);
}

TEST_F(CoordinatorTest, RestartLosesNoTrialAndNeverReusesAnId) {
  ASSERT_TRUE(Create(TuningJob("tune", Spec(4, 2))).ok());
  // Trial 1 ends, and the server dies before the coordinator hears of it.
  Report("tune", "1", {{5, 0.3}});
  for (JobState s : {JobState::kPreparing, JobState::kRunning, JobState::kSucceeded}) {
    service_->Record({"proj", "tune.1"}, {s, "", false});
  }
  Close();
  Open();  // a restart: the tuning job is taken back from its trials' jobs
  EXPECT_EQ(TrialStates("tune"), (std::vector<std::string>{"1:SUCCEEDED", "2:QUEUED", "3:QUEUED"}));
  EXPECT_EQ(Get("tune").training_output->trials[0].final_metric->objective_value, 0.3);
  Move("tune", "2", {JobState::kPreparing, JobState::kRunning, JobState::kSucceeded});
  EXPECT_EQ(TrialStates("tune"), (std::vector<std::string>{"1:SUCCEEDED", "2:SUCCEEDED", "3:QUEUED", "4:QUEUED"}));
  Close();
  Open();
  EXPECT_EQ(service_->TrialJobsOf({"proj", "tune"}).size(), 4u) << "maxTrials reached: no fifth, no id reused";
}

TEST_F(CoordinatorTest, ResumeContinuesTheStudy) {
  ASSERT_TRUE(Create(TuningJob("first", Spec(2, 2))).ok());
  Report("first", "1", {{5, 0.3}});
  Report("first", "2", {{5, 0.4}});
  Move("first", "1", {JobState::kPreparing, JobState::kRunning, JobState::kSucceeded});
  Move("first", "2", {JobState::kPreparing, JobState::kRunning, JobState::kSucceeded});
  ASSERT_EQ(Get("first").state, JobState::kSucceeded);

  HyperparameterSpec h = Spec(4, 2);
  h.resume_previous_job_id = "first";
  auto resumed = Create(TuningJob("second", h));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(TrialStates("second"),
            (std::vector<std::string>{"2:SUCCEEDED", "1:SUCCEEDED", "3:QUEUED", "4:QUEUED"}))
      << "the previous trials count towards maxTrials; new ids follow theirs";

  HyperparameterSpec other = Spec(4, 2);
  other.params.pop_back();
  other.resume_previous_job_id = "first";
  auto refused = Create(TuningJob("third", other));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  HyperparameterSpec unfinished = Spec(4, 2);
  unfinished.resume_previous_job_id = "second";
  EXPECT_EQ(Create(TuningJob("fourth", unfinished)).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace mle::service

namespace mle::service {
namespace {

TEST(JobStudiesTest, ATuningJobIsAReadOnlyStudyOfItsTrials) {
  model::Job job;
  job.project = "p";
  job.job_id = "tune";
  job.state = JobState::kRunning;
  model::TrainingInput t;
  t.region = "europe-west4";
  t.hyperparameters = Spec(4, 2);
  t.hyperparameters->hyperparameter_metric_tag = "accuracy";
  job.training_input = t;
  model::TrainingOutput out;
  HyperparameterOutput done = Trial("2", JobState::kSucceeded, 0.8);
  done.all_metrics = {{1, 0.5}, {2, 0.8}};
  out.trials = {done, Trial("1", JobState::kFailed), Trial("3", JobState::kRunning)};
  job.training_output = out;

  tuning::Study study = StudyOfJob(job);
  EXPECT_EQ(study.Name(), "projects/p/locations/europe-west4/studies/tune");
  EXPECT_EQ(study.state, tuning::StudyState::kActive);
  ASSERT_EQ(study.config.metrics.size(), 1u);
  EXPECT_EQ(study.config.metrics[0].metric, "accuracy");
  EXPECT_EQ(study.config.parameters.size(), 2u);

  auto trials = StudyTrialsOfJob(job);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].id, 1) << "by id";
  EXPECT_TRUE(trials[0].infeasible) << "a failed trial";
  EXPECT_EQ(trials[1].id, 2);
  EXPECT_EQ(trials[1].state, tuning::TrialStatus::kCompleted);
  ASSERT_TRUE(trials[1].final_measurement.has_value());
  EXPECT_EQ(trials[1].final_measurement->metrics[0].value, 0.8);
  EXPECT_EQ(trials[1].measurements.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(trials[1].parameters[1].value), 16);
  EXPECT_EQ(trials[2].state, tuning::TrialStatus::kActive);
  EXPECT_FALSE(trials[2].infeasible);
}

}  // namespace
}  // namespace mle::service
