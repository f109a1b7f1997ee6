#include "codec/discovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

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

// The string field `key` of a schema node; "" when absent.
const std::string& TextField(const json& node, const char* key) {
  static const std::string* none = new std::string;
  auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get_ref<const std::string&>() : *none;
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
    : schemas_(document.at("schemas")), enum_numbers_(std::move(enum_numbers)) {
  // Every message first, so that a property's $ref finds its message
  // whatever the order (and messages_'s addresses never move after).
  for (const auto& [name, schema] : schemas_.items()) {
    Message& m = messages_[name];
    const size_t cut = name.rfind('_');
    m.short_name = cut == std::string::npos ? name : name.substr(cut + 1);
  }
  for (const auto& [name, schema] : schemas_.items()) {
    Message& m = messages_.find(name)->second;
    auto props = schema.find("properties");
    if (props == schema.end() || !props->is_object()) continue;
    for (const auto& [key, type] : props->items()) m.properties.emplace(key, Compile(type));
  }
}

DiscoverySchema::Node DiscoverySchema::MessageNode(std::string name) const {
  Node node;
  node.kind = Node::Kind::kMessage;
  auto it = messages_.find(name);
  node.message = it == messages_.end() ? nullptr : &it->second;
  node.name = std::move(name);
  return node;
}

DiscoverySchema::Node DiscoverySchema::Compile(const json& type) const {
  Node node;
  if (!type.is_object()) return node;  // unsupported, of no type
  if (auto ref = type.find("$ref"); ref != type.end() && ref->is_string()) return MessageNode(ref->get<std::string>());
  static const auto* kinds = new std::map<std::string, Node::Kind, std::less<>>{
      {"string", Node::Kind::kString},   {"integer", Node::Kind::kInteger}, {"number", Node::Kind::kNumber},
      {"boolean", Node::Kind::kBoolean}, {"array", Node::Kind::kArray},     {"object", Node::Kind::kMap},
      {"any", Node::Kind::kAny}};
  static const auto* formats = new std::map<std::string, Node::Format, std::less<>>{
      {"int64", Node::Format::kInt64},       {"uint64", Node::Format::kUint64},
      {"int32", Node::Format::kInt32},       {"uint32", Node::Format::kUint32},
      {"google-datetime", Node::Format::kDatetime}, {"google-duration", Node::Format::kDuration},
      {"byte", Node::Format::kByte}};
  const std::string& t = TextField(type, "type");
  auto kind = kinds->find(t);
  if (kind == kinds->end()) {
    node.name = t;
    return node;
  }
  node.kind = kind->second;
  if (auto f = formats->find(TextField(type, "format")); f != formats->end()) node.format = f->second;
  switch (node.kind) {
    case Node::Kind::kString:
      if (auto e = type.find("enum"); e != type.end() && e->is_array()) {
        for (const auto& v : *e) {
          if (v.is_string()) node.enum_names.push_back(v.get<std::string>());
        }
        node.enum_set.insert(node.enum_names.begin(), node.enum_names.end());
      }
      break;
    case Node::Kind::kArray:
      node.element = std::make_unique<Node>(Compile(type.contains("items") ? type.at("items") : json()));
      break;
    case Node::Kind::kMap:
      if (auto additional = type.find("additionalProperties"); additional != type.end()) {
        node.element = std::make_unique<Node>(Compile(*additional));
      }
      break;
    default:
      break;
  }
  return node;
}

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

bool DiscoverySchema::HasSchema(absl::string_view name) const { return messages_.count(name) > 0; }

std::vector<common::FieldViolation> DiscoverySchema::Check(
    const json& value, absl::string_view schema_name,
    const std::vector<std::string>& ignore, std::vector<json::json_pointer>* where) const {
  std::vector<common::FieldViolation> out;
  const Trail root;
  CheckValue(value, MessageNode(std::string(schema_name)), root, !ignore.empty(), ignore, &out, where);
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

void DiscoverySchema::CheckValue(const json& value, const Node& type, const Trail& trail, bool ignore_here,
                                 const std::vector<std::string>& ignore, std::vector<common::FieldViolation>* out,
                                 std::vector<json::json_pointer>* where) const {
  auto bad = [&](std::string description) {
    const std::string path = PathOf(trail);
    out->push_back({path.empty() ? std::string("(body)") : path, std::move(description)});
    if (where) where->push_back(PointerOf(trail));
  };
  if (value.is_null()) return;  // proto3 JSON: null means "unset"

  using Kind = Node::Kind;
  using Format = Node::Format;
  switch (type.kind) {
    case Kind::kMessage: {
      if (type.message == nullptr) return bad(absl::StrCat("internal: unknown schema ", type.name));
      if (!value.is_object()) return bad(absl::StrCat("must be an object, got ", TypeName(value)));
      const auto& props = type.message->properties;
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
                                                            type.message->short_name, " has no such field")});
          if (where) where->push_back(PointerOf(child_trail));
          continue;
        }
        CheckValue(child, p->second, child_trail, ignore_below, ignore, out, where);
      }
      return;
    }
    case Kind::kString: {
      if (type.format == Format::kInt64 || type.format == Format::kUint64) {
        const bool int64 = type.format == Format::kInt64;
        if (value.is_number_integer() || value.is_number_unsigned()) return;
        if (value.is_string() && IsIntegerText(value.get_ref<const std::string&>(), int64)) {
          int64_t n;
          uint64_t u;
          const std::string& s = value.get_ref<const std::string&>();
          if (int64 ? absl::SimpleAtoi(s, &n) : absl::SimpleAtoi(s, &u)) return;
        }
        return bad(absl::StrCat("must be a 64-bit integer (a JSON string like \"8\", or a number), got ",
                                value.is_string() ? absl::StrCat("\"", value.get<std::string>(), "\"") : TypeName(value)));
      }
      if (!value.is_string()) return bad(absl::StrCat("must be a string, got ", TypeName(value)));
      const std::string& s = value.get_ref<const std::string&>();
      if (type.format == Format::kDatetime && !common::ParseRfc3339(s)) {
        return bad(absl::StrCat("must be an RFC 3339 timestamp like \"2024-01-02T03:04:05Z\", got \"", s, "\""));
      }
      if (type.format == Format::kDuration && !common::ParseDuration(s)) {
        return bad(absl::StrCat("must be a duration in seconds like \"7200s\", got \"", s, "\""));
      }
      if (type.format == Format::kByte) {
        std::string decoded;
        if (!absl::Base64Unescape(s, &decoded) && !absl::WebSafeBase64Unescape(s, &decoded)) {
          return bad("must be base64-encoded bytes");
        }
      }
      if (!type.enum_names.empty() && !type.enum_set.contains(s)) {
        return bad(absl::StrCat("\"", s, "\" is not one of ", absl::StrJoin(type.enum_names, ", ")));
      }
      return;
    }
    case Kind::kInteger: {
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
      if (type.format == Format::kInt32 && (n < INT32_MIN || n > INT32_MAX)) {
        return bad("is out of range for a 32-bit integer");
      }
      if (type.format == Format::kUint32 && (n < 0 || n > UINT32_MAX)) {
        return bad("is out of range for an unsigned 32-bit integer");
      }
      return;
    }
    case Kind::kNumber: {
      if (value.is_number()) return;
      if (value.is_string()) {
        const std::string& s = value.get_ref<const std::string&>();
        if (s == "NaN" || s == "Infinity" || s == "-Infinity") return;
        double d;
        if (absl::SimpleAtod(s, &d)) return;
      }
      return bad(absl::StrCat("must be a number, got ", TypeName(value)));
    }
    case Kind::kBoolean:
      if (!value.is_boolean()) return bad(absl::StrCat("must be true or false, got ", TypeName(value)));
      return;
    case Kind::kArray:
      if (!value.is_array()) return bad(absl::StrCat("must be a list, got ", TypeName(value)));
      for (size_t i = 0; i < value.size(); ++i) {
        const Trail child_trail{&trail, {}, i, true};
        CheckValue(value[i], *type.element, child_trail, false, ignore, out, where);
      }
      return;
    case Kind::kMap:
      if (!value.is_object()) return bad(absl::StrCat("must be an object, got ", TypeName(value)));
      if (type.element != nullptr) {
        for (const auto& [key, child] : value.items()) {
          const Trail child_trail{&trail, key, 0, false};
          CheckValue(child, *type.element, child_trail, false, ignore, out, where);
        }
      }
      return;
    case Kind::kAny:
      return;
    case Kind::kUnsupported:
      return bad(absl::StrCat("internal: unsupported schema type ", type.name));
  }
}

}  // namespace mle::codec
