#include "cli/schema.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace mle::cli {
namespace {

using nlohmann::json;

bool IsPlain(const YAML::Node& node) { return node.Tag() == "?" || node.Tag().empty(); }

// YAML 1.2 core-schema booleans and nulls (plus the YAML 1.1 yes/no that
// gcloud's PyYAML accepts).
std::optional<bool> ParseBool(const std::string& s) {
  std::string l = absl::AsciiStrToLower(s);
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

bool IsYamlNull(const YAML::Node& node) {
  if (node.IsNull()) return true;
  if (!node.IsScalar() || !IsPlain(node)) return false;
  const std::string& s = node.Scalar();
  return s == "~" || s == "null" || s == "Null" || s == "NULL";
}

json ScalarByLook(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (!IsPlain(node)) return s;
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) return i;
  double d = 0;
  if (!s.empty() && s.find_first_of("0123456789") != std::string::npos && absl::SimpleAtod(s, &d)) return d;
  if (auto b = ParseBool(s)) return *b;
  return s;
}

}  // namespace

const Schema& Schema::Embedded() {
  static const Schema* schema = new Schema(json::parse(kDiscoveryDocument.begin(), kDiscoveryDocument.end()));
  return *schema;
}

Schema::Schema(const json& document) : schemas_(document.value("schemas", json::object())) {}

json YamlToJson(const YAML::Node& node) {
  if (IsYamlNull(node)) return nullptr;
  if (node.IsScalar()) return ScalarByLook(node);
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  json out = json::object();
  for (const auto& kv : node) {
    if (IsYamlNull(kv.second)) continue;
    out[kv.first.Scalar()] = YamlToJson(kv.second);
  }
  return out;
}

json Schema::FromYaml(const YAML::Node& node, const std::string& schema_name) const {
  return Convert(node, json{{"$ref", schema_name}});
}

json Schema::Convert(const YAML::Node& node, const json& type) const {
  if (IsYamlNull(node)) return nullptr;
  if (type.contains("$ref")) {
    const std::string ref = type["$ref"].get<std::string>();
    if (!schemas_.contains(ref)) return YamlToJson(node);
    return Convert(node, schemas_[ref]);
  }
  const std::string kind = type.value("type", "");
  if (kind == "object" && node.IsMap()) {
    json out = json::object();
    const json* properties = type.contains("properties") ? &type["properties"] : nullptr;
    const json* additional = type.contains("additionalProperties") ? &type["additionalProperties"] : nullptr;
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      json value;
      if (properties && properties->contains(key)) {
        value = Convert(kv.second, (*properties)[key]);
      } else if (additional) {
        value = Convert(kv.second, *additional);
      } else {
        value = YamlToJson(kv.second);
      }
      if (!value.is_null()) out[key] = std::move(value);
    }
    return out;
  }
  if (kind == "array" && node.IsSequence()) {
    json out = json::array();
    const json items = type.value("items", json::object());
    for (const auto& item : node) out.push_back(Convert(item, items));
    return out;
  }
  if (!node.IsScalar()) return YamlToJson(node);
  const std::string& s = node.Scalar();
  if (kind == "string") return s;
  if (kind == "integer") {
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) return i;
    return s;  // the server reports the wrong type with the field's path
  }
  if (kind == "number") {
    double d = 0;
    if (absl::SimpleAtod(s, &d)) return d;
    return s;
  }
  if (kind == "boolean") {
    if (auto b = ParseBool(s)) return *b;
    return s;
  }
  return ScalarByLook(node);
}

std::vector<std::string> Schema::EnumValues(const std::string& schema_name, const std::string& field) const {
  std::vector<std::string> out;
  if (!schemas_.contains(schema_name)) return out;
  const json& schema = schemas_[schema_name];
  if (!schema.contains("properties") || !schema["properties"].contains(field)) return out;
  const json& prop = schema["properties"][field];
  if (!prop.contains("enum")) return out;
  for (const auto& v : prop["enum"]) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace mle::cli
