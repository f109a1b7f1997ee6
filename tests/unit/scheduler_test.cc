// The scheduler's local placement path, deterministically: a fake clock, a
// behavioural recorder whose writes become durable only when the test says
// so (as the store's group commit would), and a fake executor that records
// what it was asked and reports what the test makes happen. Events are
// processed with RunPending on the test's thread; nothing sleeps.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

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
    if (state != update.state) {
      if (model::CanTransition(state, update.state)) {
        state = update.state;
        history[key].push_back(update.state);
        if (!update.error_message.empty()) messages[key] = update.error_message;
      } else {
        s = absl::FailedPreconditionError("illegal");
        ++refused;
      }
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
  std::map<JobKey, std::string> messages;
  std::deque<std::pair<Done, absl::Status>> pending;
  int refused = 0;
};

class FakeExecutor final : public executor::Executor {
 public:
  absl::Status CheckRunnable(const model::Job&) const override { return absl::OkStatus(); }
  void Launch(const model::Job& job, const model::JobDemand&, const model::Placement&) override {
    launched.push_back(job.job_id);
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
  std::map<std::string, std::string> cancel_reasons;
  std::map<std::string, model::Placement> runs;  // what Recover finds
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() {
    SchedulerOptions options;
    model::Host host;
    host.name = "localhost";
    host.cpu_milli = 1000;  // one job at a time
    options.inventory.hosts.push_back(host);
    options.resources.machine_types.clear();
    options.resources.fallback = {1000, 0};
    scheduler_ = std::make_unique<Scheduler>(clock_, recorder_, &executor_, options);
  }

  model::Job Job(const std::string& id, int32_t priority = 0, std::string max_running = "",
                 JobState state = JobState::kQueued) {
    model::Job j;
    j.project = "p";
    j.job_id = id;
    j.sequence = ++sequence_;
    j.state = state;
    j.create_time = clock_.Now();
    model::TrainingInput t;
    t.scale_tier = "BASIC";
    t.scheduling = model::Scheduling{std::move(max_running), "", priority};
    j.training_input = t;
    recorder_.states[{"p", id}] = state;
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

}  // namespace
}  // namespace mle::scheduler
