#include "sandbox/cgroup_pool.h"

#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mle::sandbox {
namespace {

std::string ParentOf(const std::string& name) { return std::filesystem::path(name).parent_path().string(); }

bool SameLimits(const CgroupLimits& a, const CgroupLimits& b) {
  return a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.pids == b.pids;
}

}  // namespace

CgroupPool::CgroupPool(const Cgroups& cgroups, size_t max_spares) : cgroups_(cgroups), max_spares_(max_spares) {}

absl::StatusOr<std::vector<std::string>> CgroupPool::Acquire(const std::string& name, const CgroupLimits& limits) {
  std::optional<Spare> spare;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(ParentOf(name));
    if (it != free_.end() && !it->second.empty() && !ParentOf(name).empty()) {
      spare = std::move(it->second.back());
      it->second.pop_back();
      if (it->second.empty()) free_.erase(it);
      --count_;
    }
  }
  absl::StatusOr<std::vector<std::string>> dirs = absl::UnknownError("not made");
  if (spare) {
    // The spare was clean when it was put back, and nothing can enter it.
    absl::Status s = cgroups_.Rename(spare->name, name);
    if (s.ok()) s = cgroups_.ResetPeak(name);
    if (s.ok()) {
      dirs = SameLimits(spare->limits, limits) ? absl::StatusOr<std::vector<std::string>>(cgroups_.Dirs(name))
                                               : cgroups_.Create(name, limits);
    }
    if (!s.ok() || !dirs.ok()) {
      // Whatever state it is in (half renamed, a limit the kernel refused
      // with its charges): gone, and made afresh below.
      (void)cgroups_.Remove(spare->name);
      (void)cgroups_.Remove(name);
      spare.reset();
    }
  }
  if (!spare) dirs = cgroups_.Create(name, limits);
  if (dirs.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    limits_[name] = limits;
  }
  return dirs;
}

absl::Status CgroupPool::Release(const std::string& name) {
  std::optional<CgroupLimits> limits;
  std::string spare;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = limits_.find(name); it != limits_.end()) {
      limits = it->second;
      limits_.erase(it);
    }
    // A group this pool did not hand out (one a restart adopted) has limits
    // it does not know: it is removed, not kept.
    if (limits && count_ < max_spares_ && !ParentOf(name).empty() && cgroups_.version() == CgroupVersion::kV1) {
      spare = absl::StrCat(ParentOf(name), "/", kSparePrefix, next_++);
    }
  }
  if (!spare.empty()) {
    absl::StatusOr<CgroupUsage> usage = cgroups_.Usage(name);
    if (usage.ok() && usage->tasks == 0 && usage->oom_kills == 0 && usage->pids_denied == 0 &&
        cgroups_.Rename(name, spare).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      free_[ParentOf(name)].push_back({spare, *limits});
      ++count_;
      return absl::OkStatus();
    }
    if (!usage.ok() && absl::IsNotFound(usage.status())) return absl::OkStatus();  // never made, or gone
    (void)cgroups_.Remove(spare);  // a rename cut short left part of it there
  }
  return cgroups_.Remove(name);
}

size_t CgroupPool::RemoveSpares() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.clear();
    count_ = 0;
  }
  size_t removed = 0;
  for (const std::string& group : cgroups_.List()) {
    const std::string last = std::filesystem::path(group).filename().string();
    if (!absl::StartsWith(last, kSparePrefix)) continue;
    if (cgroups_.Remove(group).ok()) ++removed;
  }
  return removed;
}

size_t CgroupPool::spares() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace mle::sandbox
