#include "service/retention.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <system_error>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "rundir/replica_files.h"

namespace mle::service {
namespace fs = std::filesystem;

namespace {

// The bytes of the regular files under `dir`, links never followed.
int64_t TreeBytes(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (!ec && fs::is_regular_file(st)) {
      struct stat s {};
      if (::lstat(it->path().c_str(), &s) == 0) total += static_cast<int64_t>(s.st_blocks) * 512;
    }
  }
  return total;
}

// A replica's scratch: what its trainer wrote beside it.
constexpr const char* kScratch[] = {"work", "tmp"};

// Plans the cut of `items` and removes each item of it with `remove`
// (false: no longer removable, as when used since it was listed): what was
// removed. `what` names an item in a warning when `remove` fails.
RetentionCut RemoveEach(const std::vector<RetentionItem>& items, const RetentionBudget& budget, absl::Time now,
                        const char* what, const std::function<absl::StatusOr<bool>(const RetentionItem&)>& remove) {
  std::map<std::string, const RetentionItem*> by_id;
  for (const auto& item : items) by_id[item.id] = &item;
  RetentionCut removed;
  for (const auto& id : PlanRetention(items, budget, now).ids) {
    const RetentionItem& item = *by_id.at(id);
    auto gone = remove(item);
    if (!gone.ok()) {
      obs::Log("retention").warn("could not remove the {} {}: {}", what, id, std::string(gone.status().message()));
      continue;
    }
    if (!*gone) continue;
    removed.ids.push_back(id);
    removed.bytes += item.bytes;
    if (budget.max_age && now - item.ended > *budget.max_age) ++removed.past_age;
  }
  return removed;
}

}  // namespace

RetentionCut PlanRetention(std::vector<RetentionItem> items, const RetentionBudget& budget, absl::Time now) {
  std::sort(items.begin(), items.end(), [](const RetentionItem& a, const RetentionItem& b) {
    return std::tie(a.ended, a.id) < std::tie(b.ended, b.id);
  });
  int64_t total = 0;
  for (const auto& item : items) total += item.bytes;
  RetentionCut cut;
  for (const auto& item : items) {
    if (item.in_use) continue;
    const bool too_old = budget.max_age && now - item.ended > *budget.max_age;
    const bool over = budget.max_bytes && total > *budget.max_bytes;
    if (!too_old && !over) continue;
    cut.ids.push_back(item.id);
    cut.bytes += item.bytes;
    total -= item.bytes;
    if (too_old) ++cut.past_age;
  }
  return cut;
}

RetentionService::RetentionService(const JobService& jobs, common::Clock& clock, RetentionOptions options)
    : jobs_(jobs), clock_(clock), options_(std::move(options)) {}

RetentionService::~RetentionService() { Stop(); }

void RetentionService::SetBudgets(RetentionBudgets budgets) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.budgets = budgets;
}

void RetentionService::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      RunOnce();
      lock.lock();
      cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.interval), [this] { return stopping_; });
    }
  });
}

void RetentionService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RetentionService::Sizes RetentionService::Measure(const std::string& dir) {
  Sizes sizes;
  std::error_code ec;
  for (const auto& replica : fs::directory_iterator(dir, ec)) {
    if (!replica.is_directory(ec) || replica.is_symlink(ec)) continue;
    for (const char* scratch : kScratch) sizes.run_files += TreeBytes(replica.path() / scratch);
  }
  sizes.rest = std::max<int64_t>(0, TreeBytes(dir) - sizes.run_files);
  return sizes;
}

void RetentionService::RunOnce() {
  RetentionBudgets budgets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    budgets = options_.budgets;
  }
  const bool packages = budgets.packages.Set() && options_.packages != nullptr;
  const bool images = budgets.images.Set() && options_.podman != nullptr;
  if (!budgets.run_files.Set() && !budgets.logs.Set() && !packages && !images) return;
  const absl::Time now = clock_.Now();
  const JobService::Uses uses = jobs_.RetentionUses();
  EnvironmentsInUse environments;
  RunDirectories(budgets, uses, now, &environments);
  if (packages) Packages(budgets.packages, uses, environments, now);
  if (images) Images(budgets.images, uses, now);
}

void RetentionService::Report(const char* kind, const std::string& what, const RetentionCut& cut) {
  if (cut.ids.empty()) return;
  obs::Log("retention").info("removed {}: {} freed ({} past their age, the others over the size budget)", what,
                             common::HumanBytes(cut.bytes), cut.past_age);
  obs::Metrics::Default().RetentionRemoved(kind, static_cast<int64_t>(cut.ids.size()), cut.bytes);
}

void RetentionService::RunDirectories(const RetentionBudgets& budgets, const JobService::Uses& uses, absl::Time now,
                                      EnvironmentsInUse* environments) {
  // Each run directory (RUNS/<project>/<job>[@attempt]) with its job's end.
  std::vector<RetentionItem> run_files, logs;
  std::set<std::string> seen;
  std::error_code ec;
  for (const auto& project : fs::directory_iterator(options_.runs, ec)) {
    if (!project.is_directory(ec) || project.is_symlink(ec)) continue;
    std::error_code ec2;
    for (const auto& run : fs::directory_iterator(project.path(), ec2)) {
      if (!run.is_directory(ec2) || run.is_symlink(ec2)) continue;
      const std::string name = run.path().filename().string();
      const std::string job_id = name.substr(0, name.find('@'));
      auto end = uses.ends.find({project.path().filename().string(), job_id});
      RetentionItem item;
      item.id = run.path().string();
      if (end != uses.ends.end()) {
        item.in_use = !end->second.has_value();
        item.ended = end->second.value_or(now);
      } else {
        // No such job any more (a deleted Vertex AI job): as old as its directory.
        struct stat s {};
        item.ended = ::lstat(item.id.c_str(), &s) == 0 ? absl::FromUnixSeconds(s.st_mtime) : now;
      }
      if (item.in_use) {  // not measured: it still changes
        auto environment = rundir::ReadRunEnvironment(item.id);
        if (environment.ok() && environment->has_value()) {
          environments->dirs.insert(**environment);
        } else if (uses.packaged.count(end->first)) {
          environments->unknown = true;
        }
        continue;
      }
      auto sized = sizes_.find(item.id);
      if (sized == sizes_.end()) sized = sizes_.emplace(item.id, Measure(item.id)).first;
      seen.insert(item.id);
      RetentionItem scratch = item;
      scratch.bytes = sized->second.run_files;
      if (scratch.bytes > 0) run_files.push_back(scratch);
      item.bytes = sized->second.run_files + sized->second.rest;
      logs.push_back(item);
    }
  }
  for (auto it = sizes_.begin(); it != sizes_.end();) it = seen.count(it->first) ? std::next(it) : sizes_.erase(it);

  if (budgets.run_files.Set()) {
    auto remove_scratch = [&](const RetentionItem& item) -> absl::StatusOr<bool> {
      std::error_code ec;
      for (const auto& replica : fs::directory_iterator(item.id, ec)) {
        if (!replica.is_directory(ec) || replica.is_symlink(ec)) continue;
        for (const char* scratch : kScratch) fs::remove_all(replica.path() / scratch, ec);
      }
      sizes_[item.id].run_files = 0;
      return true;
    };
    const RetentionCut cut = RemoveEach(run_files, budgets.run_files, now, "run files of", remove_scratch);
    Report("run_files", absl::StrCat("the run files (replicas' work/ and tmp/) of ", cut.ids.size(), " ended jobs"),
           cut);
    for (auto& item : logs) {  // what is left of each for the logs' budget
      auto s = sizes_.find(item.id);
      if (s != sizes_.end()) item.bytes = s->second.run_files + s->second.rest;
    }
  }
  if (budgets.logs.Set()) {
    auto remove_run = [&](const RetentionItem& item) -> absl::StatusOr<bool> {
      std::error_code ec;
      fs::remove_all(item.id, ec);
      sizes_.erase(item.id);  // what is left of it is measured again
      if (ec) return absl::InternalError(ec.message());
      return true;
    };
    const RetentionCut cut = RemoveEach(logs, budgets.logs, now, "run directory", remove_run);
    Report("logs", absl::StrCat("the run directories (logs included) of ", cut.ids.size(), " ended jobs"), cut);
  }
}

namespace {

// What a job may pin an image by: each of its digests and its id.
std::vector<std::string> PinsOf(const containers::StoredImage& image) {
  std::vector<std::string> pins = image.repo_digests;
  pins.push_back(image.id);
  return pins;
}

}  // namespace

void RetentionService::Packages(const RetentionBudget& budget, const JobService::Uses& uses,
                                const EnvironmentsInUse& environments, absl::Time now) {
  std::vector<RetentionItem> items;
  std::set<std::string> seen;
  for (const auto& env : options_.packages->Environments()) {
    RetentionItem item;
    item.id = env.dir;
    item.ended = env.last_used;  // Remove checks it is unchanged
    if (environments.dirs.count(env.dir)) {
      // Used now: its last use follows the job (what is left after it ends
      // is counted from about then).
      options_.packages->Touch(env.dir);
      item.in_use = true;
    } else if (uses.oldest_not_running && env.last_used >= *uses.oldest_not_running) {
      item.in_use = true;
    }
    auto sized = environment_sizes_.find(env.dir);
    if (sized == environment_sizes_.end()) sized = environment_sizes_.emplace(env.dir, TreeBytes(env.dir)).first;
    item.bytes = sized->second;
    seen.insert(env.dir);
    items.push_back(std::move(item));
  }
  for (auto it = environment_sizes_.begin(); it != environment_sizes_.end();) {
    it = seen.count(it->first) ? std::next(it) : environment_sizes_.erase(it);
  }
  if (environments.unknown) return;  // nothing removed until those jobs end
  // Not when handed to a job since it was listed.
  const RetentionCut removed = RemoveEach(items, budget, now, "package environment", [&](const RetentionItem& item) {
    return options_.packages->Remove(item.id, item.ended);
  });
  for (const auto& dir : removed.ids) environment_sizes_.erase(dir);
  Report("packages", absl::StrCat(removed.ids.size(), " package environments no running job uses"), removed);
}

void RetentionService::Images(const RetentionBudget& budget, const JobService::Uses& uses, absl::Time now) {
  auto stored = options_.podman->StoredImages();
  if (!stored.ok()) {
    obs::Log("retention").warn("could not list the node's images: {}", std::string(stored.status().message()));
    return;
  }
  const std::string registry = options_.podman->settings().registry + "/";
  std::vector<RetentionItem> items;
  std::map<std::string, const containers::StoredImage*> by_id;
  for (const auto& image : *stored) {
    // Only what mlengined pulled for its jobs: every name from its
    // registry, pinned by a job of its own.
    bool ours = !options_.podman->settings().registry.empty() && !(image.names.empty() && image.repo_digests.empty());
    for (const auto& name : image.names) ours = ours && absl::StartsWith(name, registry);
    for (const auto& name : image.repo_digests) ours = ours && absl::StartsWith(name, registry);
    if (!ours || image.containers > 0) continue;  // a container holds it
    RetentionItem item;
    item.id = image.id;
    item.bytes = image.bytes;
    bool pinned = false;
    item.ended = absl::InfinitePast();
    for (const auto& pin : PinsOf(image)) {
      auto use = uses.images.find(pin);
      if (use == uses.images.end()) continue;
      pinned = true;
      if (!use->second) {
        item.in_use = true;
      } else {
        item.ended = std::max(item.ended, *use->second);
      }
    }
    if (!pinned) continue;
    by_id[image.id] = &image;
    items.push_back(std::move(item));
  }
  // Not when pinned by a new job since, or a container holds it.
  const RetentionCut removed = RemoveEach(items, budget, now, "image", [&](const RetentionItem& item) {
    const containers::StoredImage& image = *by_id.at(item.id);
    return options_.podman->RemoveImage(image, [&] { return !jobs_.PinnedByUnfinishedJob(PinsOf(image)); });
  });
  Report("images", absl::StrCat(removed.ids.size(), " images no unfinished job pins"), removed);
}

}  // namespace mle::service
