// What a job asks for, replica by replica (JobDemand), from its scale
// tier, machine types (through an operator-editable table of shapes) and
// accelerators. Both the scheduler (placement) and the executors (Slurm's
// translation) read it. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/job.h"
#include "model/resources.h"

namespace mle::model {

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

JobDemand DemandOf(const Job& job, const ResourceTable& table);

}  // namespace mle::model
