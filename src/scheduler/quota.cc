#include "scheduler/quota.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mle::scheduler {
namespace {

using R = QuotaResource;

// Names in QuotaResource order.
constexpr absl::string_view kNames[kQuotaResourceCount] = {
    "JOBS",          "CPUS",
    "TPU_V2_CORES",  "TPU_V3_CORES",
    "TPU_V2_POD_CORES", "TPU_V3_POD_CORES",
    "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_V100", "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_T4", "NVIDIA_TESLA_A100",
};

// Larger limits are typing mistakes; this also keeps CPUs x 1000 and sums of
// amounts far from overflow.
constexpr int64_t kMaxAmount = 1'000'000'000;

int64_t Scale(R r) { return r == R::kCpus ? 1000 : 1; }

absl::StatusOr<QuotaLimits> CompileLimits(const std::map<std::string, int64_t>& by_name, const QuotaLimits& base,
                                          absl::string_view where) {
  QuotaLimits limits = base;
  for (const auto& [name, amount] : by_name) {
    auto r = FindQuotaResource(name);
    if (!r) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", name, ": unknown resource; known: ",
                                                     absl::StrJoin(std::begin(kNames), std::end(kNames), ", ")));
    }
    if (amount < 0 || amount > kMaxAmount) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", name, ": ", amount, " is not an amount between 0 and ", kMaxAmount));
    }
    limits[static_cast<int>(*r)] = amount * Scale(*r);
  }
  return limits;
}

QuotaLimits BuiltInLimits() {
  QuotaLimits limits;
  limits.fill(kUnlimited);
  // The TPU guide: TPU pods need a quota increase before the first job.
  limits[static_cast<int>(R::kTpuV2PodCores)] = 0;
  limits[static_cast<int>(R::kTpuV3PodCores)] = 0;
  return limits;
}

std::string RaiseHint(const Quotas& quotas, absl::string_view project, absl::string_view region, R r) {
  const std::string key = quotas.KeyFor(project, region, r);
  const std::string own = absl::StrCat("quotas.projects.", project, ".", region, ".", QuotaResourceName(r));
  if (key == own) return key;
  return absl::StrCat(own, " (or ", key, " for every project and region)");
}

}  // namespace

std::string QuotaResourceName(QuotaResource r) { return std::string(kNames[static_cast<int>(r)]); }

std::optional<QuotaResource> FindQuotaResource(absl::string_view name) {
  for (int i = 0; i < kQuotaResourceCount; ++i) {
    if (kNames[i] == name) return static_cast<QuotaResource>(i);
  }
  return std::nullopt;
}

std::string FormatQuotaAmount(QuotaResource r, int64_t amount) {
  if (r == R::kCpus) return absl::StrCat(amount / 1000.0);
  return absl::StrCat(amount);
}

void ResourceAmounts::Add(const ResourceAmounts& other) {
  for (int i = 0; i < kQuotaResourceCount; ++i) amount[i] += other.amount[i];
}

void ResourceAmounts::Subtract(const ResourceAmounts& other) {
  for (int i = 0; i < kQuotaResourceCount; ++i) amount[i] -= other.amount[i];
}

ResourceAmounts AmountsOf(const model::JobDemand& demand) {
  ResourceAmounts a;
  a[R::kJobs] = 1;
  for (const auto& r : demand.replicas) {
    a[R::kCpus] += r.cpu_milli;
    if (r.gpu_count == 0) continue;
    // A GPU type without a quota resource cannot pass validation; nothing to count.
    if (auto gpu = FindQuotaResource(r.gpu_type)) a[*gpu] += r.gpu_count;
  }
  if (demand.tpu_hosts > 0) {
    // TPU_V2 -> TPU_V2_CORES, TPU_V3_POD -> TPU_V3_POD_CORES.
    if (auto tpu = FindQuotaResource(absl::StrCat(demand.tpu_accelerator, "_CORES"))) a[*tpu] += demand.tpu_cores;
  }
  return a;
}

Quotas::Quotas() : defaults_(BuiltInLimits()) {}

absl::StatusOr<Quotas> Quotas::Compile(QuotaSpec spec) {
  Quotas q;
  auto defaults = CompileLimits(spec.defaults, BuiltInLimits(), "quotas.defaults");
  if (!defaults.ok()) return defaults.status();
  q.defaults_ = *defaults;
  for (const auto& [project, regions] : spec.projects) {
    if (project.empty()) return absl::InvalidArgumentError("quotas.projects: a project name is empty");
    for (const auto& [region, by_name] : regions) {
      if (region.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("quotas.projects.", project, ": a region name is empty"));
      }
      auto limits = CompileLimits(by_name, q.defaults_, absl::StrCat("quotas.projects.", project, ".", region));
      if (!limits.ok()) return limits.status();
      q.projects_[project][region] = *limits;
    }
  }
  q.spec_ = std::move(spec);
  return q;
}

const QuotaLimits& Quotas::For(absl::string_view project, absl::string_view region) const {
  auto p = projects_.find(project);
  if (p == projects_.end()) return defaults_;
  auto r = p->second.find(region);
  return r == p->second.end() ? defaults_ : r->second;
}

std::string Quotas::KeyFor(absl::string_view project, absl::string_view region, QuotaResource r) const {
  const std::string name = QuotaResourceName(r);
  auto p = spec_.projects.find(std::string(project));
  if (p != spec_.projects.end()) {
    auto reg = p->second.find(std::string(region));
    if (reg != p->second.end() && reg->second.count(name)) {
      return absl::StrCat("quotas.projects.", project, ".", region, ".", name);
    }
  }
  return absl::StrCat("quotas.defaults.", name);
}

absl::Status CheckQuotaNever(const Quotas& quotas, absl::string_view project, absl::string_view region,
                             const ResourceAmounts& amounts) {
  const QuotaLimits& limits = quotas.For(project, region);
  for (int i = 0; i < kQuotaResourceCount; ++i) {
    if (amounts.amount[i] <= limits[i]) continue;
    const R r = static_cast<R>(i);
    const bool pod = r == R::kTpuV2PodCores || r == R::kTpuV3PodCores;
    return absl::FailedPreconditionError(absl::StrCat(
        "This job can never run: it needs ", FormatQuotaAmount(r, amounts.amount[i]), " ", QuotaResourceName(r),
        " but the quota of project ", project, " in region ", region, " is ", FormatQuotaAmount(r, limits[i]),
        pod ? " (TPU pod slices need a quota increase first)" : "",
        ". An operator raises it with ", RaiseHint(quotas, project, region, r),
        quotas.spec().set_by_admin
            ? " through `mlengine admin quotas set FILE` (the quotas in force were set that way, not by "
              "mlengined's configuration file)."
            : " in mlengined's configuration (quotas:), or with `mlengine admin quotas set FILE`."));
  }
  return absl::OkStatus();
}

std::optional<QuotaResource> QuotaBlock(const QuotaLimits& limits, const ResourceAmounts& in_use,
                                        const ResourceAmounts& amounts) {
  for (int i = 0; i < kQuotaResourceCount; ++i) {
    if (amounts.amount[i] > 0 && in_use.amount[i] + amounts.amount[i] > limits[i]) return static_cast<R>(i);
  }
  return std::nullopt;
}

std::string DescribeQuotaWait(const Quotas& quotas, absl::string_view project, absl::string_view region,
                              QuotaResource r, int64_t in_use, int64_t needed, const std::vector<QuotaHolder>& holders) {
  const int64_t limit = quotas.For(project, region)[static_cast<int>(r)];
  const std::string name = QuotaResourceName(r);
  if (needed > limit) {
    // Lowered below this job's need after it was accepted.
    return absl::StrCat("project quota ", name, " in ", region, " is ", FormatQuotaAmount(r, limit), " but it needs ",
                        FormatQuotaAmount(r, needed), ": it waits until an operator raises ",
                        RaiseHint(quotas, project, region, r));
  }
  constexpr size_t kNamed = 3;
  // A holder in another region is named with it: the regions a cluster
  // serves share its hosts, so what runs in each counts.
  // One holder holds all that is in use: its amount goes without saying.
  auto describe = [&](const QuotaHolder& h) {
    std::vector<std::string> parts;
    if (r != R::kJobs && holders.size() > 1) parts.push_back(FormatQuotaAmount(r, h.amount));
    if (!h.region.empty() && h.region != region) parts.push_back(absl::StrCat("in ", h.region));
    return parts.empty() ? h.job_id : absl::StrCat(h.job_id, " (", absl::StrJoin(parts, ", "), ")");
  };
  std::vector<std::string> named;
  for (size_t i = 0; i < holders.size() && i < kNamed; ++i) named.push_back(describe(holders[i]));
  std::string by;
  if (holders.size() == 1) {
    by = absl::StrCat(" by job ", named[0]);
  } else if (!holders.empty()) {
    by = absl::StrCat(" by jobs ", absl::StrJoin(named, ", "));
    if (holders.size() > kNamed) absl::StrAppend(&by, " and ", holders.size() - kNamed, " more");
  }
  return absl::StrCat("project quota ", name, " ", FormatQuotaAmount(r, limit), " in ", region, ": ",
                      FormatQuotaAmount(r, in_use), " in use", by, "; it needs ", FormatQuotaAmount(r, needed));
}

}  // namespace mle::scheduler
