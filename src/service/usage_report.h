// The operator's usage report (`mlengine admin usage`, GET
// /mlengine/v1/usage; docs/operations.md, "Usage accounting"): what jobs
// used within a period, per project, per user (who created the job), or
// both, like Slurm's sreport. Each job's usage is model::UsageOf; this adds
// them up. Pure; not thread-safe (one report, one thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/job.h"
#include "model/usage.h"

namespace mle::service {

struct UsageQuery {
  model::Period period;
  bool by_project = true;
  bool by_user = false;
  std::string project;  // only this project's jobs; empty: every project's
};

struct UsageRow {
  std::string project;  // empty when the report is not by project
  std::string user;     // empty when it is not by user; kUnknownCreator for a job of before
  int64_t jobs = 0;     // jobs (a tuning job with its trials is one) alive within the period
  model::Usage usage;
};

inline constexpr char kUnknownCreator[] = "(unknown)";

class UsageReport {
 public:
  explicit UsageReport(UsageQuery query) : query_(std::move(query)) {}
  const UsageQuery& query() const { return query_; }
  // Whether the report reads `job` at all (its project).
  bool Wants(const model::Job& job) const { return query_.project.empty() || job.project == query_.project; }
  // Adds what `job` used (model::UsageOf within the query's period). A
  // trial's usage is its tuning job's: it is not counted as a job.
  void Add(const model::Job& job, const model::Usage& usage, absl::Time now);
  // One row per group with a job or any usage, by project then user.
  std::vector<UsageRow> Rows() const;

 private:
  UsageQuery query_;
  std::map<std::pair<std::string, std::string>, UsageRow> rows_;
};

}  // namespace mle::service
