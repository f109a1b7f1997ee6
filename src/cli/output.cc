#include "cli/output.h"

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mle::cli {
namespace {

using nlohmann::json;

// Whether a plain YAML scalar with this text would be read as a non-string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  try {
    YAML::Node n = YAML::Load(s);
    if (!n.IsScalar() || n.Scalar() != s) return true;
  } catch (const YAML::Exception&) {
    return true;
  }
  std::string l = absl::AsciiStrToLower(s);
  static const char* kSpecial[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n", ".nan", ".inf", "-.inf"};
  for (const char* k : kSpecial) {
    if (l == k) return true;
  }
  // Numbers (ints, floats, hex, octal, exponent forms).
  const bool numeric_start = absl::ascii_isdigit(static_cast<unsigned char>(s[0])) ||
                             ((s[0] == '-' || s[0] == '+' || s[0] == '.') && s.size() > 1);
  if (numeric_start) {
    bool all_numberish = std::all_of(s.begin(), s.end(), [](char c) {
      return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == '_' ||
             c == 'x' || c == 'o' || c == 'e' || c == 'E' || c == ':';
    });
    if (all_numberish) return true;
  }
  return false;
}

void Emit(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [k, item] : v.items()) {
        out << YAML::Key;
        if (NeedsQuotes(k)) out << YAML::SingleQuoted;
        out << k << YAML::Value;
        Emit(out, item);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : v) Emit(out, item);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos) {
        // A literal block keeps exactly one trailing newline when read back.
        const bool literal = s.back() == '\n' && s.find("\n\n") == std::string::npos && s.find('\r') == std::string::npos;
        out << (literal ? YAML::Literal : YAML::DoubleQuoted) << s;
      } else if (NeedsQuotes(s)) {
        out << YAML::SingleQuoted << s;
      } else {
        out << s;
      }
      return;
    }
    case json::value_t::boolean:
      out << (v.get<bool>() ? "true" : "false");
      return;
    case json::value_t::null:
      out << YAML::Null;
      return;
    default:
      out << v.dump();
      return;
  }
}

}  // namespace

absl::StatusOr<Format> ParseFormat(const std::string& value) {
  if (value.empty()) return Format::kDefault;
  std::string v = absl::AsciiStrToLower(value);
  if (v == "json") return Format::kJson;
  if (v == "yaml") return Format::kYaml;
  return absl::InvalidArgumentError(absl::StrCat("--format must be json or yaml, got \"", value, "\""));
}

std::string ToYaml(const json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  Emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  return text;
}

std::string ToJson(const json& value) {
  return value.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace mle::cli
