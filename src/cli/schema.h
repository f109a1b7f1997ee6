// The ml v1 discovery document as the CLI sees it: field types (to turn a
// --config YAML file into the JSON the server expects, e.g. int64 fields as
// strings) and enum values (to map flag spellings like `nvidia-tesla-t4` or
// `basic-tpu` to NVIDIA_TESLA_T4 / BASIC_TPU).
// Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "absl/strings/string_view.h"

namespace mle::cli {

// The discovery document compiled into this binary (api/ml.v1.json).
extern const absl::string_view kDiscoveryDocument;

inline constexpr char kJobSchema[] = "GoogleCloudMlV1__Job";

class Schema {
 public:
  // The schema compiled into this binary.
  static const Schema& Embedded();
  explicit Schema(const nlohmann::json& document);

  // Converts a YAML value into JSON shaped as schema `schema_name`: scalars
  // become strings, integers, numbers or booleans as the schema's field says
  // (int64 fields are strings on the wire; `runtimeVersion: 2.10` stays the
  // string "2.10"). Null values are dropped. Fields the schema does not know
  // are converted by their YAML look and left for the server to refuse.
  nlohmann::json FromYaml(const YAML::Node& node, const std::string& schema_name) const;

  // The values of an enum field, e.g. ("GoogleCloudMlV1__AcceleratorConfig",
  // "type"); empty when the field is not an enum.
  std::vector<std::string> EnumValues(const std::string& schema_name, const std::string& field) const;

 private:
  nlohmann::json Convert(const YAML::Node& node, const nlohmann::json& type) const;
  nlohmann::json schemas_;
};

// Converts a YAML node without a schema: plain scalars that look like
// integers, numbers, booleans or null become those; everything else strings.
nlohmann::json YamlToJson(const YAML::Node& node);

}  // namespace mle::cli
