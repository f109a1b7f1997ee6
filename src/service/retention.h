// Retention (docs/operations.md, "Retention"): how long what ended jobs
// leave behind is kept, and how much of the disk it may take. Four parts,
// each with an age and a size budget of the operator's:
//   run files: the replicas' working and temporary directories (work/, tmp/:
//     what trainers write beside them, often the bulk);
//   logs: the rest of a run directory (logs, exit records, hypertune
//     metrics, manifests): once removed, the job's logs are gone (the job
//     itself, its state and output stay);
//   packages: the package environments (runtime/package_cache.h), each
//     last used when a job was handed it or last ran with it; a later job
//     with the same packages builds it again;
//   images: the images in this node's store that jobs pinned, pulled from
//     the server's registry (the operator's own, localhost/..., and images
//     no job of this server pinned are never touched); last used when the
//     last job pinning one ended; a later job pulls it again.
// The oldest go first; nothing a job that has not ended uses is touched
// (nor counted: a budget is of what is no longer in use). An environment
// used since the oldest job not yet running was submitted is kept too (that
// job may have been handed it and not yet recorded it), and none is
// removed while a job with packages runs from a directory that names no
// environment (one an earlier release started). What a round
// removed is logged and counted in /metrics.
//
// PlanRetention is the pure policy; RetentionService the shell, one thread
// looking every `interval`. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "containers/podman.h"
#include "runtime/package_cache.h"
#include "service/job_service.h"

namespace mle::service {

struct RetentionBudget {
  std::optional<absl::Duration> max_age;  // unset: kept whatever its age
  std::optional<int64_t> max_bytes;       // unset: no size budget
  bool Set() const { return max_age.has_value() || max_bytes.has_value(); }
};

struct RetentionItem {
  std::string id;
  int64_t bytes = 0;
  absl::Time ended;     // when it was last of use (a job's end)
  bool in_use = false;  // never removed
};

struct RetentionCut {
  std::vector<std::string> ids;  // oldest first
  int64_t bytes = 0;
  int64_t past_age = 0;          // of ids, how many for their age (the others for the size budget)
};

// Every item older than max_age, then the oldest others until what is left
// (in use or not) fits max_bytes. Items in use are never cut, nor counted out
// of the budget: they may leave it over.
RetentionCut PlanRetention(std::vector<RetentionItem> items, const RetentionBudget& budget, absl::Time now);

struct RetentionBudgets {
  RetentionBudget run_files;
  RetentionBudget logs;
  RetentionBudget packages;
  RetentionBudget images;
};

struct RetentionOptions {
  std::string runs;  // DATA_DIR/runs
  RetentionBudgets budgets;
  runtime::PackageCache* packages = nullptr;   // null: no package environments here
  const containers::Podman* podman = nullptr;  // null: no images on this node (no containers, or Slurm's nodes)
  absl::Duration interval = absl::Minutes(10);
};

class RetentionService {
 public:
  RetentionService(const JobService& jobs, common::Clock& clock, RetentionOptions options);
  ~RetentionService();
  RetentionService(const RetentionService&) = delete;
  RetentionService& operator=(const RetentionService&) = delete;

  // Its thread looks every interval (a round does nothing while no budget
  // is set).
  void Start();
  // New budgets (mlengined's reload), from the next round on.
  void SetBudgets(RetentionBudgets budgets);
  void Stop();
  // One round now (tests; Start's thread runs them).
  void RunOnce();

 private:
  struct Sizes {
    int64_t run_files = 0;  // work/ and tmp/ of its replicas
    int64_t rest = 0;
  };
  Sizes Measure(const std::string& dir);
  // Each round's parts; RunDirectories also finds the environments that
  // jobs which have not ended use.
  struct EnvironmentsInUse {
    std::set<std::string> dirs;
    // A job with packages runs from a directory that names none (started
    // by an earlier release): which it uses is unknown, so none is removed.
    bool unknown = false;
  };
  void RunDirectories(const RetentionBudgets& budgets, const JobService::Uses& uses, absl::Time now,
                      EnvironmentsInUse* environments);
  void Packages(const RetentionBudget& budget, const JobService::Uses& uses, const EnvironmentsInUse& environments,
                absl::Time now);
  void Images(const RetentionBudget& budget, const JobService::Uses& uses, absl::Time now);
  // Logs and counts what a part removed.
  static void Report(const char* kind, const std::string& what, const RetentionCut& cut);

  const JobService& jobs_;
  common::Clock& clock_;
  RetentionOptions options_;  // budgets guarded by mu_ (SetBudgets)
  std::map<std::string, Sizes> sizes_;  // ended jobs' run directories: they no longer change
  std::map<std::string, int64_t> environment_sizes_;  // built environments do not change either
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mle::service
