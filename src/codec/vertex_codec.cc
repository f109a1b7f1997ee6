#include "codec/vertex_codec.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/discovery.h"
#include "codec/json_fields.h"
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

json EncodeEnvList(const std::vector<model::VertexEnvVar>& env) {
  json out = json::array();
  for (const auto& e : env) out.push_back({{"name", e.name}, {"value", e.value}});
  return out;
}

json EncodePool(const VertexWorkerPool& pool) {
  json o = json::object();
  if (pool.Empty()) return o;
  json machine = json::object();
  if (!pool.machine_type.empty()) machine["machineType"] = pool.machine_type;
  if (!pool.accelerator_type.empty()) machine["acceleratorType"] = pool.accelerator_type;
  if (pool.accelerator_count != 0) machine["acceleratorCount"] = pool.accelerator_count;
  if (!pool.tpu_topology.empty()) machine["tpuTopology"] = pool.tpu_topology;
  o["machineSpec"] = std::move(machine);
  o["replicaCount"] = absl::StrCat(pool.replica_count);
  if (pool.has_container) {
    json c = {{"imageUri", pool.image_uri}};
    if (!pool.command.empty()) c["command"] = pool.command;
    if (!pool.args.empty()) c["args"] = pool.args;
    if (!pool.env.empty()) c["env"] = EncodeEnvList(pool.env);
    o["containerSpec"] = std::move(c);
  }
  if (pool.has_python_package) {
    json p = json::object();
    if (!pool.executor_image_uri.empty()) p["executorImageUri"] = pool.executor_image_uri;
    if (!pool.package_uris.empty()) p["packageUris"] = pool.package_uris;
    if (!pool.python_module.empty()) p["pythonModule"] = pool.python_module;
    if (!pool.has_container && !pool.args.empty()) p["args"] = pool.args;
    if (!pool.has_container && !pool.env.empty()) p["env"] = EncodeEnvList(pool.env);
    o["pythonPackageSpec"] = std::move(p);
  }
  if (!pool.boot_disk_type.empty() || pool.boot_disk_size_gb) {
    json d = json::object();
    if (!pool.boot_disk_type.empty()) d["bootDiskType"] = pool.boot_disk_type;
    if (pool.boot_disk_size_gb) d["bootDiskSizeGb"] = *pool.boot_disk_size_gb;
    o["diskSpec"] = std::move(d);
  }
  return o;
}

json EncodeSpec(const VertexJob& v) {
  json spec = json::object();
  json pools = json::array();
  for (const auto& p : v.pools) pools.push_back(EncodePool(p));
  spec["workerPoolSpecs"] = std::move(pools);
  if (!v.base_output_directory.empty()) spec["baseOutputDirectory"] = {{"outputUriPrefix", v.base_output_directory}};
  if (!v.service_account.empty()) spec["serviceAccount"] = v.service_account;
  if (!v.network.empty()) spec["network"] = v.network;
  json scheduling = json::object();
  if (!v.timeout.empty()) scheduling["timeout"] = v.timeout;
  if (v.restart_job_on_worker_restart) scheduling["restartJobOnWorkerRestart"] = true;
  if (!v.strategy.empty()) scheduling["strategy"] = v.strategy;
  if (!v.max_wait_duration.empty()) scheduling["maxWaitDuration"] = v.max_wait_duration;
  if (v.disable_retries) scheduling["disableRetries"] = true;
  if (!scheduling.empty()) spec["scheduling"] = std::move(scheduling);
  if (v.enable_web_access) spec["enableWebAccess"] = true;
  if (v.enable_dashboard_access) spec["enableDashboardAccess"] = true;
  return spec;
}

VertexJob DecodeSpec(const json& spec, std::vector<std::string>* unserved) {
  VertexJob v;
  if (auto it = spec.find("workerPoolSpecs"); it != spec.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      v.pools.push_back(DecodePool((*it)[i], absl::StrCat("jobSpec.workerPoolSpecs[", i, "]"), unserved));
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
    if (IsGiven(spec, f)) unserved->push_back(absl::StrCat("jobSpec.", f));
  }
  return v;
}

void PutTimeField(json& o, const char* key, const std::optional<absl::Time>& t) {
  if (t) o[key] = common::FormatRfc3339(*t);
}

}  // namespace

DecodedVertexJob DecodeCustomJob(const json& body, const std::string& location) {
  DecodedVertexJob out;
  if (!body.is_object()) {
    out.violations.push_back({"(body)", "the request body must be a JSON object (a CustomJob)"});
    return out;
  }
  std::vector<json::json_pointer> where;
  out.violations =
      DiscoverySchema::Aiplatform().Check(body, "GoogleCloudAiplatformV1CustomJob", OutputOnlyFields(), &where);
  json clean = WithoutValuesAt(body, where);
  model::Job& job = out.job;
  VertexJob vertex;
  std::vector<std::string> unserved;
  if (const json* spec = Obj(clean, "jobSpec")) vertex = DecodeSpec(*spec, &unserved);
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

std::string CustomJobName(const model::Job& job) {
  return absl::StrCat("projects/", job.project, "/locations/", job.vertex ? job.vertex->location : "", "/customJobs/",
                      job.job_id);
}


json EncodeCustomJob(const model::Job& job) {
  json o = json::object();
  o["name"] = CustomJobName(job);
  const VertexJob empty;
  const VertexJob& v = job.vertex ? *job.vertex : empty;
  o["displayName"] = v.display_name;
  o["jobSpec"] = EncodeSpec(v);
  o["state"] = model::VertexStateName(job.state);
  PutTimeField(o, "createTime", job.create_time);
  PutTimeField(o, "startTime", job.start_time);
  PutTimeField(o, "endTime", job.end_time);
  // The last change a client can see: its end, its start, or its creation.
  PutTimeField(o, "updateTime", job.end_time ? job.end_time : job.start_time ? job.start_time : job.create_time);
  if (job.state == model::JobState::kFailed || job.state == model::JobState::kCancelled) {
    const bool cancelled = job.state == model::JobState::kCancelled;
    o["error"] = {{"code", cancelled ? 1 : 3},
                  {"message", job.error_message.empty() ? (cancelled ? "CANCELED" : "The job failed.")
                                                        : job.error_message}};
  }
  if (!job.labels.empty()) o["labels"] = job.labels;
  return o;
}

json EncodeListCustomJobsResponse(const std::vector<model::Job>& jobs, const std::string& next_page_token) {
  json list = json::array();
  for (const auto& j : jobs) list.push_back(EncodeCustomJob(j));
  json o = json::object();
  if (!list.empty()) o["customJobs"] = std::move(list);
  if (!next_page_token.empty()) o["nextPageToken"] = next_page_token;
  return o;
}

json EncodeVertexForStorage(const VertexJob& v) {
  json o = {{"location", v.location}, {"displayName", v.display_name}, {"jobSpec", EncodeSpec(v)}};
  if (!v.unserved.empty()) o["unserved"] = v.unserved;
  return o;
}

VertexJob DecodeVertexFromStorage(const json& o) {
  std::vector<std::string> unserved;
  VertexJob v;
  if (const json* spec = Obj(o, "jobSpec")) v = DecodeSpec(*spec, &unserved);
  v.unserved = VertexStrings(o, "unserved");
  v.location = Str(o, "location");
  v.display_name = Str(o, "displayName");
  return v;
}

}  // namespace mle::codec
