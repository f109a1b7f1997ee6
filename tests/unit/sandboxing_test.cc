// Sandboxing::BeginJob: where a job's /etc/passwd and /etc/group come from.
// A local job uses its identity's pair, made once per identity by this
// server (no file per start); a Slurm job's are in its run directory, where
// the node reads them.
#include "executor/sandboxing.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class BeginJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("begin-job-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "run");
    runtime_.identities = &pool_;
    runtime_.identity_dir = (root_ / "identities").string();
    job_.project = "p";
    job_.job_id = "j";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  sandbox::IdentityPool pool_{600000, 1};  // one identity: every job gets it again
  SandboxRuntime runtime_;
  model::Job job_;
};

TEST_F(BeginJobTest, PerIdentityFilesAreMadeOnceAndShared) {
  Sandboxing sandboxing(runtime_);
  const std::string run = (root_ / "run").string();
  absl::StatusOr<JobSandbox> first = sandboxing.BeginJob(job_, run, PasswdFiles::kPerIdentity);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->uid, 600000u);
  EXPECT_EQ(first->passwd, runtime_.identity_dir + "/passwd-600000");
  EXPECT_EQ(first->group, runtime_.identity_dir + "/group-600000");
  EXPECT_NE(Read(first->passwd).find("mlengine-job:x:600000:600000:"), std::string::npos) << Read(first->passwd);
  EXPECT_NE(Read(first->group).find("mlengine-job:x:600000:"), std::string::npos) << Read(first->group);
  EXPECT_FALSE(fs::exists(root_ / "run" / "passwd"));
  const ino_t inode = Inode(first->passwd);

  pool_.Release(first->uid, JobCgroup("p", "j"));  // the identity goes back, as when the job ends
  model::Job next = job_;
  next.job_id = "k";
  absl::StatusOr<JobSandbox> second = sandboxing.BeginJob(next, run, PasswdFiles::kPerIdentity);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->passwd, first->passwd);
  EXPECT_EQ(Inode(second->passwd), inode);  // not written again

  // Another server (a restart) writes them again: the host's files may have changed.
  Sandboxing restarted(runtime_);
  pool_.Release(second->uid, JobCgroup("p", "k"));
  absl::StatusOr<JobSandbox> third = restarted.BeginJob(job_, run, PasswdFiles::kPerIdentity);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_NE(Inode(third->passwd), inode);
}

TEST_F(BeginJobTest, RunDirectoryFilesForASlurmJobOrWithoutAnIdentityDirectory) {
  for (const bool without_dir : {false, true}) {
    SCOPED_TRACE(without_dir ? "no identity_dir" : "run directory asked for");
    SandboxRuntime runtime = runtime_;
    if (without_dir) runtime.identity_dir.clear();
    Sandboxing sandboxing(runtime);
    const std::string run = (root_ / "run").string();
    absl::StatusOr<JobSandbox> begun = sandboxing.BeginJob(
        job_, run, without_dir ? PasswdFiles::kPerIdentity : PasswdFiles::kRunDirectory);
    ASSERT_TRUE(begun.ok()) << begun.status();
    EXPECT_EQ(begun->passwd, "");
    EXPECT_NE(Read(run + "/passwd").find("mlengine-job:x:600000:"), std::string::npos);
    EXPECT_NE(Read(run + "/group").find("mlengine-job:x:600000:"), std::string::npos);
    pool_.Release(begun->uid, JobCgroup("p", "j"));
    fs::remove(root_ / "run" / "passwd");
    fs::remove(root_ / "run" / "group");
  }
}

}  // namespace
}  // namespace mle::executor
