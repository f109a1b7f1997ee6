// Placement policy: pure functions of (job demand, cluster snapshot).
//  - CheckFeasible: could the job ever run on this inventory? "Never" is an
//    answer for the user (FAILED_PRECONDITION naming what the cluster has),
//    given at submission so no job waits forever.
//  - Place: a gang placement on the free resources now, or nullopt ("not
//    yet"). All replicas and TPU hosts or nothing.
// Thread-safe (no state).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "model/demand.h"
#include "model/job.h"
#include "model/resources.h"

namespace mle::scheduler {

// What a job asks for (model/demand.h), under the scheduler's names.
using model::DemandOf;
using model::MachineShape;
using model::ResourceTable;

// Resources in use, per host.
struct Usage {
  std::map<std::string, int64_t> cpu_milli;
  std::map<std::string, int64_t> memory_mib;
  std::map<std::string, std::vector<int>> gpus;  // busy GPU indices
  std::map<std::string, bool> tpu_busy;          // busy TPU hosts

  void Add(const model::JobDemand& demand, const model::Placement& placement);
  void Remove(const model::JobDemand& demand, const model::Placement& placement);
};

absl::Status CheckFeasible(const model::JobDemand& demand, const model::Inventory& inventory);
std::optional<model::Placement> Place(const model::JobDemand& demand, const model::Inventory& inventory,
                                      const Usage& usage);

// A one-line description of the inventory for messages ("localhost: 8 CPUs,
// no GPUs; TPU hosts: 4 x TPU_V2 (simulated)").
std::string DescribeInventory(const model::Inventory& inventory);

}  // namespace mle::scheduler
