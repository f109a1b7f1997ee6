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

// A study parameter's four value specs, by their wire names, and the ml v1
// parameter type each is.
struct VertexValueSpec {
  const char* field;  // "doubleValueSpec"
  const char* type;   // "DOUBLE"
};
inline constexpr VertexValueSpec kVertexValueSpecs[] = {{"doubleValueSpec", "DOUBLE"},
                                                       {"integerValueSpec", "INTEGER"},
                                                       {"categoricalValueSpec", "CATEGORICAL"},
                                                       {"discreteValueSpec", "DISCRETE"}};

// One of a tuning job's studySpec.parameters, with the value spec given
// (exactly one of the four is valid) in ml v1's terms.
struct VertexParameter {
  std::string id;          // parameterId
  std::string type;        // DOUBLE, INTEGER, CATEGORICAL or DISCRETE: the value spec given ("" none)
  int value_specs = 0;     // how many of doubleValueSpec, integerValueSpec, ... were given
  std::optional<double> min_value;  // double and integer specs
  std::optional<double> max_value;
  std::vector<std::string> categorical_values;
  std::vector<double> discrete_values;
  std::string scale_type;  // as given: UNIT_LINEAR_SCALE, ...; "" or SCALE_TYPE_UNSPECIFIED unset
  bool operator==(const VertexParameter&) const = default;
};

struct VertexMetric {
  std::string id;    // metricId: the tag the trainer reports (cloudml-hypertune)
  std::string goal;  // MAXIMIZE, MINIMIZE; "" or GOAL_TYPE_UNSPECIFIED unset
  bool operator==(const VertexMetric&) const = default;
};

// What makes a Vertex job a hyperparameterTuningJob: its studySpec and trial
// counts (its trialJobSpec is the VertexJob's own spec).
struct VertexStudy {
  std::vector<VertexMetric> metrics;
  std::vector<VertexParameter> parameters;
  std::string algorithm;                   // ALGORITHM_UNSPECIFIED (Bayesian), GRID_SEARCH, RANDOM_SEARCH
  std::string measurement_selection_type;  // LAST_MEASUREMENT is what is served
  std::string observation_noise;           // kept and echoed; a hint mlengine's optimizer does not take
  std::string stopping_spec;               // decayCurveStoppingSpec or medianAutomatedStoppingSpec: early stopping
  int32_t max_trial_count = 0;
  int32_t parallel_trial_count = 0;
  int32_t max_failed_trial_count = 0;
  bool operator==(const VertexStudy&) const = default;
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
  // Set for a hyperparameterTuningJob (its spec above is the trialJobSpec);
  // unset for a customJob.
  std::optional<VertexStudy> study;
  bool operator==(const VertexJob&) const = default;

  bool IsTuningJob() const { return study.has_value(); }
  // Where the spec above is in this job's resource: "jobSpec" or "trialJobSpec".
  const char* SpecField() const { return study ? "trialJobSpec" : "jobSpec"; }
  // Its collection: "customJobs" or "hyperparameterTuningJobs".
  const char* Collection() const { return study ? "hyperparameterTuningJobs" : "customJobs"; }
};

// Vertex's state of a tuning job's trial, from the state of the job that
// runs it: REQUESTED (queued, preparing), ACTIVE, STOPPING, SUCCEEDED (also
// when stopped early), INFEASIBLE (failed or cancelled).
std::string VertexTrialStateName(JobState state);

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
// A tuning job's study becomes trainingInput.hyperparameters: its one
// metric the goal and metric tag, each parameter a ParameterSpec, the trial
// counts maxTrials, maxParallelTrials and maxFailedTrials, a stopping spec
// enableTrialEarlyStopping.
TrainingInput TrainingInputOf(const VertexJob& vertex);

// The ml v1 path of a violation (e.g. "trainingInput.workerConfig.
// acceleratorConfig.type") as the Vertex field a user wrote in `vertex`
// ("jobSpec.workerPoolSpecs[1].machineSpec.acceleratorType"; a tuning job's
// "trialJobSpec..." and "studySpec.parameters[0].doubleValueSpec.minValue");
// paths with no Vertex counterpart are returned as they are.
std::string VertexFieldOf(const std::string& ml_field, const VertexJob& vertex);

}  // namespace mle::model
