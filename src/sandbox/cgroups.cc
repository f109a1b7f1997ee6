#include "sandbox/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "rundir/file_io.h"

namespace mle::sandbox {
namespace {

namespace fs = std::filesystem;

constexpr char kGroupDir[] = "mlengine";     // below <own>: every group
constexpr char kDaemonLeaf[] = "mlengined";  // v2: where mlengined itself runs
constexpr char kEnableControllers[] = "+cpu +memory +pids";
constexpr int64_t kCpuPeriodUs = 100000;
constexpr int64_t kMinCpuQuotaUs = 1000;  // the least quota the kernel takes
constexpr int64_t kMib = 1024 * 1024;
constexpr std::chrono::milliseconds kRemoveBound{5000};
constexpr int kCreateAttempts = 5;  // Create's mkdir chain, when a Remove pruned a parent meanwhile
const char* const kNeeded[] = {"cpu", "memory", "pids"};
constexpr char kFavorDynmods[] = "favordynmods";  // the cgroup2 mount option

// What an operator reads when no hierarchy can limit jobs: what the host
// has (`found`), and what to do.
absl::Status Unusable(absl::string_view found) {
  return absl::FailedPreconditionError(absl::StrCat(
      "mlengined needs the cgroup controllers cpu, memory and pids to limit jobs; this host has: ", found,
      ". Mount them (cgroup v2: mount -t cgroup2 none /sys/fs/cgroup and make cpu, memory and pids available "
      "to mlengined's cgroup, e.g. Delegate=yes in its systemd unit; cgroup v1: mount the cpu, memory and pids "
      "hierarchies), or turn the sandbox off with `sandbox: {enabled: false}` in the configuration (jobs then "
      "run without limits or isolation)."));
}

// ---- Pure parsing ---------------------------------------------------------

// One line of /proc/self/cgroup: "ID:CONTROLLERS:PATH" (v2: "0::PATH").
struct ProcCgroup {
  std::string hierarchy;
  std::vector<std::string> controllers;
  std::string path;
};

std::vector<ProcCgroup> ParseProcCgroup(absl::string_view text) {
  std::vector<ProcCgroup> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    // The path may hold ':' itself: split at the first two only.
    const size_t a = line.find(':');
    if (a == absl::string_view::npos) continue;
    const size_t b = line.find(':', a + 1);
    if (b == absl::string_view::npos) continue;
    ProcCgroup entry;
    entry.hierarchy = std::string(line.substr(0, a));
    entry.controllers = absl::StrSplit(line.substr(a + 1, b - a - 1), ',', absl::SkipEmpty());
    entry.path = std::string(absl::StripTrailingAsciiWhitespace(line.substr(b + 1)));
    out.push_back(std::move(entry));
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const absl::string_view digits = field.substr(i + 1, 3);
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out.push_back(static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// One line of /proc/self/mountinfo:
// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS".
struct Mount {
  std::string root;
  std::string mount_point;
  std::string fs_type;
  std::vector<std::string> super_options;
};

std::vector<Mount> ParseMountinfo(absl::string_view text) {
  std::vector<Mount> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;  // no file system type: not a mount line
    Mount m;
    m.root = UnescapeMountField(f[3]);
    m.mount_point = UnescapeMountField(f[4]);
    m.fs_type = std::string(f[dash + 1]);
    if (dash + 3 < f.size()) m.super_options = absl::StrSplit(f[dash + 3], ',', absl::SkipEmpty());
    out.push_back(std::move(m));
  }
  return out;
}

bool Contains(const std::vector<std::string>& list, absl::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The directory of cgroup `path` (as /proc/self/cgroup shows it) through
// mount `m`, or nullopt when the mount does not show it (a bind of another
// subtree, or a path outside this cgroup namespace: "/../x").
std::optional<std::string> DirThrough(const Mount& m, const std::string& path, const std::string& fs_prefix) {
  if (path.empty() || path[0] != '/') return std::nullopt;
  for (absl::string_view seg : absl::StrSplit(path, '/')) {
    if (seg == "..") return std::nullopt;
  }
  std::string rel;
  if (m.root == "/") {
    rel = path;
  } else if (path == m.root) {
    rel = "/";
  } else if (absl::StartsWith(path, m.root + "/")) {
    rel = path.substr(m.root.size());
  } else {
    return std::nullopt;
  }
  std::string dir = absl::StrCat(absl::StripSuffix(fs_prefix, "/"), m.mount_point);
  if (rel != "/") absl::StrAppend(&dir, absl::StripSuffix(rel, "/"));
  return dir;
}

// "KEY VALUE" lines (memory.events, pids.events, memory.oom_control): the
// value of `key`, 0 when absent; INTERNAL naming `file` when it is no
// integer.
absl::StatusOr<int64_t> KeyedValue(absl::string_view text, absl::string_view key, const std::string& file) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.empty() || f[0] != key) continue;
    int64_t value = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &value)) {
      return absl::InternalError(absl::StrCat("cannot parse ", file, ": \"", line, "\""));
    }
    return value;
  }
  return 0;
}

absl::StatusOr<int64_t> SingleValue(absl::string_view text, const std::string& file) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
    return absl::InternalError(absl::StrCat("cannot parse ", file, ": \"", absl::StripAsciiWhitespace(text), "\""));
  }
  return value;
}

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("cgroup name is empty");
  for (absl::string_view seg : absl::StrSplit(name, '/')) {
    const bool valid = !seg.empty() && seg != "." && seg != ".." && std::all_of(seg.begin(), seg.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (!valid) {
      return absl::InvalidArgumentError(absl::StrCat("invalid cgroup name \"", name,
                                                     "\": segments separated by '/' must be [A-Za-z0-9._-]+, "
                                                     "not empty, \".\" or \"..\""));
    }
  }
  return absl::OkStatus();
}

std::string LimitOrNone(int64_t value, absl::string_view none) {
  return value > 0 ? absl::StrCat(value) : std::string(none);
}

// ---- I/O ------------------------------------------------------------------

absl::Status Errno(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat("cannot ", what, " ", path));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// One write(2) of `text`: cgroupfs takes each write as one command. The
// errno of a failure in `*err` when given.
absl::Status WriteFile(const std::string& path, absl::string_view text, int* err = nullptr) {
  int ignored;
  if (err == nullptr) err = &ignored;
  *err = 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(*err = errno, "open", path);
  ssize_t n;
  do {
    n = ::write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  const int write_err = errno;
  const bool closed = ::close(fd) == 0;
  if (n < 0) return Errno(*err = write_err, absl::StrCat("write \"", text, "\" to"), path);
  if (static_cast<size_t>(n) != text.size()) {
    return absl::InternalError(absl::StrCat("short write of \"", text, "\" to ", path));
  }
  if (!closed) return Errno(*err = errno, "close", path);
  return absl::OkStatus();
}

// mkdir that accepts an existing directory (and refuses an existing file:
// a name such as "cgroup.procs" that is a control file of the parent).
absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return absl::OkStatus();
  const int err = errno;
  if (err == EEXIST && IsDirectory(path)) return absl::OkStatus();
  if (err == EEXIST) return absl::InvalidArgumentError(absl::StrCat(path, " exists and is not a cgroup directory"));
  return Errno(err, "create directory", path);
}

// `dir` and every directory below it, parents before their children. One
// readdir(3) a directory, its d_type telling the directories (cgroupfs
// gives it; lstat otherwise); never through a symlink. Cheaper than
// std::filesystem's iterators, which a job's end would pay for each of the
// dozens of control files of every group.
std::vector<std::string> GroupTree(const std::string& dir) {
  std::vector<std::string> out;
  if (!IsDirectory(dir)) return out;
  out.push_back(dir);
  for (size_t i = 0; i < out.size(); ++i) {
    DIR* d = ::opendir(out[i].c_str());
    if (d == nullptr) continue;
    while (const struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = absl::StrCat(out[i], "/", name);
      if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && IsDirectory(path))) out.push_back(path);
    }
    ::closedir(d);
  }
  return out;
}

// The pids in `dir`/cgroup.procs and its subgroups' into `out`.
void CollectProcesses(const std::string& dir, std::set<pid_t>* out) {
  for (const std::string& d : GroupTree(dir)) {
    absl::StatusOr<std::string> text = rundir::ReadFile(d + "/cgroup.procs");
    if (!text.ok()) continue;
    for (absl::string_view field : absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(field, &pid) && pid > 0) out->insert(pid);
    }
  }
}

// v1 memory.limit_in_bytes must stay <= memory.memsw.limit_in_bytes at every
// step, so which file goes first depends on the old values: try the limit
// first, and when the kernel refuses (raising above the old memsw), memsw
// first.
absl::Status WriteMemoryV1(const std::string& dir, const std::string& value) {
  const std::string limit = dir + "/memory.limit_in_bytes";
  const std::string memsw = dir + "/memory.memsw.limit_in_bytes";
  if (!Exists(memsw)) return WriteFile(limit, value);
  int err = 0;
  absl::Status first = WriteFile(limit, value, &err);
  if (first.ok()) return WriteFile(memsw, value);
  if (err != EINVAL) return first;
  if (absl::Status s = WriteFile(memsw, value); !s.ok()) return s;
  return WriteFile(limit, value);
}

}  // namespace

std::optional<std::string> FavorDynmodsMountData(const std::string& mountinfo) {
  for (const Mount& m : ParseMountinfo(mountinfo)) {
    if (m.fs_type != "cgroup2") continue;
    if (Contains(m.super_options, kFavorDynmods)) return std::nullopt;
    std::vector<std::string> keep;
    for (const std::string& o : m.super_options) {
      if (o != "rw" && o != "ro") keep.push_back(o);
    }
    keep.emplace_back(kFavorDynmods);
    return absl::StrJoin(keep, ",");
  }
  return std::string(kFavorDynmods);
}

absl::StatusOr<bool> TurnOnFavorDynmods(const std::string& scratch) {
  absl::StatusOr<std::string> mountinfo = rundir::ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status();
  const std::optional<std::string> data = FavorDynmodsMountData(*mountinfo);
  if (!data) return false;
  auto failed = [&](absl::string_view what, int err) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot turn on cgroup favordynmods: ", what, " ", scratch, ": ", std::strerror(err)));
  };
  if (::mkdir(scratch.c_str(), 0700) != 0 && errno != EEXIST) return failed("mkdir", errno);
  if (::mount("cgroup2", scratch.c_str(), "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, data->c_str()) != 0) {
    const int err = errno;
    ::rmdir(scratch.c_str());
    return failed(absl::StrCat("mount -t cgroup2 -o ", *data), err);
  }
  absl::StatusOr<std::string> after = rundir::ReadFile("/proc/self/mountinfo");
  bool took = false;
  if (after.ok()) {
    for (const Mount& m : ParseMountinfo(*after)) {
      if (m.mount_point == scratch) took = Contains(m.super_options, kFavorDynmods);
    }
  }
  ::umount2(scratch.c_str(), MNT_DETACH);
  ::rmdir(scratch.c_str());
  if (!took) {
    return absl::FailedPreconditionError(
        "cannot turn on cgroup favordynmods: the kernel did not take it (it needs Linux 6.0 or later, and "
        "mlengined in the host's cgroup namespace)");
  }
  return true;
}

Cgroups::Cgroups(CgroupVersion version, std::string cpu_own, std::string memory_own, std::string pids_own)
    : version_(version),
      cpu_own_(std::move(cpu_own)),
      memory_own_(std::move(memory_own)),
      pids_own_(std::move(pids_own)) {}

absl::StatusOr<Cgroups> Cgroups::Detect(const std::string& proc_self_cgroup, const std::string& mountinfo,
                                        const std::string& fs_prefix) {
  const std::vector<ProcCgroup> groups = ParseProcCgroup(proc_self_cgroup);
  const std::vector<Mount> mounts = ParseMountinfo(mountinfo);

  // v1: each controller's hierarchy line and a cgroup mount showing it.
  std::vector<std::string> v1_dirs, v1_have, v1_missing;
  for (const char* controller : kNeeded) {
    std::optional<std::string> dir;
    for (const ProcCgroup& g : groups) {
      if (g.hierarchy == "0" || !Contains(g.controllers, controller)) continue;
      for (const Mount& m : mounts) {
        if (m.fs_type != "cgroup" || !Contains(m.super_options, controller)) continue;
        if ((dir = DirThrough(m, g.path, fs_prefix))) break;
      }
      break;
    }
    if (dir) {
      v1_dirs.push_back(*dir);
      v1_have.push_back(controller);
    } else {
      v1_missing.push_back(controller);
    }
  }
  if (v1_missing.empty()) return Cgroups(CgroupVersion::kV1, v1_dirs[0], v1_dirs[1], v1_dirs[2]);
  const std::string v1_found = v1_have.empty() ? std::string("no cgroup v1 hierarchy of cpu, memory or pids")
                                               : absl::StrCat("cgroup v1 ", absl::StrJoin(v1_have, ", "), " (missing ",
                                                              absl::StrJoin(v1_missing, ", "), ")");

  // v2: the unified line, a cgroup2 mount showing it, and the controllers
  // its cgroup.controllers offers.
  std::string v2_found;
  for (const ProcCgroup& g : groups) {
    if (g.hierarchy != "0" || !g.controllers.empty()) continue;
    std::string path = g.path;
    // Already moved into its leaf by Prepare: <own> is the parent.
    if (absl::EndsWith(path, absl::StrCat("/", kDaemonLeaf))) {
      path.resize(path.size() - sizeof(kDaemonLeaf));
      if (path.empty()) path = "/";
    }
    for (const Mount& m : mounts) {
      if (m.fs_type != "cgroup2") continue;
      std::optional<std::string> dir = DirThrough(m, path, fs_prefix);
      if (!dir) continue;
      const std::string file = *dir + "/cgroup.controllers";
      absl::StatusOr<std::string> text = rundir::ReadFile(file);
      if (!text.ok()) {
        v2_found = absl::StrCat("cgroup v2 at ", m.mount_point, ", but ", text.status().message());
        break;
      }
      const std::vector<std::string> offered = absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
      std::vector<std::string> missing;
      for (const char* controller : kNeeded) {
        if (!Contains(offered, controller)) missing.push_back(controller);
      }
      // The hierarchy's root (where the mount shows it): Prepare may take a
      // group of its own there when <own> cannot hand the controllers down.
      std::string root;
      if (m.root == "/") {
        root = absl::StrCat(absl::StripSuffix(fs_prefix, "/"), m.mount_point);
        const absl::StatusOr<std::string> at_root = rundir::ReadFile(root + "/cgroup.controllers");
        const std::vector<std::string> root_offers =
            at_root.ok() ? absl::StrSplit(*at_root, absl::ByAnyChar(" \n"), absl::SkipEmpty())
                         : std::vector<std::string>{};
        for (const char* controller : kNeeded) {
          if (!Contains(root_offers, controller)) root.clear();
        }
      }
      if (missing.empty()) {
        Cgroups found(CgroupVersion::kV2, *dir, *dir, *dir);
        found.v2_root_ = root;
        return found;
      }
      v2_found = absl::StrCat("cgroup v2 at ", m.mount_point, ", whose ", file, " lists ",
                              offered.empty() ? "no controller" : absl::StrJoin(offered, " "), " (missing ",
                              absl::StrJoin(missing, ", "), ")");
      if (!root.empty()) {
        Cgroups found(CgroupVersion::kV2, *dir, *dir, *dir);
        found.v2_root_ = root;
        found.own_problem_ = v2_found;
        found.unusable_ = Unusable(absl::StrCat(v1_found, "; ", v2_found));
        return found;
      }
      break;
    }
    break;
  }
  if (v2_found.empty()) v2_found = "no cgroup v2 mount holding this process's cgroup";

  return Unusable(absl::StrCat(v1_found, "; ", v2_found));
}

absl::StatusOr<Cgroups> Cgroups::DetectHost() {
  absl::StatusOr<std::string> cgroup = rundir::ReadFile("/proc/self/cgroup");
  if (!cgroup.ok()) return cgroup.status();
  absl::StatusOr<std::string> mountinfo = rundir::ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status();
  return Detect(*cgroup, *mountinfo);
}

CgroupVersion Cgroups::version() const { return version_; }

std::string Cgroups::CpuBase() const { return absl::StrCat(cpu_own_, "/", kGroupDir); }
std::string Cgroups::MemoryBase() const { return absl::StrCat(memory_own_, "/", kGroupDir); }
std::string Cgroups::PidsBase() const { return absl::StrCat(pids_own_, "/", kGroupDir); }

std::vector<std::string> Cgroups::Bases() const {
  std::vector<std::string> bases;
  for (std::string base : {CpuBase(), MemoryBase(), PidsBase()}) {
    if (!Contains(bases, base)) bases.push_back(std::move(base));
  }
  return bases;
}

absl::Status Cgroups::Prepare(const std::string& fallback) {
  if (version_ == CgroupVersion::kV1) {
    for (const std::string& base : Bases()) {
      if (absl::Status s = MakeDir(base); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!fallback.empty()) {
    if (absl::Status s = CheckName(fallback); !s.ok() || absl::StrContains(fallback, "/")) {
      return absl::InvalidArgumentError(absl::StrCat("not a cgroup name: ", fallback));
    }
  }
  const bool may_move = !fallback.empty() && !v2_root_.empty();
  std::string why;
  if (own_problem_.empty()) {
    std::string others;
    absl::Status s = PrepareV2(cpu_own_, &others);
    if (s.ok() || others.empty() || !may_move) return s;
    why = absl::StrCat("its cgroup ", cpu_own_, " holds other processes (pids ", others, ")");
  } else if (!may_move) {
    return unusable_;
  } else {
    why = own_problem_;
  }
  // A group of its own at the hierarchy's root, as a service manager would
  // give it (the root takes controllers whatever processes it holds).
  const std::string left = cpu_own_;
  const std::string own = absl::StrCat(v2_root_, "/", fallback);
  if (absl::Status s = WriteFile(v2_root_ + "/cgroup.subtree_control", kEnableControllers); !s.ok()) return s;
  if (absl::Status s = MakeDir(own); !s.ok()) return s;
  std::string others;
  if (absl::Status s = PrepareV2(own, &others); !s.ok()) return s;
  ::rmdir(absl::StrCat(left, "/", kDaemonLeaf).c_str());  // where the first try put it, if it did
  cpu_own_ = memory_own_ = pids_own_ = own;
  relocation_ = absl::StrCat("in ", own, ", a cgroup of its own: ", why);
  return absl::OkStatus();
}

absl::Status Cgroups::PrepareV2(const std::string& own, std::string* others_in_own) const {
  others_in_own->clear();
  const std::string leaf = absl::StrCat(own, "/", kDaemonLeaf);
  if (absl::Status s = MakeDir(leaf); !s.ok()) return s;
  if (absl::Status s = WriteFile(leaf + "/cgroup.procs", absl::StrCat(::getpid())); !s.ok()) return s;
  const std::string own_control = own + "/cgroup.subtree_control";
  int err = 0;
  if (absl::Status s = WriteFile(own_control, kEnableControllers, &err); !s.ok()) {
    if (err != EBUSY) return s;  // EBUSY: processes left in <own>
    std::set<pid_t> others;
    if (absl::StatusOr<std::string> text = rundir::ReadFile(own + "/cgroup.procs"); text.ok()) {
      for (absl::string_view field : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
        int pid = 0;
        if (absl::SimpleAtoi(field, &pid)) others.insert(pid);
      }
    }
    *others_in_own = others.empty() ? std::string("unknown") : absl::StrJoin(others, ", ");
    return absl::FailedPreconditionError(absl::StrCat(
        s.message(), ": processes other than mlengined are in ", own, " (pids ", *others_in_own,
        "); run mlengined in a cgroup of its own (systemd: its own service with Delegate=yes)"));
  }
  const std::string base = absl::StrCat(own, "/", kGroupDir);
  if (absl::Status s = MakeDir(base); !s.ok()) return s;
  return WriteFile(base + "/cgroup.subtree_control", kEnableControllers);
}

const std::string& Cgroups::relocation() const { return relocation_; }

std::vector<std::string> Cgroups::Dirs(const std::string& name) const {
  if (!CheckName(name).ok()) return {};
  std::vector<std::string> dirs;
  for (const std::string& base : Bases()) dirs.push_back(absl::StrCat(base, "/", name));
  return dirs;
}

absl::StatusOr<std::vector<std::string>> Cgroups::Create(const std::string& name, const CgroupLimits& limits) const {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  if (limits.cpu_milli < 0 || limits.memory_mib < 0 || limits.pids < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative cgroup limit for ", name, ": cpu_milli ", limits.cpu_milli,
                                                   ", memory_mib ", limits.memory_mib, ", pids ", limits.pids));
  }
  if (limits.cpu_milli > std::numeric_limits<int64_t>::max() / (kCpuPeriodUs / 1000) ||
      limits.memory_mib > std::numeric_limits<int64_t>::max() / kMib) {
    return absl::InvalidArgumentError(absl::StrCat("cgroup limit out of range for ", name));
  }
  // <own>/mlengine counts as the first intermediate: made again if gone.
  // Remove prunes intermediates that became empty: one may go between our
  // mkdir of it and of its child (ENOENT), and the chain is made again.
  const std::vector<std::string> segments = absl::StrSplit(name, '/');
  // v1: deepest first. Most of the chain exists (a project's group, often
  // the job's), and each mkdir refused with EEXIST is a path walk in
  // cgroupfs: climb while a parent is missing, then make the rest
  // downwards. v2: top-down, enabling the controllers for the children in
  // each parent on the way.
  auto make_chain = [&]() -> absl::Status {
    for (const std::string& base : Bases()) {
      std::vector<std::string> chain = {base};
      for (const std::string& segment : segments) chain.push_back(absl::StrCat(chain.back(), "/", segment));
      if (version_ == CgroupVersion::kV2) {
        for (size_t i = 0; i < chain.size(); ++i) {
          if (absl::Status s = MakeDir(chain[i]); !s.ok()) return s;
          if (i + 1 < chain.size()) {
            if (absl::Status s = WriteFile(chain[i] + "/cgroup.subtree_control", kEnableControllers); !s.ok()) {
              return s;
            }
          }
        }
        continue;
      }
      // The deepest directory that exists or could be made; then the rest.
      size_t made = chain.size();
      for (;;) {
        absl::Status s = MakeDir(chain[made - 1]);
        if (s.ok()) break;
        if (!absl::IsNotFound(s) || made == 1) return s;
        --made;
      }
      for (; made < chain.size(); ++made) {
        if (absl::Status s = MakeDir(chain[made]); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  };
  absl::Status made = make_chain();
  for (int attempt = 1; absl::IsNotFound(made) && attempt < kCreateAttempts; ++attempt) made = make_chain();
  if (!made.ok()) return made;

  const int64_t quota_us =
      limits.cpu_milli > 0 ? std::max(kMinCpuQuotaUs, limits.cpu_milli * (kCpuPeriodUs / 1000)) : 0;
  const int64_t memory_bytes = limits.memory_mib * kMib;
  const std::string cpu = absl::StrCat(CpuBase(), "/", name);
  const std::string memory = absl::StrCat(MemoryBase(), "/", name);
  const std::string pids = absl::StrCat(PidsBase(), "/", name);
  if (version_ == CgroupVersion::kV1) {
    // Each write of a bandwidth file walks every cpu group of the host in
    // the kernel (tg_cfs_schedulable): the period, the kernel's default in a
    // new group, is written only when it differs.
    const absl::StatusOr<std::string> period = rundir::ReadFile(cpu + "/cpu.cfs_period_us");
    if (!period.ok() || absl::StripAsciiWhitespace(*period) != absl::StrCat(kCpuPeriodUs)) {
      if (absl::Status s = WriteFile(cpu + "/cpu.cfs_period_us", absl::StrCat(kCpuPeriodUs)); !s.ok()) return s;
    }
    if (absl::Status s = WriteFile(cpu + "/cpu.cfs_quota_us", LimitOrNone(quota_us, "-1")); !s.ok()) return s;
    if (absl::Status s = WriteMemoryV1(memory, LimitOrNone(memory_bytes, "-1")); !s.ok()) return s;
    if (absl::Status s = WriteFile(pids + "/pids.max", LimitOrNone(limits.pids, "max")); !s.ok()) return s;
  } else {
    const std::string& dir = cpu;
    if (absl::Status s = WriteFile(dir + "/cpu.max", absl::StrCat(LimitOrNone(quota_us, "max"), " ", kCpuPeriodUs));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteFile(dir + "/memory.max", LimitOrNone(memory_bytes, "max")); !s.ok()) return s;
    if (Exists(dir + "/memory.swap.max")) {
      if (absl::Status s = WriteFile(dir + "/memory.swap.max", memory_bytes > 0 ? "0" : "max"); !s.ok()) return s;
    }
    if (absl::Status s = WriteFile(dir + "/pids.max", LimitOrNone(limits.pids, "max")); !s.ok()) return s;
  }
  return Dirs(name);
}

absl::StatusOr<CgroupUsage> Cgroups::Usage(const std::string& name) const {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string memory = absl::StrCat(MemoryBase(), "/", name);
  const std::string pids = absl::StrCat(PidsBase(), "/", name);
  if (!IsDirectory(memory) || !IsDirectory(pids)) {
    return absl::NotFoundError(absl::StrCat("no cgroup ", name, " (", memory, ")"));
  }
  CgroupUsage usage;
  const std::string oom_file = memory + (version_ == CgroupVersion::kV1 ? "/memory.oom_control" : "/memory.events");
  absl::StatusOr<std::string> text = rundir::ReadFile(oom_file);
  if (!text.ok()) return text.status();
  absl::StatusOr<int64_t> value = KeyedValue(*text, "oom_kill", oom_file);
  if (!value.ok()) return value.status();
  usage.oom_kills = *value;

  const std::string peak_file =
      memory + (version_ == CgroupVersion::kV1 ? "/memory.max_usage_in_bytes" : "/memory.peak");
  if (version_ == CgroupVersion::kV1 || Exists(peak_file)) {
    if (!(text = rundir::ReadFile(peak_file)).ok()) return text.status();
    if (!(value = SingleValue(*text, peak_file)).ok()) return value.status();
    usage.memory_peak_bytes = *value;
  }

  const std::string pids_file = pids + "/pids.events";
  if (!(text = rundir::ReadFile(pids_file)).ok()) return text.status();
  if (!(value = KeyedValue(*text, "max", pids_file)).ok()) return value.status();
  usage.pids_denied = *value;

  const std::string current_file = pids + "/pids.current";
  if (!(text = rundir::ReadFile(current_file)).ok()) return text.status();
  if (!(value = SingleValue(*text, current_file)).ok()) return value.status();
  usage.tasks = *value;
  return usage;
}

absl::Status Cgroups::Rename(const std::string& from, const std::string& to) const {
  if (absl::Status s = CheckName(from); !s.ok()) return s;
  if (absl::Status s = CheckName(to); !s.ok()) return s;
  if (fs::path(from).parent_path() != fs::path(to).parent_path()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot rename cgroup ", from, " to ", to, ": not the same parent"));
  }
  if (version_ != CgroupVersion::kV1) {
    return absl::UnimplementedError(absl::StrCat("cannot rename cgroup ", from, ": cgroup v2 renames no group"));
  }
  for (const std::string& base : Bases()) {
    const std::string old_dir = absl::StrCat(base, "/", from);
    const std::string new_dir = absl::StrCat(base, "/", to);
    if (::rename(old_dir.c_str(), new_dir.c_str()) == 0) continue;
    const int err = errno;
    if (err == ENOENT && IsDirectory(new_dir)) continue;  // renamed before
    return Errno(err, "rename", absl::StrCat(old_dir, " to ", new_dir));
  }
  return absl::OkStatus();
}

absl::Status Cgroups::ResetPeak(const std::string& name) const {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  const std::string memory = absl::StrCat(MemoryBase(), "/", name);
  if (version_ == CgroupVersion::kV1) return WriteFile(memory + "/memory.max_usage_in_bytes", "0");
  const std::string peak = memory + "/memory.peak";
  // Kernels before 6.12 show memory.peak but take no write to it.
  if (Exists(peak)) WriteFile(peak, "reset").IgnoreError();
  return absl::OkStatus();
}

std::vector<pid_t> Cgroups::Processes(const std::string& name) const {
  std::set<pid_t> pids;
  for (const std::string& dir : Dirs(name)) CollectProcesses(dir, &pids);
  return std::vector<pid_t>(pids.begin(), pids.end());
}

absl::Status Cgroups::Remove(const std::string& name, const std::vector<std::string>& children) const {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  for (const std::string& child : children) {
    if (absl::Status s = CheckName(absl::StrCat(name, "/", child)); !s.ok()) return s;
  }
  const auto deadline = std::chrono::steady_clock::now() + kRemoveBound;
  const pid_t self = ::getpid();
  std::chrono::milliseconds pause{1};
  auto wait = [&pause] {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  };
  // The group's directories in one controller, parents first: listed, or
  // (`known`) the group and the `children` the caller made, without
  // listing any directory (each readdir of a cgroup directory reads its
  // dozens of control files).
  auto tree = [&](const std::string& base, bool known) {
    const std::string dir = absl::StrCat(base, "/", name);
    if (!known) return GroupTree(dir);
    std::vector<std::string> out = {dir};
    for (const std::string& child : children) out.push_back(absl::StrCat(dir, "/", child));
    return out;
  };
  // Removes the group's directories, deepest first, in every controller.
  // `patient`: a directory still busy (a killed process not yet gone) is
  // tried again until the deadline; otherwise EBUSY (a process, or a
  // subgroup the caller did not name) ends the attempt.
  auto remove_dirs = [&](bool patient, bool known) -> absl::Status {
    for (const std::string& base : Bases()) {
      const std::vector<std::string> dirs = tree(base, known);
      for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
        if (!absl::StartsWith(*it, base + "/")) continue;  // never outside <own>/mlengine
        for (;;) {
          if (::rmdir(it->c_str()) == 0 || errno == ENOENT) break;
          const int err = errno;
          if (err != EBUSY || !patient) return Errno(err, "remove", *it);
          if (std::chrono::steady_clock::now() > deadline) {
            return absl::UnavailableError(absl::StrCat("cannot remove ", *it, ": ", std::strerror(err)));
          }
          wait();
        }
      }
    }
    return absl::OkStatus();
  };

  // The intermediates above the group (a project's), when it left them
  // empty: the kernel refuses to remove one that still holds a group, so a
  // sibling's is never touched, and Create makes them again when one goes
  // under it. <own>/mlengine itself stays.
  auto prune_parents = [&] {
    for (const std::string& base : Bases()) {
      for (fs::path dir = fs::path(absl::StrCat(base, "/", name)).parent_path(); dir.string() != base;
           dir = dir.parent_path()) {
        if (!absl::StartsWith(dir.string(), base + "/") || ::rmdir(dir.c_str()) != 0) break;
      }
    }
  };

  // Most groups are empty by now (their replicas exited): the kernel's
  // rmdir refuses a group with a process in it (EBUSY), so a removal that
  // succeeds proves there was none, without reading a single cgroup.procs.
  if (remove_dirs(false, true).ok() || remove_dirs(false, false).ok()) {
    prune_parents();
    return absl::OkStatus();
  }

  // Kill until no process is left: killed processes leave cgroup.procs
  // when they have exited, and a process may fork while we kill.
  for (;;) {
    std::vector<pid_t> pids = Processes(name);
    pids.erase(std::remove(pids.begin(), pids.end(), self), pids.end());
    if (pids.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat("processes of cgroup ", name, " survived SIGKILL for ",
                                                 kRemoveBound.count() / 1000, " s: ", absl::StrJoin(pids, ", ")));
    }
    if (version_ == CgroupVersion::kV2) {
      const std::string kill_file = absl::StrCat(CpuBase(), "/", name, "/cgroup.kill");
      if (Exists(kill_file)) WriteFile(kill_file, "1").IgnoreError();  // the signals below still go out
    }
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    wait();
  }
  absl::Status removed = remove_dirs(true, false);
  if (removed.ok()) prune_parents();
  return removed;
}

std::vector<std::string> Cgroups::List() const {
  const std::string base = MemoryBase();
  std::set<std::string> dirs, parents;
  for (const std::string& dir : GroupTree(base)) {
    if (dir == base) continue;
    const fs::path rel = fs::path(dir).lexically_relative(base);
    dirs.insert(rel.string());
    if (rel.has_parent_path()) parents.insert(rel.parent_path().string());
  }
  std::vector<std::string> leaves;
  for (const std::string& d : dirs) {
    if (!parents.count(d)) leaves.push_back(d);
  }
  return leaves;
}

}  // namespace mle::sandbox
