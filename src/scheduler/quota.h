// Quotas: the operator's limits on what one project may hold at once in one
// region (TPU cores, TPU pod cores, GPUs of each type, CPUs, jobs), and the
// accounting of a job's demand in those terms. Two answers, as placement
// gives (placement.h):
//  - CheckQuotaNever: the job exceeds a limit even with nothing else of its
//    project running. FAILED_PRECONDITION at submission, naming the quota,
//    its value and the configuration key that raises it.
//  - QuotaBlock: it fits the limits, but what its project already holds in
//    the region leaves too little now: it waits (DescribeQuotaWait says why).
// TPU pod cores are 0 unless the operator allows them: the TPU guide has
// pods need a quota increase first. Every other resource is unlimited unless
// configured.
// Pure functions and plain values; thread-safe (no state).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/resources.h"

namespace mle::scheduler {

// What quotas (and fair share, fair_share.h) count. GPUs are counted per
// AcceleratorConfig type; pod cores apart from single-host TPU cores.
enum class QuotaResource : int {
  kJobs,
  kCpus,  // milli-CPU here; whole or fractional CPUs in the configuration
  kTpuV2Cores,
  kTpuV3Cores,
  kTpuV2PodCores,
  kTpuV3PodCores,
  kNvidiaTeslaK80,
  kNvidiaTeslaP100,
  kNvidiaTeslaV100,
  kNvidiaTeslaP4,
  kNvidiaTeslaT4,
  kNvidiaTeslaA100,
  kCount,
};
inline constexpr int kQuotaResourceCount = static_cast<int>(QuotaResource::kCount);

// The operator's name ("JOBS", "CPUS", "TPU_V3_CORES", "TPU_V2_POD_CORES",
// "NVIDIA_TESLA_T4", ...) and back.
std::string QuotaResourceName(QuotaResource r);
std::optional<QuotaResource> FindQuotaResource(absl::string_view name);
// `amount` as the operator writes it ("2.5" CPUs for 2500 milli-CPU).
std::string FormatQuotaAmount(QuotaResource r, int64_t amount);

// An amount of every resource, indexed by QuotaResource.
struct ResourceAmounts {
  std::array<int64_t, kQuotaResourceCount> amount{};

  int64_t& operator[](QuotaResource r) { return amount[static_cast<int>(r)]; }
  int64_t operator[](QuotaResource r) const { return amount[static_cast<int>(r)]; }
  void Add(const ResourceAmounts& other);
  void Subtract(const ResourceAmounts& other);
  bool operator==(const ResourceAmounts&) const = default;
};

// What a job holds while it runs: one job, its replicas' CPUs and GPUs, its
// TPU cores (a pod slice's as pod cores).
ResourceAmounts AmountsOf(const model::JobDemand& demand);

// The operator's quotas as written (configuration file or admin API):
// resource names to amounts. CPUs are whole CPUs here.
struct QuotaSpec {
  // For every project and region, unless the project's region sets its own.
  std::map<std::string, int64_t> defaults;
  // project -> region -> resource name -> amount.
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> projects;
  // Where they come from, for the hint a refusal gives: false, the
  // configuration file's quotas:; true, `mlengine admin quotas set`.
  bool set_by_admin = false;
  bool operator==(const QuotaSpec&) const = default;
};

// Limits of one (project, region); kUnlimited where none is set.
inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
using QuotaLimits = std::array<int64_t, kQuotaResourceCount>;

// Quotas compiled for lookups. The default value has no limits but TPU pod
// cores, which are 0.
class Quotas {
 public:
  Quotas();

  // INVALID_ARGUMENT naming the key (e.g. "quotas.projects.p.us-central1.
  // TPU_V9_CORES: unknown resource; known: ...") for an unknown resource, a
  // negative or absurdly large amount, or an empty project or region name.
  static absl::StatusOr<Quotas> Compile(QuotaSpec spec);

  const QuotaLimits& For(absl::string_view project, absl::string_view region) const;
  // The configuration key that sets `r` for (project, region), or the
  // default's key when the project's region does not set it.
  std::string KeyFor(absl::string_view project, absl::string_view region, QuotaResource r) const;
  const QuotaSpec& spec() const { return spec_; }

 private:
  QuotaSpec spec_;
  QuotaLimits defaults_;
  std::map<std::string, std::map<std::string, QuotaLimits, std::less<>>, std::less<>> projects_;
};

// OK, or FAILED_PRECONDITION ("This job can never run: ...") when `amounts`
// exceed a limit of (project, region) on their own; the message names the
// quota, its value, the project and region, and the key that raises it.
absl::Status CheckQuotaNever(const Quotas& quotas, absl::string_view project, absl::string_view region,
                             const ResourceAmounts& amounts);

// The first resource whose limit `amounts` would exceed on top of `in_use`
// (what the project already holds in the region); nullopt when it fits.
std::optional<QuotaResource> QuotaBlock(const QuotaLimits& limits, const ResourceAmounts& in_use,
                                        const ResourceAmounts& amounts);

// A job of the project that holds some of a quota.
struct QuotaHolder {
  std::string job_id;
  int64_t amount = 0;
  std::string region;  // named when it is not the waiting job's
};

// Why a job waits for quota `r`, with the numbers: "project quota
// TPU_V3_POD_CORES 32 in us-central1: 32 in use by job pod_1; it needs 32".
// `holders` in the order to name them (at most three are).
std::string DescribeQuotaWait(const Quotas& quotas, absl::string_view project, absl::string_view region,
                              QuotaResource r, int64_t in_use, int64_t needed, const std::vector<QuotaHolder>& holders);

// Carries the quotas in force out somewhere else as well (the Slurm
// executor: as its per-project accounts' limits). Told them at start and
// whenever they change; an error says what could not be carried out.
class QuotaMirror {
 public:
  virtual ~QuotaMirror() = default;
  virtual absl::Status MirrorQuotas(const Quotas& quotas) = 0;
};

}  // namespace mle::scheduler
