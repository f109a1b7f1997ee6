#include "service/retention.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "obs/log.h"
#include "obs/metrics.h"

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

void RetentionService::SetBudgets(RetentionBudget run_files, RetentionBudget logs) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.run_files = run_files;
  options_.logs = logs;
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
  RetentionBudget run_files_budget, logs_budget;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_files_budget = options_.run_files;
    logs_budget = options_.logs;
  }
  if (!run_files_budget.Set() && !logs_budget.Set()) return;
  const absl::Time now = clock_.Now();
  const auto ends = jobs_.EndTimes();
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
      auto end = ends.find({project.path().filename().string(), job_id});
      RetentionItem item;
      item.id = run.path().string();
      if (end != ends.end()) {
        item.in_use = !end->second.has_value();
        item.ended = end->second.value_or(now);
      } else {
        // No such job any more (a deleted Vertex AI job): as old as its directory.
        struct stat s {};
        item.ended = ::lstat(item.id.c_str(), &s) == 0 ? absl::FromUnixSeconds(s.st_mtime) : now;
      }
      if (item.in_use) continue;  // not measured: it still changes
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

  if (run_files_budget.Set()) {
    const RetentionCut cut = PlanRetention(run_files, run_files_budget, now);
    for (const auto& dir : cut.ids) {
      for (const auto& replica : fs::directory_iterator(dir, ec)) {
        if (!replica.is_directory(ec) || replica.is_symlink(ec)) continue;
        for (const char* scratch : kScratch) fs::remove_all(replica.path() / scratch, ec);
      }
      sizes_[dir].run_files = 0;
    }
    if (!cut.ids.empty()) {
      obs::Log("retention").info("removed the run files (replicas' work/ and tmp/) of {} ended jobs: {} freed ({} "
                                 "past their age, the others over the size budget)",
                                 cut.ids.size(), common::HumanBytes(cut.bytes), cut.past_age);
      obs::Metrics::Default().RetentionRemoved("run_files", static_cast<int64_t>(cut.ids.size()), cut.bytes);
    }
    for (auto& item : logs) {  // what is left of each for the logs' budget
      auto s = sizes_.find(item.id);
      if (s != sizes_.end()) item.bytes = s->second.run_files + s->second.rest;
    }
  }
  if (logs_budget.Set()) {
    const RetentionCut cut = PlanRetention(logs, logs_budget, now);
    for (const auto& dir : cut.ids) {
      fs::remove_all(dir, ec);
      if (ec) obs::Log("retention").warn("could not remove all of {}: {}", dir, ec.message());
      sizes_.erase(dir);
    }
    if (!cut.ids.empty()) {
      obs::Log("retention").info("removed the run directories (logs included) of {} ended jobs: {} freed ({} past "
                                 "their age, the others over the size budget)",
                                 cut.ids.size(), common::HumanBytes(cut.bytes), cut.past_age);
      obs::Metrics::Default().RetentionRemoved("logs", static_cast<int64_t>(cut.ids.size()), cut.bytes);
    }
  }
}

}  // namespace mle::service
