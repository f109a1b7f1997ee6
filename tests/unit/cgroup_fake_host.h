// What the cgroup tests share (cgroups_test, cgroup_pool_test): this
// host's cgroup layout and a pure v2 host's as /proc shows them, file
// helpers, and FakeHost, a fake host's cgroup trees (plain directories and
// files laid out as the kernel shows them) below a temporary directory.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <vector>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "sandbox/cgroups.h"

namespace mle::sandbox::testing {

namespace fs = std::filesystem;

// ---- This host's real layout (captured on the development VM) -------------

constexpr char kHybridCgroup[] = R"(9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/ccad0ab77607e67f7bf76283b494e183
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
)";

constexpr char kHybridMountinfo[] = R"(22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334076k,nr_inodes=3083519,mode=755
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683664k
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
28 27 0:25 / /mnt/sandboxing/model_tools_env/v1/python ro,nosuid,nodev,relatime - tmpfs model_tools_unavailable ro,size=4k,mode=755
29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw,mode=600,ptmxmode=000
30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683664k
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
)";

// A systemd host with pure cgroup v2 (Debian 12, Ubuntu 22.04 and later).
constexpr char kV2Cgroup[] = "0::/system.slice/mlengined.service\n";
constexpr char kV2Mountinfo[] =
    R"(22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
24 23 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
)";
constexpr char kV2Own[] = "/sys/fs/cgroup/system.slice/mlengined.service";

// ---- Helpers -----------------------------------------------------------------

inline void WriteText(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripTrailingAsciiWhitespace(ss.str()));
}

// A fresh directory, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cgroups_test.XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct FakeHost {
  explicit FakeHost(CgroupVersion version, const std::string& procs = "") {
    if (version == CgroupVersion::kV1) {
      for (const char* d : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory/process_api/ccad0ab77607e67f7bf76283b494e183",
                            "/sys/fs/cgroup/pids"}) {
        fs::create_directories(tmp.path() + d);
      }
      cgroups.emplace(*Cgroups::Detect(kHybridCgroup, kHybridMountinfo, tmp.path()));
    } else {
      own = tmp.path() + kV2Own;
      WriteText(own + "/cgroup.controllers", "cpuset cpu io memory pids");
      WriteText(own + "/cgroup.procs", procs);
      cgroups.emplace(*Cgroups::Detect(kV2Cgroup, kV2Mountinfo, tmp.path()));
    }
  }
  // The one directory of `name` holding controller `file`'s directory.
  std::string Dir(const std::string& name, const std::string& controller) const {
    for (const std::string& d : cgroups->Dirs(name)) {
      if (cgroups->version() == CgroupVersion::kV2 || absl::StrContains(d, "/" + controller + "/")) return d;
    }
    return "";
  }

  TempDir tmp;
  std::string own;  // v2
  std::optional<Cgroups> cgroups;
};

// ---- The kernel (root only) -----------------------------------------------

// Forks a child that joins `dirs` (writes "0" into each cgroup.procs), tells
// the parent through a pipe, then returns `body()` as its exit status.
inline pid_t ForkInGroup(const std::vector<std::string>& dirs, const std::function<int()>& body) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    for (const std::string& dir : dirs) {
      const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(120);
      ::close(fd);
    }
    if (::write(ready[1], "j", 1) != 1) ::_exit(121);
    ::close(ready[1]);
    ::_exit(body());
  }
  ::close(ready[1]);
  char c = 0;
  const bool joined = pid > 0 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return joined ? pid : -1;
}

inline int WaitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// A fixture of the kernel's cgroup v1 trees (root only; skipped elsewhere):
// this host's Cgroups, prepared, and a group `PREFIX-PID` of the test's own
// below `<own>/mlengine`, removed with everything below it at the end (and
// `<own>/mlengine` too when the test made it).
class CgroupsV1KernelTest : public ::testing::Test {
 protected:
  explicit CgroupsV1KernelTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups";
    absl::StatusOr<Cgroups> host = Cgroups::DetectHost();
    if (!host.ok() || host->version() != CgroupVersion::kV1) {
      GTEST_SKIP() << "no cgroup v1 cpu, memory and pids here: " << host.status();
    }
    cgroups_.emplace(*host);
    top_ = absl::StrCat(prefix_, "-", ::getpid());
    for (const std::string& dir : cgroups_->Dirs(top_)) {
      const std::string base = fs::path(dir).parent_path().string();
      if (!fs::exists(base)) made_bases_.push_back(base);
    }
    ASSERT_TRUE(cgroups_->Prepare().ok());
  }

  void TearDown() override {
    if (!cgroups_) return;
    EXPECT_TRUE(cgroups_->Remove(top_).ok());
    for (const std::string& dir : cgroups_->Dirs(top_)) EXPECT_FALSE(fs::exists(dir)) << dir;
    for (const std::string& base : made_bases_) ::rmdir(base.c_str());
  }

  std::string Group(const std::string& leaf) const { return top_ + "/" + leaf; }

  const std::string prefix_;
  std::optional<Cgroups> cgroups_;
  std::string top_;
  std::vector<std::string> made_bases_;
};

}  // namespace mle::sandbox::testing
