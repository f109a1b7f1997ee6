// Sandboxing: where a job's /etc/passwd and /etc/group come from. No file
// is made for them, on any executor: BeginJob takes the identity, and the
// replica's spec carries the two texts (the host's with the job's identity
// added), which the sandbox writes on the view's own tmpfs.
#include "executor/sandboxing.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sandbox/spec.h"

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file below `dir`, relative.
std::vector<std::string> Files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) out.push_back(fs::relative(e.path(), dir).string());
  }
  return out;
}

class BeginJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("begin-job-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "run");
    runtime_.identities = &pool_;
    job_.project = "p";
    job_.job_id = "j";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  sandbox::IdentityPool pool_{600000, 1};  // one identity: every job gets it again
  SandboxRuntime runtime_;
  model::Job job_;
};

TEST_F(BeginJobTest, TakesTheIdentityAndWritesNothing) {
  Sandboxing sandboxing(runtime_);
  absl::StatusOr<JobSandbox> begun = sandboxing.BeginJob(job_);
  ASSERT_TRUE(begun.ok()) << begun.status();
  EXPECT_EQ(begun->uid, 600000u);
  EXPECT_TRUE(Files(root_).empty());
  model::Job other = job_;
  other.job_id = "k";
  EXPECT_EQ(sandboxing.BeginJob(other).status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<JobSandbox> again = sandboxing.BeginJob(job_);  // a resubmission keeps it
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->uid, 600000u);
}

TEST_F(BeginJobTest, TheSpecCarriesPasswdAndGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the replica's directories to its identity";
  // A fake cgroup v1 tree of plain files (sandbox/cgroups.h's fs_prefix).
  const std::string cg = (root_ / "cg").string();
  for (const char* c : {"cpu", "memory", "pids"}) fs::create_directories(root_ / "cg/sys/fs/cgroup" / c);
  auto cgroups = sandbox::Cgroups::Detect(
      "1:cpu:/\n2:memory:/\n3:pids:/\n",
      "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
      cg);
  ASSERT_TRUE(cgroups.ok()) << cgroups.status();
  runtime_.cgroups = &*cgroups;
  Sandboxing sandboxing(runtime_);
  absl::StatusOr<JobSandbox> begun = sandboxing.BeginJob(job_);
  ASSERT_TRUE(begun.ok()) << begun.status();
  const std::string run = (root_ / "run").string();
  absl::StatusOr<std::string> text =
      sandboxing.PrepareReplica(*begun, "p", "j", run, "master-replica-0", model::ReplicaDemand{}, {}, {}, "");
  ASSERT_TRUE(text.ok()) << text.status();
  sandbox::SandboxSpec spec;
  std::string error;
  ASSERT_TRUE(sandbox::ParseSpec(*text, &spec, &error)) << error;
  absl::StatusOr<std::string> path = Sandboxing::WriteSpecFile(run, "master-replica-0", *text);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(Read(*path), *text) << "the file for what reads it by path holds the same spec";
  EXPECT_EQ(fs::status(*path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  std::map<std::string, std::string> files;
  for (const auto& e : spec.view) {
    if (e.kind == sandbox::ViewEntry::Kind::kFile) files[e.target] = e.source;
  }
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files["/etc/passwd"].find("\nmlengine-job:x:600000:600000:"), std::string::npos) << files["/etc/passwd"];
  EXPECT_NE(files["/etc/passwd"].find("root:x:0:0:"), std::string::npos) << "the host's users stay";
  EXPECT_NE(files["/etc/group"].find("mlengine-job:x:600000:"), std::string::npos) << files["/etc/group"];
  for (const std::string& f : Files(root_ / "run")) {
    EXPECT_EQ(f.find("passwd"), std::string::npos) << f;
    EXPECT_EQ(f.find("group"), std::string::npos) << f;
  }
}

}  // namespace
}  // namespace mle::executor
