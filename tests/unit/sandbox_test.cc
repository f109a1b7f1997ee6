// The sandbox's pure parts: the spec file's format (both ways, and what it
// refuses), the plan of a replica's view, the passwd/group of a view, the
// identity pool. EnterSandbox itself is exercised by the e2e suite
// (tests/e2e/test_sandbox.py) and by mlengined's start-up check.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/host.h"
#include "sandbox/kernel_log.h"
#include "sandbox/plan.h"
#include "sandbox/spec.h"

namespace mle::sandbox {
namespace {

using Kind = ViewEntry::Kind;

SandboxSpec Example() {
  SandboxSpec s;
  s.uid = 524300;
  s.gid = 524300;
  s.umask = 0;
  s.cwd = "/data/runs/p/j/master-replica-0/work";
  s.cgroups = {"/sys/fs/cgroup/cpu/mlengine/p/j/master-replica-0"};
  s.view = {{Kind::kSymlink, false, "usr/bin", "/bin"},   {Kind::kBind, false, "/usr", "/usr"},
            {Kind::kTmpfs, true, "mode=0755", "/dev"},    {Kind::kDevice, true, "/dev/null", "/dev/null"},
            {Kind::kProc, false, "", "/proc"},            {Kind::kDir, false, "", "/data/buckets"},
            {Kind::kDir, false, "1777", "/dev/shm"},      {Kind::kSysfs, false, "", "/sys"},
            {Kind::kBind, true, "/data/runs/x", "/tmp"},
            // A file's text on one line: newlines, tabs and backslashes escaped, "\\n" kept literal.
            {Kind::kFile, false, "root:x:0:0::/root:/bin/sh\n\tx\\n\\\n", "/etc/passwd"},
            {Kind::kFile, false, "", "/etc/empty"}};
  return s;
}

TEST(SandboxSpecTest, RoundTrips) {
  std::string text, error;
  ASSERT_TRUE(EncodeSpec(Example(), &text, &error)) << error;
  EXPECT_EQ(text.substr(0, text.find('\n')), kSpecFormat);
  SandboxSpec parsed;
  ASSERT_TRUE(ParseSpec(text, &parsed, &error)) << error << "\n" << text;
  EXPECT_EQ(parsed, Example());
}

TEST(SandboxSpecTest, EncodeRefuses) {
  struct Row {
    const char* name;
    void (*change)(SandboxSpec&);
  };
  const Row rows[] = {
      {"root uid", [](SandboxSpec& s) { s.uid = 0; }},
      {"root gid", [](SandboxSpec& s) { s.gid = 0; }},
      {"relative cwd", [](SandboxSpec& s) { s.cwd = "work"; }},
      {"a tab in a path", [](SandboxSpec& s) { s.view[1].target = "/us\tr"; }},
      {"a newline in a source", [](SandboxSpec& s) { s.view[1].source = "/usr\nbind\trw\t/\t/x"; }},
      {"a relative bind source", [](SandboxSpec& s) { s.view[1].source = "usr"; }},
      {"a relative cgroup", [](SandboxSpec& s) { s.cgroups = {"mlengine/x"}; }},
      {"a directory's mode not in octal", [](SandboxSpec& s) { s.view[5].source = "0x777"; }},
  };
  for (const auto& row : rows) {
    SandboxSpec s = Example();
    row.change(s);
    std::string text, error;
    EXPECT_FALSE(EncodeSpec(s, &text, &error)) << row.name;
    EXPECT_FALSE(error.empty()) << row.name;
  }
}

TEST(SandboxSpecTest, ParseRefuses) {
  const std::string head = std::string(kSpecFormat) + "\nuid\t524300\ngid\t524300\ncwd\t/w\n";
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"", "empty"},
      {"mlengine.sandbox/v9\nuid\t5\ngid\t5\ncwd\t/w\n", "line 1"},
      {std::string(kSpecFormat) + "\nuid\t0\ngid\t5\ncwd\t/w\n", "bad uid"},
      {std::string(kSpecFormat) + "\nuid\t-5\ngid\t5\ncwd\t/w\n", "bad uid"},
      {std::string(kSpecFormat) + "\ngid\t5\ncwd\t/w\n", "lacks its uid"},
      {head + "bind\trx\t/a\t/b\n", "bad bind"},
      {head + "bind\tro\ta\t/b\n", "bad bind"},
      {head + "bind\tro\t/a\n", "bad bind"},
      {head + "umask\t999\n", "bad umask"},
      {head + "chroot\t/\n", "unknown record chroot"},
      {head + "proc\tproc\n", "bad proc"},
      {head + "sysfs\tsys\n", "bad sysfs"},
      {head + "dir\t99\t/d\n", "bad dir"},
      {head + "dir\t0755\td\n", "bad dir"},
      {head + "file\t/etc/passwd\troot\\q\n", "bad file"},
      {head + "file\t/etc/passwd\troot\\\n", "bad file"},
      {head + "file\tetc/passwd\troot\n", "bad file"},
      {head + "file\t/etc/passwd\n", "bad file"},
  };
  for (const auto& [text, why] : rows) {
    SandboxSpec s;
    std::string error;
    EXPECT_FALSE(ParseSpec(text, &s, &error)) << text;
    EXPECT_NE(error.find(why), std::string::npos) << error << " (wanted " << why << ")";
  }
}

bool Has(const SandboxSpec& s, Kind kind, const std::string& target, bool writable = false) {
  for (const auto& e : s.view) {
    if (e.kind == kind && e.target == target && (kind != Kind::kBind || e.writable == writable)) return true;
  }
  return false;
}

TEST(PlanReplicaSandboxTest, TheViewHoldsWhatTheJobMayReachAndNothingElse) {
  HostLayout host;
  host.links = {{"/bin", "usr/bin"}, {"/lib", "usr/lib"}};
  host.read_only = {"/usr", "/etc", "/sys", "/opt/mlengine/python"};
  host.devices = {"/dev/null", "/dev/urandom", "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"};
  ReplicaView v;
  v.uid = v.gid = 524301;
  v.cwd = "/data/runs/p/j/master-replica-0/work";
  v.writable = {v.cwd, "/data/runs/p/j/master-replica-0/hypertune"};
  v.tmp = "/data/runs/p/j/master-replica-0/tmp";
  v.read_only = {"/data/envs/rt/abc"};
  v.gcs_root = "/data/buckets";
  v.buckets = {{"mine", true}, {"shared", false}};
  v.gpus = {1};
  v.cgroups = {"/cg/cpu/x"};
  v.passwd = "root:x:0:0::/root:/bin/sh\nmlengine-job:x:524301:524301:mlengine job:/tmp:/usr/sbin/nologin\n";
  const SandboxSpec s = PlanReplicaSandbox(host, v);
  EXPECT_EQ(s.uid, 524301u);
  EXPECT_EQ(s.cwd, v.cwd);
  EXPECT_EQ(s.cgroups, v.cgroups);
  EXPECT_TRUE(Has(s, Kind::kSymlink, "/bin"));
  EXPECT_TRUE(Has(s, Kind::kBind, "/usr"));
  EXPECT_TRUE(Has(s, Kind::kBind, "/opt/mlengine/python"));
  EXPECT_TRUE(Has(s, Kind::kBind, "/data/envs/rt/abc"));
  EXPECT_TRUE(Has(s, Kind::kBind, v.cwd, true));
  EXPECT_TRUE(Has(s, Kind::kBind, "/data/runs/p/j/master-replica-0/hypertune", true));
  EXPECT_TRUE(Has(s, Kind::kBind, "/tmp", true));
  EXPECT_TRUE(Has(s, Kind::kBind, "/data/buckets/mine", true));
  EXPECT_TRUE(Has(s, Kind::kBind, "/data/buckets/shared", false));
  EXPECT_TRUE(Has(s, Kind::kFile, "/etc/passwd"));
  EXPECT_TRUE(Has(s, Kind::kProc, "/proc"));
  EXPECT_TRUE(Has(s, Kind::kDir, "/data/buckets"));
  // Its own GPU and the control device; not another replica's GPU.
  EXPECT_TRUE(Has(s, Kind::kDevice, "/dev/nvidia1"));
  EXPECT_TRUE(Has(s, Kind::kDevice, "/dev/nvidiactl"));
  EXPECT_FALSE(Has(s, Kind::kDevice, "/dev/nvidia0"));
  // Nothing of the data directory but those.
  for (const auto& e : s.view) {
    if (e.kind == Kind::kBind && e.source.rfind("/data", 0) == 0) {
      EXPECT_TRUE(e.source == v.cwd || e.source == v.tmp || e.source.find("/hypertune") != std::string::npos ||
                  e.source.rfind("/data/buckets/", 0) == 0 || e.source == "/data/envs/rt/abc" ||
                  e.source == v.passwd)
          << e.source;
    }
  }
  // Parents before children.
  for (size_t i = 1; i < s.view.size(); ++i) EXPECT_LE(s.view[i - 1].target, s.view[i].target);
}

TEST(PlanReplicaSandboxTest, NoGpuNoGpuDevices) {
  HostLayout host;
  host.devices = {"/dev/null", "/dev/nvidiactl", "/dev/nvidia0"};
  ReplicaView v;
  v.uid = v.gid = 524301;
  v.cwd = "/w";
  v.tmp = "/t";
  const SandboxSpec s = PlanReplicaSandbox(host, v);
  EXPECT_TRUE(Has(s, Kind::kDevice, "/dev/null"));
  EXPECT_FALSE(Has(s, Kind::kDevice, "/dev/nvidiactl"));
  EXPECT_FALSE(Has(s, Kind::kDevice, "/dev/nvidia0"));
}

TEST(PlanReplicaSandboxTest, NothingIsMountedInsideAReadOnlyBindOfTheHost) {
  // A data directory under /usr would need mount points there (mlengined
  // refuses to start with one: CheckHost); the plan drops them.
  HostLayout host;
  host.read_only = {"/usr"};
  ReplicaView v;
  v.uid = v.gid = 524301;
  v.cwd = "/usr/local/data/w";
  v.writable = {v.cwd};
  v.tmp = "/t";
  const SandboxSpec s = PlanReplicaSandbox(host, v);
  EXPECT_FALSE(Has(s, Kind::kBind, v.cwd, true));
}

TEST(PasswdWithIdentityTest, AddsTheJobAndReplacesAnEntryOfItsUid) {
  const std::string host = "root:x:0:0:root:/root:/bin/bash\nclash:x:524301:10::/:/bin/sh\n";
  const std::string out = PasswdWithIdentity(host, 524301, 524301);
  EXPECT_NE(out.find("root:x:0:0"), std::string::npos);
  EXPECT_EQ(out.find("clash"), std::string::npos);
  EXPECT_NE(out.find("mlengine-job:x:524301:524301:mlengine job:/tmp:/usr/sbin/nologin\n"), std::string::npos);
  EXPECT_NE(GroupWithIdentity("root:x:0:\n", 524301).find("mlengine-job:x:524301:\n"), std::string::npos);
}

TEST(IdentityPoolTest, OneUidPerJobRoundRobinAndNoneWhenAllAreHeld) {
  IdentityPool pool(1000, 3);
  EXPECT_EQ(pool.Acquire("p/a"), 1000u);
  EXPECT_EQ(pool.Acquire("p/a"), 1000u);  // resubmitted: the identity it holds
  EXPECT_EQ(pool.HeldBy("p/a"), 1000u);
  EXPECT_EQ(pool.HeldBy("p/b"), std::nullopt);
  EXPECT_TRUE(pool.Hold(1002, "p/c"));  // a job found running at recovery
  EXPECT_EQ(pool.Acquire("p/b"), 1001u);
  EXPECT_EQ(pool.Acquire("p/d"), std::nullopt);
  pool.Release(1000, "p/a");
  EXPECT_EQ(pool.Acquire("p/d"), 1000u);
  EXPECT_FALSE(pool.Hold(999, "p/e"));
  EXPECT_FALSE(pool.Contains(1003));
}

TEST(IdentityPoolTest, OnlyItsOwnerReleasesAUid) {
  // A stale record (a start undone at recovery) naming a uid another job
  // holds now can neither take it nor free it.
  IdentityPool pool(1000, 2);
  EXPECT_TRUE(pool.Hold(1000, "p/live"));
  EXPECT_FALSE(pool.Hold(1000, "p/stale"));
  EXPECT_TRUE(pool.Hold(1000, "p/live"));  // the same job keeping it
  EXPECT_FALSE(pool.Owns(1000, "p/stale"));
  pool.Release(1000, "p/stale");
  EXPECT_TRUE(pool.Owns(1000, "p/live"));
  EXPECT_EQ(pool.Acquire("p/new"), 1001u);
}

TEST(IdentityPoolTest, TwoPoolsSharingALeaseFileNeverHandOutOneUidTwice) {
  // Two servers on one host: each pool leases its uids in the shared file
  // (an open file description lock per uid), whatever its round's start.
  const std::string dir = ::testing::TempDir() + "/identity-leases-" + std::to_string(::getpid());
  const std::string file = dir + "/uids.lock";
  auto a = std::make_unique<IdentityPool>(1000, 3, file);
  IdentityPool b(1000, 3, file);
  ASSERT_TRUE(a->status().ok()) << a->status();
  std::map<std::string, uid_t> taken;  // a's: job -> uid
  for (const char* job : {"a/1", "a/2"}) {
    auto uid = a->Acquire(job);
    ASSERT_TRUE(uid.has_value());
    taken[job] = *uid;
  }
  ASSERT_NE(taken["a/1"], taken["a/2"]);
  auto last = b.Acquire("b/1");
  ASSERT_TRUE(last.has_value());
  EXPECT_NE(*last, taken["a/1"]);
  EXPECT_NE(*last, taken["a/2"]);
  EXPECT_EQ(b.Acquire("b/2"), std::nullopt);  // the other two are a's
  EXPECT_FALSE(b.Hold(taken["a/1"], "b/recovered"));
  // Released by a, or gone with a's process: b may take it.
  a->Release(taken["a/1"], "a/1");
  EXPECT_EQ(b.Acquire("b/2"), taken["a/1"]);
  a.reset();
  EXPECT_EQ(b.Acquire("b/3"), taken["a/2"]);
  EXPECT_TRUE(std::filesystem::is_regular_file(file));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}

TEST(IdentityPoolTest, AnUnopenableLeaseFileIsAnError) {
  IdentityPool pool(1000, 3, "/proc/self/no-such-dir/uids.lock");
  EXPECT_FALSE(pool.status().ok());
  EXPECT_NE(pool.status().message().find("uids.lock"), std::string::npos) << pool.status();
  EXPECT_EQ(pool.Acquire("p/1"), std::nullopt);
}

// A replica of a job whose data directory is `data`: its work directory
// (cwd, writable) and /tmp in the run.
ReplicaView ViewOfARunIn(const std::string& data) {
  ReplicaView v;
  v.uid = v.gid = 524301;
  v.cwd = data + "/runs/p/j/m/work";
  v.writable = {v.cwd};
  v.tmp = data + "/runs/p/j/m/tmp";
  return v;
}

TEST(PlanReplicaSandboxTest, NoMountPointIsMadeInTheJobsOwnTmp) {
  // A data directory under /tmp (tests, benchmarks): its run and bucket
  // mount points go on a tmpfs over /tmp/DIR, never into the directory on
  // disk that is the job's /tmp.
  ReplicaView v = ViewOfARunIn("/tmp/x/data");
  v.gcs_root = "/tmp/x/data/gcs";
  v.buckets = {{"mine", true}};
  SandboxSpec s = PlanReplicaSandbox(HostLayout{}, v);
  EXPECT_TRUE(Has(s, Kind::kBind, "/tmp", true));
  EXPECT_TRUE(Has(s, Kind::kTmpfs, "/tmp/x"));
  EXPECT_TRUE(Has(s, Kind::kBind, v.cwd, true));
  EXPECT_TRUE(Has(s, Kind::kBind, "/tmp/x/data/gcs/mine", true));
  // The buckets' root at /tmp itself: the tmpfs takes its place.
  v.gcs_root = "/tmp/gcs";
  s = PlanReplicaSandbox(HostLayout{}, v);
  EXPECT_TRUE(Has(s, Kind::kTmpfs, "/tmp/gcs"));
  EXPECT_FALSE(Has(s, Kind::kDir, "/tmp/gcs"));
  EXPECT_TRUE(Has(s, Kind::kBind, "/tmp/gcs/mine", true));
  for (size_t i = 1; i < s.view.size(); ++i) EXPECT_LE(s.view[i - 1].target, s.view[i].target);
}

TEST(PlanReplicaSandboxTest, ADataDirectoryUnderVarTmpReplacesItsLink) {
  ReplicaView v = ViewOfARunIn("/var/tmp/data");
  const SandboxSpec s = PlanReplicaSandbox(HostLayout{}, v);
  EXPECT_FALSE(Has(s, Kind::kSymlink, "/var/tmp"));
  EXPECT_TRUE(Has(s, Kind::kBind, v.cwd, true));
  // Without one there, /var/tmp is /tmp.
  v.cwd = v.tmp = "/w";
  v.writable = {v.cwd};
  EXPECT_TRUE(Has(PlanReplicaSandbox(HostLayout{}, v), Kind::kSymlink, "/var/tmp"));
}

// ---- The kernel log's memory-limit kills ----------------------------------

constexpr char kCid[] = "bd231360e645525df61cb4398f2eb3fc03e4cf5bd0bce175a45a0682a19835e9";

std::string OomRecord(const std::string& memcg, const std::string& task, int pid) {
  return "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-x,mems_allowed=0,oom_memcg=" + memcg +
         ",task_memcg=" + memcg + ",task=" + task + ",pid=" + std::to_string(pid) + ",uid=524301";
}

TEST(FindOomKillTest, TheLastRecordOfTheCgroup) {
  const std::string container = std::string("/libpod_parent/libpod-") + kCid;
  const std::string other = "/libpod_parent/libpod-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  struct Row {
    std::string name;
    std::vector<std::string> log;
    std::string part;
    std::optional<OomKill> want;
  };
  const Row rows[] = {
      {"none", {"Linux version 6.1", "random: crng init done"}, kCid, std::nullopt},
      {"another container's", {OomRecord(other, "python3", 7)}, kCid, std::nullopt},
      {"its own", {"Memory cgroup stats for " + container + ":", OomRecord(container, "python3", 14778),
                   "Memory cgroup out of memory: Killed process 14778 (python3)"},
       kCid, OomKill{"python3", 14778, container}},
      {"the last of two", {OomRecord(container, "a", 1), OomRecord(other, "b", 2), OomRecord(container, "c", 3)},
       kCid, OomKill{"c", 3, container}},
      {"its task's cgroup below the one at its limit",
       {"oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/mlengine/p/j,task_memcg=/mlengine/p/j/libpod-" +
        std::string(kCid) + ",task=python3,pid=9,uid=1"},
       kCid, OomKill{"python3", 9, "/mlengine/p/j"}},
      {"an empty part matches nothing", {OomRecord(container, "python3", 1)}, "", std::nullopt},
      {"a pid that does not parse", {"oom-kill:oom_memcg=/" + std::string(kCid) + ",task=t,pid=x"}, kCid,
       OomKill{"t", 0, "/" + std::string(kCid)}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(FindOomKill(row.log, row.part), row.want);
  }
}

// The kernel's own log, as root: it holds the boot's first records.
TEST(ReadKernelLogTest, ReadsTheRecordsAsRoot) {
  if (::geteuid() != 0 || ::access("/dev/kmsg", R_OK) != 0) GTEST_SKIP() << "needs root and /dev/kmsg";
  const std::vector<std::string> log = ReadKernelLog();
  ASSERT_FALSE(log.empty());
  for (const std::string& text : log) EXPECT_EQ(text.find('\n'), std::string::npos) << text;
}

}  // namespace
}  // namespace mle::sandbox
