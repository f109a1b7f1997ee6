// Retention (docs/operations.md, "Retention"): how long ended jobs' run
// directories are kept, and how much of the disk they may take. Two parts,
// each with an age and a size budget of the operator's:
//   run files: the replicas' working and temporary directories (work/, tmp/:
//     what trainers write beside them, often the bulk);
//   logs: the rest of a run directory (logs, exit records, hypertune
//     metrics, manifests): once removed, the job's logs are gone (the job
//     itself, its state and output stay).
// The oldest go first; a job that has not ended is never touched (nor
// counted: a budget is of ended jobs' directories). What a round removed is
// logged and counted in /metrics.
//
// PlanRetention is the pure policy; RetentionService the shell, one thread
// looking every `interval`. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
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

struct RetentionOptions {
  std::string runs;  // DATA_DIR/runs
  RetentionBudget run_files;
  RetentionBudget logs;
  absl::Duration interval = absl::Minutes(10);
};

class RetentionService {
 public:
  RetentionService(const JobService& jobs, common::Clock& clock, RetentionOptions options);
  ~RetentionService();
  RetentionService(const RetentionService&) = delete;
  RetentionService& operator=(const RetentionService&) = delete;

  // Its thread looks every interval (a round does nothing while neither
  // budget is set).
  void Start();
  // New budgets (mlengined's reload), from the next round on.
  void SetBudgets(RetentionBudget run_files, RetentionBudget logs);
  void Stop();
  // One round now (tests; Start's thread runs them).
  void RunOnce();

 private:
  struct Sizes {
    int64_t run_files = 0;  // work/ and tmp/ of its replicas
    int64_t rest = 0;
  };
  Sizes Measure(const std::string& dir);

  const JobService& jobs_;
  common::Clock& clock_;
  RetentionOptions options_;  // budgets guarded by mu_ (SetBudgets)
  std::map<std::string, Sizes> sizes_;  // ended jobs' run directories: they no longer change
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mle::service
