#include "sandbox/plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mle::sandbox {
namespace {

ViewEntry Bind(const std::string& path, bool writable) { return {ViewEntry::Kind::kBind, writable, path, path}; }

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

SandboxSpec PlanReplicaSandbox(const HostLayout& host, const ReplicaView& view) {
  SandboxSpec spec;
  spec.uid = view.uid;
  spec.gid = view.gid;
  // Objects written into a bucket stay readable and replaceable by later
  // jobs that may (the bucket's directories are only reachable through views).
  spec.umask = 0;
  spec.cwd = view.cwd;
  spec.cgroups = view.cgroups;

  std::vector<ViewEntry> entries;
  for (const auto& [path, target] : host.links) entries.push_back({ViewEntry::Kind::kSymlink, false, target, path});
  for (const auto& dir : host.read_only) entries.push_back(Bind(dir, false));
  for (const auto& dir : view.read_only) entries.push_back(Bind(dir, false));

  // /dev is a tmpfs of its own holding the devices and /dev/shm (a
  // directory only the job may write: mode 1777 in a tmpfs owned by root).
  entries.push_back({ViewEntry::Kind::kTmpfs, true, "mode=0755", "/dev"});
  std::set<std::string> gpu_devices;
  for (int g : view.gpus) gpu_devices.insert(absl::StrCat("/dev/nvidia", g));
  for (const auto& dev : host.devices) {
    const bool gpu = dev.rfind("/dev/nvidia", 0) == 0;
    const bool per_gpu = gpu && dev.size() > 11 && std::isdigit(static_cast<unsigned char>(dev[11]));
    // The GPU control devices go with any GPU; a numbered one only with its own.
    if (gpu && (view.gpus.empty() || (per_gpu && !gpu_devices.count(dev)))) continue;
    entries.push_back({ViewEntry::Kind::kDevice, true, dev, dev});
  }
  entries.push_back({ViewEntry::Kind::kDir, true, "1777", "/dev/shm"});
  entries.push_back({ViewEntry::Kind::kSymlink, false, "/proc/self/fd", "/dev/fd"});
  entries.push_back({ViewEntry::Kind::kSymlink, false, "/proc/self/fd/0", "/dev/stdin"});
  entries.push_back({ViewEntry::Kind::kSymlink, false, "/proc/self/fd/1", "/dev/stdout"});
  entries.push_back({ViewEntry::Kind::kSymlink, false, "/proc/self/fd/2", "/dev/stderr"});
  entries.push_back({ViewEntry::Kind::kProc, false, "", "/proc"});
  entries.push_back({ViewEntry::Kind::kSysfs, false, "", "/sys"});
  entries.push_back({ViewEntry::Kind::kBind, true, view.tmp, "/tmp"});
  entries.push_back({ViewEntry::Kind::kSymlink, false, "/tmp", "/var/tmp"});
  if (!view.passwd.empty()) entries.push_back({ViewEntry::Kind::kFile, false, view.passwd, "/etc/passwd"});
  if (!view.group.empty()) entries.push_back({ViewEntry::Kind::kFile, false, view.group, "/etc/group"});
  for (const auto& dir : view.writable) entries.push_back(Bind(dir, true));
  if (!view.gcs_root.empty()) {
    entries.push_back({ViewEntry::Kind::kDir, false, "", view.gcs_root});
    for (const auto& b : view.buckets) entries.push_back(Bind(view.gcs_root + "/" + b.bucket, b.writable));
  }
  // An entry below the view's /var/tmp link (a data directory under
  // /var/tmp) needs real directories there: the link goes.
  std::erase_if(entries, [&entries](const ViewEntry& link) {
    return link.kind == ViewEntry::Kind::kSymlink &&
           std::any_of(entries.begin(), entries.end(),
                       [&link](const ViewEntry& e) { return e.target != link.target && Under(e.target, link.target); });
  });
  // An entry below the job's writable /tmp (a data directory under /tmp, as
  // in tests) would have its mount point made in the job's own directory on
  // disk, by root: a small tmpfs over the first directory below /tmp holds
  // those mount points instead (one directory on disk, none for the job to
  // find and no disk inodes made per entry).
  std::set<std::string> shadows;
  for (const auto& e : entries) {
    if (Under(e.target, "/tmp") && e.target != "/tmp") {
      shadows.insert(e.target.substr(0, e.target.find('/', 5)));
    }
  }
  for (const auto& dir : shadows) {
    const ViewEntry shadow{ViewEntry::Kind::kTmpfs, true, "mode=0755,size=64k,nr_inodes=4096", dir};
    auto at = std::find_if(entries.begin(), entries.end(), [&dir](const ViewEntry& e) { return e.target == dir; });
    if (at == entries.end()) {
      entries.push_back(shadow);
    } else if (at->kind == ViewEntry::Kind::kDir) {
      *at = shadow;  // a bare directory (the buckets' root) on the job's disk: the same, in memory
    }
  }
  // Parents before children (a prefix sorts first); an entry inside a
  // read-only bind of the host would need a mount point there: dropped
  // (the planner's callers keep the data directory out of those).
  std::stable_sort(entries.begin(), entries.end(),
                   [](const ViewEntry& a, const ViewEntry& b) { return a.target < b.target; });
  std::vector<std::string> read_only_roots;
  for (const auto& e : entries) {
    bool inside_read_only = false;
    for (const auto& r : read_only_roots) inside_read_only = inside_read_only || (Under(e.target, r) && e.target != r);
    if (inside_read_only && e.target != "/etc/passwd" && e.target != "/etc/group") continue;
    if (!spec.view.empty() && spec.view.back().target == e.target) continue;  // the first of equals wins
    if (e.kind == ViewEntry::Kind::kBind && !e.writable) read_only_roots.push_back(e.target);
    spec.view.push_back(e);
  }
  return spec;
}

std::string PasswdWithIdentity(const std::string& host_passwd, uid_t uid, gid_t gid) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(host_passwd, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    if (f.size() >= 3 && f[2] == absl::StrCat(uid)) continue;
    absl::StrAppend(&out, line, "\n");
  }
  absl::StrAppend(&out, "mlengine-job:x:", uid, ":", gid, ":mlengine job:/tmp:/usr/sbin/nologin\n");
  return out;
}

std::string GroupWithIdentity(const std::string& host_group, gid_t gid) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(host_group, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    if (f.size() >= 3 && f[2] == absl::StrCat(gid)) continue;
    absl::StrAppend(&out, line, "\n");
  }
  absl::StrAppend(&out, "mlengine-job:x:", gid, ":\n");
  return out;
}

}  // namespace mle::sandbox
