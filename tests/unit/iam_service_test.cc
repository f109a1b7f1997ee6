// IamService over a real SqliteStore and a fake clock: tokens expire at
// their time and not before, die with their principal and their job, and
// everything survives a reopen; a stale etag changes nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "common/clock.h"
#include "db/store.h"
#include "iam/iam_service.h"

namespace mle::iam {
namespace {

namespace fs = std::filesystem;

template <class T>
T Wait(std::function<void(std::function<void(T)>)> call) {
  std::promise<T> p;
  call([&p](T v) { p.set_value(std::move(v)); });
  return p.get_future().get();
}

class IamServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_iam_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Open();
  }
  void TearDown() override {
    iam_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void Open() {
    iam_.reset();
    store_.reset();
    auto store = db::OpenSqliteStore({(dir_ / "mlengine.db").string(), true});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    iam_ = std::make_unique<IamService>(*store_, clock_, "operator-token");
    ASSERT_TRUE(iam_->Recover().ok());
  }
  User CreateUser(const std::string& email) {
    auto u = Wait<absl::StatusOr<User>>([&](auto done) { iam_->CreateUser(email, done); });
    EXPECT_TRUE(u.ok()) << u.status();
    return *u;
  }
  IssuedToken Issue(const std::string& email, absl::Duration lifetime, const std::string& purpose) {
    auto t = Wait<absl::StatusOr<IssuedToken>>(
        [&](auto done) { iam_->IssueToken(Principal::User(email), lifetime, purpose, done); });
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }

  fs::path dir_;
  common::FakeClock clock_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<IamService> iam_;
};

TEST_F(IamServiceTest, TokensExpireAtTheirTimeAndSurviveAReopen) {
  CreateUser("a@example.com");
  const IssuedToken t = Issue("a@example.com", absl::Hours(1), "user");
  EXPECT_EQ(t.expire_time, clock_.Now() + absl::Hours(1));
  EXPECT_EQ(iam_->Authenticate(t.token).value(), Principal::User("a@example.com"));
  EXPECT_EQ(iam_->Authenticate("operator-token").value(), Principal::Operator());
  Open();  // what was durable is back
  clock_.Advance(absl::Minutes(59));
  EXPECT_TRUE(iam_->Authenticate(t.token).ok());
  clock_.Advance(absl::Minutes(1));
  const auto expired = iam_->Authenticate(t.token);
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(std::string(expired.status().message()).find("expired"), std::string::npos) << expired.status();
  EXPECT_EQ(iam_->Authenticate("mle1.forged").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(IamServiceTest, TokensDieWithTheirPrincipalAndTheirPurpose) {
  CreateUser("b@example.com");
  const IssuedToken job = Issue("b@example.com", absl::Hours(2), JobTokenPurpose("p", "j"));
  const IssuedToken other = Issue("b@example.com", absl::Hours(2), JobTokenPurpose("p", "k"));
  EXPECT_TRUE(Wait<absl::Status>([&](auto done) { iam_->RevokeTokens(JobTokenPurpose("p", "j"), done); }).ok());
  EXPECT_FALSE(iam_->Authenticate(job.token).ok());
  EXPECT_TRUE(iam_->Authenticate(other.token).ok());
  EXPECT_TRUE(Wait<absl::Status>([&](auto done) { iam_->DeleteUser("b@example.com", done); }).ok());
  EXPECT_FALSE(iam_->Authenticate(other.token).ok());
  Open();
  EXPECT_FALSE(iam_->Authenticate(other.token).ok());
}

TEST_F(IamServiceTest, AStaleEtagChangesNothing) {
  CreateUser("c@example.com");
  const Resource project = Resource::Project("p");
  const Policy empty = iam_->GetPolicy(project);
  Policy grant{1, {{"roles/viewer", {"user:c@example.com"}}}};
  auto set = Wait<absl::StatusOr<Policy>>(
      [&](auto done) { iam_->SetPolicy(Principal::Operator(), project, grant, EtagOf(empty.revision), done); });
  ASSERT_TRUE(set.ok()) << set.status();
  auto stale = Wait<absl::StatusOr<Policy>>(
      [&](auto done) { iam_->SetPolicy(Principal::Operator(), project, Policy{}, EtagOf(empty.revision), done); });
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(iam_->GetPolicy(project), *set);
  EXPECT_TRUE(iam_->Authorize(Principal::User("c@example.com"), perm::kJobsList, Resource::Job("p", "j")).ok());
  Open();
  EXPECT_EQ(iam_->GetPolicy(project), *set);
}

}  // namespace
}  // namespace mle::iam
