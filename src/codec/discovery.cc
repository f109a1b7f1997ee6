#include "absl/strings/string_view.h"
#include "codec/discovery.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;

std::string Join(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string TypeName(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

bool IsIntegerText(absl::string_view s, bool allow_sign) {
  if (!s.empty() && allow_sign && s[0] == '-') s.remove_prefix(1);
  if (s.empty() || s.size() > 20) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

const DiscoverySchema& DiscoverySchema::Embedded() {
  static const DiscoverySchema* schema =
      new DiscoverySchema(json::parse(kDiscoveryDocument));
  return *schema;
}

const DiscoverySchema& DiscoverySchema::Aiplatform() {
  static const DiscoverySchema* schema = new DiscoverySchema(json::parse(kAiplatformDiscoveryDocument));
  return *schema;
}

DiscoverySchema::DiscoverySchema(const json& document) : schemas_(document.at("schemas")) {}

bool DiscoverySchema::HasSchema(absl::string_view name) const {
  return schemas_.contains(std::string(name));
}

std::vector<common::FieldViolation> DiscoverySchema::Check(
    const json& value, absl::string_view schema_name,
    const std::vector<std::string>& ignore, std::vector<json::json_pointer>* where) const {
  std::vector<common::FieldViolation> out;
  CheckValue(value, json{{"$ref", std::string(schema_name)}}, "", json::json_pointer(), ignore, &out, where);
  return out;
}

void DiscoverySchema::CheckValue(const json& value, const json& type, const std::string& path,
                                 const json::json_pointer& pointer, const std::vector<std::string>& ignore,
                                 std::vector<common::FieldViolation>* out, std::vector<json::json_pointer>* where) const {
  auto bad = [&](std::string description) {
    out->push_back({path.empty() ? std::string("(body)") : path, std::move(description)});
    if (where) where->push_back(pointer);
  };
  if (value.is_null()) return;  // proto3 JSON: null means "unset"

  if (type.contains("$ref")) {
    const std::string ref = type["$ref"].get<std::string>();
    auto it = schemas_.find(ref);
    if (it == schemas_.end()) {
      bad(absl::StrCat("internal: unknown schema ", ref));
      return;
    }
    const json& schema = *it;
    if (!value.is_object()) {
      bad(absl::StrCat("must be an object, got ", TypeName(value)));
      return;
    }
    const json& props = schema.contains("properties") ? schema["properties"] : json::object();
    for (const auto& [key, child] : value.items()) {
      std::string child_path = Join(path, key);
      if (std::find(ignore.begin(), ignore.end(), child_path) != ignore.end()) continue;
      auto p = props.find(key);
      if (p == props.end()) {
        out->push_back({child_path, absl::StrCat("Unknown field name \"", key, "\": ", ref.substr(ref.rfind('_') + 1),
                                                 " has no such field")});
        if (where) where->push_back(pointer / key);
        continue;
      }
      CheckValue(child, *p, child_path, pointer / key, ignore, out, where);
    }
    return;
  }

  const std::string t = type.value("type", "");
  const std::string format = type.value("format", "");
  if (t == "string") {
    if (format == "int64" || format == "uint64") {
      if (value.is_number_integer() || value.is_number_unsigned()) return;
      if (value.is_string() && IsIntegerText(value.get<std::string>(), format == "int64")) {
        int64_t n;
        uint64_t u;
        const std::string s = value.get<std::string>();
        if (format == "int64" ? absl::SimpleAtoi(s, &n) : absl::SimpleAtoi(s, &u)) return;
      }
      return bad(absl::StrCat("must be a 64-bit integer (a JSON string like \"8\", or a number), got ",
                              value.is_string() ? absl::StrCat("\"", value.get<std::string>(), "\"") : TypeName(value)));
    }
    if (!value.is_string()) return bad(absl::StrCat("must be a string, got ", TypeName(value)));
    const std::string s = value.get<std::string>();
    if (format == "google-datetime" && !common::ParseRfc3339(s)) {
      return bad(absl::StrCat("must be an RFC 3339 timestamp like \"2024-01-02T03:04:05Z\", got \"", s, "\""));
    }
    if (format == "google-duration" && !common::ParseDuration(s)) {
      return bad(absl::StrCat("must be a duration in seconds like \"7200s\", got \"", s, "\""));
    }
    if (format == "byte") {
      std::string decoded;
      if (!absl::Base64Unescape(s, &decoded) && !absl::WebSafeBase64Unescape(s, &decoded)) {
        return bad("must be base64-encoded bytes");
      }
    }
    if (type.contains("enum")) {
      const auto& values = type["enum"];
      if (std::find(values.begin(), values.end(), s) == values.end()) {
        std::vector<std::string> names = values.get<std::vector<std::string>>();
        return bad(absl::StrCat("\"", s, "\" is not one of ", absl::StrJoin(names, ", ")));
      }
    }
    return;
  }
  if (t == "integer") {
    int64_t n = 0;
    if (value.is_number_integer() || value.is_number_unsigned()) {
      if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return bad("is out of range for a 32-bit integer");
      }
      n = value.get<int64_t>();
    } else if (value.is_number_float()) {
      double d = value.get<double>();
      // Casting a double outside int64's range is undefined: range first.
      if (!(d >= -0x1p63 && d < 0x1p63)) return bad("is out of range for a 32-bit integer");
      if (d != static_cast<double>(static_cast<int64_t>(d))) return bad("must be a whole number");
      n = static_cast<int64_t>(d);
    } else if (value.is_string() && IsIntegerText(value.get<std::string>(), true) &&
               absl::SimpleAtoi(value.get<std::string>(), &n)) {
    } else {
      return bad(absl::StrCat("must be an integer, got ", TypeName(value)));
    }
    if (format == "int32" && (n < INT32_MIN || n > INT32_MAX)) return bad("is out of range for a 32-bit integer");
    if (format == "uint32" && (n < 0 || n > UINT32_MAX)) return bad("is out of range for an unsigned 32-bit integer");
    return;
  }
  if (t == "number") {
    if (value.is_number()) return;
    if (value.is_string()) {
      const std::string s = value.get<std::string>();
      if (s == "NaN" || s == "Infinity" || s == "-Infinity") return;
      double d;
      if (absl::SimpleAtod(s, &d)) return;
    }
    return bad(absl::StrCat("must be a number, got ", TypeName(value)));
  }
  if (t == "boolean") {
    if (!value.is_boolean()) return bad(absl::StrCat("must be true or false, got ", TypeName(value)));
    return;
  }
  if (t == "array") {
    if (!value.is_array()) return bad(absl::StrCat("must be a list, got ", TypeName(value)));
    for (size_t i = 0; i < value.size(); ++i) {
      CheckValue(value[i], type["items"], absl::StrCat(path, "[", i, "]"), pointer / i, ignore, out, where);
    }
    return;
  }
  if (t == "object") {
    if (!value.is_object()) return bad(absl::StrCat("must be an object, got ", TypeName(value)));
    if (type.contains("additionalProperties")) {
      for (const auto& [key, child] : value.items()) {
        CheckValue(child, type["additionalProperties"], Join(path, key), pointer / key, ignore, out, where);
      }
    }
    return;
  }
  if (t == "any") return;
  bad(absl::StrCat("internal: unsupported schema type ", t));
}

}  // namespace mle::codec
