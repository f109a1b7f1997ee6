// The `ml` v1 discovery document as a schema checker: walks a JSON value
// against a named schema and reports every unknown field, wrong type,
// malformed int64/timestamp/duration/bytes and unknown enum value, with the
// wire path of each. Used on every request body (strictness at the edge) and
// by tests on every response (the server emits only what the contract has).
// Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/string_view.h"
#include "common/status.h"

namespace mle::codec {

extern const absl::string_view kDiscoveryDocument;
extern const absl::string_view kAiplatformDiscoveryDocument;  // api/aiplatform.v1.json

class DiscoverySchema {
 public:
  // The schema compiled into this binary.
  static const DiscoverySchema& Embedded();
  // Vertex AI's aiplatform v1 schemas (the part mlengine serves).
  static const DiscoverySchema& Aiplatform();
  explicit DiscoverySchema(const nlohmann::json& document);

  // Checks `value` against schema `schema_name` (e.g. "GoogleCloudMlV1__Job").
  // `prefix` is prepended to reported paths. Fields named in `ignore` (paths
  // relative to the root, e.g. "createTime") are skipped entirely.
  // When `where` is given, it receives the JSON pointer of each violation
  // (same order), so a caller can drop the offending values.
  std::vector<common::FieldViolation> Check(const nlohmann::json& value,
                                            absl::string_view schema_name,
                                            const std::vector<std::string>& ignore = {},
                                            std::vector<nlohmann::json::json_pointer>* where = nullptr) const;

  bool HasSchema(absl::string_view name) const;

 private:
  // Where a value lies: its parent's trail and its key or index. Its path
  // and JSON pointer are spelled out only for a violation (most values
  // have none, and building both for every value cost a body's check most
  // of its time).
  struct Trail {
    const Trail* up = nullptr;  // null: the root
    std::string_view key;       // when !is_index
    size_t index = 0;
    bool is_index = false;
  };
  static std::string PathOf(const Trail& trail);
  static nlohmann::json::json_pointer PointerOf(const Trail& trail);
  // `ignore_here`: an entry of `ignore` may name this value or one below it.
  void CheckValue(const nlohmann::json& value, const nlohmann::json& type, const Trail& trail, bool ignore_here,
                  const std::vector<std::string>& ignore, std::vector<common::FieldViolation>* out,
                  std::vector<nlohmann::json::json_pointer>* where) const;
  nlohmann::json schemas_;
};

}  // namespace mle::codec
