// The flags of `mlengine jobs submit training` and how they become a Job
// resource (JSON, as sent to jobs.create), following gcloud ai-platform:
// the --config file (YAML or JSON Job: jobId, labels, trainingInput) is the
// base and every flag given overrides the matching field. Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"

namespace mle::cli {

// Flags of `jobs submit training` that map onto the Job (unset = not given).
struct SubmitFlags {
  std::string job_id;
  std::optional<std::string> module_name;
  std::optional<std::string> job_dir;
  std::optional<std::string> region;
  std::optional<std::string> runtime_version;
  std::optional<std::string> python_version;
  std::optional<std::string> scale_tier;  // flag spelling, e.g. "basic-tpu"
  std::optional<std::string> master_machine_type;
  std::optional<std::string> master_accelerator;  // "type=nvidia-tesla-t4,count=1"
  std::optional<std::string> master_image_uri;
  std::optional<std::string> worker_machine_type;
  std::optional<int64_t> worker_count;
  std::optional<std::string> worker_accelerator;
  std::optional<std::string> worker_image_uri;
  std::optional<std::string> parameter_server_machine_type;
  std::optional<int64_t> parameter_server_count;
  std::optional<std::string> parameter_server_accelerator;
  std::optional<std::string> parameter_server_image_uri;
  std::optional<std::string> tpu_tf_version;
  std::optional<std::string> labels;  // "k=v,k2=v2"
  std::optional<std::string> use_chief_in_tf_config;  // "true"/"false"
  std::optional<std::string> service_account;
  std::optional<std::string> network;
  bool enable_web_access = false;
  // --kms-key: a key's resource name, or its id with --kms-keyring,
  // --kms-location and --kms-project (default: the job's project).
  std::optional<std::string> kms_key, kms_keyring, kms_location, kms_project;
  std::string project;  // the job's project (for --kms-key's default)
  std::vector<std::string> user_args;  // after "--"
};

// Parses "type=nvidia-tesla-t4,count=1" into an AcceleratorConfig
// {"type": "NVIDIA_TESLA_T4", "count": "1"}. Both keys are required, count
// must be a positive integer, and type one of the lower-case hyphenated
// accelerator enum names. `flag` names the flag in messages.
absl::StatusOr<nlohmann::json> ParseAccelerator(const std::string& flag, const std::string& value);

// An enum value as a flag spells it: NVIDIA_TESLA_T4 -> nvidia-tesla-t4.
std::string FlagSpelling(const std::string& enum_value);
// The enum value of a flag's value among `choices` (flag spellings), in
// either spelling and any case: "Nvidia-Tesla-T4" -> NVIDIA_TESLA_T4.
// INVALID_ARGUMENT naming `flag` and the choices otherwise.
absl::StatusOr<std::string> EnumFromFlag(const std::string& flag, const std::string& value,
                                         const std::vector<std::string>& choices);

// The accepted spellings of accelerator types / scale tiers (for help text).
std::vector<std::string> AcceleratorChoices();
std::vector<std::string> ScaleTierChoices();

// "basic-tpu" -> "BASIC_TPU" (the flag's choices, case-insensitive).
absl::StatusOr<std::string> ScaleTierEnum(const std::string& value);

// Parses "k=v,k2=v2" (gcloud's label dict) into a map. `flag` names the flag
// in messages.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& flag, const std::string& value);
// Parses "k1,k2".
std::vector<std::string> ParseKeyList(const std::string& value);

// A --config file's text as YAML (JSON is YAML too); INVALID_ARGUMENT with
// the line and column where it is neither. `path` is for messages.
absl::StatusOr<YAML::Node> LoadConfigFile(const std::string& text, const std::string& path);

// Reads a --config file's text (YAML or JSON) into a Job, shaped by the
// discovery schema (int64 fields as strings). `path` is for messages.
absl::StatusOr<nlohmann::json> ParseJobConfig(const std::string& text, const std::string& path);

// The Job to create: `config` (from ParseJobConfig, or {}) overridden by the
// flags. Refuses flag combinations gcloud refuses (--worker-count without
// --worker-machine-type, --runtime-version with --master-image-uri, ...).
absl::StatusOr<nlohmann::json> BuildJob(const nlohmann::json& config, const SubmitFlags& flags);

// Sets trainingInput.packageUris when `uris` is not empty (staged packages
// replace those of the config file), then refuses a job that has neither
// packages nor a custom container (gcloud: "Non-custom jobs must have
// packages").
absl::Status SetPackageUris(nlohmann::json& job, const std::vector<std::string>& uris);

}  // namespace mle::cli
