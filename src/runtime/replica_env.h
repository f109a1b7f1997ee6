// The replica contract (docs/runtime-contract.md) as a pure function: from a
// job, its demand and its placement, the command line and environment of
// every replica — TF_CONFIG, CLUSTER_SPEC, TPU_CONFIG and TPU_WORKER_*,
// torch.distributed's MASTER_ADDR/PORT, WORLD_SIZE, RANK, CUDA_VISIBLE_DEVICES,
// CLOUD_ML_*, MLENGINE_*. Executors (local, Slurm) share it so every replica
// sees the same contract wherever it runs. Thread-safe (no state).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/job.h"
#include "model/resources.h"

namespace mle::runtime {

struct ReplicaLaunch {
  std::string task_name;  // master-replica-0, worker-replica-1, ...
  std::string role;       // master, worker, ps, evaluator
  int index = 0;
  std::string host;
  std::vector<std::string> argv;           // a container's: its arguments (after the entrypoint)
  std::map<std::string, std::string> env;  // added to the base environment
  // A custom container: the pinned image to run (empty: argv is a program
  // on the host) and the entrypoint replacing the image's (containerCommand;
  // empty: the image's own).
  std::string image;
  std::vector<std::string> entrypoint;
};

struct LaunchContext {
  std::string python;                        // interpreter of the prepared environment
  std::map<std::string, std::string> hosts;  // task name -> address other replicas use
  std::map<std::string, int> ports;          // task name -> cluster port (not evaluators)
  int torch_port = 0;                        // MASTER_PORT
  std::string gcs_root;                      // MLENGINE_GCS_ROOT
  std::string python_path;                   // mlengine's python/ (prepended to PYTHONPATH)
  std::string zone = "us-central1-a";        // TPU_CONFIG zone
  std::string trial_id;                      // tuning trials only
  int attempt = 0;                           // MLENGINE_ATTEMPT; 0: the job's (model::CurrentAttempt)
  std::string hp_metric_file;                // CLOUD_ML_HP_METRIC_FILE
  // The job's credential (MLENGINE_SERVICE_ACCOUNT, MLENGINE_ACCESS_TOKEN)
  // and where the API is (MLENGINE_API_ENDPOINT); empty: none given.
  std::string service_account;
  std::string access_token;
  std::string api_endpoint;
  // When set, each TPU host of the placement also runs a process of its own,
  // "tpu-replica-<i>" (role "tpu"), with this command: the Slurm executor
  // runs mlengine's simulated TPU worker there. Its port is
  // ports["tpu-replica-<i>"], given as MLENGINE_TPU_PORT; the master gets
  // every TPU worker's host:port in MLENGINE_TPU_WORKER_ENDPOINTS.
  std::vector<std::string> tpu_worker_argv;
};

std::vector<ReplicaLaunch> BuildReplicaLaunches(const model::Job& job, const model::JobDemand& demand,
                                                const model::Placement& placement, const LaunchContext& context);

// "tpu-replica-3": the task name of the process on TPU host 3.
std::string TpuTaskName(int index);

// "v2-8", "v3-32": the TPU_ACCELERATOR_TYPE of a demand.
std::string TpuAcceleratorName(const model::JobDemand& demand);

}  // namespace mle::runtime
