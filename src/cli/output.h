// How the CLI prints resources: YAML (gcloud's default for describe), JSON,
// and aligned tables (list). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace mle::cli {

enum class Format { kDefault, kJson, kYaml };

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
