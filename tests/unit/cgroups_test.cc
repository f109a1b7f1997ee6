// Cgroups as data: detection on the texts of /proc/self/cgroup and
// /proc/self/mountinfo (this host's hybrid layout, pure v2, broken hosts),
// limits, usage and listing on fake trees of plain files laid out as the
// kernel shows them, and, where the test runs as root on a host with the v1
// controllers, the kernel itself enforcing the limits on forked children.
#include "sandbox/cgroups.h"
#include "cgroup_fake_host.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace mle::sandbox {
namespace {

using namespace mle::sandbox::testing;  // NOLINT: the fake host and its helpers

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---- This host's real layout (captured on the development VM) -------------


// An older systemd host: cgroup v1 with cpu and cpuacct in one hierarchy.
constexpr char kV1CoMountedCgroup[] = R"(12:pids:/system.slice/mlengined.service
6:memory:/system.slice/mlengined.service
4:cpu,cpuacct:/system.slice/mlengined.service
1:name=systemd:/system.slice/mlengined.service
0::/system.slice/mlengined.service
)";
constexpr char kV1CoMountedMountinfo[] =
    R"(25 22 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
35 25 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:19 - cgroup cgroup rw,pids
)";

// A container whose cgroup mounts show only its own subtree (no cgroup
// namespace): the mount's root is the container's cgroup.
constexpr char kContainerCgroup[] = R"(5:pids:/docker/abc
4:memory:/docker/abc
3:cpu,cpuacct:/docker/abc
0::/docker/abc
)";
constexpr char kContainerMountinfo[] =
    R"(700 690 0:50 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct
701 690 0:51 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
702 690 0:52 /docker/abc /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids
)";

// ---- Helpers -----------------------------------------------------------------


std::string Expand(const std::string& s, const std::string& prefix) { return absl::StrReplaceAll(s, {{"$P", prefix}}); }

// ---- Detect --------------------------------------------------------------

struct DetectRow {
  std::string name;
  std::string proc_self_cgroup;
  std::string mountinfo;
  std::string controllers_at;  // under the prefix: a cgroup.controllers to write ("" none)
  std::string controllers;
  bool ok;
  CgroupVersion version;
  std::vector<std::string> dirs;  // of group "p/j/r", $P the prefix
  std::vector<std::string> message_has;
};

const std::vector<DetectRow>& DetectRows() {
  static const auto* rows = new std::vector<DetectRow>{
      {"this host (hybrid): v1, memory below its own cgroup",
       kHybridCgroup,
       kHybridMountinfo,
       "",
       "",
       true,
       CgroupVersion::kV1,
       {"$P/sys/fs/cgroup/cpu/mlengine/p/j/r",
        "$P/sys/fs/cgroup/memory/process_api/ccad0ab77607e67f7bf76283b494e183/mlengine/p/j/r",
        "$P/sys/fs/cgroup/pids/mlengine/p/j/r"},
       {}},
      {"pure v2 under systemd",
       kV2Cgroup,
       kV2Mountinfo,
       absl::StrCat(kV2Own, "/cgroup.controllers"),
       "cpuset cpu io memory pids\n",
       true,
       CgroupVersion::kV2,
       {absl::StrCat("$P", kV2Own, "/mlengine/p/j/r")},
       {}},
      {"pure v2, already moved into its leaf by Prepare",
       "0::/system.slice/mlengined.service/mlengined\n",
       kV2Mountinfo,
       absl::StrCat(kV2Own, "/cgroup.controllers"),
       "cpuset cpu io memory pids\n",
       true,
       CgroupVersion::kV2,
       {absl::StrCat("$P", kV2Own, "/mlengine/p/j/r")},
       {}},
      {"pure v2 in the root cgroup (a container with its own cgroup namespace)",
       "0::/\n",
       kV2Mountinfo,
       "/sys/fs/cgroup/cgroup.controllers",
       "cpu memory pids\n",
       true,
       CgroupVersion::kV2,
       {"$P/sys/fs/cgroup/mlengine/p/j/r"},
       {}},
      {"v1 with cpu,cpuacct in one hierarchy",
       kV1CoMountedCgroup,
       kV1CoMountedMountinfo,
       "",
       "",
       true,
       CgroupVersion::kV1,
       {"$P/sys/fs/cgroup/cpu,cpuacct/system.slice/mlengined.service/mlengine/p/j/r",
        "$P/sys/fs/cgroup/memory/system.slice/mlengined.service/mlengine/p/j/r",
        "$P/sys/fs/cgroup/pids/system.slice/mlengined.service/mlengine/p/j/r"},
       {}},
      {"v1 mounts rooted at the container's own cgroup",
       kContainerCgroup,
       kContainerMountinfo,
       "",
       "",
       true,
       CgroupVersion::kV1,
       {"$P/sys/fs/cgroup/cpu,cpuacct/mlengine/p/j/r", "$P/sys/fs/cgroup/memory/mlengine/p/j/r",
        "$P/sys/fs/cgroup/pids/mlengine/p/j/r"},
       {}},
      {"a mount point with an escaped space",
       "0::/svc\n",
       "24 23 0:22 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
       "/sys/fs/my cgroup/svc/cgroup.controllers",
       "cpu memory pids",
       true,
       CgroupVersion::kV2,
       {"$P/sys/fs/my cgroup/svc/mlengine/p/j/r"},
       {}},
      {"v2 without the memory controller",
       kV2Cgroup,
       kV2Mountinfo,
       absl::StrCat(kV2Own, "/cgroup.controllers"),
       "cpuset cpu io pids\n",
       false,
       CgroupVersion::kV2,
       {},
       {"cpu, memory and pids", "lists cpuset cpu io pids (missing memory)", "Delegate=yes",
        "`sandbox: {enabled: false}`"}},
      {"v2 whose cgroup.controllers cannot be read",
       kV2Cgroup,
       kV2Mountinfo,
       "",
       "",
       false,
       CgroupVersion::kV2,
       {},
       {"cgroup v2 at /sys/fs/cgroup, but cannot open", "cgroup.controllers"}},
      {"hybrid without the pids hierarchy, and an empty unified tree",
       "8:cpu:/\n4:memory:/\n0::/\n",
       "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
       "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
       "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
       "/sys/fs/cgroup/unified/cgroup.controllers",
       "",
       false,
       CgroupVersion::kV1,
       {},
       {"cgroup v1 cpu, memory (missing pids)", "lists no controller (missing cpu, memory, pids)"}},
      {"no cgroups at all",
       "",
       "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n",
       "",
       "",
       false,
       CgroupVersion::kV1,
       {},
       {"no cgroup v1 hierarchy of cpu, memory or pids", "no cgroup v2 mount", "Mount them",
        "`sandbox: {enabled: false}` in the configuration (jobs then run without limits or isolation)"}},
      {"a cgroup outside this namespace's view",
       "0::/../../other\n",
       kV2Mountinfo,
       "",
       "",
       false,
       CgroupVersion::kV2,
       {},
       {"no cgroup v2 mount holding this process's cgroup"}},
  };
  return *rows;
}

TEST(CgroupsDetect, Table) {
  for (const DetectRow& row : DetectRows()) {
    SCOPED_TRACE(row.name);
    TempDir tmp;
    if (!row.controllers_at.empty()) WriteText(tmp.path() + row.controllers_at, row.controllers);
    absl::StatusOr<Cgroups> cgroups = Cgroups::Detect(row.proc_self_cgroup, row.mountinfo, tmp.path());
    if (!row.ok) {
      ASSERT_FALSE(cgroups.ok());
      EXPECT_EQ(cgroups.status().code(), absl::StatusCode::kFailedPrecondition);
      for (const std::string& part : row.message_has) {
        EXPECT_THAT(std::string(cgroups.status().message()), HasSubstr(part));
      }
      continue;
    }
    ASSERT_TRUE(cgroups.ok()) << cgroups.status();
    EXPECT_EQ(cgroups->version(), row.version);
    std::vector<std::string> want;
    for (const std::string& d : row.dirs) want.push_back(Expand(d, tmp.path()));
    EXPECT_EQ(cgroups->Dirs("p/j/r"), want);
  }
}

TEST(CgroupsDetect, HostDetectsOrSaysWhy) {
  absl::StatusOr<Cgroups> cgroups = Cgroups::DetectHost();
  if (!cgroups.ok()) {
    EXPECT_EQ(cgroups.status().code(), absl::StatusCode::kFailedPrecondition) << cgroups.status();
    EXPECT_THAT(std::string(cgroups.status().message()), HasSubstr("sandbox: {enabled: false}"));
  }
}

// ---- favordynmods ---------------------------------------------------------

TEST(CgroupsFavorDynmods, MountDataKeepsTheRootsFlags) {
  struct Row {
    std::string name;
    std::string mountinfo;
    std::optional<std::string> data;
  };
  const std::string v2_on = absl::StrReplaceAll(kV2Mountinfo, {{"memory_recursiveprot", "memory_recursiveprot,favordynmods"}});
  const Row rows[] = {
      {"hybrid: an empty v2 tree with no flags", kHybridMountinfo, "favordynmods"},
      {"pure v2: its flags kept", kV2Mountinfo, "nsdelegate,memory_recursiveprot,favordynmods"},
      {"already on", v2_on, std::nullopt},
      {"read-only mount: ro is not a cgroup2 flag",
       "24 23 0:22 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 ro,nsdelegate\n", "nsdelegate,favordynmods"},
      {"no cgroup2 mounted (v1 only)", "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", "favordynmods"},
      {"a v1 hierarchy's options are not the v2 root's",
       "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,favordynmods\n", "favordynmods"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(FavorDynmodsMountData(row.mountinfo), row.data);
  }
}

// The kernel's flag is host-wide and this test leaves it on (as mlengined
// does): it checks that the first call turns it on or finds it on, that the
// v2 root then shows it, and that a second call has nothing to do.
TEST(CgroupsFavorDynmods, TurnsItOnOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount cgroup2";
  TempDir tmp;
  const std::string scratch = tmp.path() + "/cgroup2";
  absl::StatusOr<bool> first = TurnOnFavorDynmods(scratch);
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "this kernel does not take favordynmods: " << first.status();
  }
  EXPECT_FALSE(fs::exists(scratch)) << "the scratch mount point stays behind";
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(FavorDynmodsMountData(text.str()), std::nullopt) << text.str();
  absl::StatusOr<bool> again = TurnOnFavorDynmods(scratch);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
}

// ---- Names ----------------------------------------------------------------

TEST(CgroupsNames, Table) {
  struct Row {
    std::string name;
    bool valid;
  };
  const Row rows[] = {
      {"a", true},         {"proj/job/master-0", true},
      {"A.b_c-9/x", true}, {"..a/b..", true},
      {"", false},         {"/a", false},
      {"a/", false},       {"a//b", false},
      {".", false},        {"..", false},
      {"a/../b", false},   {"a/./b", false},
      {"a b", false},      {"a\nb", false},
      {"a:b", false},      {"caf\xc3\xa9", false},
      {"a/b\\c", false},   {"~", false},
  };
  TempDir tmp;
  WriteText(tmp.path() + kV2Own + "/cgroup.controllers", "cpu memory pids");
  absl::StatusOr<Cgroups> cgroups = Cgroups::Detect(kV2Cgroup, kV2Mountinfo, tmp.path());
  ASSERT_TRUE(cgroups.ok()) << cgroups.status();
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(cgroups->Dirs(row.name).empty(), !row.valid);
    EXPECT_EQ(cgroups->Create(row.name, {}).status().code(),
              row.valid ? absl::StatusCode::kOk : absl::StatusCode::kInvalidArgument);
    if (row.valid) continue;
    EXPECT_EQ(cgroups->Usage(row.name).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(cgroups->Remove(row.name).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(cgroups->Processes(row.name).empty());
  }
}

// ---- Fake trees: v1 (this host's layout) and v2 ------------------------------

// A Cgroups of `version` on plain files below a temp dir; its own cgroup
// directories exist (v2: with cgroup.procs holding `procs`).

TEST(CgroupsFakeV2, PrepareMovesItselfAndEnablesControllers) {
  FakeHost host(CgroupVersion::kV2, absl::StrCat(::getpid(), "\n"));
  ASSERT_TRUE(host.cgroups->Prepare().ok());
  ASSERT_TRUE(host.cgroups->Prepare().ok());  // idempotent
  EXPECT_EQ(ReadText(host.own + "/mlengined/cgroup.procs"), absl::StrCat(::getpid()));
  EXPECT_EQ(ReadText(host.own + "/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(host.own + "/mlengine/cgroup.subtree_control"), "+cpu +memory +pids");
}

TEST(CgroupsFakeV2, PrepareNamesTheFileItCannotWrite) {
  FakeHost host(CgroupVersion::kV2);
  fs::create_directories(host.own + "/cgroup.subtree_control");  // open for writing fails (EISDIR)
  absl::Status s = host.cgroups->Prepare();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(host.own + "/cgroup.subtree_control: Is a directory"));
}

// A parent that delegates less than the three (here: memory only, as a
// sandboxing agent's cgroup did on a GPU host) while the root offers them:
// without a fallback Prepare refuses as Detect used to; with one, mlengined
// takes a cgroup of its own at the root, and its groups go there.
TEST(CgroupsFakeV2, PrepareTakesAGroupOfItsOwnAtTheRootWhenItsOwnLacksControllers) {
  TempDir tmp;
  const std::string root = tmp.path() + "/sys/fs/cgroup";
  const std::string own = tmp.path() + kV2Own;
  WriteText(own + "/cgroup.controllers", "memory\n");
  WriteText(root + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");
  absl::StatusOr<Cgroups> cgroups = Cgroups::Detect(kV2Cgroup, kV2Mountinfo, tmp.path());
  ASSERT_TRUE(cgroups.ok()) << cgroups.status();

  Cgroups stays = *cgroups;
  absl::Status refused = stays.Prepare();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("lists memory (missing cpu, pids)"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("Delegate=yes"));
  EXPECT_EQ(stays.Prepare("a/b").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stays.Prepare("..").code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(cgroups->Prepare("mlengined-0123abcd").ok());
  const std::string moved = root + "/mlengined-0123abcd";
  EXPECT_EQ(ReadText(root + "/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(moved + "/mlengined/cgroup.procs"), absl::StrCat(::getpid()));
  EXPECT_EQ(ReadText(moved + "/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(moved + "/mlengine/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_FALSE(fs::exists(own + "/mlengined"));
  EXPECT_THAT(cgroups->Dirs("p/j/r"), ElementsAre(moved + "/mlengine/p/j/r"));
  EXPECT_THAT(cgroups->relocation(), HasSubstr("in " + moved + ", a cgroup of its own: cgroup v2 at /sys/fs/cgroup"));
  EXPECT_THAT(cgroups->relocation(), HasSubstr("(missing cpu, pids)"));

  // Detected again by the process in its leaf there: the same tree.
  WriteText(moved + "/cgroup.controllers", "cpu memory pids\n");
  absl::StatusOr<Cgroups> again = Cgroups::Detect("0::/mlengined-0123abcd/mlengined\n", kV2Mountinfo, tmp.path());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->Dirs("p/j/r"), cgroups->Dirs("p/j/r"));
  EXPECT_EQ(again->relocation(), "");
}

// Where its own group serves, a fallback changes nothing.
TEST(CgroupsFakeV2, PrepareStaysInItsOwnGroupWhenItServes) {
  FakeHost host(CgroupVersion::kV2);
  WriteText(host.tmp.path() + "/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
  absl::StatusOr<Cgroups> cgroups = Cgroups::Detect(kV2Cgroup, kV2Mountinfo, host.tmp.path());
  ASSERT_TRUE(cgroups.ok()) << cgroups.status();
  ASSERT_TRUE(cgroups->Prepare("mlengined-0123abcd").ok());
  EXPECT_EQ(cgroups->relocation(), "");
  EXPECT_THAT(cgroups->Dirs("p/j/r"), ElementsAre(host.own + "/mlengine/p/j/r"));
  EXPECT_FALSE(fs::exists(host.tmp.path() + "/sys/fs/cgroup/mlengined-0123abcd"));
}

TEST(CgroupsFakeV2, CreateEnablesControllersInEachIntermediate) {
  FakeHost host(CgroupVersion::kV2);
  ASSERT_TRUE(host.cgroups->Prepare().ok());
  absl::StatusOr<std::vector<std::string>> dirs = host.cgroups->Create("proj/job/master-0", {500, 64, 16});
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  EXPECT_THAT(*dirs, ElementsAre(host.own + "/mlengine/proj/job/master-0"));
  EXPECT_EQ(*dirs, host.cgroups->Dirs("proj/job/master-0"));
  for (const char* d : {"/mlengine", "/mlengine/proj", "/mlengine/proj/job"}) {
    EXPECT_EQ(ReadText(host.own + d + "/cgroup.subtree_control"), "+cpu +memory +pids") << d;
  }
  // The leaf holds processes: its subtree_control stays untouched.
  EXPECT_FALSE(fs::exists((*dirs)[0] + "/cgroup.subtree_control"));
}

// Each row: limits, files that exist before Create, the files' contents after.
struct LimitsRow {
  std::string name;
  CgroupVersion version;
  CgroupLimits limits;
  std::vector<std::string> present;  // "controller/file"
  std::map<std::string, std::string> want;
  std::vector<std::string> absent;
};

TEST(CgroupsFake, CreateWritesLimits) {
  const std::vector<LimitsRow> rows = {
      {"v2 all limits",
       CgroupVersion::kV2,
       {500, 64, 16},
       {},
       {{"cpu/cpu.max", "50000 100000"}, {"memory/memory.max", "67108864"}, {"pids/pids.max", "16"}},
       {"memory/memory.swap.max"}},
      {"v2 swap accounted: none allowed",
       CgroupVersion::kV2,
       {2000, 1024, 100},
       {"memory/memory.swap.max"},
       {{"cpu/cpu.max", "200000 100000"},
        {"memory/memory.max", "1073741824"},
        {"memory/memory.swap.max", "0"},
        {"pids/pids.max", "100"}},
       {}},
      {"v2 no limits",
       CgroupVersion::kV2,
       {0, 0, 0},
       {"memory/memory.swap.max"},
       {{"cpu/cpu.max", "max 100000"},
        {"memory/memory.max", "max"},
        {"memory/memory.swap.max", "max"},
        {"pids/pids.max", "max"}},
       {}},
      {"v2 a tiny CPU share gets the kernel's least quota",
       CgroupVersion::kV2,
       {5, 0, 0},
       {},
       {{"cpu/cpu.max", "1000 100000"}},
       {}},
      {"v1 all limits, memsw present",
       CgroupVersion::kV1,
       {500, 64, 16},
       {"memory/memory.memsw.limit_in_bytes"},
       {{"cpu/cpu.cfs_period_us", "100000"},
        {"cpu/cpu.cfs_quota_us", "50000"},
        {"memory/memory.limit_in_bytes", "67108864"},
        {"memory/memory.memsw.limit_in_bytes", "67108864"},
        {"pids/pids.max", "16"}},
       {}},
      {"v1 without swap accounting",
       CgroupVersion::kV1,
       {1500, 3, 1},
       {},
       {{"cpu/cpu.cfs_quota_us", "150000"}, {"memory/memory.limit_in_bytes", "3145728"}, {"pids/pids.max", "1"}},
       {"memory/memory.memsw.limit_in_bytes"}},
      {"v1 no limits",
       CgroupVersion::kV1,
       {0, 0, 0},
       {"memory/memory.memsw.limit_in_bytes"},
       {{"cpu/cpu.cfs_quota_us", "-1"},
        {"memory/memory.limit_in_bytes", "-1"},
        {"memory/memory.memsw.limit_in_bytes", "-1"},
        {"pids/pids.max", "max"}},
       {}},
  };
  for (const LimitsRow& row : rows) {
    SCOPED_TRACE(row.name);
    FakeHost host(row.version);
    ASSERT_TRUE(host.cgroups->Prepare().ok());
    const std::string name = "p/j/master-0";
    auto split = [&](const std::string& cf) {
      const size_t slash = cf.find('/');
      return host.Dir(name, cf.substr(0, slash)) + cf.substr(slash);
    };
    for (const std::string& p : row.present) WriteText(split(p), "");
    absl::StatusOr<std::vector<std::string>> dirs = host.cgroups->Create(name, row.limits);
    ASSERT_TRUE(dirs.ok()) << dirs.status();
    EXPECT_EQ(dirs->size(), row.version == CgroupVersion::kV1 ? 3u : 1u);
    for (const auto& [file, text] : row.want) EXPECT_EQ(ReadText(split(file)), text) << file;
    for (const std::string& file : row.absent) EXPECT_FALSE(fs::exists(split(file))) << file;
  }
}

TEST(CgroupsFake, CreateRefusesNegativeLimitsAndControlFileNames) {
  FakeHost host(CgroupVersion::kV2);
  ASSERT_TRUE(host.cgroups->Prepare().ok());
  for (const CgroupLimits& limits :
       {CgroupLimits{-1, 0, 0}, CgroupLimits{0, -1, 0}, CgroupLimits{0, 0, -1}, CgroupLimits{0, int64_t{1} << 60, 0}}) {
    EXPECT_EQ(host.cgroups->Create("g", limits).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(fs::exists(host.own + "/mlengine/g"));
  // A name that is one of the parent's files is no group.
  absl::StatusOr<std::vector<std::string>> dirs = host.cgroups->Create("cgroup.subtree_control", {});
  EXPECT_EQ(dirs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dirs.status().message()), HasSubstr("is not a cgroup directory"));
}

TEST(CgroupsFake, CreateNamesTheFileItCannotWrite) {
  FakeHost host(CgroupVersion::kV1);
  ASSERT_TRUE(host.cgroups->Prepare().ok());
  const std::string cpu = host.Dir("g", "cpu");
  fs::create_directories(cpu + "/cpu.cfs_quota_us");  // a directory: open for writing fails (EISDIR)
  absl::StatusOr<std::vector<std::string>> dirs = host.cgroups->Create("g", {100, 0, 0});
  ASSERT_FALSE(dirs.ok());
  EXPECT_THAT(std::string(dirs.status().message()), HasSubstr(cpu + "/cpu.cfs_quota_us"));
  EXPECT_THAT(std::string(dirs.status().message()), HasSubstr("Is a directory"));
}

// Each row: the counter files as the kernel writes them, the usage read.
struct UsageRow {
  std::string name;
  CgroupVersion version;
  std::map<std::string, std::string> files;  // "controller/file" -> text
  absl::StatusCode code;
  CgroupUsage want;
  std::string message_has;
};

TEST(CgroupsFake, UsageParsesCounters) {
  const std::vector<UsageRow> rows = {
      {"v2 with memory.peak",
       CgroupVersion::kV2,
       {{"memory/memory.events", "low 0\nhigh 0\nmax 812\noom 3\noom_kill 2\noom_group_kill 0\n"},
        {"memory/memory.peak", "67108864\n"},
        {"pids/pids.events", "max 7\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kOk,
       {2, 67108864, 7},
       ""},
      {"v2 before memory.peak (kernels < 5.19): peak 0",
       CgroupVersion::kV2,
       {{"memory/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}, {"pids/pids.events", "max 0\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kOk,
       {0, 0, 0},
       ""},
      {"v2 before oom_kill was counted (kernels < 4.13)",
       CgroupVersion::kV2,
       {{"memory/memory.events", "low 0\nhigh 0\nmax 4\noom 1\n"}, {"pids/pids.events", "max 1\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kOk,
       {0, 0, 1},
       ""},
      {"v2 oom_group_kill is not oom_kill",
       CgroupVersion::kV2,
       {{"memory/memory.events", "oom_group_kill 5\noom_kill 1\n"}, {"pids/pids.events", "max 0\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kOk,
       {1, 0, 0},
       ""},
      {"v2 garbled memory.events",
       CgroupVersion::kV2,
       {{"memory/memory.events", "oom_kill many\n"}, {"pids/pids.events", "max 0\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kInternal,
       {},
       "memory.events: \"oom_kill many\""},
      {"v2 pids.events missing",
       CgroupVersion::kV2,
       {{"memory/memory.events", "oom_kill 0\n"}},
       absl::StatusCode::kNotFound,
       {},
       "pids.events"},
      {"v1 as this host's kernel writes it",
       CgroupVersion::kV1,
       {{"memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"},
        {"memory/memory.max_usage_in_bytes", "67108864\n"},
        {"pids/pids.events", "max 49\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kOk,
       {1, 67108864, 49},
       ""},
      {"v1 a group with tasks in it",
       CgroupVersion::kV1,
       {{"memory/memory.oom_control", "oom_kill 0\n"},
        {"memory/memory.max_usage_in_bytes", "4096\n"},
        {"pids/pids.events", "max 0\n"},
        {"pids/pids.current", "3\n"}},
       absl::StatusCode::kOk,
       {0, 4096, 0, 3},
       ""},
      {"v1 pids.current missing",
       CgroupVersion::kV1,
       {{"memory/memory.oom_control", "oom_kill 0\n"},
        {"memory/memory.max_usage_in_bytes", "4096\n"},
        {"pids/pids.events", "max 0\n"}},
       absl::StatusCode::kNotFound,
       {},
       "pids.current"},
      {"v1 garbled max_usage_in_bytes",
       CgroupVersion::kV1,
       {{"memory/memory.oom_control", "oom_kill 0\n"},
        {"memory/memory.max_usage_in_bytes", "lots\n"},
        {"pids/pids.events", "max 0\n"}, {"pids/pids.current", "0\n"}},
       absl::StatusCode::kInternal,
       {},
       "memory.max_usage_in_bytes: \"lots\""},
  };
  for (const UsageRow& row : rows) {
    SCOPED_TRACE(row.name);
    FakeHost host(row.version);
    ASSERT_TRUE(host.cgroups->Create("p/j/r", {}).ok());
    for (const auto& [file, text] : row.files) {
      const size_t slash = file.find('/');
      WriteText(host.Dir("p/j/r", file.substr(0, slash)) + file.substr(slash), text);
    }
    absl::StatusOr<CgroupUsage> usage = host.cgroups->Usage("p/j/r");
    ASSERT_EQ(usage.status().code(), row.code) << usage.status();
    if (!usage.ok()) {
      EXPECT_THAT(std::string(usage.status().message()), HasSubstr(row.message_has));
      continue;
    }
    EXPECT_EQ(usage->oom_kills, row.want.oom_kills);
    EXPECT_EQ(usage->memory_peak_bytes, row.want.memory_peak_bytes);
    EXPECT_EQ(usage->pids_denied, row.want.pids_denied);
    EXPECT_EQ(usage->tasks, row.want.tasks);
  }
}

TEST(CgroupsFake, UsageOfAMissingGroupIsNotFound) {
  FakeHost host(CgroupVersion::kV1);
  EXPECT_EQ(host.cgroups->Usage("nobody").status().code(), absl::StatusCode::kNotFound);
}

TEST(CgroupsFake, ProcessesAreEveryControllersDeduplicatedAndRecursive) {
  FakeHost host(CgroupVersion::kV1);
  ASSERT_TRUE(host.cgroups->Create("p/j/r", {}).ok());
  ASSERT_TRUE(host.cgroups->Create("p/j/r/sub", {}).ok());
  ASSERT_TRUE(host.cgroups->Create("p/other", {}).ok());
  WriteText(host.Dir("p/j/r", "cpu") + "/cgroup.procs", "30\n10\n");
  WriteText(host.Dir("p/j/r", "memory") + "/cgroup.procs", "10\n30\n");
  WriteText(host.Dir("p/j/r", "pids") + "/cgroup.procs", "10\n20\n");
  WriteText(host.Dir("p/j/r/sub", "memory") + "/cgroup.procs", "40\n");
  WriteText(host.Dir("p/other", "memory") + "/cgroup.procs", "50\n");
  EXPECT_THAT(host.cgroups->Processes("p/j/r"), ElementsAre(10, 20, 30, 40));
  EXPECT_THAT(host.cgroups->Processes("p/j"), ElementsAre(10, 20, 30, 40));
  EXPECT_THAT(host.cgroups->Processes("p"), ElementsAre(10, 20, 30, 40, 50));
  EXPECT_TRUE(host.cgroups->Processes("nobody").empty());
}

TEST(CgroupsFake, ListFindsTheLeaves) {
  for (CgroupVersion version : {CgroupVersion::kV1, CgroupVersion::kV2}) {
    FakeHost host(version);
    EXPECT_TRUE(host.cgroups->List().empty());
    ASSERT_TRUE(host.cgroups->Prepare().ok());
    EXPECT_TRUE(host.cgroups->List().empty());
    for (const char* name : {"p/j/master-0", "p/j/worker-1", "q/k/master-0", "single"}) {
      ASSERT_TRUE(host.cgroups->Create(name, {}).ok());
    }
    EXPECT_THAT(host.cgroups->List(), ElementsAre("p/j/master-0", "p/j/worker-1", "q/k/master-0", "single"));
  }
}

TEST(CgroupsFake, RemoveOfAMissingGroupIsOk) {
  FakeHost host(CgroupVersion::kV2);
  EXPECT_TRUE(host.cgroups->Remove("p/j").ok());
}

TEST(CgroupsFake, RenameMovesTheGroupInEveryControllerWithinItsParent) {
  FakeHost host(CgroupVersion::kV1);
  ASSERT_TRUE(host.cgroups->Create("p/j.master-0", {500, 64, 16}).ok());
  ASSERT_TRUE(host.cgroups->Rename("p/j.master-0", "p/.spare-0").ok());
  for (const char* controller : {"cpu", "memory", "pids"}) {
    EXPECT_FALSE(fs::exists(host.Dir("p/j.master-0", controller))) << controller;
    EXPECT_TRUE(fs::is_directory(host.Dir("p/.spare-0", controller))) << controller;
  }
  EXPECT_EQ(ReadText(host.Dir("p/.spare-0", "pids") + "/pids.max"), "16");  // the same group, its limits
  // Cut short after the cpu controller: the call again finishes it.
  fs::rename(host.Dir("p/.spare-0", "cpu"), host.Dir("p/k.worker-1", "cpu"));
  ASSERT_TRUE(host.cgroups->Rename("p/.spare-0", "p/k.worker-1").ok());
  for (const char* controller : {"cpu", "memory", "pids"}) {
    EXPECT_TRUE(fs::is_directory(host.Dir("p/k.worker-1", controller))) << controller;
  }

  absl::Status moved = host.cgroups->Rename("p/k.worker-1", "q/k.worker-1");
  EXPECT_EQ(moved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(moved.message()), HasSubstr("not the same parent"));
  absl::Status missing = host.cgroups->Rename("p/nobody", "p/other");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), HasSubstr(host.Dir("p/nobody", "cpu")));
  EXPECT_EQ(host.cgroups->Rename("p/k.worker-1", "p/..").code(), absl::StatusCode::kInvalidArgument);

  FakeHost v2(CgroupVersion::kV2);
  ASSERT_TRUE(v2.cgroups->Prepare().ok());
  ASSERT_TRUE(v2.cgroups->Create("p/j.master-0", {}).ok());
  EXPECT_EQ(v2.cgroups->Rename("p/j.master-0", "p/.spare-0").code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(fs::is_directory(v2.Dir("p/j.master-0", "memory")));
}

TEST(CgroupsFake, ResetPeakWritesTheKernelsReset) {
  FakeHost v1(CgroupVersion::kV1);
  ASSERT_TRUE(v1.cgroups->Create("p/g", {}).ok());
  WriteText(v1.Dir("p/g", "memory") + "/memory.max_usage_in_bytes", "67108864");
  ASSERT_TRUE(v1.cgroups->ResetPeak("p/g").ok());
  EXPECT_EQ(ReadText(v1.Dir("p/g", "memory") + "/memory.max_usage_in_bytes"), "0");

  FakeHost v2(CgroupVersion::kV2);
  ASSERT_TRUE(v2.cgroups->Prepare().ok());
  ASSERT_TRUE(v2.cgroups->Create("p/g", {}).ok());
  ASSERT_TRUE(v2.cgroups->ResetPeak("p/g").ok());  // no memory.peak: nothing to do
  EXPECT_FALSE(fs::exists(v2.Dir("p/g", "memory") + "/memory.peak"));
  WriteText(v2.Dir("p/g", "memory") + "/memory.peak", "4096");
  ASSERT_TRUE(v2.cgroups->ResetPeak("p/g").ok());
  EXPECT_EQ(ReadText(v2.Dir("p/g", "memory") + "/memory.peak"), "reset");
}

// ---- The kernel: cgroup v1 as on this host (root only) ---------------------


class CgroupsV1Kernel : public CgroupsV1KernelTest {
 protected:
  CgroupsV1Kernel() : CgroupsV1KernelTest("cgroups_test") {}
};

constexpr CgroupLimits kSmall = {500, 64, 16};

TEST_F(CgroupsV1Kernel, LimitsAsTheKernelReadsThemBack) {
  struct Row {
    CgroupLimits limits;
    std::string quota, memory, pids;  // "" for memory: no limit (the kernel's largest page multiple)
  };
  // One group rewritten: raising memory past the old memsw limit and lowering
  // it below need the two files in opposite orders.
  const Row rows[] = {
      {{500, 64, 16}, "50000", "67108864", "16"},     {{500, 128, 16}, "50000", "134217728", "16"},
      {{2000, 32, 100}, "200000", "33554432", "100"}, {{0, 0, 0}, "-1", "", "max"},
      {{5, 64, 1}, "1000", "67108864", "1"},
  };
  const std::string name = Group("rewritten");
  for (const Row& row : rows) {
    SCOPED_TRACE(absl::StrCat(row.limits.cpu_milli, " ", row.limits.memory_mib, " ", row.limits.pids));
    absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(name, row.limits);
    ASSERT_TRUE(dirs.ok()) << dirs.status();
    ASSERT_EQ(dirs->size(), 3u);
    const std::string &cpu = (*dirs)[0], &memory = (*dirs)[1], &pids = (*dirs)[2];
    EXPECT_EQ(ReadText(cpu + "/cpu.cfs_period_us"), "100000");
    EXPECT_EQ(ReadText(cpu + "/cpu.cfs_quota_us"), row.quota);
    std::vector<std::string> memory_files = {memory + "/memory.limit_in_bytes"};
    if (fs::exists(memory + "/memory.memsw.limit_in_bytes")) {
      memory_files.push_back(memory + "/memory.memsw.limit_in_bytes");
    }
    for (const std::string& file : memory_files) {
      if (row.memory.empty()) {
        EXPECT_GT(std::stoll(ReadText(file)), int64_t{1} << 62) << file;
      } else {
        EXPECT_EQ(ReadText(file), row.memory) << file;
      }
    }
    EXPECT_EQ(ReadText(pids + "/pids.max"), row.pids);
  }
}

TEST_F(CgroupsV1Kernel, ProcessesListsAMemberAndRemoveKillsIt) {
  const std::string name = Group("member");
  absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(name, kSmall);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  absl::StatusOr<CgroupUsage> fresh = cgroups_->Usage(name);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->oom_kills, 0);
  EXPECT_EQ(fresh->pids_denied, 0);

  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = ForkInGroup(*dirs, [&] {
    ::close(hold[1]);
    char c;
    return ::read(hold[0], &c, 1) == 0 ? 0 : 1;  // blocks until killed
  });
  ::close(hold[0]);
  ASSERT_GT(child, 0);
  EXPECT_THAT(cgroups_->Processes(name), ElementsAre(child));
  EXPECT_THAT(cgroups_->Processes(top_), ElementsAre(child));
  EXPECT_THAT(cgroups_->List(), ::testing::Contains(name));

  ASSERT_TRUE(cgroups_->Remove(name).ok());
  const int status = WaitFor(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ::close(hold[1]);
  for (const std::string& dir : *dirs) EXPECT_FALSE(fs::exists(dir)) << dir;
  EXPECT_TRUE(cgroups_->Remove(name).ok());  // gone already: fine
}

TEST_F(CgroupsV1Kernel, MemoryLimitOomKills) {
  const std::string name = Group("oom");
  absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(name, kSmall);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  const pid_t child = ForkInGroup(*dirs, [] {
    constexpr size_t kSize = size_t{200} << 20;
    char* p = static_cast<char*>(::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 2;
    for (size_t i = 0; i < kSize; i += 4096) p[i] = 1;
    return 0;  // survived: the limit did not hold
  });
  ASSERT_GT(child, 0);
  const int status = WaitFor(child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  absl::StatusOr<CgroupUsage> usage = cgroups_->Usage(name);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_GE(usage->oom_kills, 1);
  EXPECT_LE(usage->memory_peak_bytes, int64_t{64} << 20);
  EXPECT_GE(usage->memory_peak_bytes, int64_t{48} << 20);
}

TEST_F(CgroupsV1Kernel, PidsLimitRefusesForks) {
  const std::string name = Group("forks");
  absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(name, kSmall);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  const std::string pids_current = (*dirs)[2] + "/pids.current";
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  // Refused forks are counted against the group's tasks when the first one
  // is refused, not against a fixed number of forks: a sanitizer's runtime
  // threads are tasks too.
  const pid_t child = ForkInGroup(*dirs, [&] {
    ::close(report[0]);
    int hold[2];
    if (::pipe(hold) != 0) return 3;
    int counts[3] = {0, 0, -1};  // forked, refused with EAGAIN, tasks at the first refusal
    for (int i = 0; i < 64; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(hold[1]);
        char c;
        ::_exit(static_cast<int>(::read(hold[0], &c, 1)));  // until the parent closes hold
      }
      if (pid > 0) {
        ++counts[0];
      } else if (errno == EAGAIN) {
        if (++counts[1] == 1) {
          const int fd = ::open(pids_current.c_str(), O_RDONLY | O_CLOEXEC);
          char text[32] = {};
          if (fd >= 0 && ::read(fd, text, sizeof(text) - 1) > 0) counts[2] = std::atoi(text);
          if (fd >= 0) ::close(fd);
        }
      } else {
        return 4;
      }
    }
    ::close(hold[1]);
    while (::wait(nullptr) > 0) {
    }
    return ::write(report[1], counts, sizeof(counts)) == sizeof(counts) ? 0 : 5;
  });
  ::close(report[1]);
  ASSERT_GT(child, 0);
  int counts[3] = {-1, -1, -1};
  EXPECT_EQ(::read(report[0], counts, sizeof(counts)), static_cast<ssize_t>(sizeof(counts)));
  ::close(report[0]);
  const int status = WaitFor(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(counts[0], 1);
  EXPECT_LE(counts[0], 15);  // 16 tasks at most: the child and 15 more
  EXPECT_EQ(counts[0] + counts[1], 64);
  EXPECT_EQ(counts[2], 16) << "tasks in the group when a fork was first refused";
  absl::StatusOr<CgroupUsage> usage = cgroups_->Usage(name);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_GE(usage->pids_denied, counts[1]);
}

TEST_F(CgroupsV1Kernel, RemoveTakesSubgroupsAndKillsTheirProcesses) {
  std::vector<pid_t> children;
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  for (const char* leaf : {"job/master-0", "job/worker-0"}) {
    absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(Group(leaf), kSmall);
    ASSERT_TRUE(dirs.ok()) << dirs.status();
    children.push_back(ForkInGroup(*dirs, [&] {
      ::close(hold[1]);
      char c;
      return ::read(hold[0], &c, 1) == 0 ? 0 : 1;
    }));
    ASSERT_GT(children.back(), 0);
  }
  ::close(hold[0]);
  EXPECT_EQ(cgroups_->Processes(Group("job")).size(), 2u);
  ASSERT_TRUE(cgroups_->Remove(Group("job")).ok());
  for (pid_t child : children) {
    const int status = WaitFor(child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  ::close(hold[1]);
  for (const std::string& dir : cgroups_->Dirs(Group("job"))) EXPECT_FALSE(fs::exists(dir)) << dir;
  EXPECT_THAT(cgroups_->List(), ::testing::Not(::testing::Contains(::testing::HasSubstr(Group("job")))));
}

// Remove first tries rmdir alone (the kernel refuses a group with a
// process: EBUSY); a group whose processes have all exited goes that way,
// and one that is busy halfway through (its first subgroup removed already)
// still ends with every process killed and every directory gone.
// Each also with the subgroups the caller knows of (a job's replicas),
// which go without a listing of the job's group: all of them, some of them
// (a subgroup the caller did not know of is found and removed too), none.
TEST_F(CgroupsV1Kernel, RemoveOfExitedAndOfHalfBusyGroups) {
  const std::vector<std::vector<std::string>> knowns = {{}, {"master-0", "worker-0", "evaluator-0"}, {"master-0"}};
  for (const bool busy : {false, true})
  for (size_t k = 0; k < knowns.size(); ++k) {
    SCOPED_TRACE(busy ? "a process in master-0" : "every process exited");
    SCOPED_TRACE(absl::StrCat("known subgroups: ", absl::StrJoin(knowns[k], ",")));
    const std::string job = Group(absl::StrCat(busy ? "busy" : "exited", k));
    pid_t live = -1;
    int hold[2];
    ASSERT_EQ(::pipe(hold), 0);
    for (const char* leaf : {"/master-0", "/worker-0"}) {
      absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(job + leaf, kSmall);
      ASSERT_TRUE(dirs.ok()) << dirs.status();
      const bool stays = busy && std::string(leaf) == "/master-0";
      const pid_t pid = ForkInGroup(*dirs, [&] {
        ::close(hold[1]);
        char c;
        return stays && ::read(hold[0], &c, 1) == 0 ? 0 : 1;
      });
      ASSERT_GT(pid, 0);
      if (stays) {
        live = pid;
      } else {
        WaitFor(pid);
      }
    }
    ::close(hold[0]);
    EXPECT_EQ(cgroups_->Processes(job).size(), busy ? 1u : 0u);
    ASSERT_TRUE(cgroups_->Remove(job, knowns[k]).ok());
    if (live > 0) {
      const int status = WaitFor(live);
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    }
    ::close(hold[1]);
    for (const std::string& dir : cgroups_->Dirs(job)) EXPECT_FALSE(fs::exists(dir)) << dir;
  }
}

// Create makes what is missing of the chain, deepest first, and leaves
// what exists as it is (a sibling's group and its limits included).
TEST_F(CgroupsV1Kernel, CreateMakesOnlyTheMissingPartOfTheChain) {
  ASSERT_TRUE(cgroups_->Create(Group("p/j1/master-0"), kSmall).ok());
  for (const char* leaf : {"p/j1/worker-0", "p/j2/master-0", "q/j3/master-0"}) {
    absl::StatusOr<std::vector<std::string>> dirs = cgroups_->Create(Group(leaf), {250, 32, 8});
    ASSERT_TRUE(dirs.ok()) << leaf << ": " << dirs.status();
    for (const std::string& dir : *dirs) EXPECT_TRUE(fs::is_directory(dir)) << dir;
  }
  for (const std::string& dir : cgroups_->Dirs(Group("p/j1/master-0"))) {
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
    if (absl::StrContains(dir, "/pids/")) {
      EXPECT_EQ(ReadText(dir + "/pids.max"), "16") << "a sibling's stays";
    }
  }
  ASSERT_TRUE(cgroups_->Remove(Group("p")).ok());
  ASSERT_TRUE(cgroups_->Remove(Group("q")).ok());
}

// A project's intermediate group goes with its last job's group (they used
// to pile up, one per project ever seen, and every cpu quota write walks
// every cpu group of the host), and stays while a sibling is in it.
TEST_F(CgroupsV1Kernel, RemovePrunesEmptyIntermediatesOnly) {
  for (const char* job : {"project/j1/master-0", "project/j2/master-0"}) {
    ASSERT_TRUE(cgroups_->Create(Group(job), kSmall).ok());
  }
  ASSERT_TRUE(cgroups_->Remove(Group("project/j1")).ok());
  for (const std::string& dir : cgroups_->Dirs(Group("project/j1"))) EXPECT_FALSE(fs::exists(dir)) << dir;
  for (const std::string& dir : cgroups_->Dirs(Group("project/j2/master-0"))) EXPECT_TRUE(fs::exists(dir)) << dir;
  ASSERT_TRUE(cgroups_->Remove(Group("project/j2")).ok());
  for (const std::string& dir : cgroups_->Dirs(Group("project"))) EXPECT_FALSE(fs::exists(dir)) << dir;
  for (const std::string& dir : cgroups_->Dirs(top_)) EXPECT_FALSE(fs::exists(dir)) << dir;
  // And one made again after its parent went.
  ASSERT_TRUE(cgroups_->Create(Group("project/j3/master-0"), kSmall).ok());
}

}  // namespace
}  // namespace mle::sandbox
