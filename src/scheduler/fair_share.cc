#include "scheduler/fair_share.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "model/catalog.h"

namespace mle::scheduler {
namespace {

using R = QuotaResource;

constexpr int64_t kMaxWeight = 1'000'000;

// Pod slices are made of the same hosts as single-host TPUs.
R HostResource(R r) {
  if (r == R::kTpuV2PodCores) return R::kTpuV2Cores;
  if (r == R::kTpuV3PodCores) return R::kTpuV3Cores;
  return r;
}

}  // namespace

absl::StatusOr<Shares> Shares::Compile(std::map<std::string, int64_t> weights) {
  Shares s;
  for (auto& [project, weight] : weights) {
    if (project.empty()) return absl::InvalidArgumentError("shares: a project name is empty");
    if (weight < 1 || weight > kMaxWeight) {
      return absl::InvalidArgumentError(
          absl::StrCat("shares.", project, ": ", weight, " is not a weight between 1 and ", kMaxWeight));
    }
    s.weights_.emplace(project, weight);
  }
  return s;
}

int64_t Shares::WeightOf(absl::string_view project) const {
  auto it = weights_.find(project);
  return it == weights_.end() ? 1 : it->second;
}

ResourceAmounts CapacityOf(const model::Inventory& inventory) {
  ResourceAmounts c;
  for (const auto& h : inventory.hosts) {
    if (h.runs_replicas) c[R::kCpus] += h.cpu_milli;
    for (const auto& g : h.gpus) {
      if (auto r = FindQuotaResource(g.type)) ++c[*r];
    }
    // TPU_V2 -> TPU_V2_CORES; a host without a TPU matches nothing.
    if (auto r = FindQuotaResource(absl::StrCat(h.tpu_type, "_CORES"))) c[*r] += model::kTpuCoresPerHost;
  }
  return c;
}

DominantShare DominantShareOf(const ResourceAmounts& held, const ResourceAmounts& capacity) {
  ResourceAmounts on_hosts;
  for (int i = 0; i < kQuotaResourceCount; ++i) {
    const R r = static_cast<R>(i);
    if (r != R::kJobs) on_hosts[HostResource(r)] += held[r];
  }
  DominantShare best;
  for (int i = 0; i < kQuotaResourceCount; ++i) {
    if (capacity.amount[i] <= 0 || on_hosts.amount[i] <= 0) continue;
    const double f = static_cast<double>(on_hosts.amount[i]) / static_cast<double>(capacity.amount[i]);
    if (f > best.fraction) best = {f, static_cast<R>(i)};
  }
  return best;
}

std::string ShareResourceName(QuotaResource r) {
  switch (r) {
    case R::kCpus:
      return "CPUs";
    case R::kTpuV2Cores:
    case R::kTpuV2PodCores:
      return "TPU_V2 cores";
    case R::kTpuV3Cores:
    case R::kTpuV3PodCores:
      return "TPU_V3 cores";
    case R::kJobs:
    case R::kCount:
      return "jobs";
    default:
      return absl::StrCat(QuotaResourceName(r), " GPUs");
  }
}

}  // namespace mle::scheduler
