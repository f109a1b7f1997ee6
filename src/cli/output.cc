#include "cli/output.h"

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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
  if (value.find('(') != std::string::npos) {
    auto p = ParseProjection(value);
    if (!p.ok()) return p.status();
    Format f(Format::kProjection);
    f.projection = *std::move(p);
    return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--format must be json, yaml, or a projection such as value(state), table(jobId,state), csv(jobId,state) "
      "or get(state); got \"", value, "\""));
}

absl::StatusOr<Projection> ParseProjection(const std::string& text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  const size_t open = t.find('(');
  if (open == std::string::npos || t.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("--format ", text, ": expected NAME(KEY, ...)"));
  }
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(0, open)));
  Projection p;
  if (name == "value" || name == "get") {
    p.kind = Projection::Kind::kValue;
  } else if (name == "csv") {
    p.kind = Projection::Kind::kCsv;
  } else if (name == "table") {
    p.kind = Projection::Kind::kTable;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--format ", text, ": mlengine prints json, yaml, value(), get(), csv() and table(), not ", name,
                     "()"));
  }
  const std::string inner = t.substr(open + 1, t.size() - open - 2);
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    Projection::Key key;
    std::string path(part);
    if (const size_t colon = path.find(':'); colon != std::string::npos) {
      const std::string attr(absl::StripAsciiWhitespace(path.substr(colon + 1)));
      path = std::string(absl::StripAsciiWhitespace(path.substr(0, colon)));
      if (!absl::StartsWith(attr, "label=")) {
        return absl::InvalidArgumentError(absl::StrCat("--format ", text, ": of a key's attributes only label= is "
                                                                          "supported, not ", attr));
      }
      key.label = attr.substr(6);
    }
    if (path.empty() || path.find_first_of("()[]") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--format ", text, ": \"", part, "\" is not a key (a dotted path such as trainingInput.scaleTier; "
          "transforms such as .date() are not supported)"));
    }
    key.path = absl::StrSplit(path, '.');
    p.keys.push_back(std::move(key));
  }
  if (p.keys.empty()) return absl::InvalidArgumentError(absl::StrCat("--format ", text, ": name at least one key"));
  return p;
}

namespace {

std::string Cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : v) parts.push_back(Cell(e));
    return absl::StrJoin(parts, ";");
  }
  return v.dump();
}

const json* Lookup(const json& resource, const std::vector<std::string>& path) {
  const json* at = &resource;
  for (const auto& k : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(k);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// jobId -> JOB_ID, as gcloud heads a table's columns.
std::string UpperSnake(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (absl::ascii_isupper(c) && !out.empty() && out.back() != '_') out.push_back('_');
    out.push_back(c == '-' || c == '.' ? '_' : absl::ascii_toupper(c));
  }
  return out;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

}  // namespace

std::string Project(const Projection& p, const std::vector<json>& resources) {
  std::vector<std::vector<std::string>> rows;
  for (const json& r : resources) {
    std::vector<std::string> row;
    for (const auto& k : p.keys) {
      const json* v = Lookup(r, k.path);
      row.push_back(v == nullptr ? "" : Cell(*v));
    }
    rows.push_back(std::move(row));
  }
  std::string out;
  switch (p.kind) {
    case Projection::Kind::kValue:
      for (const auto& row : rows) absl::StrAppend(&out, absl::StrJoin(row, "\t"), "\n");
      return out;
    case Projection::Kind::kCsv: {
      std::vector<std::string> header;
      for (const auto& k : p.keys) header.push_back(CsvField(k.label.empty() ? absl::StrJoin(k.path, ".") : k.label));
      absl::StrAppend(&out, absl::StrJoin(header, ","), "\n");
      for (const auto& row : rows) {
        std::vector<std::string> cells;
        for (const auto& c : row) cells.push_back(CsvField(c));
        absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
      }
      return out;
    }
    case Projection::Kind::kTable: {
      std::vector<std::string> header;
      for (const auto& k : p.keys) header.push_back(k.label.empty() ? UpperSnake(k.path.back()) : k.label);
      rows.insert(rows.begin(), header);
      return Table(rows);
    }
  }
  return out;
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
