#include "cli/job_flags.h"

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "cli/schema.h"

namespace mle::cli {
namespace {

using nlohmann::json;

std::vector<std::string> Choices(const std::string& schema, const std::string& field, const std::string& skip) {
  std::vector<std::string> out;
  for (const auto& v : Schema::Embedded().EnumValues(schema, field)) {
    if (v != skip) out.push_back(FlagSpelling(v));
  }
  return out;
}

json& Object(json& parent, const char* key) {
  if (!parent.contains(key) || !parent[key].is_object()) parent[key] = json::object();
  return parent[key];
}

}  // namespace

std::string FlagSpelling(const std::string& enum_value) {
  return absl::StrReplaceAll(absl::AsciiStrToLower(enum_value), {{"_", "-"}});
}

absl::StatusOr<std::string> EnumFromFlag(const std::string& flag, const std::string& value,
                                         const std::vector<std::string>& choices) {
  std::string v = FlagSpelling(std::string(absl::StripAsciiWhitespace(value)));
  for (const auto& c : choices) {
    if (c == v) return absl::StrReplaceAll(absl::AsciiStrToUpper(c), {{"-", "_"}});
  }
  return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": invalid choice \"", value,
                                                 "\"; choose one of: ", absl::StrJoin(choices, ", ")));
}

std::vector<std::string> AcceleratorChoices() {
  return Choices("GoogleCloudMlV1__AcceleratorConfig", "type", "ACCELERATOR_TYPE_UNSPECIFIED");
}

std::vector<std::string> ScaleTierChoices() { return Choices("GoogleCloudMlV1__TrainingInput", "scaleTier", ""); }

absl::StatusOr<std::string> ScaleTierEnum(const std::string& value) {
  return EnumFromFlag("--scale-tier", value, ScaleTierChoices());
}

absl::StatusOr<json> ParseAccelerator(const std::string& flag, const std::string& value) {
  std::map<std::string, std::string> dict;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    if (part.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": \"", part,
                                                     "\" is not KEY=VALUE; expected type=TYPE,count=N"));
    }
    if (key != "type" && key != "count") {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", flag, ": unknown key \"", key, "\"; expected type=TYPE,count=N"));
    }
    dict[key] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  if (!dict.count("type") || !dict.count("count")) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": both type and count are required, e.g. ",
                                                   flag, "=type=nvidia-tesla-t4,count=1"));
  }
  auto type = EnumFromFlag(absl::StrCat(flag, " type"), dict["type"], AcceleratorChoices());
  if (!type.ok()) return type.status();
  int64_t count = 0;
  if (!absl::SimpleAtoi(dict["count"], &count) || count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", flag, ": count must be a positive integer, got \"", dict["count"], "\""));
  }
  return json{{"type", *type}, {"count", std::to_string(count)}};
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& flag, const std::string& value) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    if (part.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", flag, ": \"", part, "\" is not KEY=VALUE (e.g. ", flag, "=team=vision,env=dev)"));
    }
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    if (key.empty()) return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": a label key is empty"));
    out[key] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return out;
}

std::vector<std::string> ParseKeyList(const std::string& value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

absl::StatusOr<YAML::Node> LoadConfigFile(const std::string& text, const std::string& path) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--config ", path, ": not valid YAML or JSON: line ",
                                                   e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<json> ParseJobConfig(const std::string& text, const std::string& path) {
  auto loaded = LoadConfigFile(text, path);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  if (root.IsNull()) return json::object();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--config ", path, ": the file must hold a Job (a mapping with jobId, labels, trainingInput), e.g.\n"
        "  trainingInput:\n    scaleTier: CUSTOM\n    masterType: n1-highcpu-16"));
  }
  json job = Schema::Embedded().FromYaml(root, kJobSchema);
  // The tier as the samples spell it (basic, basic-gpu): gcloud's own
  // spelling of the flag, which AI Platform's config files took too.
  if (job.contains("trainingInput") && job["trainingInput"].is_object()) {
    json& ti = job["trainingInput"];
    if (ti.contains("scaleTier") && ti["scaleTier"].is_string()) {
      if (auto tier = ScaleTierEnum(ti["scaleTier"].get<std::string>()); tier.ok()) ti["scaleTier"] = *tier;
    }
  }
  return job;
}

absl::StatusOr<json> BuildJob(const json& config, const SubmitFlags& f) {
  // Argument checks gcloud makes before anything is sent.
  if (f.worker_count.has_value() != f.worker_machine_type.has_value()) {
    return absl::InvalidArgumentError("--worker-machine-type and --worker-count must be given together");
  }
  if (f.parameter_server_count.has_value() != f.parameter_server_machine_type.has_value()) {
    return absl::InvalidArgumentError(
        "--parameter-server-machine-type and --parameter-server-count must be given together");
  }
  if (f.worker_count && *f.worker_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("argument --worker-count: must be at least 1, got ", *f.worker_count));
  }
  if (f.parameter_server_count && *f.parameter_server_count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument --parameter-server-count: must be at least 1, got ", *f.parameter_server_count));
  }
  if (f.runtime_version && f.master_image_uri) {
    return absl::InvalidArgumentError(
        "--runtime-version and --master-image-uri cannot be used together: a job runs either a runtime "
        "version with a Python package or a custom container");
  }

  json job = config.is_object() ? config : json::object();
  if (!f.job_id.empty()) job["jobId"] = f.job_id;
  json& ti = Object(job, "trainingInput");

  auto set = [&ti](const char* key, const std::optional<std::string>& v) {
    if (v) ti[key] = *v;
  };
  set("pythonModule", f.module_name);
  set("jobDir", f.job_dir);
  set("region", f.region);
  set("runtimeVersion", f.runtime_version);
  set("pythonVersion", f.python_version);
  set("masterType", f.master_machine_type);
  set("workerType", f.worker_machine_type);
  set("parameterServerType", f.parameter_server_machine_type);
  set("serviceAccount", f.service_account);
  if (f.worker_count) ti["workerCount"] = std::to_string(*f.worker_count);
  if (f.parameter_server_count) ti["parameterServerCount"] = std::to_string(*f.parameter_server_count);
  if (f.scale_tier) {
    auto tier = ScaleTierEnum(*f.scale_tier);
    if (!tier.ok()) return tier.status();
    ti["scaleTier"] = *tier;
  }
  if (f.use_chief_in_tf_config) {
    std::string v = absl::AsciiStrToLower(*f.use_chief_in_tf_config);
    if (v == "true" || v == "yes" || v == "1" || v == "on") {
      ti["useChiefInTfConfig"] = true;
    } else if (v == "false" || v == "no" || v == "0" || v == "off") {
      ti["useChiefInTfConfig"] = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("argument --use-chief-in-tf-config: expected true or false, got \"",
                                                     *f.use_chief_in_tf_config, "\""));
    }
  }

  struct Replica {
    const char* config_key;
    const char* flag;
    const std::optional<std::string>& accelerator;
    const std::optional<std::string>& image;
  };
  for (const Replica& r : {Replica{"masterConfig", "--master-accelerator", f.master_accelerator, f.master_image_uri},
                           Replica{"workerConfig", "--worker-accelerator", f.worker_accelerator, f.worker_image_uri},
                           Replica{"parameterServerConfig", "--parameter-server-accelerator",
                                   f.parameter_server_accelerator, f.parameter_server_image_uri}}) {
    if (r.accelerator) {
      auto accel = ParseAccelerator(r.flag, *r.accelerator);
      if (!accel.ok()) return accel.status();
      Object(ti, r.config_key)["acceleratorConfig"] = *accel;
    }
    if (r.image) Object(ti, r.config_key)["imageUri"] = *r.image;
  }
  if (f.tpu_tf_version) Object(ti, "workerConfig")["tpuTfVersion"] = *f.tpu_tf_version;
  set("network", f.network);
  if (f.enable_web_access) ti["enableWebAccess"] = true;
  if (f.kms_key) {
    std::string name = *f.kms_key;
    if (name.find('/') == std::string::npos) {  // an id: gcloud's --kms-keyring/--kms-location complete it
      if (!f.kms_keyring || !f.kms_location) {
        return absl::InvalidArgumentError(
            "argument --kms-key: give the key's full name (projects/P/locations/L/keyRings/R/cryptoKeys/K), or "
            "its id with --kms-keyring and --kms-location");
      }
      name = absl::StrCat("projects/", f.kms_project.value_or(f.project), "/locations/", *f.kms_location,
                          "/keyRings/", *f.kms_keyring, "/cryptoKeys/", name);
    }
    Object(ti, "encryptionConfig")["kmsKeyName"] = name;
  } else if (f.kms_keyring || f.kms_location || f.kms_project) {
    return absl::InvalidArgumentError("--kms-keyring, --kms-location and --kms-project name a key only with --kms-key");
  }

  if (!f.user_args.empty()) ti["args"] = f.user_args;

  if (f.labels) {
    auto labels = ParseLabels("--labels", *f.labels);
    if (!labels.ok()) return labels.status();
    json& l = Object(job, "labels");
    for (const auto& [k, v] : *labels) l[k] = v;
  }
  return job;
}

absl::Status SetPackageUris(json& job, const std::vector<std::string>& uris) {
  json& ti = Object(job, "trainingInput");
  if (!uris.empty()) ti["packageUris"] = uris;
  const bool has_packages = ti.contains("packageUris") && ti["packageUris"].is_array() && !ti["packageUris"].empty();
  const bool has_image = ti.contains("masterConfig") && ti["masterConfig"].is_object() &&
                         ti["masterConfig"].contains("imageUri");
  if (!has_packages && !has_image) {
    return absl::InvalidArgumentError(
        "Non-custom jobs must have packages: give --package-path (a local Python package directory), "
        "--packages, trainingInput.packageUris in --config, or a custom container with --master-image-uri");
  }
  return absl::OkStatus();
}

}  // namespace mle::cli
