// The server's configuration file (YAML; see config/mlengined.yaml for every
// key with its meaning) and the local inventory derived from it and from
// this machine (cores, memory, GPUs via nvidia-smi, declared TPU hosts).
// Plain values; loading does I/O. Not thread-safe during loading.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "containers/images.h"
#include "executor/slurm/slurm_plan.h"
#include "model/demand.h"
#include "model/usage.h"
#include "model/resources.h"
#include "runtime/runtimes.h"
#include "sandbox/host.h"
#include "scheduler/fair_share.h"
#include "scheduler/interruption.h"
#include "scheduler/quota.h"

namespace mle::server {

struct TpuHostConfig {
  std::string name;
  std::string type;  // TPU_V2 / TPU_V3
  bool simulated = true;
};

// `slurm:` (used with --executor slurm; see config/mlengined-slurm.yaml).
struct SlurmConfig {
  std::string conf;  // SLURM_CONF for sbatch/squeue/scancel/sinfo; empty: theirs
  executor::slurm::SlurmSettings settings;
  model::ResourceTable machines;  // machine type -> CPUs (x1000), memory
  int max_poll_seconds = 5;
  int submit_concurrency = 4;  // sbatch calls at once
  // The stall watch (docs/interruptions.md), as local.stall_after_seconds
  // and local.stall_action are for local jobs: each replica's shim on its
  // node records its CPU time; mlengined reads it with the logs.
  int64_t stall_after_seconds = 3600;
  bool stall_fails = false;
  int64_t join_timeout_seconds = 0;  // the join deadline, as local.join_timeout_seconds (0: off)
};

struct ServerConfig {
  runtime::RuntimeCatalog runtimes;
  int cpu_oversubscription = 4;
  int64_t replica_cpu_milli = 1000;
  // `local.replica_memory_mib`: what each replica may use (its memory limit
  // in the sandbox), counted against this machine's memory.
  int64_t replica_memory_mib = 2048;
  // `local.stall_after_seconds` / `local.stall_action`: a running job whose
  // replicas wrote no log line and used no CPU for that long is stalled:
  // flagged in its errorMessage ("flag"), or ended FAILED ("fail"); 0: never.
  int64_t stall_after_seconds = 3600;
  bool stall_fails = false;
  // `local.join_timeout_seconds`: a job of several replicas that have not
  // all connected to one another this long after their start fails; 0: never.
  int64_t join_timeout_seconds = 0;
  // `sandbox:` (docs/security.md).
  sandbox::SandboxSettings sandbox;
  std::vector<TpuHostConfig> tpu_hosts;
  std::map<std::string, std::vector<std::string>> gpu_types;  // enum type -> model substrings
  int cancel_grace_seconds = 10;
  SlurmConfig slurm;
  scheduler::Quotas quotas;  // `quotas:` (defaults, projects.<p>.<region>)
  // `regions:` the regions this cluster serves (AI Platform's names); a
  // job or study for another is refused. One by default.
  std::vector<std::string> regions = {"us-central1"};
  scheduler::Shares shares;
  scheduler::PreemptionPolicy preemption;  // `scheduling.preemption` (enabled, fair_share, exempt_projects)
  scheduler::RetryPolicy retries;          // `scheduling.max_retries`  // `shares:` (fair-share weight by project)
  containers::ContainerSettings containers;  // `containers:` (custom container jobs)
  // `console_dir:` the web console's files; nullopt: `console` beside the
  // mlengined executable; "": no console.
  std::optional<std::string> console_dir;
  // `accounting.ml_units_per_hour` (machine_types, accelerators): rates
  // that replace the defaults of model/usage.h.
  model::UsageRates usage_rates = model::UsageRates::Defaults();
  // `webhooks:` (docs/notifications.md).
  struct Webhooks {
    bool enabled = true;
    bool allow_loopback = false;  // deliveries to this machine (tests, a receiver beside mlengined)
    int max_per_project = 10;
  } webhooks;
  // `disk:` the data directory's (docs/operations.md, "A full disk"): below
  // reserve_mb free, new jobs and uploads are refused; looked at every
  // check_seconds.
  struct Disk {
    int64_t reserve_mb = 256;
    int check_seconds = 2;
  } disk;
  // `retention:` (docs/operations.md, "Retention"): ended jobs' run files
  // and logs, package environments and images no job uses, each an age
  // (days) and a size (MiB) budget; unset: kept.
  struct RetentionBudget {
    std::optional<double> max_age_days;
    std::optional<int64_t> max_size_mb;
  };
  struct Retention {
    RetentionBudget run_files;
    RetentionBudget logs;
    RetentionBudget packages;
    RetentionBudget images;
    int check_seconds = 600;
  } retention;
};

// Reads the file; an empty path gives the built-in defaults (the runtime
// bound to /usr/bin/python3, no TPU hosts). FAILED_PRECONDITION when a
// runtime's interpreter is not an executable file.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

// The same from the YAML text alone, without I/O (interpreters unchecked):
// INVALID_ARGUMENT, prefixed with `origin` (a file name), for YAML that is
// malformed or not of the documented shape.
absl::StatusOr<ServerConfig> ParseServerConfig(const std::string& text, const std::string& origin);

// This machine as the local executor's inventory: one host "localhost" with
// cores x oversubscription CPU, its NVIDIA GPUs (nvidia-smi, when on PATH),
// plus the configured TPU hosts (which run no replicas themselves).
model::Inventory DetectLocalInventory(const ServerConfig& config);

}  // namespace mle::server
