#include "absl/strings/string_view.h"
#include "codec/job_codec.h"

#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codec/discovery.h"
#include "codec/json_fields.h"
#include "codec/json_text.h"
#include "codec/vertex_codec.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;
using namespace mle::model;

// ---- decoding (input already checked against the schema) ----


std::optional<int32_t> Int32(const json& o, const char* key) {
  auto v = Int64(o, key);
  if (!v) return std::nullopt;
  return static_cast<int32_t>(*v);
}


std::optional<bool> Bool(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  return it->get<bool>();
}


std::vector<std::string> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return out;
  for (const auto& v : *it) out.push_back(v.is_null() ? "" : v.get<std::string>());
  return out;
}


std::map<std::string, std::string> StringMap(const json& o, const char* key) {
  std::map<std::string, std::string> out;
  if (const json* m = Obj(o, key)) {
    for (const auto& [k, v] : m->items()) out[k] = v.is_null() ? "" : v.get<std::string>();
  }
  return out;
}


ReplicaConfig DecodeReplica(const json& o) {
  ReplicaConfig r;
  if (const json* a = Obj(o, "acceleratorConfig")) {
    r.accelerator_config = AcceleratorConfig{Int64(*a, "count"), Str(*a, "type")};
  }
  r.image_uri = Str(o, "imageUri");
  r.container_command = Strings(o, "containerCommand");
  r.container_args = Strings(o, "containerArgs");
  r.tpu_tf_version = Str(o, "tpuTfVersion");
  if (const json* d = Obj(o, "diskConfig")) {
    r.disk_config = DiskConfig{Str(*d, "bootDiskType"), Int32(*d, "bootDiskSizeGb")};
  }
  return r;
}

std::optional<ReplicaConfig> OptReplica(const json& o, const char* key) {
  if (const json* r = Obj(o, key)) return DecodeReplica(*r);
  return std::nullopt;
}

HyperparameterSpec DecodeHyperparameters(const json& o) {
  HyperparameterSpec h;
  h.goal = Str(o, "goal");
  if (const json* params = Obj(o, "params")) {
    for (const auto& p : *params) {
      ParameterSpec s;
      if (p.is_null()) {
        h.params.push_back(s);
        continue;
      }
      s.parameter_name = Str(p, "parameterName");
      s.type = Str(p, "type");
      s.min_value = Double(p, "minValue");
      s.max_value = Double(p, "maxValue");
      s.categorical_values = Strings(p, "categoricalValues");
      if (const json* d = Obj(p, "discreteValues")) {
        for (const auto& v : *d) {
          json holder = {{"v", v}};
          s.discrete_values.push_back(Double(holder, "v").value_or(0));
        }
      }
      s.scale_type = Str(p, "scaleType");
      h.params.push_back(std::move(s));
    }
  }
  h.max_trials = Int32(o, "maxTrials");
  h.max_parallel_trials = Int32(o, "maxParallelTrials");
  h.max_failed_trials = Int32(o, "maxFailedTrials");
  h.hyperparameter_metric_tag = Str(o, "hyperparameterMetricTag");
  h.algorithm = Str(o, "algorithm");
  h.enable_trial_early_stopping = Bool(o, "enableTrialEarlyStopping");
  h.resume_previous_job_id = Str(o, "resumePreviousJobId");
  return h;
}

TrainingInput DecodeTrainingInput(const json& o) {
  TrainingInput t;
  t.scale_tier = Str(o, "scaleTier");
  t.master_type = Str(o, "masterType");
  t.master_config = OptReplica(o, "masterConfig");
  t.worker_type = Str(o, "workerType");
  t.worker_count = Int64(o, "workerCount");
  t.worker_config = OptReplica(o, "workerConfig");
  t.parameter_server_type = Str(o, "parameterServerType");
  t.parameter_server_count = Int64(o, "parameterServerCount");
  t.parameter_server_config = OptReplica(o, "parameterServerConfig");
  t.evaluator_type = Str(o, "evaluatorType");
  t.evaluator_count = Int64(o, "evaluatorCount");
  t.evaluator_config = OptReplica(o, "evaluatorConfig");
  t.package_uris = Strings(o, "packageUris");
  t.python_module = Str(o, "pythonModule");
  t.args = Strings(o, "args");
  if (const json* h = Obj(o, "hyperparameters")) t.hyperparameters = DecodeHyperparameters(*h);
  t.region = Str(o, "region");
  t.job_dir = Str(o, "jobDir");
  t.runtime_version = Str(o, "runtimeVersion");
  t.python_version = Str(o, "pythonVersion");
  if (const json* s = Obj(o, "scheduling")) {
    t.scheduling = Scheduling{Str(*s, "maxRunningTime"), Str(*s, "maxWaitTime"), Int32(*s, "priority")};
  }
  t.network = Str(o, "network");
  t.service_account = Str(o, "serviceAccount");
  t.use_chief_in_tf_config = Bool(o, "useChiefInTfConfig");
  t.enable_web_access = Bool(o, "enableWebAccess");
  if (const json* e = Obj(o, "encryptionConfig")) {
    t.has_encryption_config = true;
    t.kms_key_name = Str(*e, "kmsKeyName");
  }
  return t;
}

// ---- encoding (unset and default values are omitted, as Google does) ----

void PutStr(json& o, const char* key, const std::string& v) {
  if (!v.empty()) o[key] = v;
}
void PutInt64(json& o, const char* key, std::optional<int64_t> v) {
  if (v) o[key] = std::to_string(*v);
}
void PutInt32(json& o, const char* key, std::optional<int32_t> v) {
  if (v) o[key] = *v;
}
void PutStrings(json& o, const char* key, const std::vector<std::string>& v) {
  if (!v.empty()) o[key] = v;
}
void PutTime(json& o, const char* key, const std::optional<absl::Time>& t) {
  if (t) o[key] = common::FormatRfc3339(*t);
}
void PutBool(json& o, const char* key, std::optional<bool> v) {
  if (v) o[key] = *v;
}


json EncodeReplica(const ReplicaConfig& r) {
  json o = json::object();
  if (r.accelerator_config) {
    json a = json::object();
    PutInt64(a, "count", r.accelerator_config->count);
    PutStr(a, "type", r.accelerator_config->type);
    o["acceleratorConfig"] = a;
  }
  PutStr(o, "imageUri", r.image_uri);
  PutStrings(o, "containerCommand", r.container_command);
  PutStrings(o, "containerArgs", r.container_args);
  PutStr(o, "tpuTfVersion", r.tpu_tf_version);
  if (r.disk_config) {
    json d = json::object();
    PutStr(d, "bootDiskType", r.disk_config->boot_disk_type);
    PutInt32(d, "bootDiskSizeGb", r.disk_config->boot_disk_size_gb);
    o["diskConfig"] = d;
  }
  return o;
}

json EncodeHyperparameters(const HyperparameterSpec& h) {
  json o = json::object();
  PutStr(o, "goal", h.goal);
  json params = json::array();
  for (const auto& p : h.params) {
    json s = json::object();
    PutStr(s, "parameterName", p.parameter_name);
    PutStr(s, "type", p.type);
    if (p.min_value) s["minValue"] = EncodeDouble(*p.min_value);
    if (p.max_value) s["maxValue"] = EncodeDouble(*p.max_value);
    PutStrings(s, "categoricalValues", p.categorical_values);
    if (!p.discrete_values.empty()) {
      json d = json::array();
      for (double v : p.discrete_values) d.push_back(EncodeDouble(v));
      s["discreteValues"] = d;
    }
    PutStr(s, "scaleType", p.scale_type);
    params.push_back(s);
  }
  if (!params.empty()) o["params"] = params;
  PutInt32(o, "maxTrials", h.max_trials);
  PutInt32(o, "maxParallelTrials", h.max_parallel_trials);
  PutInt32(o, "maxFailedTrials", h.max_failed_trials);
  PutStr(o, "hyperparameterMetricTag", h.hyperparameter_metric_tag);
  PutStr(o, "algorithm", h.algorithm);
  PutBool(o, "enableTrialEarlyStopping", h.enable_trial_early_stopping);
  PutStr(o, "resumePreviousJobId", h.resume_previous_job_id);
  return o;
}

json EncodeTrainingInput(const TrainingInput& t) {
  json o = json::object();
  PutStr(o, "scaleTier", t.scale_tier);
  PutStr(o, "masterType", t.master_type);
  if (t.master_config) o["masterConfig"] = EncodeReplica(*t.master_config);
  PutStr(o, "workerType", t.worker_type);
  PutInt64(o, "workerCount", t.worker_count);
  if (t.worker_config) o["workerConfig"] = EncodeReplica(*t.worker_config);
  PutStr(o, "parameterServerType", t.parameter_server_type);
  PutInt64(o, "parameterServerCount", t.parameter_server_count);
  if (t.parameter_server_config) o["parameterServerConfig"] = EncodeReplica(*t.parameter_server_config);
  PutStr(o, "evaluatorType", t.evaluator_type);
  PutInt64(o, "evaluatorCount", t.evaluator_count);
  if (t.evaluator_config) o["evaluatorConfig"] = EncodeReplica(*t.evaluator_config);
  PutStrings(o, "packageUris", t.package_uris);
  PutStr(o, "pythonModule", t.python_module);
  PutStrings(o, "args", t.args);
  if (t.hyperparameters) o["hyperparameters"] = EncodeHyperparameters(*t.hyperparameters);
  PutStr(o, "region", t.region);
  PutStr(o, "jobDir", t.job_dir);
  PutStr(o, "runtimeVersion", t.runtime_version);
  PutStr(o, "pythonVersion", t.python_version);
  if (t.scheduling) {
    json s = json::object();
    PutStr(s, "maxRunningTime", t.scheduling->max_running_time);
    PutStr(s, "maxWaitTime", t.scheduling->max_wait_time);
    PutInt32(s, "priority", t.scheduling->priority);
    o["scheduling"] = s;
  }
  PutStr(o, "network", t.network);
  PutStr(o, "serviceAccount", t.service_account);
  PutBool(o, "useChiefInTfConfig", t.use_chief_in_tf_config);
  PutBool(o, "enableWebAccess", t.enable_web_access);
  if (t.has_encryption_config) {
    json e = json::object();
    PutStr(e, "kmsKeyName", t.kms_key_name);
    o["encryptionConfig"] = e;
  }
  return o;
}

json EncodeTrainingOutput(const TrainingOutput& t) {
  json o = json::object();
  if (t.completed_trial_count) o["completedTrialCount"] = std::to_string(t.completed_trial_count);
  if (!t.trials.empty()) {
    json trials = json::array();
    for (const auto& h : t.trials) {
      json x = json::object();
      PutStr(x, "trialId", h.trial_id);
      if (!h.hyperparameters.empty()) x["hyperparameters"] = h.hyperparameters;
      if (h.final_metric) {
        json m = json::object();
        PutInt64(m, "trainingStep", h.final_metric->training_step);
        if (h.final_metric->objective_value) m["objectiveValue"] = EncodeDouble(*h.final_metric->objective_value);
        x["finalMetric"] = m;
      }
      if (!h.all_metrics.empty()) {
        json all = json::array();
        for (const auto& metric : h.all_metrics) {
          json m = json::object();
          PutInt64(m, "trainingStep", metric.training_step);
          if (metric.objective_value) m["objectiveValue"] = EncodeDouble(*metric.objective_value);
          all.push_back(std::move(m));
        }
        x["allMetrics"] = std::move(all);
      }
      if (h.state != JobState::kUnspecified) x["state"] = std::string(JobStateName(h.state));
      PutTime(x, "startTime", h.start_time);
      PutTime(x, "endTime", h.end_time);
      if (h.is_trial_stopped_early) x["isTrialStoppedEarly"] = true;
      trials.push_back(x);
    }
    o["trials"] = trials;
  }
  if (t.consumed_ml_units != 0) o["consumedMLUnits"] = t.consumed_ml_units;
  PutStr(o, "hyperparameterMetricTag", t.hyperparameter_metric_tag);
  if (t.is_hyperparameter_tuning_job) o["isHyperparameterTuningJob"] = true;
  if (!t.web_access_uris.empty()) o["webAccessUris"] = t.web_access_uris;
  return o;
}

}  // namespace

const std::vector<std::string>& JobOutputOnlyFields() {
  static const auto* fields = new std::vector<std::string>{
      "createTime", "startTime", "endTime", "state", "errorMessage",
      "jobPosition", "trainingOutput", "predictionOutput", "attempts"};
  return *fields;
}

DecodedJob DecodeJob(const json& body) {
  DecodedJob out;
  if (!body.is_object()) {
    out.violations.push_back({"(body)", "the request body must be a JSON object (a Job)"});
    return out;
  }
  std::vector<json::json_pointer> where;
  out.violations = DiscoverySchema::Embedded().Check(body, "GoogleCloudMlV1__Job", JobOutputOnlyFields(), &where);
  json clean = WithoutValuesAt(body, where);
  for (const auto& field : JobOutputOnlyFields()) clean.erase(field);
  Job& job = out.job;
  job.job_id = Str(clean, "jobId");
  if (const json* t = Obj(clean, "trainingInput")) job.training_input = DecodeTrainingInput(*t);
  job.has_prediction_input = Obj(clean, "predictionInput") != nullptr;
  job.labels = StringMap(clean, "labels");
  return out;
}

absl::StatusOr<Job> DecodeJobRequest(const json& body) {
  DecodedJob decoded = DecodeJob(body);
  if (!decoded.violations.empty()) {
    return common::InvalidArgumentWithViolations("Invalid JSON payload received.", decoded.violations);
  }
  return std::move(decoded.job);
}

namespace {

json EncodeJobWith(const Job& job, bool training_input) {
  json o = json::object();
  o["jobId"] = job.job_id;
  if (training_input && job.training_input) o["trainingInput"] = EncodeTrainingInput(*job.training_input);
  PutTime(o, "createTime", job.create_time);
  PutTime(o, "startTime", job.start_time);
  PutTime(o, "endTime", job.end_time);
  if (job.state != JobState::kUnspecified) o["state"] = std::string(JobStateName(job.state));
  PutStr(o, "errorMessage", job.error_message);
  if (job.training_output) {
    json t = EncodeTrainingOutput(*job.training_output);
    if (!t.empty()) o["trainingOutput"] = t;
  }
  if (!job.labels.empty()) o["labels"] = job.labels;
  PutInt64(o, "jobPosition", job.job_position);
  if (!job.attempts.empty()) {
    // mlengine's own field (not in the discovery document): Google's
    // clients keep or ignore what they do not know.
    json list = json::array();
    for (const auto& a : job.attempts) {
      json x = {{"attempt", a.number}};
      PutTime(x, "startTime", a.start_time);
      PutTime(x, "endTime", a.end_time);
      if (!a.hosts.empty()) x["hosts"] = a.hosts;
      x["end"] = std::string(model::AttemptEndName(a.end));
      PutStr(x, "message", a.message);
      list.push_back(std::move(x));
    }
    o["attempts"] = std::move(list);
  }
  o["etag"] = EtagForVersion(job.version);
  return o;
}

}  // namespace

json EncodeJob(const Job& job) { return EncodeJobWith(job, true); }

json EncodeListJobsResponse(const std::vector<Job>& jobs, const std::string& next_page_token) {
  json o = json::object();
  if (!jobs.empty()) {
    json list = json::array();
    for (const auto& j : jobs) list.push_back(EncodeJob(j));
    o["jobs"] = std::move(list);
  }
  PutStr(o, "nextPageToken", next_page_token);
  return o;
}

json EncodeGetConfigResponse(const Project& project) {
  return json{{"serviceAccount", project.service_account},
              {"serviceAccountProject", std::to_string(project.number)},
              {"config", {{"tpuServiceAccount", project.tpu_service_account}}}};
}

json EncodeError(const absl::Status& status) {
  json error = {{"code", common::HttpStatusForCode(status.code())},
                {"message", std::string(status.message())},
                {"status", std::string(common::CodeName(status.code()))}};
  auto violations = common::GetFieldViolations(status);
  if (!violations.empty()) {
    json list = json::array();
    for (const auto& v : violations) list.push_back({{"field", v.field}, {"description", v.description}});
    error["details"] = json::array(
        {{{"@type", "type.googleapis.com/google.rpc.BadRequest"}, {"fieldViolations", list}}});
  }
  if (auto info = common::GetPermissionInfo(status)) {
    error["details"] = json::array({{{"@type", "type.googleapis.com/google.rpc.ErrorInfo"},
                                     {"reason", "IAM_PERMISSION_DENIED"},
                                     {"domain", "iam.googleapis.com"},
                                     {"metadata", {{"permission", info->permission}, {"resource", info->resource}}}}});
  }
  return json{{"error", error}};
}

std::string EtagForVersion(int64_t version) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i) {
    bytes[i] = static_cast<char>(version & 0xff);
    version >>= 8;
  }
  return absl::Base64Escape(bytes);
}

std::string SerializeJobForStorage(const Job& job) {
  // A custom job's trainingInput is made from its spec again as it is read
  // (model::TrainingInputOf): only what admission chose is kept (each
  // commit writes fewer bytes). A tuning job's trial keeps its own (its
  // parameters are in its args).
  const bool vertex = job.vertex && job.training_input && job.trial_of.empty();
  json o = EncodeJobWith(job, !vertex);
  if (vertex) {
    o["_runtimeVersion"] = job.training_input->runtime_version;
    const auto& worker = job.training_input->worker_config;
    if (worker && !worker->tpu_tf_version.empty()) o["_tpuTfVersion"] = worker->tpu_tf_version;
  }
  o["_project"] = job.project;
  o["_version"] = job.version;
  o["_sequence"] = job.sequence;
  o["_hasPredictionInput"] = job.has_prediction_input;
  if (!job.resolved_images.empty()) o["_resolvedImages"] = job.resolved_images;
  if (!job.trial_of.empty()) o["_trial"] = {{"of", job.trial_of}, {"id", job.trial_id}};
  if (!job.preempted_by.empty()) o["_preemptedBy"] = job.preempted_by;
  if (!job.creator.empty()) o["_creator"] = job.creator;
  std::string row = DumpJson(o);
  if (job.vertex) {
    // A Vertex job's spec, written as text (VertexStorageText) and put in
    // as the row's last member: `o` is a non-empty object, its text ends
    // in '}'. ParseStoredJob reads members in any order.
    row.pop_back();
    absl::StrAppend(&row, ",\"_vertex\":", VertexStorageText(*job.vertex), "}");
  }
  return row;
}

absl::StatusOr<TrainingInput> DecodeEncodedTrainingInput(const json& o) {
  if (!o.is_object()) return absl::DataLossError("the trainingInput is not an object");
  try {
    return DecodeTrainingInput(o);
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("the trainingInput has a field of the wrong type (", e.what(), ")"));
  }
}

absl::StatusOr<Job> ParseStoredJob(absl::string_view text) {
  json o;
  try {
    o = ParseJson(std::string_view(text.data(), text.size()));
  } catch (const json::exception&) {
    return absl::DataLossError("stored job is not valid JSON");
  }
  if (!o.is_object()) return absl::DataLossError("stored job is not valid JSON");
  Job job;
  job.project = o.value("_project", "");
  job.version = o.value("_version", int64_t{0});
  job.sequence = o.value("_sequence", int64_t{0});
  job.has_prediction_input = o.value("_hasPredictionInput", false);
  job.resolved_images = StringMap(o, "_resolvedImages");
  if (const json* trial = Obj(o, "_trial")) {
    job.trial_of = Str(*trial, "of");
    job.trial_id = Str(*trial, "id");
  }
  job.preempted_by = Str(o, "_preemptedBy");
  job.creator = Str(o, "_creator");
  if (const json* vertex = Obj(o, "_vertex")) {
    job.vertex = DecodeVertexFromStorage(*vertex);
    if (!job.training_input) {
      job.training_input = model::TrainingInputOf(*job.vertex);
      job.training_input->runtime_version = Str(o, "_runtimeVersion");
      if (const std::string tpu = Str(o, "_tpuTfVersion"); !tpu.empty() && job.training_input->worker_config) {
        job.training_input->worker_config->tpu_tf_version = tpu;
      }
    }
  }
  job.job_id = Str(o, "jobId");
  if (const json* t = Obj(o, "trainingInput")) job.training_input = DecodeTrainingInput(*t);
  job.labels = StringMap(o, "labels");
  job.create_time = Time(o, "createTime");
  job.start_time = Time(o, "startTime");
  job.end_time = Time(o, "endTime");
  job.state = ParseJobState(Str(o, "state")).value_or(JobState::kUnspecified);
  job.error_message = Str(o, "errorMessage");
  job.job_position = Int64(o, "jobPosition");
  if (const json* attempts = Obj(o, "attempts"); attempts && attempts->is_array()) {
    for (const auto& x : *attempts) {
      model::Attempt a;
      a.number = static_cast<int32_t>(Int64(x, "attempt").value_or(static_cast<int64_t>(job.attempts.size()) + 1));
      a.start_time = Time(x, "startTime");
      a.end_time = Time(x, "endTime").value_or(absl::UnixEpoch());
      if (const json* hosts = Obj(x, "hosts"); hosts && hosts->is_array()) {
        for (const auto& h : *hosts) {
          if (h.is_string()) a.hosts.push_back(h.get<std::string>());
        }
      }
      a.end = model::ParseAttemptEnd(Str(x, "end")).value_or(model::AttemptEnd::kFailed);
      a.message = Str(x, "message");
      job.attempts.push_back(std::move(a));
    }
  }
  if (const json* out = Obj(o, "trainingOutput")) {
    TrainingOutput t;
    t.completed_trial_count = Int64(*out, "completedTrialCount").value_or(0);
    t.consumed_ml_units = Double(*out, "consumedMLUnits").value_or(0);
    t.hyperparameter_metric_tag = Str(*out, "hyperparameterMetricTag");
    t.is_hyperparameter_tuning_job = Bool(*out, "isHyperparameterTuningJob").value_or(false);
    t.web_access_uris = StringMap(*out, "webAccessUris");
    if (const json* trials = Obj(*out, "trials")) {
      for (const auto& x : *trials) {
        HyperparameterOutput h;
        h.trial_id = Str(x, "trialId");
        h.hyperparameters = StringMap(x, "hyperparameters");
        if (const json* m = Obj(x, "finalMetric")) {
          h.final_metric = HyperparameterMetric{Int64(*m, "trainingStep"), Double(*m, "objectiveValue")};
        }
        if (const json* all = Obj(x, "allMetrics"); all && all->is_array()) {
          for (const auto& m : *all) {
            h.all_metrics.push_back(HyperparameterMetric{Int64(m, "trainingStep"), Double(m, "objectiveValue")});
          }
        }
        h.state = ParseJobState(Str(x, "state")).value_or(JobState::kUnspecified);
        h.start_time = Time(x, "startTime");
        h.end_time = Time(x, "endTime");
        h.is_trial_stopped_early = Bool(x, "isTrialStoppedEarly").value_or(false);
        t.trials.push_back(std::move(h));
      }
    }
    job.training_output = std::move(t);
  }
  return job;
}

}  // namespace mle::codec
