// Placement policy: pure functions of (job, cluster snapshot).
//  - DemandOf: what a job asks for, replica by replica, from its scale tier,
//    machine types (through an operator-editable table) and accelerators.
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
#include "model/job.h"
#include "model/resources.h"

namespace mle::scheduler {

// What a replica of a machine type costs on this cluster.
struct MachineShape {
  int64_t cpu_milli = 1000;
  int64_t memory_mib = 0;
};

struct ResourceTable {
  // By machine type name; types not listed cost `fallback`.
  std::map<std::string, MachineShape> machine_types;
  MachineShape fallback;
  static ResourceTable Defaults();
};

model::JobDemand DemandOf(const model::Job& job, const ResourceTable& table);

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
