#include "model/demand.h"

#include <algorithm>

#include "model/catalog.h"

namespace mle::model {
namespace {

// TPU host type for an AcceleratorConfig TPU type (pods are made of hosts of
// the same generation).
std::string HostTypeFor(const std::string& accelerator) {
  if (accelerator == "TPU_V3" || accelerator == "TPU_V3_POD") return "TPU_V3";
  return "TPU_V2";
}

void AddRole(JobDemand* d, const ResourceTable& table, const std::string& role, const std::string& machine_type,
             int64_t count, const std::optional<ReplicaConfig>& config) {
  for (int64_t i = 0; i < count; ++i) {
    ReplicaDemand r;
    r.role = role;
    r.index = static_cast<int>(i);
    r.machine_type = machine_type;
    auto shape = table.machine_types.find(machine_type);
    const MachineShape& s = shape == table.machine_types.end() ? table.fallback : shape->second;
    r.cpu_milli = s.cpu_milli;
    r.memory_mib = s.memory_mib;
    if (const auto* m = FindMachineType(machine_type); m && m->implied_accelerator_count > 0) {
      r.gpu_type = std::string(m->implied_accelerator);
      r.gpu_count = m->implied_accelerator_count;
      r.gpu_implied_by = "machine type " + machine_type;
    }
    if (config && config->accelerator_config && !config->accelerator_config->type.empty()) {
      r.gpu_type = config->accelerator_config->type;
      r.gpu_count = static_cast<int>(config->accelerator_config->count.value_or(0));
      r.gpu_implied_by.clear();
    }
    d->replicas.push_back(std::move(r));
  }
}

}  // namespace

ResourceTable ResourceTable::Defaults() {
  ResourceTable t;
  t.fallback = {1000, 0};
  return t;
}

JobDemand DemandOf(const Job& job, const ResourceTable& table) {
  JobDemand d;
  if (!job.training_input) return d;
  const TrainingInput& t = *job.training_input;
  const std::string tier = t.scale_tier.empty() ? "BASIC" : t.scale_tier;
  if (tier == "CUSTOM") {
    AddRole(&d, table, "master", t.master_type, 1, t.master_config);
    if (t.worker_type == kCloudTpuMachine) {
      // The TPU worker is the TPU itself: hosts, not a process of ours.
      std::string type = "TPU_V2";
      int64_t cores = kTpuCoresPerHost;
      if (t.worker_config && t.worker_config->accelerator_config) {
        type = t.worker_config->accelerator_config->type;
        cores = t.worker_config->accelerator_config->count.value_or(kTpuCoresPerHost);
      }
      d.tpu_accelerator = type;
      d.tpu_type = HostTypeFor(type);
      d.tpu_cores = cores;
      d.tpu_hosts = static_cast<int>(std::max<int64_t>(1, cores / kTpuCoresPerHost));
    } else {
      AddRole(&d, table, "worker", t.worker_type, t.worker_count.value_or(0), t.worker_config);
    }
    AddRole(&d, table, "ps", t.parameter_server_type, t.parameter_server_count.value_or(0),
            t.parameter_server_config);
    AddRole(&d, table, "evaluator", t.evaluator_type, t.evaluator_count.value_or(0), t.evaluator_config);
    return d;
  }
  // Predefined tiers (machine shapes as AI Platform documented them).
  AddRole(&d, table, "master", tier == "BASIC_GPU" ? "standard_gpu" : "standard", 1, std::nullopt);
  if (tier == "BASIC_GPU") d.replicas.back().gpu_implied_by = "scale tier BASIC_GPU";
  if (tier == "STANDARD_1") {
    AddRole(&d, table, "worker", "standard", 4, std::nullopt);
    AddRole(&d, table, "ps", "standard", 3, std::nullopt);
  } else if (tier == "PREMIUM_1") {
    AddRole(&d, table, "worker", "large_model", 19, std::nullopt);
    AddRole(&d, table, "ps", "large_model", 11, std::nullopt);
  } else if (tier == "BASIC_TPU") {
    d.tpu_accelerator = "TPU_V2";
    d.tpu_type = "TPU_V2";
    d.tpu_cores = kTpuCoresPerHost;
    d.tpu_hosts = 1;
  }
  return d;
}

}  // namespace mle::model
