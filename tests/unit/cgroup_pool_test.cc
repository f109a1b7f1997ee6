// CgroupPool (src/sandbox/cgroup_pool.h): which groups are used again and
// which are removed, on fake cgroup trees (plain directories and files laid
// out as the kernel shows them) and, as root on a host with the cgroup v1
// controllers, on the kernel's.
#include "sandbox/cgroup_pool.h"
#include "cgroup_fake_host.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace mle::sandbox {
namespace {

namespace fs = std::filesystem;

using namespace mle::sandbox::testing;  // NOLINT: the fake host and its helpers

// The kernel's counters of a group, as a replica that ended leaves them.
void Counters(const FakeHost& host, const std::string& name, int oom_kills = 0, int pids_denied = 0, int tasks = 0,
              int64_t peak = 4096) {
  WriteText(host.Dir(name, "memory") + "/memory.oom_control", absl::StrCat("oom_kill_disable 0\noom_kill ", oom_kills));
  WriteText(host.Dir(name, "memory") + "/memory.max_usage_in_bytes", absl::StrCat(peak));
  WriteText(host.Dir(name, "pids") + "/pids.events", absl::StrCat("max ", pids_denied));
  WriteText(host.Dir(name, "pids") + "/pids.current", absl::StrCat(tasks));
}

// The group's directory in every controller.
bool Exists(const FakeHost& host, const std::string& name) {
  for (const char* c : {"cpu", "memory", "pids"}) {
    if (!fs::is_directory(host.Dir(name, c))) return false;
  }
  return true;
}

constexpr CgroupLimits kLimits = {1000, 512, 4096};

TEST(CgroupPoolFake, AnEndedReplicasGroupServesTheNextReplicaOfItsProject) {
  FakeHost host(CgroupVersion::kV1);
  CgroupPool pool(*host.cgroups);
  absl::StatusOr<std::vector<std::string>> first = pool.Acquire("p/a.master-replica-0", kLimits);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, host.cgroups->Dirs("p/a.master-replica-0"));
  Counters(host, "p/a.master-replica-0", 0, 0, 0, 1 << 20);
  ASSERT_TRUE(pool.Release("p/a.master-replica-0").ok());
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_FALSE(fs::exists(host.Dir("p/a.master-replica-0", "memory")));
  EXPECT_TRUE(Exists(host, "p/.spare-0"));

  // The next replica of project p takes it: renamed, its peak started again,
  // and its limits (the same) left as they are.
  WriteText(host.Dir("p/.spare-0", "pids") + "/pids.max", "as left");
  absl::StatusOr<std::vector<std::string>> second = pool.Acquire("p/b.master-replica-0", kLimits);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, host.cgroups->Dirs("p/b.master-replica-0"));
  EXPECT_EQ(pool.spares(), 0u);
  EXPECT_FALSE(fs::exists(host.Dir("p/.spare-0", "memory")));
  EXPECT_EQ(ReadText(host.Dir("p/b.master-replica-0", "memory") + "/memory.max_usage_in_bytes"), "0");
  EXPECT_EQ(ReadText(host.Dir("p/b.master-replica-0", "pids") + "/pids.max"), "as left");

  // Other limits are written.
  ASSERT_TRUE(pool.Release("p/b.master-replica-0").ok());
  ASSERT_TRUE(pool.Acquire("p/c.master-replica-0", {500, 64, 16}).ok());
  EXPECT_EQ(ReadText(host.Dir("p/c.master-replica-0", "pids") + "/pids.max"), "16");
  EXPECT_EQ(ReadText(host.Dir("p/c.master-replica-0", "cpu") + "/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(ReadText(host.Dir("p/c.master-replica-0", "memory") + "/memory.limit_in_bytes"), "67108864");
}

TEST(CgroupPoolFake, OnlyACleanGroupOfAKnownReplicaIsKept) {
  struct Row {
    std::string name;
    int oom_kills, pids_denied, tasks;
    bool acquired;  // through the pool (its limits known)
    bool kept;
  };
  const Row rows[] = {
      {"ended cleanly", 0, 0, 0, true, true},
      {"a process killed at the memory limit", 1, 0, 0, true, false},
      {"a fork refused at the pids limit", 0, 2, 0, true, false},
      {"a task still in it", 0, 0, 1, true, false},
      {"made before a restart (limits unknown)", 0, 0, 0, false, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    FakeHost host(CgroupVersion::kV1);
    CgroupPool pool(*host.cgroups);
    const std::string name = "p/j.master-replica-0";
    ASSERT_TRUE((row.acquired ? pool.Acquire(name, kLimits) : host.cgroups->Create(name, kLimits)).ok());
    Counters(host, name, row.oom_kills, row.pids_denied, row.tasks);
    (void)pool.Release(name);  // a fake tree's files make a removal fail; the name says what happened
    EXPECT_EQ(pool.spares(), row.kept ? 1u : 0u);
    EXPECT_EQ(Exists(host, "p/.spare-0"), row.kept);
    EXPECT_EQ(Exists(host, name), !row.kept);
  }
}

TEST(CgroupPoolFake, SparesServeTheirOwnParentAndAreBounded) {
  FakeHost host(CgroupVersion::kV1);
  CgroupPool pool(*host.cgroups, /*max_spares=*/1);
  for (const char* name : {"p/a.master-replica-0", "p/b.master-replica-0"}) {
    ASSERT_TRUE(pool.Acquire(name, kLimits).ok());
    Counters(host, name);
  }
  ASSERT_TRUE(pool.Release("p/a.master-replica-0").ok());
  (void)pool.Release("p/b.master-replica-0");  // over the bound: removed (a fake's removal fails)
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_TRUE(Exists(host, "p/b.master-replica-0"));

  // Project q makes its own; p's spare waits for p.
  ASSERT_TRUE(pool.Acquire("q/c.master-replica-0", kLimits).ok());
  EXPECT_EQ(pool.spares(), 1u);
  EXPECT_TRUE(Exists(host, "p/.spare-0"));

  // A group without a parent is never kept (a spare must share it).
  ASSERT_TRUE(pool.Acquire("top", kLimits).ok());
  Counters(host, "top");
  (void)pool.Release("top");
  EXPECT_EQ(pool.spares(), 1u);
}

TEST(CgroupPoolFake, AReleaseOfAGroupNeverMadeIsOk) {
  FakeHost host(CgroupVersion::kV1);
  CgroupPool pool(*host.cgroups);
  EXPECT_TRUE(pool.Release("p/never.master-replica-0").ok());
  ASSERT_TRUE(pool.Acquire("p/made.master-replica-0", kLimits).ok());
  ASSERT_TRUE(fs::remove_all(fs::path(host.Dir("p/made.master-replica-0", "memory"))) > 0);
  EXPECT_TRUE(pool.Release("p/made.master-replica-0").ok());
  EXPECT_EQ(pool.spares(), 0u);
}

TEST(CgroupPoolFake, OnCgroupV2EveryGroupIsMadeAndRemoved) {
  FakeHost host(CgroupVersion::kV2);
  ASSERT_TRUE(host.cgroups->Prepare().ok());
  CgroupPool pool(*host.cgroups);
  ASSERT_TRUE(pool.Acquire("p/a.master-replica-0", kLimits).ok());
  (void)pool.Release("p/a.master-replica-0");
  EXPECT_EQ(pool.spares(), 0u);
  EXPECT_FALSE(fs::exists(host.Dir("p/.spare-0", "memory")));
}

// ---- The kernel: cgroup v1 as on this host (root only) ---------------------

class CgroupPoolKernel : public CgroupsV1KernelTest {
 protected:
  CgroupPoolKernel() : CgroupsV1KernelTest("cgroup_pool_test") {}

  void SetUp() override {
    CgroupsV1KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    pool_.emplace(*cgroups_);
  }

  void TearDown() override {
    pool_.reset();
    CgroupsV1KernelTest::TearDown();  // its spares go with the test's group
  }

  static ino_t Inode(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  std::optional<CgroupPool> pool_;
};

TEST_F(CgroupPoolKernel, TheKernelsGroupIsRenamedForTheNextReplicaAndItsLimitsHold) {
  const std::string a = Group("a.master-replica-0"), b = Group("b.master-replica-0");
  absl::StatusOr<std::vector<std::string>> dirs = pool_->Acquire(a, {500, 64, 16});
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  const ino_t memory_inode = Inode((*dirs)[1]);
  const pid_t done = ForkInGroup(*dirs, [] { return 0; });
  ASSERT_GT(done, 0);
  EXPECT_EQ(WEXITSTATUS(WaitFor(done)), 0);
  ASSERT_TRUE(pool_->Release(a).ok());
  EXPECT_EQ(pool_->spares(), 1u);
  for (const std::string& dir : *dirs) EXPECT_FALSE(fs::exists(dir)) << dir;

  // Memory enough for a hundred forks of this process (under
  // AddressSanitizer too): the bomb below meets the process limit first.
  absl::StatusOr<std::vector<std::string>> again = pool_->Acquire(b, {2000, 2048, 100});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, cgroups_->Dirs(b));
  EXPECT_EQ(Inode((*again)[1]), memory_inode);  // the same group
  EXPECT_EQ(pool_->spares(), 0u);
  EXPECT_EQ(ReadText((*again)[0] + "/cpu.cfs_quota_us"), "200000");
  EXPECT_EQ(ReadText((*again)[1] + "/memory.limit_in_bytes"), "2147483648");
  EXPECT_EQ(ReadText((*again)[2] + "/pids.max"), "100");
  absl::StatusOr<CgroupUsage> usage = cgroups_->Usage(b);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->tasks, 0);
  EXPECT_EQ(usage->oom_kills, 0);

  // A replica in it is limited by it: a fork bomb stops at 100 tasks.
  const pid_t bomb = ForkInGroup(
      *again,
      [] {
        int made = 0;
        for (int i = 0; i < 200; ++i) {
          const pid_t p = ::fork();
          if (p == 0) {
            ::pause();
            ::_exit(0);
          }
          if (p < 0) break;
          ++made;
        }
        ::kill(0, SIGKILL);
        return made < 200 ? 0 : 1;
      });
  ASSERT_GT(bomb, 0);
  ::setpgid(bomb, bomb);
  WaitFor(bomb);
  usage = cgroups_->Usage(b);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_GT(usage->pids_denied, 0);
  // Its forks were refused: the group is not kept, and whatever is left in
  // it is killed.
  ASSERT_TRUE(pool_->Release(b).ok());
  EXPECT_EQ(pool_->spares(), 0u);
  for (const std::string& dir : *again) EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST_F(CgroupPoolKernel, AGroupWithAProcessLeftIsRemovedAndTheProcessKilled) {
  const std::string name = Group("left.master-replica-0");
  absl::StatusOr<std::vector<std::string>> dirs = pool_->Acquire(name, {500, 64, 16});
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  const pid_t stays = ForkInGroup(*dirs, [] { return ::pause(); });
  ASSERT_GT(stays, 0);
  ASSERT_TRUE(pool_->Release(name).ok());
  const int status = WaitFor(stays);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ(pool_->spares(), 0u);
  for (const std::string& dir : *dirs) EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST_F(CgroupPoolKernel, RemoveSparesTakesThisPoolsAndAnEarlierOnes) {
  const std::vector<std::string> leaves = {"x.master-replica-0", "y.master-replica-0"};
  for (const std::string& leaf : leaves) ASSERT_TRUE(pool_->Acquire(Group(leaf), {}).ok());
  for (const std::string& leaf : leaves) ASSERT_TRUE(pool_->Release(Group(leaf)).ok());
  EXPECT_EQ(pool_->spares(), 2u);
  // A pool of a restarted mlengined finds them. (At least them: it sweeps
  // the host's whole mlengine tree, where an mlengined of the e2e tests
  // running beside this one may have left spares of its own; the loop
  // below checks that none of this test's is left.)
  CgroupPool restarted(*cgroups_);
  EXPECT_GE(restarted.RemoveSpares(), 2u);
  EXPECT_EQ(pool_->RemoveSpares(), 0u);
  EXPECT_EQ(pool_->spares(), 0u);
  for (const std::string& leaf : cgroups_->List()) {
    EXPECT_FALSE(absl::StartsWith(leaf, top_ + "/")) << leaf;
  }
}

}  // namespace
}  // namespace mle::sandbox
