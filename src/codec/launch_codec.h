// The Slurm launcher's wire formats: what mlengined hands to
// mlengine-slurm-launch through the run directory, versioned on their own
// (not the database's storage encoding, SerializeJobForStorage):
//
//   "mlengine.launch/v1" (RUN/job.json): the job's identity, its
//     trainingInput in the ml v1 API's JSON (the replicas see it in
//     TF_CONFIG), and the Slurm components mlengined planned and submitted,
//     in het-group order. Exactly what the launcher needs, nothing else.
//   "mlengine.task-launch/v1" (RUN/<task>/launch): one task's argv,
//     environment and node, computed by the launcher in the allocation.
//
// Every document carries its "format"; a decoder accepts exactly its own
// version and says what it found otherwise (an older writer, another
// installation), and rejects unknown fields. Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/job.h"

namespace mle::codec {

inline constexpr char kLaunchJobFormat[] = "mlengine.launch/v1";
inline constexpr char kTaskLaunchFormat[] = "mlengine.task-launch/v1";

// One Slurm component (one het group) as the launcher runs it.
struct LaunchComponent {
  std::string role;                // master, worker, ps, evaluator, tpu
  std::vector<std::string> tasks;  // task i runs on the component's node i
  std::string first_node_task;     // also on node 0 (the master of a TPU job); empty: none
};

// How the nodes run a custom container job (containers::ContainerSettings,
// as far as a node needs it).
struct LaunchContainers {
  std::map<std::string, std::string> images;  // imageUri -> pinned reference
  std::string podman;
  std::string init;
  std::string runtime;
  std::string gpu_devices;
  bool registry_insecure = true;
  std::string containers_conf;  // the containers.conf podman uses (in the run directory)
  std::map<std::string, std::string> simulated;  // imageUri -> note, for simulated stand-ins
  bool operator==(const LaunchContainers&) const = default;
};

// The sandbox the job's replicas run in on the nodes (docs/security.md):
// mlengined chose the identity and the buckets; each node's launcher makes
// the cgroups and the view.
struct LaunchSandbox {
  uint32_t uid = 0;
  std::map<std::string, bool> buckets;   // bucket -> writable
  std::vector<std::string> read_only;    // more host directories every view holds (runtimes, mlengine's python)
  int64_t pids_limit = 0;
  struct Limits {
    int64_t cpu_milli = 0;   // 0: none
    int64_t memory_mib = 0;  // 0: none
  };
  std::map<std::string, Limits> limits;  // task -> its limits
};

struct LaunchJob {
  std::string project;
  std::string job_id;
  model::TrainingInput training_input;
  std::vector<LaunchComponent> components;  // at least one
  // The replicas' credential (see executor::CredentialIssuer): the account,
  // its token, and where the API is; empty when none is given.
  std::string service_account;
  std::string access_token;
  std::string api_endpoint;
  std::optional<LaunchContainers> containers;  // a custom container job
  std::optional<LaunchSandbox> sandbox;        // none: replicas run unsandboxed
  // A Vertex AI job's spec (model::Job::vertex): its replicas get Vertex's
  // contract (runtime/replica_env.h).
  std::optional<model::VertexJob> vertex;
  // A trial of a tuning job (model::Job::trial_of, trial_id); empty otherwise.
  std::string trial_of;
  std::string trial_id;
  // Which attempt of the job this run is (MLENGINE_ATTEMPT; 1 when absent).
  int attempt = 1;
  // How often each replica's shim records its CPU time for the stall watch
  // (mlengine-replica --progress); 0: not watched.
  int progress_every_ms = 0;
  // The shims also record whether their replica connected to the job's
  // others (mlengine-replica --join-ports: the join deadline).
  bool watch_joins = false;
};

std::string EncodeLaunchJob(const LaunchJob& job);

// What a warm interpreter (python -m mlengine._warm) becomes: one JSON line.
struct WarmSpec {
  std::string module;
  std::vector<std::string> args;
  std::string cwd;
  std::map<std::string, std::string> env;  // the whole environment
  std::vector<std::string> site_dirs;      // the job's package environment's site-packages
  std::string prefix;                      // that environment (empty: none)
  std::string sandbox;                     // the sandbox spec the child enters first (empty: none)
};
std::string EncodeWarmSpec(const WarmSpec& spec);
// FAILED_PRECONDITION when the document is of another format or version (or
// has none: written by an older mlengined); DATA_LOSS when it is not a
// well-formed v1 document (the message names the field).
absl::StatusOr<LaunchJob> DecodeLaunchJob(absl::string_view text);

struct TaskLaunch {
  std::vector<std::string> argv;           // the replica's command line
  std::map<std::string, std::string> env;  // added to the task's environment
  std::string host;                        // the address other replicas use for it
  // A custom container: the pinned image (empty: argv is a host program)
  // and the entrypoint replacing the image's (empty: its own).
  std::string image;
  std::vector<std::string> entrypoint;
};

std::string EncodeTaskLaunch(const TaskLaunch& launch);
// Errors as DecodeLaunchJob's.
absl::StatusOr<TaskLaunch> DecodeTaskLaunch(absl::string_view text);

}  // namespace mle::codec
