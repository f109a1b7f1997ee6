// A job created through Vertex AI's API (aiplatform v1 customJobs): its
// CustomJobSpec as plain C++ values, and how it runs on the same engine as
// an ml v1 job. A Vertex job is a model::Job whose `vertex` is set: its
// trainingInput is made from the spec (TrainingInputOf), so validation,
// quotas, the scheduler and both executors treat it as the CUSTOM-tier ml v1
// job it is equal to; the spec is kept as it was given, for the API to
// answer with and for the replicas' Vertex environment (CLUSTER_SPEC,
// AIP_MODEL_DIR...). docs/vertex.md has the mapping.
// No I/O and no JSON here. Plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/job_state.h"

namespace mle::model {

struct TrainingInput;

struct VertexEnvVar {
  std::string name;
  std::string value;
  bool operator==(const VertexEnvVar&) const = default;
};

// One entry of jobSpec.workerPoolSpecs. An entry with nothing set is an
// empty pool (Vertex's way to skip pool 1 or 2 and still give pool 3).
struct VertexWorkerPool {
  // machineSpec
  std::string machine_type;
  std::string accelerator_type;  // "" or ACCELERATOR_TYPE_UNSPECIFIED: none
  int32_t accelerator_count = 0;
  std::string tpu_topology;
  int64_t replica_count = 0;
  // containerSpec (image_uri set) or pythonPackageSpec (python_module or
  // executor_image_uri set); args and env belong to whichever it is.
  bool has_container = false;
  bool has_python_package = false;
  std::string image_uri;
  std::vector<std::string> command;
  std::string executor_image_uri;
  std::vector<std::string> package_uris;
  std::string python_module;
  std::vector<std::string> args;
  std::vector<VertexEnvVar> env;
  // diskSpec
  std::string boot_disk_type;
  std::optional<int32_t> boot_disk_size_gb;

  bool Empty() const {
    return machine_type.empty() && replica_count == 0 && !has_container && !has_python_package &&
           accelerator_type.empty() && boot_disk_type.empty() && !boot_disk_size_gb;
  }
  bool operator==(const VertexWorkerPool&) const = default;
};

struct VertexJob {
  std::string location;  // the {location} of its name
  std::string display_name;
  std::vector<VertexWorkerPool> pools;
  std::string base_output_directory;  // baseOutputDirectory.outputUriPrefix
  std::string service_account;
  std::string network;
  // scheduling
  std::string timeout;  // protobuf duration text ("3600s"); "" unset
  bool restart_job_on_worker_restart = false;
  std::string strategy;
  std::string max_wait_duration;
  bool disable_retries = false;
  bool enable_web_access = false;
  bool enable_dashboard_access = false;
  // Fields of CustomJobSpec mlengine cannot serve, by their wire names
  // (validation refuses each, saying so).
  std::vector<std::string> unserved;
  bool operator==(const VertexJob&) const = default;
};

// Vertex's name of a job state: JOB_STATE_QUEUED (ml v1's QUEUED),
// JOB_STATE_PENDING (PREPARING), JOB_STATE_RUNNING, ...
std::string VertexStateName(JobState state);

// Vertex's names of the pools, by index: what CLUSTER_SPEC calls them.
inline std::string WorkerPoolName(size_t index) { return "workerpool" + std::to_string(index); }
// The pool an ml v1 role runs (master 0, worker 1, ps 2, evaluator 3).
inline size_t WorkerPoolIndex(const std::string& role) {
  return role == "master" ? 0 : role == "worker" ? 1 : role == "ps" ? 2 : 3;
}

// The ml v1 trainingInput a Vertex spec runs as: scale tier CUSTOM; pool 0
// the master, pool 1 the workers, pool 2 the parameter servers, pool 3 the
// evaluators (an empty pool: none); each pool's machine type, accelerators,
// disk, and container (image, command, args) on the replica config; a
// package spec's packages, module and args, which ml v1 gives every
// replica, from the first pool that has them; region the location; jobDir
// the base output directory; scheduling.maxRunningTime the timeout and
// maxWaitTime the maxWaitDuration; the service account. runtimeVersion is
// left for the service (the executor image's runtime, RuntimeForImage).
TrainingInput TrainingInputOf(const VertexJob& vertex);

// The ml v1 path of a violation (e.g. "trainingInput.workerConfig.
// acceleratorConfig.type") as the Vertex field a user wrote
// ("jobSpec.workerPoolSpecs[1].machineSpec.acceleratorType"); paths with no
// Vertex counterpart are returned as they are.
std::string VertexFieldOf(const std::string& ml_field);

}  // namespace mle::model
