#include "codec/json_fields.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "common/time_format.h"

namespace mle::codec {

using nlohmann::json;

json WithoutValuesAt(const json& body, const std::vector<json::json_pointer>& where) {
  json clean = body;
  for (const auto& ptr : where) {
    if (ptr.empty()) continue;
    json& parent = clean[ptr.parent_pointer()];
    const std::string last = ptr.back();
    if (parent.is_object()) {
      parent.erase(last);
    } else if (parent.is_array()) {
      parent[std::stoul(last)] = nullptr;
    }
  }
  return clean;
}

const json* Obj(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Str(const json& o, const char* key) {
  const json* v = Obj(o, key);
  return v == nullptr ? "" : v->get<std::string>();
}

std::optional<int64_t> Int64(const json& o, const char* key) {
  const json* v = Obj(o, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    int64_t n = 0;
    if (absl::SimpleAtoi(v->get<std::string>(), &n)) return n;
    return std::nullopt;
  }
  if (v->is_number_float()) return static_cast<int64_t>(v->get<double>());
  return v->get<int64_t>();
}

std::optional<double> Double(const json& o, const char* key) {
  const json* v = Obj(o, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    double d = 0;
    if (absl::SimpleAtod(s, &d)) return d;
    return std::nullopt;
  }
  return v->get<double>();
}

std::optional<absl::Time> Time(const json& o, const char* key) {
  const json* v = Obj(o, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return common::ParseRfc3339(v->get<std::string>());
}

json EncodeDouble(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

}  // namespace mle::codec
