// Fair share between projects: weighted dominant resource fairness, as
// Slurm's fairshare and Kueue's cohorts share a cluster. A project's usage
// is the largest fraction it holds of any one resource of the cluster (CPUs,
// GPUs of a type, TPU cores of a generation, pod slices included); divided
// by its weight it orders projects: when resources free up, the project
// furthest below its share goes first. A project may borrow what the others
// leave idle; it gives it back by being last in line while it is above its
// share (nothing is preempted).
// Usage is what projects hold now, not a decayed history: a project that
// waited gets no credit later, and the order is a pure function of the
// present.
// Pure functions and plain values; thread-safe (no state).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/resources.h"
#include "scheduler/quota.h"

namespace mle::scheduler {

// Weights by project (the operator's `shares:`); a project not listed
// weighs 1.
class Shares {
 public:
  Shares() = default;
  // INVALID_ARGUMENT naming the key ("shares.p: ...") for an empty project
  // name or a weight outside 1..1000000.
  static absl::StatusOr<Shares> Compile(std::map<std::string, int64_t> weights);

  int64_t WeightOf(absl::string_view project) const;
  const std::map<std::string, int64_t, std::less<>>& weights() const { return weights_; }

 private:
  std::map<std::string, int64_t, std::less<>> weights_;
};

// What the cluster has of each resource fair share counts: CPUs of the
// hosts that run replicas, GPUs by type, TPU host cores by generation (held
// under the single-host resource; pod cores count against the same hosts).
ResourceAmounts CapacityOf(const model::Inventory& inventory);

// The largest fraction of the cluster `held` takes, and of which resource.
struct DominantShare {
  double fraction = 0;
  QuotaResource resource = QuotaResource::kCpus;
};
DominantShare DominantShareOf(const ResourceAmounts& held, const ResourceAmounts& capacity);

// A name for the resource a dominant share is of ("CPUs", "TPU_V3 cores",
// "NVIDIA_TESLA_T4 GPUs").
std::string ShareResourceName(QuotaResource r);

}  // namespace mle::scheduler
