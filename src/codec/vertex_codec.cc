#include "codec/vertex_codec.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/discovery.h"
#include "codec/json_fields.h"
#include "codec/json_text.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;
using model::VertexJob;
using model::VertexWorkerPool;

const std::vector<std::string>& OutputOnlyFields() {
  static const auto* fields = new std::vector<std::string>{
      "name", "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris",
      "satisfiesPzs", "satisfiesPzi"};
  return *fields;
}

const std::vector<std::string>& TuningOutputOnlyFields() {
  static const auto* fields = [] {
    auto* f = new std::vector<std::string>(OutputOnlyFields());
    f->push_back("trials");
    return f;
  }();
  return *fields;
}

// Fields of the schema mlengine has nothing to serve with: each given one
// is recorded (by its wire path) and refused by validation.
constexpr const char* kUnservedSpecFields[] = {
    "persistentResourceId", "reservedIpRanges", "pscInterfaceConfig", "experiment",  "experimentRun",
    "models",               "tensorboard",      "protectedArtifactLocationId"};
constexpr const char* kUnservedPoolFields[] = {"nfsMounts", "lustreMounts"};
constexpr const char* kUnservedMachineFields[] = {"reservationAffinity", "gpuPartitionSize"};

std::vector<std::string> VertexStrings(const json& o, const char* key) {
  std::vector<std::string> out;
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return out;
  for (const auto& v : *it) out.push_back(v.is_string() ? v.get<std::string>() : "");
  return out;
}

bool VertexFlag(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

bool IsGiven(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && !it->is_null();
}

std::vector<model::VertexEnvVar> EnvList(const json& o) {
  std::vector<model::VertexEnvVar> out;
  auto it = o.find("env");
  if (it == o.end() || !it->is_array()) return out;
  for (const auto& e : *it) {
    if (e.is_object()) out.push_back({Str(e, "name"), Str(e, "value")});
  }
  return out;
}

void PutTimeField(json& o, const char* key, const std::optional<absl::Time>& t) {
  if (t) o[key] = common::FormatRfc3339(*t);
}

VertexWorkerPool DecodePool(const json& o, const std::string& path, std::vector<std::string>* unserved) {
  VertexWorkerPool pool;
  if (!o.is_object()) return pool;
  if (const json* m = Obj(o, "machineSpec")) {
    pool.machine_type = Str(*m, "machineType");
    pool.accelerator_type = Str(*m, "acceleratorType");
    pool.accelerator_count = static_cast<int32_t>(Int64(*m, "acceleratorCount").value_or(0));
    pool.tpu_topology = Str(*m, "tpuTopology");
    for (const char* f : kUnservedMachineFields) {
      if (IsGiven(*m, f)) unserved->push_back(absl::StrCat(path, ".machineSpec.", f));
    }
  }
  pool.replica_count = Int64(o, "replicaCount").value_or(0);
  if (const json* c = Obj(o, "containerSpec")) {
    pool.has_container = true;
    pool.image_uri = Str(*c, "imageUri");
    pool.command = VertexStrings(*c, "command");
    pool.args = VertexStrings(*c, "args");
    pool.env = EnvList(*c);
  }
  if (const json* p = Obj(o, "pythonPackageSpec")) {
    pool.has_python_package = true;
    pool.executor_image_uri = Str(*p, "executorImageUri");
    pool.package_uris = VertexStrings(*p, "packageUris");
    pool.python_module = Str(*p, "pythonModule");
    if (!pool.has_container) {
      pool.args = VertexStrings(*p, "args");
      pool.env = EnvList(*p);
    }
  }
  if (const json* d = Obj(o, "diskSpec")) {
    pool.boot_disk_type = Str(*d, "bootDiskType");
    if (auto size = Int64(*d, "bootDiskSizeGb")) pool.boot_disk_size_gb = static_cast<int32_t>(*size);
  }
  for (const char* f : kUnservedPoolFields) {
    if (IsGiven(o, f)) unserved->push_back(absl::StrCat(path, ".", f));
  }
  return pool;
}

// The spec and a custom job are written once, to a sink (codec/json_text.h):
// JsonSink::Tree for nlohmann's tree, Text for an answer's text without it.
// Each object's members go in key order, as nlohmann keeps them (a Text sink
// checks that, and gives the tree's text back otherwise).

void WriteStrings(JsonSink& out, std::string_view key, const std::vector<std::string>& values) {
  out.Key(key);
  out.StartArray();
  for (const auto& v : values) out.String(v);
  out.EndArray();
}

void WriteStr(JsonSink& out, std::string_view key, const std::string& value) {
  out.Key(key);
  out.String(value);
}

void WriteEnv(JsonSink& out, const std::vector<model::VertexEnvVar>& env) {
  out.Key("env");
  out.StartArray();
  for (const auto& e : env) {
    out.StartObject();
    WriteStr(out, "name", e.name);
    WriteStr(out, "value", e.value);
    out.EndObject();
  }
  out.EndArray();
}

void WritePool(JsonSink& out, const VertexWorkerPool& pool) {
  out.StartObject();
  if (pool.Empty()) return out.EndObject();
  if (pool.has_container) {
    out.Key("containerSpec");
    out.StartObject();
    if (!pool.args.empty()) WriteStrings(out, "args", pool.args);
    if (!pool.command.empty()) WriteStrings(out, "command", pool.command);
    if (!pool.env.empty()) WriteEnv(out, pool.env);
    WriteStr(out, "imageUri", pool.image_uri);
    out.EndObject();
  }
  if (!pool.boot_disk_type.empty() || pool.boot_disk_size_gb) {
    out.Key("diskSpec");
    out.StartObject();
    if (pool.boot_disk_size_gb) {
      out.Key("bootDiskSizeGb");
      out.Int64(*pool.boot_disk_size_gb);
    }
    if (!pool.boot_disk_type.empty()) WriteStr(out, "bootDiskType", pool.boot_disk_type);
    out.EndObject();
  }
  out.Key("machineSpec");
  out.StartObject();
  if (pool.accelerator_count != 0) {
    out.Key("acceleratorCount");
    out.Int64(pool.accelerator_count);
  }
  if (!pool.accelerator_type.empty()) WriteStr(out, "acceleratorType", pool.accelerator_type);
  if (!pool.machine_type.empty()) WriteStr(out, "machineType", pool.machine_type);
  if (!pool.tpu_topology.empty()) WriteStr(out, "tpuTopology", pool.tpu_topology);
  out.EndObject();
  if (pool.has_python_package) {
    out.Key("pythonPackageSpec");
    out.StartObject();
    if (!pool.has_container && !pool.args.empty()) WriteStrings(out, "args", pool.args);
    if (!pool.has_container && !pool.env.empty()) WriteEnv(out, pool.env);
    if (!pool.executor_image_uri.empty()) WriteStr(out, "executorImageUri", pool.executor_image_uri);
    if (!pool.package_uris.empty()) WriteStrings(out, "packageUris", pool.package_uris);
    if (!pool.python_module.empty()) WriteStr(out, "pythonModule", pool.python_module);
    out.EndObject();
  }
  WriteStr(out, "replicaCount", absl::StrCat(pool.replica_count));
  out.EndObject();
}

void WriteSpec(JsonSink& out, const VertexJob& v) {
  out.StartObject();
  if (!v.base_output_directory.empty()) {
    out.Key("baseOutputDirectory");
    out.StartObject();
    WriteStr(out, "outputUriPrefix", v.base_output_directory);
    out.EndObject();
  }
  if (v.enable_dashboard_access) {
    out.Key("enableDashboardAccess");
    out.Bool(true);
  }
  if (v.enable_web_access) {
    out.Key("enableWebAccess");
    out.Bool(true);
  }
  if (!v.network.empty()) WriteStr(out, "network", v.network);
  if (v.disable_retries || !v.max_wait_duration.empty() || v.restart_job_on_worker_restart || !v.strategy.empty() ||
      !v.timeout.empty()) {
    out.Key("scheduling");
    out.StartObject();
    if (v.disable_retries) {
      out.Key("disableRetries");
      out.Bool(true);
    }
    if (!v.max_wait_duration.empty()) WriteStr(out, "maxWaitDuration", v.max_wait_duration);
    if (v.restart_job_on_worker_restart) {
      out.Key("restartJobOnWorkerRestart");
      out.Bool(true);
    }
    if (!v.strategy.empty()) WriteStr(out, "strategy", v.strategy);
    if (!v.timeout.empty()) WriteStr(out, "timeout", v.timeout);
    out.EndObject();
  }
  if (!v.service_account.empty()) WriteStr(out, "serviceAccount", v.service_account);
  out.Key("workerPoolSpecs");
  out.StartArray();
  for (const auto& p : v.pools) WritePool(out, p);
  out.EndArray();
  out.EndObject();
}

json EncodeSpec(const VertexJob& v) {
  JsonSink tree = JsonSink::Tree();
  WriteSpec(tree, v);
  return tree.TakeTree();
}

// `field`: where the spec is ("jobSpec", a tuning job's "trialJobSpec").
VertexJob DecodeSpec(const json& spec, const std::string& field, std::vector<std::string>* unserved) {
  VertexJob v;
  if (auto it = spec.find("workerPoolSpecs"); it != spec.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      v.pools.push_back(DecodePool((*it)[i], absl::StrCat(field, ".workerPoolSpecs[", i, "]"), unserved));
    }
  }
  if (const json* out = Obj(spec, "baseOutputDirectory")) v.base_output_directory = Str(*out, "outputUriPrefix");
  v.service_account = Str(spec, "serviceAccount");
  v.network = Str(spec, "network");
  if (const json* s = Obj(spec, "scheduling")) {
    v.timeout = Str(*s, "timeout");
    v.restart_job_on_worker_restart = VertexFlag(*s, "restartJobOnWorkerRestart");
    v.strategy = Str(*s, "strategy");
    v.max_wait_duration = Str(*s, "maxWaitDuration");
    v.disable_retries = VertexFlag(*s, "disableRetries");
  }
  v.enable_web_access = VertexFlag(spec, "enableWebAccess");
  v.enable_dashboard_access = VertexFlag(spec, "enableDashboardAccess");
  for (const char* f : kUnservedSpecFields) {
    if (IsGiven(spec, f)) unserved->push_back(absl::StrCat(field, ".", f));
  }
  return v;
}

// ---- a tuning job's studySpec ----

constexpr const char* kUnservedStudyFields[] = {"convexAutomatedStoppingSpec", "studyStoppingConfig"};
constexpr const char* kStoppingSpecs[] = {"decayCurveStoppingSpec", "medianAutomatedStoppingSpec"};


model::VertexParameter DecodeParameter(const json& o, const std::string& path, std::vector<std::string>* unserved) {
  model::VertexParameter p;
  if (!o.is_object()) return p;
  p.id = Str(o, "parameterId");
  p.scale_type = Str(o, "scaleType");
  for (const auto& [field, type] : model::kVertexValueSpecs) {
    const json* spec = Obj(o, field);
    if (spec == nullptr) continue;
    ++p.value_specs;
    p.type = type;
    if (IsGiven(*spec, "defaultValue")) unserved->push_back(absl::StrCat(path, ".", field, ".defaultValue"));
    if (p.type == std::string("DOUBLE") || p.type == std::string("INTEGER")) {
      p.min_value = Double(*spec, "minValue");
      p.max_value = Double(*spec, "maxValue");
    } else if (auto it = spec->find("values"); it != spec->end() && it->is_array()) {
      for (const auto& value : *it) {
        if (p.type == std::string("CATEGORICAL")) {
          p.categorical_values.push_back(value.is_string() ? value.get<std::string>() : "");
        } else if (value.is_number()) {
          p.discrete_values.push_back(value.get<double>());
        }
      }
    }
  }
  if (IsGiven(o, "conditionalParameterSpecs")) unserved->push_back(path + ".conditionalParameterSpecs");
  return p;
}

model::VertexStudy DecodeStudy(const json& body, std::vector<std::string>* unserved) {
  model::VertexStudy study;
  study.max_trial_count = static_cast<int32_t>(Int64(body, "maxTrialCount").value_or(0));
  study.parallel_trial_count = static_cast<int32_t>(Int64(body, "parallelTrialCount").value_or(0));
  study.max_failed_trial_count = static_cast<int32_t>(Int64(body, "maxFailedTrialCount").value_or(0));
  const json* spec = Obj(body, "studySpec");
  if (spec == nullptr) return study;
  if (auto it = spec->find("metrics"); it != spec->end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      if (!m.is_object()) continue;
      study.metrics.push_back({Str(m, "metricId"), Str(m, "goal")});
      if (IsGiven(m, "safetyConfig")) unserved->push_back(absl::StrCat("studySpec.metrics[", i, "].safetyConfig"));
    }
  }
  if (auto it = spec->find("parameters"); it != spec->end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      study.parameters.push_back(DecodeParameter((*it)[i], absl::StrCat("studySpec.parameters[", i, "]"), unserved));
    }
  }
  study.algorithm = Str(*spec, "algorithm");
  study.measurement_selection_type = Str(*spec, "measurementSelectionType");
  study.observation_noise = Str(*spec, "observationNoise");
  for (const char* f : kStoppingSpecs) {
    if (IsGiven(*spec, f)) study.stopping_spec = f;
  }
  for (const char* f : kUnservedStudyFields) {
    if (IsGiven(*spec, f)) unserved->push_back(absl::StrCat("studySpec.", f));
  }
  return study;
}

json EncodeParameter(const model::VertexParameter& p) {
  json o = {{"parameterId", p.id}};
  for (const auto& [field, type] : model::kVertexValueSpecs) {
    if (p.type != type) continue;
    json spec = json::object();
    if (p.type == std::string("DOUBLE")) {
      if (p.min_value) spec["minValue"] = EncodeDouble(*p.min_value);
      if (p.max_value) spec["maxValue"] = EncodeDouble(*p.max_value);
    } else if (p.type == std::string("INTEGER")) {
      if (p.min_value) spec["minValue"] = absl::StrCat(static_cast<int64_t>(*p.min_value));
      if (p.max_value) spec["maxValue"] = absl::StrCat(static_cast<int64_t>(*p.max_value));
    } else if (p.type == std::string("CATEGORICAL")) {
      spec["values"] = p.categorical_values;
    } else {
      spec["values"] = p.discrete_values;
    }
    o[field] = std::move(spec);
  }
  if (!p.scale_type.empty()) o["scaleType"] = p.scale_type;
  return o;
}

json EncodeStudySpec(const model::VertexStudy& study) {
  json spec = json::object();
  json metrics = json::array();
  for (const auto& m : study.metrics) {
    json metric = {{"metricId", m.id}};
    if (!m.goal.empty()) metric["goal"] = m.goal;
    metrics.push_back(std::move(metric));
  }
  spec["metrics"] = std::move(metrics);
  json parameters = json::array();
  for (const auto& p : study.parameters) parameters.push_back(EncodeParameter(p));
  spec["parameters"] = std::move(parameters);
  if (!study.algorithm.empty()) spec["algorithm"] = study.algorithm;
  if (!study.measurement_selection_type.empty()) spec["measurementSelectionType"] = study.measurement_selection_type;
  if (!study.observation_noise.empty()) spec["observationNoise"] = study.observation_noise;
  if (!study.stopping_spec.empty()) spec[study.stopping_spec] = json::object();
  return spec;
}

// A trial's parameter value as Vertex gives it: a number for a double,
// integer or discrete parameter, a string for a categorical one.
json TrialValue(const model::VertexStudy& study, const std::string& id, const std::string& value) {
  for (const auto& p : study.parameters) {
    if (p.id != id || p.type == "CATEGORICAL") continue;
    double d = 0;
    if (!absl::SimpleAtod(value, &d)) break;
    if (p.type == "INTEGER") return static_cast<int64_t>(d);
    return EncodeDouble(d);
  }
  return value;
}

json EncodeMeasurement(const model::HyperparameterMetric& m, const std::string& metric_id) {
  json o = json::object();
  o["stepCount"] = absl::StrCat(m.training_step.value_or(0));
  json metrics = json::array();
  if (m.objective_value) metrics.push_back({{"metricId", metric_id}, {"value", EncodeDouble(*m.objective_value)}});
  o["metrics"] = std::move(metrics);
  return o;
}

json EncodeTrials(const model::Job& job, const model::VertexStudy& study) {
  json trials = json::array();
  if (!job.training_output) return trials;
  const std::string metric_id = study.metrics.empty() ? "" : study.metrics[0].id;
  for (const auto& t : job.training_output->trials) {
    json o = {{"id", t.trial_id}, {"state", model::VertexTrialStateName(t.state)}};
    if (t.is_trial_stopped_early) o["state"] = "SUCCEEDED";
    json parameters = json::array();
    for (const auto& [id, value] : t.hyperparameters) {
      parameters.push_back({{"parameterId", id}, {"value", TrialValue(study, id, value)}});
    }
    o["parameters"] = std::move(parameters);
    if (t.final_metric) o["finalMeasurement"] = EncodeMeasurement(*t.final_metric, metric_id);
    if (!t.all_metrics.empty()) {
      json measurements = json::array();
      for (const auto& m : t.all_metrics) measurements.push_back(EncodeMeasurement(m, metric_id));
      o["measurements"] = std::move(measurements);
    }
    if (t.state == model::JobState::kFailed || t.state == model::JobState::kCancelled) {
      o["infeasibleReason"] = t.state == model::JobState::kCancelled ? "The trial was cancelled."
                                                                      : "The trial's job failed; its log says why.";
    }
    PutTimeField(o, "startTime", t.start_time);
    PutTimeField(o, "endTime", t.end_time);
    trials.push_back(std::move(o));
  }
  return trials;
}

}  // namespace

namespace {

// A create body of either resource: `tuning` for a HyperparameterTuningJob.
DecodedVertexJob DecodeVertexJob(const json& body, const std::string& location, bool tuning) {
  DecodedVertexJob out;
  const char* type = tuning ? "HyperparameterTuningJob" : "CustomJob";
  if (!body.is_object()) {
    out.violations.push_back({"(body)", absl::StrCat("the request body must be a JSON object (a ", type, ")")});
    return out;
  }
  std::vector<json::json_pointer> where;
  out.violations = DiscoverySchema::Aiplatform().Check(body, absl::StrCat("GoogleCloudAiplatformV1", type),
                                                      tuning ? TuningOutputOnlyFields() : OutputOnlyFields(), &where);
  // The body without the values the check refused: a copy only when there
  // are some (a copy of the tree costs a create a few per cent).
  json cleaned;
  if (!where.empty()) cleaned = WithoutValuesAt(body, where);
  const json& clean = where.empty() ? body : cleaned;
  model::Job& job = out.job;
  VertexJob vertex;
  std::vector<std::string> unserved;
  const std::string spec_field = tuning ? "trialJobSpec" : "jobSpec";
  if (const json* spec = Obj(clean, spec_field.c_str())) vertex = DecodeSpec(*spec, spec_field, &unserved);
  if (tuning) vertex.study = DecodeStudy(clean, &unserved);
  if (IsGiven(clean, "encryptionSpec")) unserved.push_back("encryptionSpec");
  vertex.unserved = std::move(unserved);
  vertex.location = location;
  vertex.display_name = Str(clean, "displayName");
  if (auto it = clean.find("labels"); it != clean.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) job.labels[k] = v.is_string() ? v.get<std::string>() : "";
  }
  job.training_input = model::TrainingInputOf(vertex);
  job.vertex = std::move(vertex);
  return out;
}

}  // namespace

DecodedVertexJob DecodeCustomJob(const json& body, const std::string& location) {
  return DecodeVertexJob(body, location, /*tuning=*/false);
}

DecodedVertexJob DecodeHyperparameterTuningJob(const json& body, const std::string& location) {
  return DecodeVertexJob(body, location, /*tuning=*/true);
}

std::string VertexJobName(const model::Job& job) {
  const VertexJob empty;
  const VertexJob& v = job.vertex ? *job.vertex : empty;
  return absl::StrCat("projects/", job.project, "/locations/", v.location, "/", v.Collection(), "/", job.job_id);
}

namespace {

// A CustomJob, or for a job with a study a HyperparameterTuningJob with its
// trials: its members in key order.
void WriteVertexJob(JsonSink& out, const model::Job& job, const VertexJob& v) {
  // The last change a client can see: its end, its start, or its creation.
  const std::string created = job.create_time ? common::FormatRfc3339(*job.create_time) : "";
  const std::optional<absl::Time> updated = job.end_time ? job.end_time : job.start_time;
  out.StartObject();
  if (job.create_time) WriteStr(out, "createTime", created);
  WriteStr(out, "displayName", v.display_name);
  if (job.end_time) WriteStr(out, "endTime", common::FormatRfc3339(*job.end_time));
  if (job.state == model::JobState::kFailed || job.state == model::JobState::kCancelled) {
    const bool cancelled = job.state == model::JobState::kCancelled;
    out.Key("error");
    out.StartObject();
    out.Key("code");
    out.Int64(cancelled ? 1 : 3);
    WriteStr(out, "message",
             job.error_message.empty() ? std::string(cancelled ? "CANCELED" : "The job failed.") : job.error_message);
    out.EndObject();
  }
  if (!v.study) {
    out.Key("jobSpec");
    WriteSpec(out, v);
  }
  if (!job.labels.empty()) {
    out.Key("labels");
    out.StartObject();
    for (const auto& [key, value] : job.labels) WriteStr(out, key, value);
    out.EndObject();
  }
  if (v.study && v.study->max_failed_trial_count != 0) {
    out.Key("maxFailedTrialCount");
    out.Int64(v.study->max_failed_trial_count);
  }
  if (v.study) {
    out.Key("maxTrialCount");
    out.Int64(v.study->max_trial_count);
  }
  WriteStr(out, "name", VertexJobName(job));
  if (v.study) {
    out.Key("parallelTrialCount");
    out.Int64(v.study->parallel_trial_count);
  }
  if (job.start_time) WriteStr(out, "startTime", common::FormatRfc3339(*job.start_time));
  WriteStr(out, "state", model::VertexStateName(job.state));
  if (v.study) {
    out.Key("studySpec");
    out.Value(EncodeStudySpec(*v.study));
    out.Key("trialJobSpec");
    WriteSpec(out, v);
    if (json trials = EncodeTrials(job, *v.study); !trials.empty()) {
      out.Key("trials");
      out.Value(trials);
    }
  }
  if (updated) {
    WriteStr(out, "updateTime", common::FormatRfc3339(*updated));
  } else if (job.create_time) {
    WriteStr(out, "updateTime", created);  // the same instant, formatted once
  }
  out.EndObject();
}

const VertexJob& VertexOf(const model::Job& job) {
  static const VertexJob* const empty = new VertexJob;
  return job.vertex ? *job.vertex : *empty;
}

}  // namespace

std::optional<std::string> VertexJobTextWithoutTree(const model::Job& job, int indent) {
  JsonSink text = JsonSink::Text(indent);
  WriteVertexJob(text, job, VertexOf(job));
  if (!text.ok()) return std::nullopt;
  return text.TakeText();
}

std::string VertexJobText(const model::Job& job, int indent) {
  if (auto text = VertexJobTextWithoutTree(job, indent)) return *std::move(text);
  return DumpJson(EncodeVertexJob(job), indent);
}

json EncodeVertexJob(const model::Job& job) {
  JsonSink tree = JsonSink::Tree();
  WriteVertexJob(tree, job, VertexOf(job));
  return tree.TakeTree();
}

json EncodeListVertexJobsResponse(const std::vector<model::Job>& jobs, bool tuning,
                                  const std::string& next_page_token) {
  json list = json::array();
  for (const auto& j : jobs) list.push_back(EncodeVertexJob(j));
  json o = json::object();
  if (!list.empty()) o[tuning ? "hyperparameterTuningJobs" : "customJobs"] = std::move(list);
  if (!next_page_token.empty()) o["nextPageToken"] = next_page_token;
  return o;
}

json EncodeVertexJobSpec(const VertexJob& vertex) { return EncodeSpec(vertex); }

namespace {

void WriteVertexForStorage(JsonSink& out, const VertexJob& v) {
  out.StartObject();
  WriteStr(out, "displayName", v.display_name);
  out.Key("jobSpec");
  WriteSpec(out, v);
  WriteStr(out, "location", v.location);
  if (v.study) {
    json study = EncodeStudySpec(*v.study);
    study["maxTrialCount"] = v.study->max_trial_count;
    study["parallelTrialCount"] = v.study->parallel_trial_count;
    study["maxFailedTrialCount"] = v.study->max_failed_trial_count;
    out.Key("study");
    out.Value(study);
  }
  if (!v.unserved.empty()) WriteStrings(out, "unserved", v.unserved);
  out.EndObject();
}

}  // namespace

json EncodeVertexForStorage(const VertexJob& v) {
  JsonSink tree = JsonSink::Tree();
  WriteVertexForStorage(tree, v);
  return tree.TakeTree();
}

std::string VertexStorageText(const VertexJob& v) {
  JsonSink text = JsonSink::Text(-1);
  WriteVertexForStorage(text, v);
  if (text.ok()) return text.TakeText();
  return DumpJson(EncodeVertexForStorage(v));
}

VertexJob DecodeVertexFromStorage(const json& o) {
  std::vector<std::string> unserved;
  VertexJob v;
  if (const json* spec = Obj(o, "jobSpec")) v = DecodeSpec(*spec, "jobSpec", &unserved);
  if (const json* study = Obj(o, "study")) {
    // Stored as the wire's studySpec with the counts beside it.
    json body = {{"studySpec", *study}};
    for (const char* count : {"maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"}) {
      if (study->contains(count)) body[count] = (*study)[count];
    }
    v.study = DecodeStudy(body, &unserved);
  }
  v.unserved = VertexStrings(o, "unserved");
  v.location = Str(o, "location");
  v.display_name = Str(o, "displayName");
  return v;
}

}  // namespace mle::codec
