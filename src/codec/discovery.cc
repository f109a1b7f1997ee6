#include "absl/strings/string_view.h"
#include "codec/discovery.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;

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
  static const DiscoverySchema* schema =
      new DiscoverySchema(json::parse(kAiplatformDiscoveryDocument), json::parse(kAiplatformEnumNumbers));
  return *schema;
}

DiscoverySchema::DiscoverySchema(const json& document, json enum_numbers)
    : schemas_(document.at("schemas")), enum_numbers_(std::move(enum_numbers)) {}

void DiscoverySchema::RecodeEnums(json& value, absl::string_view schema_name, EnumEncoding to) const {
  if (enum_numbers_.is_null()) return;
  RecodeValue(value, json{{"$ref", std::string(schema_name)}}, nullptr, to);
}

void DiscoverySchema::RecodeValue(json& value, const json& type, const json* numbers, EnumEncoding to) const {
  if (auto ref_it = type.find("$ref"); ref_it != type.end()) {
    const std::string& ref = ref_it->get_ref<const std::string&>();
    auto schema = schemas_.find(ref);
    if (schema == schemas_.end() || !value.is_object()) return;
    auto props = schema->find("properties");
    if (props == schema->end()) return;
    auto fields = enum_numbers_.find(ref);
    for (auto& [key, child] : value.items()) {
      auto p = props->find(key);
      if (p == props->end()) continue;
      const json* field_numbers = nullptr;
      if (fields != enum_numbers_.end()) {
        if (auto f = fields->find(key); f != fields->end()) field_numbers = &*f;
      }
      RecodeValue(child, *p, field_numbers, to);
    }
    return;
  }
  const std::string& t = type.value("type", "");
  if (t == "array" && value.is_array()) {
    for (json& item : value) RecodeValue(item, type["items"], numbers, to);
    return;
  }
  if (t == "object" && value.is_object()) {
    if (auto additional = type.find("additionalProperties"); additional != type.end()) {
      for (auto& [key, child] : value.items()) RecodeValue(child, *additional, nullptr, to);
    }
    return;
  }
  if (numbers == nullptr || !type.contains("enum")) return;
  if (to == EnumEncoding::kNumbers) {
    if (!value.is_string()) return;
    if (auto n = numbers->find(value.get<std::string>()); n != numbers->end()) value = *n;
    return;
  }
  // To a name: a number, or a number as a JSON string ("5").
  int64_t number = 0;
  if (value.is_number_integer()) {
    number = value.get<int64_t>();
  } else if (!value.is_string() || !absl::SimpleAtoi(value.get<std::string>(), &number)) {
    return;
  }
  for (const auto& [name, n] : numbers->items()) {
    if (n.get<int64_t>() == number) {
      value = name;
      return;
    }
  }
}

bool DiscoverySchema::HasSchema(absl::string_view name) const {
  return schemas_.contains(std::string(name));
}

std::vector<common::FieldViolation> DiscoverySchema::Check(
    const json& value, absl::string_view schema_name,
    const std::vector<std::string>& ignore, std::vector<json::json_pointer>* where) const {
  std::vector<common::FieldViolation> out;
  const Trail root;
  CheckValue(value, json{{"$ref", std::string(schema_name)}}, root, !ignore.empty(), ignore, &out, where);
  return out;
}

std::string DiscoverySchema::PathOf(const Trail& trail) {
  std::vector<const Trail*> chain;
  for (const Trail* t = &trail; t != nullptr && t->up != nullptr; t = t->up) chain.push_back(t);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Trail& t = **it;
    if (t.is_index) {
      absl::StrAppend(&path, "[", t.index, "]");
    } else {
      if (!path.empty()) path += '.';
      path.append(t.key.data(), t.key.size());
    }
  }
  return path;
}

json::json_pointer DiscoverySchema::PointerOf(const Trail& trail) {
  std::vector<const Trail*> chain;
  for (const Trail* t = &trail; t != nullptr && t->up != nullptr; t = t->up) chain.push_back(t);
  json::json_pointer pointer;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    pointer = (*it)->is_index ? pointer / (*it)->index : pointer / std::string((*it)->key);
  }
  return pointer;
}

namespace {

// The string field `key` of a schema node; "" when absent.
const std::string& TextField(const json& node, const char* key) {
  static const std::string* none = new std::string;
  auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get_ref<const std::string&>() : *none;
}

}  // namespace

void DiscoverySchema::CheckValue(const json& value, const json& type, const Trail& trail, bool ignore_here,
                                 const std::vector<std::string>& ignore, std::vector<common::FieldViolation>* out,
                                 std::vector<json::json_pointer>* where) const {
  auto bad = [&](std::string description) {
    const std::string path = PathOf(trail);
    out->push_back({path.empty() ? std::string("(body)") : path, std::move(description)});
    if (where) where->push_back(PointerOf(trail));
  };
  if (value.is_null()) return;  // proto3 JSON: null means "unset"

  if (auto ref_it = type.find("$ref"); ref_it != type.end()) {
    const std::string& ref = ref_it->get_ref<const std::string&>();
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
    static const json* no_properties = new json(json::object());
    auto props_it = schema.find("properties");
    const json& props = props_it != schema.end() ? *props_it : *no_properties;
    for (const auto& [key, child] : value.items()) {
      const Trail child_trail{&trail, key, 0, false};
      bool ignore_below = false;
      if (ignore_here) {
        const std::string child_path = PathOf(child_trail);
        if (std::find(ignore.begin(), ignore.end(), child_path) != ignore.end()) continue;
        ignore_below = std::any_of(ignore.begin(), ignore.end(), [&](const std::string& i) {
          return absl::StartsWith(i, child_path) && i.size() > child_path.size() &&
                 (i[child_path.size()] == '.' || i[child_path.size()] == '[');
        });
      }
      auto p = props.find(key);
      if (p == props.end()) {
        out->push_back({PathOf(child_trail), absl::StrCat("Unknown field name \"", key, "\": ",
                                                          ref.substr(ref.rfind('_') + 1), " has no such field")});
        if (where) where->push_back(PointerOf(child_trail));
        continue;
      }
      CheckValue(child, *p, child_trail, ignore_below, ignore, out, where);
    }
    return;
  }

  const std::string& t = TextField(type, "type");
  const std::string& format = TextField(type, "format");
  if (t == "string") {
    if (format == "int64" || format == "uint64") {
      if (value.is_number_integer() || value.is_number_unsigned()) return;
      if (value.is_string() && IsIntegerText(value.get_ref<const std::string&>(), format == "int64")) {
        int64_t n;
        uint64_t u;
        const std::string& s = value.get_ref<const std::string&>();
        if (format == "int64" ? absl::SimpleAtoi(s, &n) : absl::SimpleAtoi(s, &u)) return;
      }
      return bad(absl::StrCat("must be a 64-bit integer (a JSON string like \"8\", or a number), got ",
                              value.is_string() ? absl::StrCat("\"", value.get<std::string>(), "\"") : TypeName(value)));
    }
    if (!value.is_string()) return bad(absl::StrCat("must be a string, got ", TypeName(value)));
    const std::string& s = value.get_ref<const std::string&>();
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
    if (auto e = type.find("enum"); e != type.end()) {
      const auto& values = *e;
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
    } else if (value.is_string() && IsIntegerText(value.get_ref<const std::string&>(), true) &&
               absl::SimpleAtoi(value.get_ref<const std::string&>(), &n)) {
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
      const std::string& s = value.get_ref<const std::string&>();
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
    const json& items = type["items"];
    for (size_t i = 0; i < value.size(); ++i) {
      const Trail child_trail{&trail, {}, i, true};
      CheckValue(value[i], items, child_trail, false, ignore, out, where);
    }
    return;
  }
  if (t == "object") {
    if (!value.is_object()) return bad(absl::StrCat("must be an object, got ", TypeName(value)));
    if (auto additional = type.find("additionalProperties"); additional != type.end()) {
      for (const auto& [key, child] : value.items()) {
        const Trail child_trail{&trail, key, 0, false};
        CheckValue(child, *additional, child_trail, false, ignore, out, where);
      }
    }
    return;
  }
  if (t == "any") return;
  bad(absl::StrCat("internal: unsupported schema type ", t));
}

}  // namespace mle::codec
