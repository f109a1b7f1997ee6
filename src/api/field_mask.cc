#include "api/field_mask.h"

#include "common/status.h"

namespace mle::api {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& why) {
  return common::InvalidArgumentWithViolations("Invalid field selection.", {{"fields", why}});
}

// Parses a comma-separated selection list into `into`, starting at `pos`,
// until the end or an unmatched ')'.
absl::Status ParseList(const std::string& s, size_t& pos, json& into, int depth) {
  if (depth > 32) return Bad("is nested too deeply");
  for (;;) {
    // One path: name("/"name)* optionally followed by "(" list ")".
    json* node = &into;
    for (;;) {
      size_t start = pos;
      while (pos < s.size() && s[pos] != ',' && s[pos] != '/' && s[pos] != '(' && s[pos] != ')') ++pos;
      std::string name = s.substr(start, pos - start);
      while (!name.empty() && name.front() == ' ') name.erase(0, 1);
      while (!name.empty() && name.back() == ' ') name.pop_back();
      if (name.empty()) return Bad("has an empty field name at position " + std::to_string(start));
      if (!node->contains(name)) (*node)[name] = json::object();
      node = &(*node)[name];
      if (pos < s.size() && s[pos] == '/') {
        ++pos;
        continue;
      }
      break;
    }
    if (pos < s.size() && s[pos] == '(') {
      ++pos;
      if (auto st = ParseList(s, pos, *node, depth + 1); !st.ok()) return st;
      if (pos >= s.size() || s[pos] != ')') return Bad("has a '(' without its ')'");
      ++pos;
    }
    if (pos < s.size() && s[pos] == ',') {
      ++pos;
      continue;
    }
    return absl::OkStatus();
  }
}

json Select(const json& value, const json& tree) {
  if (tree.empty() || tree.contains("*")) return value;
  if (value.is_array()) {
    json out = json::array();
    for (const auto& v : value) out.push_back(Select(v, tree));
    return out;
  }
  if (!value.is_object()) return value;
  json out = json::object();
  for (const auto& [name, sub] : tree.items()) {
    auto it = value.find(name);
    if (it != value.end()) out[name] = Select(*it, sub);
  }
  return out;
}

}  // namespace

absl::StatusOr<FieldMask> FieldMask::Parse(const std::string& text) {
  FieldMask mask;
  if (text.empty()) return mask;
  size_t pos = 0;
  if (auto s = ParseList(text, pos, mask.tree_, 0); !s.ok()) return s;
  if (pos != text.size()) return Bad("has a ')' without its '('");
  return mask;
}

json FieldMask::Apply(const json& value) const { return Select(value, tree_); }

}  // namespace mle::api
