// JobService with its real collaborators (SQLite in a temp dir, the
// scheduler driven by hand, a fake clock): create, list, patch, cancel,
// maxWaitTime and recovery, deterministically.
#include "service/job_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "codec/job_codec.h"
#include "service_fixture.h"

namespace mle::service {
namespace {

namespace fs = std::filesystem;
using model::JobState;

model::Job ValidJob(const std::string& id, int32_t priority = 0, std::string max_wait = "") {
  model::Job j = mle::testing::BasicPackageJob(id);
  j.training_input->scheduling = model::Scheduling{"", std::move(max_wait), priority};
  return j;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mle::testing::FreshTestDirectory("mle_service_test");
    Open();
  }
  void TearDown() override {
    Close();
    fs::remove_all(dir_);
  }
  void Open() {
    store_ = *db::OpenSqliteStore({(dir_ / "mlengine.db").string(), true});
    service_ = std::make_unique<JobService>(*store_, clock_, validate::Config::Defaults());
    scheduler_ = std::make_unique<scheduler::Scheduler>(clock_, *service_, executor_);
    service_->AttachScheduler(scheduler_.get());
    ASSERT_TRUE(service_->Recover().ok());
    scheduler_->RunPending();
  }
  void Close() {
    scheduler_.reset();
    service_.reset();
    store_.reset();  // drains the writer: every acknowledged write is on disk
  }
  absl::StatusOr<model::Job> Create(model::Job job) {
    std::promise<absl::StatusOr<model::Job>> p;
    service_->CreateJob("proj", std::move(job), [&](absl::StatusOr<model::Job> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    scheduler_->RunPending();
    return r;
  }
  absl::Status Cancel(const std::string& id) {
    std::promise<absl::Status> p;
    service_->CancelJob("proj", id, [&](absl::Status s) { p.set_value(s); });
    auto s = p.get_future().get();
    scheduler_->RunPending();
    return s;
  }
  absl::StatusOr<model::Job> Patch(const std::string& id, PatchJobRequest req) {
    std::promise<absl::StatusOr<model::Job>> p;
    service_->PatchJob("proj", id, std::move(req), [&](absl::StatusOr<model::Job> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  fs::path dir_;
  executor::Executor* executor_ = nullptr;  // set before Open()
  common::FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<JobService> service_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
};

TEST_F(ServiceTest, CreateGetAndDuplicate) {
  auto job = Create(ValidJob("a"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->create_time, clock_.Now());
  EXPECT_EQ(job->job_position, 1);  // the create reply already has its place in the queue
  auto again = Create(ValidJob("a"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(service_->GetJob("proj", "a")->job_id, "a");
  EXPECT_EQ(service_->GetJob("proj", "zzz").status().code(), absl::StatusCode::kNotFound);
}

// The create's own writes (the call's audit line) go in the job's commit:
// written with an accepted job, never with a refused one.
TEST_F(ServiceTest, WritesWithTheJobAreCommittedWithItOnly) {
  auto create = [&](model::Job job, const std::string& request_id) {
    db::AuditRecord line;
    line.time_us = 1;
    line.project = "proj";
    line.principal = "operator";
    line.method = "ml.projects.jobs.create";
    line.outcome = "OK";
    line.request_id = request_id;
    std::promise<absl::StatusOr<model::Job>> p;
    service_->CreateJob(
        "proj", std::move(job), [&](absl::StatusOr<model::Job> r) { p.set_value(std::move(r)); }, {},
        iam::Principal::Operator(), {db::AppendAudit{line}});
    return p.get_future().get();
  };
  ASSERT_TRUE(create(ValidJob("a"), "accepted").ok());
  EXPECT_EQ(create(ValidJob("1bad"), "invalid").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(ValidJob("a"), "duplicate").status().code(), absl::StatusCode::kAlreadyExists);
  Close();
  Open();
  auto lines = store_->ReadAudit({"proj", 0, 100});
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].request_id, "accepted");
  EXPECT_TRUE(service_->GetJob("proj", "a").ok()) << "and the job with it";
}

TEST_F(ServiceTest, InvalidJobIsRefusedAndNothingIsStored) {
  model::Job bad = ValidJob("1bad");
  bad.training_input->region = "";
  auto r = Create(bad);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_GE(common::GetFieldViolations(r.status()).size(), 2u);
  EXPECT_TRUE(service_->ListJobs("proj", {})->jobs.empty());
}

TEST_F(ServiceTest, QueuePositionsFollowPriorityThenAge) {
  ASSERT_TRUE(Create(ValidJob("low_old", 0)).ok());
  ASSERT_TRUE(Create(ValidJob("high", 500)).ok());
  ASSERT_TRUE(Create(ValidJob("low_new", 0)).ok());
  EXPECT_EQ(service_->GetJob("proj", "high")->job_position, 1);
  EXPECT_EQ(service_->GetJob("proj", "low_old")->job_position, 2);
  EXPECT_EQ(service_->GetJob("proj", "low_new")->job_position, 3);
  ASSERT_TRUE(Cancel("high").ok());
  EXPECT_EQ(service_->GetJob("proj", "low_old")->job_position, 1);
}

TEST_F(ServiceTest, ListIsNewestFirstAndPages) {
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(Create(ValidJob("job_" + std::to_string(i))).ok());
  ListJobsRequest req;
  req.page_size = 10;
  std::vector<std::string> seen;
  for (;;) {
    auto page = service_->ListJobs("proj", req);
    ASSERT_TRUE(page.ok());
    for (const auto& j : page->jobs) seen.push_back(j.job_id);
    if (page->next_page_token.empty()) break;
    req.page_token = page->next_page_token;
  }
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_EQ(seen.front(), "job_24");
  EXPECT_EQ(seen.back(), "job_0");
  EXPECT_EQ(service_->ListJobs("proj", {})->jobs.size(), 20u);
  EXPECT_TRUE(service_->ListJobs("other", {})->jobs.empty());
  ListJobsRequest big;
  big.page_size = 1000;
  EXPECT_EQ(service_->ListJobs("proj", big)->jobs.size(), 25u);
}

TEST_F(ServiceTest, CancelMovesThroughCancellingToCancelled) {
  ASSERT_TRUE(Create(ValidJob("c")).ok());
  std::promise<absl::Status> p;
  service_->CancelJob("proj", "c", [&](absl::Status s) { p.set_value(s); });
  ASSERT_TRUE(p.get_future().get().ok());
  EXPECT_EQ(service_->GetJob("proj", "c")->state, JobState::kCancelling);
  scheduler_->RunPending();
  auto job = service_->GetJob("proj", "c");
  EXPECT_EQ(job->state, JobState::kCancelled);
  EXPECT_TRUE(job->end_time.has_value());
  EXPECT_EQ(Cancel("c").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServiceTest, RecordRefusesIllegalMovesAndReportsDurability) {
  ASSERT_TRUE(Create(ValidJob("r")).ok());
  auto record = [&](JobState state) {
    std::promise<absl::Status> p;
    service_->Record({"proj", "r"}, {state, ""}, [&](absl::Status s) { p.set_value(s); });
    return p.get_future().get();
  };
  // QUEUED -> SUCCEEDED skips the start: refused, said, and nothing changes.
  EXPECT_EQ(record(JobState::kSucceeded).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->GetJob("proj", "r")->state, JobState::kQueued);
  EXPECT_TRUE(record(JobState::kPreparing).ok());  // durable when it says so
  auto stored = store_->Load();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->jobs.size(), 1u);
  EXPECT_EQ(stored->jobs[0].state, "PREPARING");
  EXPECT_EQ(codec::ParseStoredJob(stored->jobs[0].body)->state, JobState::kPreparing);
  std::promise<absl::Status> p;
  service_->Record({"proj", "nope"}, {JobState::kRunning, ""}, [&](absl::Status s) { p.set_value(s); });
  EXPECT_EQ(p.get_future().get().code(), absl::StatusCode::kNotFound);
}

// What retention reads of the jobs: when each ended, when each pinned
// image was last used (not ended: in use), the jobs with packages not
// ended, and the oldest job not yet running.
TEST_F(ServiceTest, RetentionUsesFollowTheJobsThatPinEachImage) {
  auto pinned = [](const std::string& id, std::map<std::string, std::string> images) {
    model::Job job = ValidJob(id);
    job.resolved_images = std::move(images);
    return job;
  };
  auto record = [&](const std::string& id, JobState state) {
    std::promise<absl::Status> p;
    service_->Record({"proj", id}, {state, ""}, [&](absl::Status s) { p.set_value(s); });
    return p.get_future().get();
  };
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(Create(pinned("a", {{"u/x", "r/x@sha256:1"}})).ok());
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(Create(pinned("b", {{"u/x", "r/x@sha256:1"}, {"u/y", "r/y@sha256:2"}})).ok());
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(Create(pinned("c", {{"u/z", "r/z@sha256:3"}})).ok());
  ASSERT_TRUE(record("a", JobState::kPreparing).ok());
  ASSERT_TRUE(record("a", JobState::kRunning).ok());
  ASSERT_TRUE(Cancel("b").ok());

  JobService::Uses uses = service_->RetentionUses();
  ASSERT_EQ(uses.ends.size(), 3u);
  EXPECT_FALSE(uses.ends.at({"proj", "a"}).has_value());
  EXPECT_EQ(uses.ends.at({"proj", "b"}), t0 + absl::Hours(2));
  EXPECT_FALSE(uses.ends.at({"proj", "c"}).has_value());
  EXPECT_FALSE(uses.images.at("r/x@sha256:1").has_value()) << "a runs with it";
  EXPECT_EQ(uses.images.at("r/y@sha256:2"), t0 + absl::Hours(2));
  EXPECT_FALSE(uses.images.at("r/z@sha256:3").has_value()) << "c waits to run it";
  EXPECT_EQ(uses.oldest_not_running, t0 + absl::Hours(2)) << "c: a runs, b ended";
  EXPECT_EQ(uses.packaged, (std::set<scheduler::JobKey>{{"proj", "a"}, {"proj", "c"}})) << "with packages, not ended";
  EXPECT_TRUE(service_->PinnedByUnfinishedJob({"r/z@sha256:3"}));
  EXPECT_FALSE(service_->PinnedByUnfinishedJob({"r/y@sha256:2", "sha256:9"}));

  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(record("a", JobState::kSucceeded).ok());
  ASSERT_TRUE(Cancel("c").ok());
  uses = service_->RetentionUses();
  EXPECT_EQ(uses.images.at("r/x@sha256:1"), t0 + absl::Hours(3)) << "the later of a's and b's ends";
  EXPECT_EQ(uses.images.at("r/z@sha256:3"), t0 + absl::Hours(3));
  EXPECT_FALSE(uses.oldest_not_running.has_value());
  EXPECT_TRUE(uses.packaged.empty());
  EXPECT_FALSE(service_->PinnedByUnfinishedJob({"r/x@sha256:1", "r/z@sha256:3"}));
}

TEST_F(ServiceTest, PatchLabelsWithEtag) {
  auto job = Create(ValidJob("p"));
  ASSERT_TRUE(job.ok());
  const std::string etag = codec::EtagForVersion(job->version);
  auto patched = Patch("p", {{"labels", "etag"}, {{"team", "nlp"}}, etag});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(patched->labels.at("team"), "nlp");
  auto stale = Patch("p", {{"labels", "etag"}, {{"team", "x"}}, etag});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  auto bad_mask = Patch("p", {{"trainingInput"}, {}, ""});
  EXPECT_EQ(bad_mask.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_label = Patch("p", {{"labels"}, {{"Team", "x"}}, ""});
  EXPECT_EQ(bad_label.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, MaxWaitTimeCancelsAJobThatNeverStarts) {
  ASSERT_TRUE(Create(ValidJob("w", 0, "1800s")).ok());
  clock_.Advance(absl::Seconds(1799));
  scheduler_->Tick();
  scheduler_->RunPending();
  EXPECT_EQ(service_->GetJob("proj", "w")->state, JobState::kQueued);
  clock_.Advance(absl::Seconds(1));
  scheduler_->Tick();
  scheduler_->RunPending();
  auto job = service_->GetJob("proj", "w");
  EXPECT_EQ(job->state, JobState::kCancelled);
  EXPECT_NE(job->error_message.find("maxWaitTime"), std::string::npos);
}

TEST_F(ServiceTest, StateSurvivesReopen) {
  ASSERT_TRUE(Create(ValidJob("keep")).ok());
  ASSERT_TRUE(Create(ValidJob("gone")).ok());
  ASSERT_TRUE(Cancel("gone").ok());
  std::promise<absl::StatusOr<model::Project>> p;
  service_->GetConfig("proj", [&](absl::StatusOr<model::Project> r) { p.set_value(r); });
  const int64_t number = p.get_future().get()->number;
  Close();
  Open();
  EXPECT_EQ(service_->GetJob("proj", "keep")->state, JobState::kQueued);
  EXPECT_EQ(service_->GetJob("proj", "keep")->job_position, 1);
  EXPECT_EQ(service_->GetJob("proj", "gone")->state, JobState::kCancelled);
  std::promise<absl::StatusOr<model::Project>> q;
  service_->GetConfig("proj", [&](absl::StatusOr<model::Project> r) { q.set_value(r); });
  EXPECT_EQ(q.get_future().get()->number, number);
  // New jobs continue the sequence: newest first still holds.
  ASSERT_TRUE(Create(ValidJob("after")).ok());
  EXPECT_EQ(service_->ListJobs("proj", {})->jobs.front().job_id, "after");
}


// An executor whose cluster manager queues and places jobs itself (as
// Slurm does): it records what the scheduler asks of it.
class DelegatingExecutor : public executor::Executor {
 public:
  absl::Status CheckRunnable(const model::Job&) const override { return absl::OkStatus(); }
  bool PlacesJobs() const override { return true; }
  void Launch(const model::Job& job, const model::JobDemand&, const model::Placement& placement) override {
    launched.push_back(job.job_id);
    EXPECT_TRUE(placement.replicas.empty());
  }
  void Cancel(const executor::JobRef& job, const std::string& reason) override {
    cancelled.push_back(job.job_id + ": " + reason);
  }
  std::optional<model::Placement> Recover(const model::Job&) override { return model::Placement{}; }
  std::vector<std::string> launched, cancelled;
};

class DelegatingServiceTest : public ServiceTest {
 protected:
  void SetUp() override {
    executor_ = &exec_;
    ServiceTest::SetUp();
  }
  DelegatingExecutor exec_;
};

TEST_F(DelegatingServiceTest, JobsGoToTheExecutorAtOnceAndShowWhyTheyWait) {
  ASSERT_TRUE(Create(ValidJob("a")).ok());
  ASSERT_TRUE(Create(ValidJob("b", 0, "1800s")).ok());
  EXPECT_EQ(exec_.launched, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(service_->GetJob("proj", "a")->state, JobState::kQueued);  // not PREPARING: Slurm decides
  scheduler_->JobWaiting({"proj", "a"}, "Waiting in the Slurm queue: Resources");
  scheduler_->RunPending();
  auto a = service_->GetJob("proj", "a");
  EXPECT_EQ(a->state, JobState::kQueued);
  EXPECT_EQ(a->error_message, "Waiting in the Slurm queue: Resources");
  scheduler_->JobPreparing({"proj", "a"});
  scheduler_->RunPending();
  EXPECT_EQ(service_->GetJob("proj", "a")->state, JobState::kPreparing);
  EXPECT_EQ(service_->GetJob("proj", "a")->error_message, "");  // the reason no longer holds
  scheduler_->JobStarted({"proj", "a"});
  scheduler_->RunPending();
  EXPECT_EQ(service_->GetJob("proj", "a")->state, JobState::kRunning);
  // Requeued by Slurm (node failure with --requeue): QUEUED again, with why.
  scheduler_->JobWaiting({"proj", "a"}, "Requeued by Slurm (REQUEUED)");
  scheduler_->RunPending();
  EXPECT_EQ(service_->GetJob("proj", "a")->state, JobState::kQueued);
  EXPECT_EQ(service_->GetJob("proj", "a")->error_message, "Requeued by Slurm (REQUEUED)");
  // maxWaitTime still holds for a job waiting in Slurm: the executor is told to stop it.
  clock_.Advance(absl::Seconds(1800));
  scheduler_->Tick();
  scheduler_->RunPending();
  ASSERT_EQ(exec_.cancelled.size(), 1u);
  EXPECT_NE(exec_.cancelled[0].find("b: The job was not started within its scheduling.maxWaitTime"), std::string::npos);
  EXPECT_EQ(service_->GetJob("proj", "b")->state, JobState::kCancelling);
  scheduler_->JobEnded({"proj", "b"}, executor::Outcome::kStopped, "");
  scheduler_->RunPending();
  EXPECT_EQ(service_->GetJob("proj", "b")->state, JobState::kCancelled);
}

}  // namespace
}  // namespace mle::service
