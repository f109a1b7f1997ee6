#include "service/usage_report.h"

namespace mle::service {
namespace {

// The job was alive (created, not yet ended) at some time of the period.
bool AliveWithin(const model::Job& job, const model::Period& period, absl::Time now) {
  if (!job.create_time) return false;
  const absl::Time from = *job.create_time;
  const absl::Time to = job.end_time.value_or(now);
  if (period.end && from >= *period.end) return false;
  if (period.start && to <= *period.start) return false;
  return true;
}

}  // namespace

void UsageReport::Add(const model::Job& job, const model::Usage& usage, absl::Time now) {
  const bool counted = !model::IsTrialJob(job) && AliveWithin(job, query_.period, now);
  const bool used = usage.run_hours > 0 || usage.queue_hours > 0;
  if (!counted && !used) return;
  std::pair<std::string, std::string> key;
  if (query_.by_project) key.first = job.project;
  if (query_.by_user) key.second = job.creator.empty() ? kUnknownCreator : job.creator;
  UsageRow& row = rows_[key];
  row.project = key.first;
  row.user = key.second;
  if (counted) ++row.jobs;
  row.usage += usage;
}

std::vector<UsageRow> UsageReport::Rows() const {
  std::vector<UsageRow> out;
  out.reserve(rows_.size());
  for (const auto& [key, row] : rows_) out.push_back(row);
  return out;
}

}  // namespace mle::service
