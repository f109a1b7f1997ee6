// How an mlengine job becomes one Slurm job: pure functions shared by the
// Slurm executor (which writes the batch script) and mlengine-slurm-launch
// (which runs inside the allocation and must find the same components).
//
// One component per replica role (master, worker, ps, evaluator). More than
// one component makes a heterogeneous job ("#SBATCH hetjob"), which Slurm
// allocates all at once: the gang placement AI Platform gave. Every replica
// gets its own node, as every replica was its own VM (`--nodes=N
// --ntasks-per-node=1`). The batch script runs on the master's node.
//
// TPU jobs: a TPU host is a node with a `tpu` GRES of 8 cores; TPU_V2_POD /
// TPU_V3_POD with N cores is N/8 nodes. The TPU hosts are one component
// (role "tpu", task tpu-replica-<i> on node i) and the master runs beside
// TPU worker 0 on the first of them, as a Cloud TPU VM runs the trainer on
// its host. (Slurm does not let two components of one job share a node, so
// a separate master node would make a 32-core pod need five nodes.)
// Thread-safe (no state).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/launch_codec.h"
#include "executor/slurm/slurm_parsers.h"
#include "model/job.h"
#include "model/resources.h"

namespace mle::executor::slurm {

// Which Slurm account a job runs under (slurm.accounts).
enum class AccountMode {
  kNone,        // `account` (or the user's default account): one for every project
  kPerProject,  // its project's, "mle-<project>" (slurm_accounts.h), with the project's quotas as limits
};

// The operator's translation table (config: slurm:).
struct SlurmSettings {
  std::string partition;   // --partition; empty: the cluster's default
  std::string account;     // --account (kNone)
  AccountMode accounts = AccountMode::kNone;
  // The region whose quotas the per-project accounts' limits carry out (the
  // cluster is one region).
  std::string region = "us-central1";
  std::string qos;         // --qos
  std::string tpu_gres = "tpu";  // GRES of a TPU host's cores (8 per host)
  // Constrain TPU components to nodes with the feature "tpu_v2"/"tpu_v3"
  // (Slurm node Features). Off: any node with the TPU GRES serves any type.
  bool tpu_type_constraint = false;
  bool tpu_simulated = false;  // the TPU GRES is declared, not real (test clusters)
  // AcceleratorConfig GPU type -> Slurm GRES type ("NVIDIA_TESLA_T4" -> "t4");
  // types not listed: the name without "NVIDIA_TESLA_"/"NVIDIA_", lowercased.
  std::map<std::string, std::string> gpu_gres_types;
  bool requeue = false;    // --requeue: Slurm requeues after a node failure
  std::vector<std::string> extra_sbatch_args;  // added to the first component
};

// The GRES type of an AcceleratorConfig GPU type: `gpu_gres_types`, else the
// name without "NVIDIA_TESLA_"/"NVIDIA_", lowercased ("NVIDIA_TESLA_T4" -> "t4").
std::string GpuGresType(const std::string& type, const SlurmSettings& settings);

struct Component {
  std::string role;                // master, worker, ps, evaluator, tpu
  std::vector<std::string> tasks;  // task names, task i on node i
  std::string first_node_task;     // also on node 0 (the master of a TPU job); empty: none
  int cpus_per_task = 1;
  int64_t memory_mib = 0;          // per node; 0: Slurm's default
  std::string gres;                // "gpu:t4:2", "tpu:8"; empty: none
  std::string constraint;          // node features; empty: none
};

// The components of a job, as described above. Replicas of one role share
// one component, so they must ask for the same machine (they do: one
// machine type per role).
std::vector<Component> PlanComponents(const model::JobDemand& demand, const SlurmSettings& settings);

// Every task of the components (first_node_task first), in component order.
std::vector<std::string> TasksOf(const std::vector<Component>& components);

// The components as the launcher reads them (RUN/job.json), and back: only
// what the launcher uses (role, tasks, first_node_task) travels.
std::vector<codec::LaunchComponent> ToLaunchComponents(const std::vector<Component>& components);
std::vector<Component> FromLaunchComponents(const std::vector<codec::LaunchComponent>& components);

// "mle-<project>-<job_id>": how a restarted server finds its Slurm job.
std::string SlurmJobName(const std::string& project, const std::string& job_id);

struct BatchScriptInput {
  std::string project;
  std::string job_id;
  std::string run_dir;      // shared by every node: logs, exit files, outcome
  std::string account;      // --account; empty: SlurmSettings::account
  std::vector<std::string> launcher_argv;  // what the batch script execs
  int64_t time_limit_minutes = 0;  // 0: none
  int nice = 0;
  std::map<std::string, std::string> labels;
};

// The batch script for sbatch: job-wide options, one block per component
// separated by "#SBATCH hetjob", then `exec` of the launcher.
std::string BuildBatchScript(const BatchScriptInput& input, const std::vector<Component>& components,
                             const SlurmSettings& settings);

// Inside the allocation: the placement of every task, given each
// component's expanded node list (SLURM_JOB_NODELIST_HET_GROUP_<k>, or
// SLURM_JOB_NODELIST for a single component). Task i of a component runs on
// its i-th node; first_node_task on node 0. INVALID_ARGUMENT when a component got
// fewer nodes than it has tasks.
absl::StatusOr<model::Placement> PlacementFromAllocation(const std::vector<Component>& components,
                                                         const std::vector<std::vector<std::string>>& nodes,
                                                         bool tpu_simulated);

// Admission: could these components ever be allocated on these nodes (each
// component's nodes need its CPUs, memory, GRES and features; components
// never share a node)? OK, or FAILED_PRECONDITION naming what is missing and
// what the cluster has. Nodes that are down now count: they may return.
absl::Status CheckComponentsFit(const std::vector<Component>& components, const model::JobDemand& demand,
                                const std::vector<SlurmNode>& nodes);

// "4 nodes: tpuhost1 (2 CPUs, 2000 MiB, tpu:8), ..." for messages.
std::string DescribeNodes(const std::vector<SlurmNode>& nodes);

// A node as a host of the cluster view: CPUs (x1000), memory, one GpuDevice
// per GPU of its GRES (model: the GRES type, type: the AcceleratorConfig
// type `gpu_gres_types` maps to it, if any), the TPU type of a node with
// the TPU GRES (its tpu_v2/tpu_v3 feature upper-cased; "TPU" without one).
model::Host HostOfNode(const SlurmNode& node, const SlurmSettings& settings);

// The ports a job's tasks listen on, derived from the Slurm job id so every
// node computes the same ones without talking: 16 per job in
// [first, first + 16 * span), cycling every `span` jobs. Task i (in
// component order, then the torch rendezvous last) gets base + i; a job with
// more than 16 endpoints takes consecutive blocks.
std::vector<int> JobPorts(int64_t slurm_job_id, int count, int first = 20000, int span = 2000);

}  // namespace mle::executor::slurm
