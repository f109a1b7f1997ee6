// How the CLI prints resources: YAML (gcloud's default for describe), JSON,
// and aligned tables (list). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace mle::cli {

// gcloud's format projections: value(KEY, ...), get(KEY, ...), csv(...),
// table(...). A KEY is a dotted path into the resource (trainingInput.
// scaleTier), optionally `:label=NAME` (csv's and table's header). Values:
// strings as they are, numbers and booleans as JSON writes them, a list
// joined with ';', an absent key empty.
struct Projection {
  enum class Kind { kValue, kCsv, kTable };
  struct Key {
    std::vector<std::string> path;
    std::string label;  // table/csv header; default: the key (table: UPPER_SNAKE of its last part)
  };
  Kind kind = Kind::kValue;
  std::vector<Key> keys;
};

// The projection of `text` (e.g. "value(state)"); INVALID_ARGUMENT naming
// what is wrong (transforms such as .date() are not supported).
absl::StatusOr<Projection> ParseProjection(const std::string& text);
// `resources` printed by `p`: one line each (table and csv after a header).
std::string Project(const Projection& p, const std::vector<nlohmann::json>& resources);

// --format: json, yaml, or a projection. Compares equal to its kind.
struct Format {
  enum Kind { kDefault, kJson, kYaml, kProjection };
  Format(Kind k = kDefault) : kind(k) {}  // NOLINT(google-explicit-constructor): Format::kJson reads as a Format
  Kind kind;
  Projection projection;  // kProjection
  bool operator==(Kind k) const { return kind == k; }
};

absl::StatusOr<Format> ParseFormat(const std::string& value);

// Block-style YAML of a JSON value. Strings that YAML would read back as
// something else ("4", "true", "", "2.10") are single-quoted; keys keep the
// JSON object's order (sorted).
std::string ToYaml(const nlohmann::json& value);

// Pretty JSON (2-space indent) with a trailing newline.
std::string ToJson(const nlohmann::json& value);

// Columns padded to the widest cell, separated by two spaces; the first row
// is the header.
std::string Table(const std::vector<std::vector<std::string>>& rows);

}  // namespace mle::cli
