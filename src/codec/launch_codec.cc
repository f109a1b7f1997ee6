#include "codec/launch_codec.h"
#include "codec/vertex_codec.h"

#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/job_codec.h"

namespace mle::codec {
namespace {

using nlohmann::json;

// Error messages are phrases about the document ("has no ..."); the reader
// of the file puts its path in front.
absl::Status Malformed(absl::string_view what) { return absl::DataLossError(what); }

// The document as an object of format `format` with only `fields` (besides
// "format").
absl::StatusOr<json> ParseDocument(absl::string_view text, absl::string_view format,
                                   const std::set<std::string>& fields) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return Malformed(absl::StrCat("is not JSON (a ", format, " document was expected)"));
  if (!doc.is_object()) return Malformed(absl::StrCat("is not a JSON object (a ", format, " document was expected)"));
  auto f = doc.find("format");
  if (f == doc.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("has no \"format\" field: an older mlengine wrote it, and this one reads \"", format,
                     "\" only. Resubmit the job with this mlengine."));
  }
  if (!f->is_string() || f->get<std::string>() != format) {
    return absl::FailedPreconditionError(
        absl::StrCat("is in format ", f->dump(), ", but this program reads \"", format,
                     "\" only: mlengined and mlengine-slurm-launch must come from the same installation."));
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "format" && fields.count(key) == 0) {
      return Malformed(absl::StrCat("has an unknown field \"", key, "\" (", format, " has ",
                                    absl::StrJoin(fields, ", "), ")"));
    }
  }
  return doc;
}

absl::StatusOr<std::string> String(const json& o, const char* key, bool required) {
  auto it = o.find(key);
  if (it == o.end()) {
    if (!required) return std::string();
    return Malformed(absl::StrCat("has no \"", key, "\""));
  }
  if (!it->is_string()) return Malformed(absl::StrCat("has a \"", key, "\" that is not a string"));
  std::string s = it->get<std::string>();
  if (required && s.empty()) return Malformed(absl::StrCat("has an empty \"", key, "\""));
  return s;
}

absl::StatusOr<std::vector<std::string>> StringList(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return Malformed(absl::StrCat("has no \"", key, "\" list"));
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) return Malformed(absl::StrCat("has a \"", key, "\" entry that is not a string: ", v.dump()));
    out.push_back(v.get<std::string>());
  }
  return out;
}

absl::StatusOr<LaunchComponent> DecodeComponent(const json& c, size_t k) {
  const std::string where = absl::StrCat("component ", k);
  if (!c.is_object()) return Malformed(absl::StrCat("has a ", where, " that is not an object"));
  for (const auto& [key, value] : c.items()) {
    if (key != "role" && key != "tasks" && key != "firstNodeTask") {
      return Malformed(absl::StrCat("has an unknown field \"", key, "\" in ", where));
    }
  }
  LaunchComponent out;
  auto role = String(c, "role", true);
  auto tasks = StringList(c, "tasks");
  auto first = String(c, "firstNodeTask", false);
  for (const absl::Status& s : {role.status(), tasks.status(), first.status()}) {
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), " in ", where));
  }
  if (tasks->empty()) return Malformed(absl::StrCat("has no tasks in ", where));
  out.role = *std::move(role);
  out.tasks = *std::move(tasks);
  out.first_node_task = *std::move(first);
  return out;
}

}  // namespace

std::string EncodeLaunchJob(const LaunchJob& job) {
  model::Job wire;
  wire.job_id = job.job_id;
  wire.training_input = job.training_input;
  json components = json::array();
  for (const auto& c : job.components) {
    json o = {{"role", c.role}, {"tasks", c.tasks}};
    if (!c.first_node_task.empty()) o["firstNodeTask"] = c.first_node_task;
    components.push_back(std::move(o));
  }
  json doc = {{"format", kLaunchJobFormat},
              {"project", job.project},
              {"jobId", job.job_id},
              {"trainingInput", EncodeJob(wire).value("trainingInput", json::object())},
              {"components", std::move(components)}};
  if (!job.access_token.empty()) {
    doc["credential"] = {{"serviceAccount", job.service_account},
                         {"accessToken", job.access_token},
                         {"apiEndpoint", job.api_endpoint}};
  }
  if (!job.trial_of.empty()) doc["trial"] = {{"of", job.trial_of}, {"id", job.trial_id}};
  if (job.vertex) doc["vertex"] = EncodeVertexForStorage(*job.vertex);
  if (job.attempt > 1) doc["attempt"] = job.attempt;
  if (job.progress_every_ms > 0) doc["progressEveryMs"] = job.progress_every_ms;
  if (job.watch_joins) doc["watchJoins"] = true;
  if (job.containers) {
    const LaunchContainers& c = *job.containers;
    doc["containers"] = {{"images", c.images},       {"podman", c.podman},
                         {"init", c.init},           {"runtime", c.runtime},
                         {"gpuDevices", c.gpu_devices}, {"registryInsecure", c.registry_insecure},
                         {"containersConf", c.containers_conf}, {"simulated", c.simulated}};
  }
  if (job.sandbox) {
    doc["sandbox"] = {{"uid", job.sandbox->uid},
                      {"buckets", job.sandbox->buckets},
                      {"readOnly", job.sandbox->read_only},
                      {"pidsLimit", job.sandbox->pids_limit},
                      {"limits", json::object()}};
    for (const auto& [task, l] : job.sandbox->limits) {
      doc["sandbox"]["limits"][task] = {{"cpuMilli", l.cpu_milli}, {"memoryMib", l.memory_mib}};
    }
  }
  return doc.dump(2) + "\n";
}

std::string EncodeWarmSpec(const WarmSpec& spec) {
  json doc = {{"module", spec.module}, {"args", spec.args}, {"cwd", spec.cwd}, {"env", spec.env},
              {"site_dirs", spec.site_dirs}};
  if (!spec.prefix.empty()) doc["prefix"] = spec.prefix;
  if (!spec.sandbox.empty()) doc["sandbox"] = spec.sandbox;
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);  // one line
}

absl::StatusOr<LaunchJob> DecodeLaunchJob(absl::string_view text) {
  auto doc = ParseDocument(text, kLaunchJobFormat, {"project", "jobId", "trainingInput", "components", "credential", "containers", "trial", "sandbox", "attempt", "progressEveryMs", "watchJoins", "vertex"});
  if (!doc.ok()) return doc.status();
  LaunchJob out;
  auto project = String(*doc, "project", true);
  if (!project.ok()) return project.status();
  out.project = *std::move(project);
  auto job_id = String(*doc, "jobId", true);
  if (!job_id.ok()) return job_id.status();
  out.job_id = *std::move(job_id);
  if (auto trial = doc->find("trial"); trial != doc->end()) {
    if (!trial->is_object() || !trial->value("of", json()).is_string() || !trial->value("id", json()).is_string()) {
      return absl::DataLossError("launch document: \"trial\" must be {\"of\": string, \"id\": string}");
    }
    out.trial_of = (*trial)["of"].get<std::string>();
    out.trial_id = (*trial)["id"].get<std::string>();
  }

  if (auto attempt = doc->find("attempt"); attempt != doc->end()) {
    if (!attempt->is_number_integer() || attempt->get<int64_t>() < 1 || attempt->get<int64_t>() > 1000000) {
      return Malformed("has an \"attempt\" that is not a positive number");
    }
    out.attempt = attempt->get<int>();
  }
  if (auto every = doc->find("progressEveryMs"); every != doc->end()) {
    if (!every->is_number_integer() || every->get<int64_t>() < 100 || every->get<int64_t>() > 3600000) {
      return Malformed("has a \"progressEveryMs\" that is not from 100 to 3600000");
    }
    out.progress_every_ms = every->get<int>();
  }
  if (auto joins = doc->find("watchJoins"); joins != doc->end()) {
    if (!joins->is_boolean()) return Malformed("has a \"watchJoins\" that is not true or false");
    out.watch_joins = joins->get<bool>();
  }

  auto ti = doc->find("trainingInput");
  if (ti == doc->end() || !ti->is_object()) return Malformed("has no \"trainingInput\" object");
  // mlengined's own encoding of a job it validated at create.
  auto training_input = DecodeEncodedTrainingInput(*ti);
  if (!training_input.ok()) {
    return Malformed(absl::StrCat("has an invalid trainingInput (", training_input.status().message(), ")"));
  }
  out.training_input = *std::move(training_input);
  if (auto vertex = doc->find("vertex"); vertex != doc->end()) {
    if (!vertex->is_object()) return Malformed("has a \"vertex\" that is not an object");
    out.vertex = DecodeVertexFromStorage(*vertex);
  }

  auto components = doc->find("components");
  if (components == doc->end() || !components->is_array() || components->empty()) {
    return Malformed("has no \"components\" (a non-empty list)");
  }
  for (size_t k = 0; k < components->size(); ++k) {
    auto c = DecodeComponent((*components)[k], k);
    if (!c.ok()) return c.status();
    out.components.push_back(*std::move(c));
  }
  if (auto cred = doc->find("credential"); cred != doc->end()) {
    if (!cred->is_object()) return Malformed("has a \"credential\" that is not an object");
    for (auto [key, field] : {std::pair{"serviceAccount", &out.service_account},
                              std::pair{"accessToken", &out.access_token}, std::pair{"apiEndpoint", &out.api_endpoint}}) {
      auto v = String(*cred, key, true);
      if (!v.ok()) return v.status();
      *field = *std::move(v);
    }
  }
  if (auto c = doc->find("containers"); c != doc->end()) {
    if (!c->is_object()) return Malformed("has a \"containers\" that is not an object");
    LaunchContainers lc;
    for (auto [key, field] : {std::pair{"podman", &lc.podman}, std::pair{"init", &lc.init},
                              std::pair{"runtime", &lc.runtime}, std::pair{"gpuDevices", &lc.gpu_devices},
                              std::pair{"containersConf", &lc.containers_conf}}) {
      auto v = String(*c, key, true);
      if (!v.ok()) return v.status();
      *field = *std::move(v);
    }
    auto insecure = c->find("registryInsecure");
    if (insecure == c->end() || !insecure->is_boolean()) return Malformed("has no boolean containers.registryInsecure");
    lc.registry_insecure = insecure->get<bool>();
    auto images = c->find("images");
    if (images == c->end() || !images->is_object()) return Malformed("has no containers.images object");
    for (const auto& [uri, ref] : images->items()) {
      if (!ref.is_string()) return Malformed(absl::StrCat("has a containers.images value that is not a string: ", uri));
      lc.images[uri] = ref.get<std::string>();
    }
    if (auto sim = c->find("simulated"); sim != c->end()) {
      if (!sim->is_object()) return Malformed("has a containers.simulated that is not an object");
      for (const auto& [uri, note] : sim->items()) {
        if (!note.is_string()) return Malformed(absl::StrCat("has a containers.simulated value that is not a string: ", uri));
        lc.simulated[uri] = note.get<std::string>();
      }
    }
    out.containers = std::move(lc);
  }
  if (auto sb = doc->find("sandbox"); sb != doc->end()) {
    LaunchSandbox ls;
    auto uid = sb->is_object() ? sb->find("uid") : sb->end();
    if (uid == sb->end() || !uid->is_number_unsigned() || uid->get<uint64_t>() == 0 ||
        uid->get<uint64_t>() > 0xfffffffeULL) {
      return Malformed("has a \"sandbox\" without a uid above 0");
    }
    ls.uid = static_cast<uint32_t>(uid->get<uint64_t>());
    auto buckets = sb->find("buckets");
    if (buckets == sb->end() || !buckets->is_object()) return Malformed("has no sandbox.buckets object");
    for (const auto& [name, writable] : buckets->items()) {
      if (!writable.is_boolean()) return Malformed(absl::StrCat("has a sandbox.buckets value that is not a boolean: ", name));
      ls.buckets[name] = writable.get<bool>();
    }
    auto read_only = sb->find("readOnly");
    if (read_only == sb->end() || !read_only->is_array()) return Malformed("has no sandbox.readOnly list");
    for (const auto& dir : *read_only) {
      if (!dir.is_string()) return Malformed("has a sandbox.readOnly entry that is not a string");
      ls.read_only.push_back(dir.get<std::string>());
    }
    auto pids = sb->find("pidsLimit");
    if (pids == sb->end() || !pids->is_number_integer()) return Malformed("has no integer sandbox.pidsLimit");
    ls.pids_limit = pids->get<int64_t>();
    auto limits = sb->find("limits");
    if (limits == sb->end() || !limits->is_object()) return Malformed("has no sandbox.limits object");
    for (const auto& [task, l] : limits->items()) {
      auto cpu = l.is_object() ? l.find("cpuMilli") : l.end();
      auto memory = l.is_object() ? l.find("memoryMib") : l.end();
      if (cpu == l.end() || memory == l.end() || !cpu->is_number_integer() || !memory->is_number_integer()) {
        return Malformed(absl::StrCat("has sandbox.limits of ", task, " without integer cpuMilli and memoryMib"));
      }
      ls.limits[task] = {cpu->get<int64_t>(), memory->get<int64_t>()};
    }
    out.sandbox = std::move(ls);
  }
  return out;
}

std::string EncodeTaskLaunch(const TaskLaunch& launch) {
  json doc = {{"format", kTaskLaunchFormat}, {"argv", launch.argv}, {"env", launch.env}, {"host", launch.host}};
  if (!launch.image.empty()) {
    doc["image"] = launch.image;
    doc["entrypoint"] = launch.entrypoint;
  }
  return doc.dump() + "\n";
}

absl::StatusOr<TaskLaunch> DecodeTaskLaunch(absl::string_view text) {
  auto doc = ParseDocument(text, kTaskLaunchFormat, {"argv", "env", "host", "image", "entrypoint"});
  if (!doc.ok()) return doc.status();
  TaskLaunch out;
  auto image = String(*doc, "image", false);
  if (!image.ok()) return image.status();
  out.image = *std::move(image);
  if (!out.image.empty()) {
    auto entrypoint = StringList(*doc, "entrypoint");
    if (!entrypoint.ok()) return entrypoint.status();
    out.entrypoint = *std::move(entrypoint);
  }
  auto argv = StringList(*doc, "argv");
  if (!argv.ok()) return argv.status();
  if (argv->empty() && out.image.empty()) return Malformed("has an empty \"argv\"");
  out.argv = *std::move(argv);
  auto env = doc->find("env");
  if (env == doc->end() || !env->is_object()) return Malformed("has no \"env\" object");
  for (const auto& [key, value] : env->items()) {
    if (!value.is_string()) return Malformed(absl::StrCat("has an \"env\" value that is not a string: ", key));
    out.env[key] = value.get<std::string>();
  }
  auto host = String(*doc, "host", true);
  if (!host.ok()) return host.status();
  out.host = *std::move(host);
  return out;
}

}  // namespace mle::codec
