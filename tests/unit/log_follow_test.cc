// LogService::Follow with its real collaborators (JobService over SQLite in
// a temp dir, the replica's log files, the directory watch): pages as lines
// are written, one shared page for followers at the same place, a slow
// follower given everything at once when it is ready, the job's end, and
// the errors a follow starts with.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include "common/run_layout.h"
#include "rundir/replica_files.h"
#include "service/job_service.h"
#include "service/log_service.h"
#include "service_fixture.h"

namespace mle::service {
namespace {

namespace fs = std::filesystem;

// A follower that records what it is sent; Ready() as the test sets it.
class RecordingFollower : public LogFollower {
 public:
  bool Ready() const override { return ready_; }
  bool Gone() const override { return gone_; }
  void Send(std::shared_ptr<const SharedPage> page) override {
    std::lock_guard<std::mutex> lock(mu_);
    pages_.push_back(std::move(page));
    cv_.notify_all();
  }
  void End(absl::Status status) override {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = status;
    cv_.notify_all();
  }
  // Waits (up to 10 s) until `done` holds, with the lock held.
  template <class Pred>
  bool WaitFor(Pred done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done(); });
  }
  // Every message sent so far, in order.
  std::vector<std::string> Messages() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& p : pages_) {
      for (const auto& e : p->result().page.entries) out.push_back(e.message);
    }
    return out;
  }
  size_t Pages() {
    std::lock_guard<std::mutex> lock(mu_);
    return pages_.size();
  }
  std::shared_ptr<const SharedPage> Page(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return pages_.at(i);
  }
  std::optional<absl::Status> end() {
    std::lock_guard<std::mutex> lock(mu_);
    return end_;
  }

  std::atomic<bool> ready_{true};
  std::atomic<bool> gone_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<const SharedPage>> pages_;
  std::optional<absl::Status> end_;
};

size_t CountMessages(const std::vector<std::shared_ptr<const SharedPage>>& pages) {
  size_t n = 0;
  for (const auto& p : pages) n += p->result().page.entries.size();
  return n;
}

class LogFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mle::testing::FreshTestDirectory("mle_log_follow_test");
    fs::create_directories(dir_ / "runs");
    store_ = *db::OpenSqliteStore({(dir_ / "mlengine.db").string(), true});
    jobs_ = std::make_unique<JobService>(*store_, clock_, validate::Config::Defaults());
    scheduler_ = std::make_unique<scheduler::Scheduler>(clock_, *jobs_, executor_);
    jobs_->AttachScheduler(scheduler_.get());
    ASSERT_TRUE(jobs_->Recover().ok());
    std::promise<absl::StatusOr<model::Job>> created;
    jobs_->CreateJob("proj", mle::testing::BasicPackageJob("a"), [&](absl::StatusOr<model::Job> r) { created.set_value(std::move(r)); });
    ASSERT_TRUE(created.get_future().get().ok());
    log_ = common::JobRunDir((dir_ / "runs").string(), "proj", "a", 1) + "/master-replica-0/log";
    fs::create_directories(fs::path(log_).parent_path());
    Write("before 1");
    Write("before 2");
    logs_ = std::make_unique<LogService>(*jobs_, logs::LogReader((dir_ / "runs").string()));
  }
  void TearDown() override {
    logs_.reset();
    scheduler_.reset();
    jobs_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void Write(const std::string& line) { ASSERT_TRUE(rundir::AppendLogLine(log_, false, line).ok()); }
  void CancelJob() {
    std::promise<absl::Status> done;
    jobs_->CancelJob("proj", "a", [&](absl::Status s) { done.set_value(s); });
    ASSERT_TRUE(done.get_future().get().ok());
    scheduler_->RunPending();
  }

  fs::path dir_;
  std::string log_;
  executor::Executor* executor_ = nullptr;
  common::FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<LogService> logs_;
};

TEST_F(LogFollowTest, PagesComeAsLinesAreWrittenAndTheFollowEndsWithTheJob) {
  auto f = std::make_shared<RecordingFollower>();
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, f).ok());
  // The first page at once: what was written before.
  EXPECT_EQ(f->Messages(), (std::vector<std::string>{"before 1", "before 2"}));
  Write("after 1");
  ASSERT_TRUE(f->WaitFor([&] { return CountMessages(f->pages_) == 3; }));
  Write("after 2");
  ASSERT_TRUE(f->WaitFor([&] { return CountMessages(f->pages_) == 4; }));
  EXPECT_EQ(f->Messages(), (std::vector<std::string>{"before 1", "before 2", "after 1", "after 2"}));
  EXPECT_FALSE(f->end().has_value());
  CancelJob();
  ASSERT_TRUE(f->WaitFor([&] { return f->end_.has_value(); }));
  EXPECT_TRUE(f->end()->ok()) << *f->end();
  EXPECT_TRUE(f->Page(f->Pages() - 1)->result().job_ended);
  for (size_t i = 0; i + 1 < f->Pages(); ++i) EXPECT_FALSE(f->Page(i)->result().job_ended);
}

TEST_F(LogFollowTest, FollowersAtTheSamePlaceShareOnePage) {
  std::vector<std::shared_ptr<RecordingFollower>> followers;
  for (int i = 0; i < 5; ++i) {
    followers.push_back(std::make_shared<RecordingFollower>());
    LogRequest from_now;
    from_now.page_token = "end";
    ASSERT_TRUE(logs_->Follow("proj", "a", from_now, followers.back()).ok());
  }
  Write("shared");
  for (auto& f : followers) ASSERT_TRUE(f->WaitFor([&] { return CountMessages(f->pages_) == 1; }));
  const auto page = followers[0]->Page(followers[0]->Pages() - 1);
  for (auto& f : followers) EXPECT_EQ(f->Page(f->Pages() - 1), page) << "one page, not a copy each";
  int encoded = 0;
  for (auto& f : followers) {
    (void)f;
    page->Encoded("test", [&](const LogResult&) {
      ++encoded;
      return std::string("x");
    });
  }
  EXPECT_EQ(encoded, 1);
}

TEST_F(LogFollowTest, ASlowFollowerIsSentNothingUntilReadyThenEverythingAtOnce) {
  auto f = std::make_shared<RecordingFollower>();
  auto fast = std::make_shared<RecordingFollower>();
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, f).ok());
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, fast).ok());
  ASSERT_EQ(f->Pages(), 1u);
  f->ready_ = false;  // still taking its first page
  Write("1");
  Write("2");
  Write("3");
  // The fast follower beside it, woken by the same writes, gets them: the
  // slow one has been looked at by now.
  ASSERT_TRUE(fast->WaitFor([&] { return CountMessages(fast->pages_) == 5; }));
  EXPECT_EQ(f->Pages(), 1u);
  f->ready_ = true;
  ASSERT_TRUE(f->WaitFor([&] { return CountMessages(f->pages_) == 5; }));
  EXPECT_EQ(f->Pages(), 2u) << "the three lines in one page";
  EXPECT_EQ(f->Messages(), (std::vector<std::string>{"before 1", "before 2", "1", "2", "3"}));
}

TEST_F(LogFollowTest, AFollowerThatHasGoneIsDroppedAndOthersGoOn) {
  auto gone = std::make_shared<RecordingFollower>();
  auto stays = std::make_shared<RecordingFollower>();
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, gone).ok());
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, stays).ok());
  gone->gone_ = true;
  Write("later");
  ASSERT_TRUE(stays->WaitFor([&] { return CountMessages(stays->pages_) == 3; }));
  EXPECT_EQ(gone->Pages(), 1u);
  EXPECT_FALSE(gone->end().has_value());
}

TEST_F(LogFollowTest, AFollowThatCannotStartIsAnErrorAndSendsNothing) {
  auto f = std::make_shared<RecordingFollower>();
  EXPECT_EQ(logs_->Follow("proj", "nope", {}, f).code(), absl::StatusCode::kNotFound);
  LogRequest bad;
  bad.page_token = "not a token!";
  EXPECT_EQ(logs_->Follow("proj", "a", bad, f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->Pages(), 0u);
  EXPECT_FALSE(f->end().has_value());
}

TEST_F(LogFollowTest, AFollowOfAnEndedJobIsOnePageAndTheEnd) {
  CancelJob();
  auto f = std::make_shared<RecordingFollower>();
  ASSERT_TRUE(logs_->Follow("proj", "a", {}, f).ok());
  ASSERT_EQ(f->Pages(), 1u);
  EXPECT_TRUE(f->Page(0)->result().job_ended);
  EXPECT_EQ(f->Messages(), (std::vector<std::string>{"before 1", "before 2"}));
  ASSERT_TRUE(f->end().has_value());
  EXPECT_TRUE(f->end()->ok());
}

}  // namespace
}  // namespace mle::service
