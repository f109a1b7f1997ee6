// Resources: what a cluster has (Inventory of Hosts), what a job asks for
// (JobDemand, one ReplicaDemand per process), and where it was put
// (Placement). Amounts are integers (milli-CPU, MiB, device counts), never
// doubles. Plain values; no I/O. Not thread-safe; copy freely.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mle::model {

struct GpuDevice {
  int index = 0;           // as CUDA_VISIBLE_DEVICES counts
  std::string model;       // e.g. "NVIDIA H200" (what nvidia-smi says)
  std::string type;        // the AcceleratorConfig type it serves, e.g. "NVIDIA_TESLA_A100"
};

// One machine that can run replicas and/or carries accelerators.
struct Host {
  std::string name;
  int64_t cpu_milli = 0;       // schedulable CPU, in thousandths of a core
  int64_t memory_mib = 0;      // 0 = not accounted
  std::vector<GpuDevice> gpus;
  // A TPU host: "TPU_V2" or "TPU_V3" with kTpuCoresPerHost cores; empty = none.
  std::string tpu_type;
  bool simulated = false;      // declared, not real: jobs are told so
  bool runs_replicas = true;   // false for a TPU host of the local executor
};

struct Inventory {
  std::vector<Host> hosts;
};

// One process of a job: master-replica-0, worker-replica-1, ...
struct ReplicaDemand {
  std::string role;       // "master", "worker", "ps", "evaluator"
  int index = 0;
  std::string machine_type;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::string gpu_type;   // AcceleratorConfig type; empty = none
  int gpu_count = 0;
  // What asked for the GPUs when the job named none itself: "scale tier
  // BASIC_GPU", "machine type standard_gpu"; empty otherwise.
  std::string gpu_implied_by;
  std::string TaskName() const;  // e.g. "worker-replica-1"
};

struct JobDemand {
  std::vector<ReplicaDemand> replicas;
  // TPU: N hosts of one type, allocated together (a pod slice is N/8 hosts).
  std::string tpu_type;      // "TPU_V2" / "TPU_V3"; empty = no TPU
  int tpu_hosts = 0;
  std::string tpu_accelerator;  // the job's AcceleratorConfig type, e.g. TPU_V3_POD
  int64_t tpu_cores = 0;
};

struct ReplicaPlacement {
  std::string host;
  std::vector<int> gpu_indices;
};

struct Placement {
  std::map<std::string, ReplicaPlacement> replicas;  // by task name
  std::vector<std::string> tpu_hosts;                // in TPU_WORKER_ID order
  bool tpu_simulated = false;
};

}  // namespace mle::model
