#include "model/vertex.h"

#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/job.h"

namespace mle::model {
namespace {

// Vertex calls a TPU host's machine type "cloud-tpu", ml v1 "cloud_tpu".
std::string MlMachineType(const std::string& vertex) { return vertex == "cloud-tpu" ? "cloud_tpu" : vertex; }

ReplicaConfig ConfigOf(const VertexWorkerPool& pool) {
  ReplicaConfig config;
  if (!pool.accelerator_type.empty() && pool.accelerator_type != "ACCELERATOR_TYPE_UNSPECIFIED") {
    config.accelerator_config = AcceleratorConfig{pool.accelerator_count, pool.accelerator_type};
  }
  if (pool.has_container) {
    config.image_uri = pool.image_uri;
    config.container_command = pool.command;
    config.container_args = pool.args;
  }
  if (!pool.boot_disk_type.empty() || pool.boot_disk_size_gb) {
    config.disk_config = DiskConfig{pool.boot_disk_type, pool.boot_disk_size_gb};
  }
  return config;
}

// ml v1's ParameterSpec of a study's parameter.
ParameterSpec ParameterOf(const VertexParameter& p) {
  ParameterSpec out;
  out.parameter_name = p.id;
  out.type = p.type;
  out.min_value = p.min_value;
  out.max_value = p.max_value;
  out.categorical_values = p.categorical_values;
  out.discrete_values = p.discrete_values;
  if (p.scale_type != "SCALE_TYPE_UNSPECIFIED") out.scale_type = p.scale_type;
  return out;
}

HyperparameterSpec HyperparametersOf(const VertexStudy& study) {
  HyperparameterSpec h;
  if (!study.metrics.empty()) {
    h.goal = study.metrics[0].goal.empty() ? "GOAL_TYPE_UNSPECIFIED" : study.metrics[0].goal;
    h.hyperparameter_metric_tag = study.metrics[0].id;
  }
  for (const auto& p : study.parameters) h.params.push_back(ParameterOf(p));
  if (study.max_trial_count != 0) h.max_trials = study.max_trial_count;
  if (study.parallel_trial_count != 0) h.max_parallel_trials = study.parallel_trial_count;
  if (study.max_failed_trial_count != 0) h.max_failed_trials = study.max_failed_trial_count;
  h.algorithm = study.algorithm;
  if (!study.stopping_spec.empty()) h.enable_trial_early_stopping = true;
  return h;
}

// Where a ParameterSpec's field is in a study's parameter `p`.
std::string ParameterFieldOf(const std::string& field, const VertexParameter& p) {
  std::string spec;
  for (const auto& v : kVertexValueSpecs) {
    if (p.type == v.type) spec = v.field;
  }
  if (field == "parameterName") return "parameterId";
  if (field == "scaleType") return "scaleType";
  if (spec.empty() || field == "type") return "";
  if (field == "categoricalValues" || field == "discreteValues") return spec + ".values";
  if (absl::StartsWith(field, "categoricalValues[") || absl::StartsWith(field, "discreteValues[")) {
    return spec + ".values" + field.substr(field.find('['));
  }
  return spec + "." + field;  // minValue, maxValue
}

// A trainingInput.hyperparameters path as the study's, or nullopt.
std::optional<std::string> StudyFieldOf(const std::string& ml_field, const VertexStudy& study) {
  const std::string kPrefix = "trainingInput.hyperparameters";
  if (!absl::StartsWith(ml_field, kPrefix)) return std::nullopt;
  const std::string rest = ml_field.substr(kPrefix.size());
  if (rest.empty()) return "studySpec";
  static const auto* fields = new std::vector<std::pair<std::string, std::string>>{
      {".goal", "studySpec.metrics[0].goal"},
      {".hyperparameterMetricTag", "studySpec.metrics[0].metricId"},
      {".maxTrials", "maxTrialCount"},
      {".maxParallelTrials", "parallelTrialCount"},
      {".maxFailedTrials", "maxFailedTrialCount"},
      {".algorithm", "studySpec.algorithm"},
      {".enableTrialEarlyStopping", "studySpec"},
      {".params", "studySpec.parameters"}};
  for (const auto& [ml, vertex] : *fields) {
    if (rest == ml) return vertex;
  }
  // .params[i] and .params[i].field
  if (!absl::StartsWith(rest, ".params[")) return std::nullopt;
  const size_t close = rest.find(']');
  size_t index = 0;
  if (close == std::string::npos || !absl::SimpleAtoi(rest.substr(8, close - 8), &index)) return std::nullopt;
  const std::string param = absl::StrCat("studySpec.parameters[", index, "]");
  if (close + 1 >= rest.size() || rest[close + 1] != '.' || index >= study.parameters.size()) return param;
  const std::string field = ParameterFieldOf(rest.substr(close + 2), study.parameters[index]);
  return field.empty() ? param : param + "." + field;
}

}  // namespace

std::string VertexTrialStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
    case JobState::kPreparing:
      return "REQUESTED";
    case JobState::kRunning:
      return "ACTIVE";
    case JobState::kCancelling:
      return "STOPPING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
    case JobState::kCancelled:
      return "INFEASIBLE";
    default:
      return "STATE_UNSPECIFIED";
  }
}

std::string VertexStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "JOB_STATE_QUEUED";
    case JobState::kPreparing:
      return "JOB_STATE_PENDING";
    case JobState::kRunning:
      return "JOB_STATE_RUNNING";
    case JobState::kSucceeded:
      return "JOB_STATE_SUCCEEDED";
    case JobState::kFailed:
      return "JOB_STATE_FAILED";
    case JobState::kCancelling:
      return "JOB_STATE_CANCELLING";
    case JobState::kCancelled:
      return "JOB_STATE_CANCELLED";
    default:
      return "JOB_STATE_UNSPECIFIED";
  }
}

TrainingInput TrainingInputOf(const VertexJob& vertex) {
  TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.region = vertex.location;
  t.job_dir = vertex.base_output_directory;
  t.service_account = vertex.service_account;
  t.network = vertex.network;
  if (!vertex.timeout.empty() || !vertex.max_wait_duration.empty()) {
    Scheduling s;
    s.max_running_time = vertex.timeout;
    s.max_wait_time = vertex.max_wait_duration;
    t.scheduling = s;
  }
  if (vertex.enable_web_access) t.enable_web_access = true;
  for (size_t i = 0; i < vertex.pools.size() && i < 4; ++i) {
    const VertexWorkerPool& pool = vertex.pools[i];
    if (pool.Empty()) continue;
    const std::string type = MlMachineType(pool.machine_type);
    switch (i) {
      case 0:
        t.master_type = type;
        t.master_config = ConfigOf(pool);
        break;
      case 1:
        t.worker_type = type;
        t.worker_count = pool.replica_count;
        t.worker_config = ConfigOf(pool);
        break;
      case 2:
        t.parameter_server_type = type;
        t.parameter_server_count = pool.replica_count;
        t.parameter_server_config = ConfigOf(pool);
        break;
      case 3:
        t.evaluator_type = type;
        t.evaluator_count = pool.replica_count;
        t.evaluator_config = ConfigOf(pool);
        break;
    }
    if (pool.has_python_package && t.python_module.empty() && t.package_uris.empty()) {
      t.package_uris = pool.package_uris;
      t.python_module = pool.python_module;
      t.args = pool.args;
    }
  }
  if (vertex.study) t.hyperparameters = HyperparametersOf(*vertex.study);
  return t;
}

namespace {

// The jobSpec path of an ml v1 trainingInput path (ml_field as it is if none).
std::string SpecFieldOf(const std::string& ml_field) {
  // Longest ml v1 prefixes first: the first that fits is replaced.
  static const auto* table = [] {
    auto* t = new std::vector<std::pair<std::string, std::string>>;
    const std::pair<const char*, int> roles[] = {
        {"master", 0}, {"worker", 1}, {"parameterServer", 2}, {"evaluator", 3}};
    for (const auto& [role, index] : roles) {
      const std::string pool = absl::StrCat("jobSpec.workerPoolSpecs[", index, "]");
      const std::string config = absl::StrCat("trainingInput.", role, "Config");
      t->emplace_back(config + ".acceleratorConfig.type", pool + ".machineSpec.acceleratorType");
      t->emplace_back(config + ".acceleratorConfig.count", pool + ".machineSpec.acceleratorCount");
      t->emplace_back(config + ".acceleratorConfig", pool + ".machineSpec");
      t->emplace_back(config + ".imageUri", pool + ".containerSpec.imageUri");
      // The TPU runtime a container goes with is chosen for its image.
      t->emplace_back(config + ".tpuTfVersion", pool + ".containerSpec.imageUri");
      t->emplace_back(config + ".containerCommand", pool + ".containerSpec.command");
      t->emplace_back(config + ".containerArgs", pool + ".containerSpec.args");
      t->emplace_back(config + ".diskConfig.bootDiskType", pool + ".diskSpec.bootDiskType");
      t->emplace_back(config + ".diskConfig.bootDiskSizeGb", pool + ".diskSpec.bootDiskSizeGb");
      t->emplace_back(config + ".diskConfig", pool + ".diskSpec");
      t->emplace_back(config, pool);
      t->emplace_back(absl::StrCat("trainingInput.", role, "Type"), pool + ".machineSpec.machineType");
      t->emplace_back(absl::StrCat("trainingInput.", role, "Count"), pool + ".replicaCount");
    }
    const std::string package = "jobSpec.workerPoolSpecs[0].pythonPackageSpec";
    t->emplace_back("trainingInput.packageUris", package + ".packageUris");
    t->emplace_back("trainingInput.pythonModule", package + ".pythonModule");
    t->emplace_back("trainingInput.args", package + ".args");
    t->emplace_back("trainingInput.runtimeVersion", package + ".executorImageUri");
    t->emplace_back("trainingInput.pythonVersion", package + ".executorImageUri");
    t->emplace_back("trainingInput.scheduling.maxRunningTime", "jobSpec.scheduling.timeout");
    t->emplace_back("trainingInput.scheduling.maxWaitTime", "jobSpec.scheduling.maxWaitDuration");
    t->emplace_back("trainingInput.scheduling", "jobSpec.scheduling");
    t->emplace_back("trainingInput.jobDir", "jobSpec.baseOutputDirectory.outputUriPrefix");
    t->emplace_back("trainingInput.serviceAccount", "jobSpec.serviceAccount");
    t->emplace_back("trainingInput.network", "jobSpec.network");
    t->emplace_back("trainingInput.enableWebAccess", "jobSpec.enableWebAccess");
    t->emplace_back("trainingInput.region", "parent");
    t->emplace_back("trainingInput.scaleTier", "jobSpec.workerPoolSpecs");
    t->emplace_back("trainingInput", "jobSpec");
    return t;
  }();
  for (const auto& [ml, vertex] : *table) {
    if (ml_field == ml) return vertex;
    if (absl::StartsWith(ml_field, ml) && (ml_field[ml.size()] == '.' || ml_field[ml.size()] == '[')) {
      return vertex + ml_field.substr(ml.size());
    }
  }
  return ml_field;
}

}  // namespace

std::string VertexFieldOf(const std::string& ml_field, const VertexJob& vertex) {
  if (vertex.study) {
    if (auto field = StudyFieldOf(ml_field, *vertex.study)) return *field;
  }
  std::string field = SpecFieldOf(ml_field);
  // A tuning job's spec is its trialJobSpec.
  if (vertex.study && absl::StartsWith(field, "jobSpec")) field = "trialJobSpec" + field.substr(7);
  return field;
}

}  // namespace mle::model
