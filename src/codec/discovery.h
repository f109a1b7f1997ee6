// The `ml` v1 discovery document as a schema checker: walks a JSON value
// against a named schema and reports every unknown field, wrong type,
// malformed int64/timestamp/duration/bytes and unknown enum value, with the
// wire path of each. Used on every request body (strictness at the edge) and
// by tests on every response (the server emits only what the contract has).
// Immutable after construction; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/status.h"

namespace mle::codec {

extern const absl::string_view kDiscoveryDocument;
extern const absl::string_view kAiplatformDiscoveryDocument;  // api/aiplatform.v1.json
extern const absl::string_view kAiplatformEnumNumbers;        // api/aiplatform.v1.enums.json

class DiscoverySchema {
 public:
  // The schema compiled into this binary.
  static const DiscoverySchema& Embedded();
  // Vertex AI's aiplatform v1 schemas (the part mlengine serves).
  static const DiscoverySchema& Aiplatform();
  // `enum_numbers`: each enum field's proto numbers, {"SCHEMA": {"field":
  // {"NAME": number}}} (scripts/enum-numbers.py); none, null.
  explicit DiscoverySchema(const nlohmann::json& document, nlohmann::json enum_numbers = nullptr);

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

  // Proto3's JSON mapping lets an enum travel as its number as well as its
  // name: a request may send either, and `$alt=json;enum-encoding=int` (what
  // @google-cloud/aiplatform's REST mode asks for) wants numbers back.
  // Rewrites each enum field of `value` (of schema `schema_name`, through
  // every nested schema, list and map) to the encoding `to`, by the numbers
  // of its proto; a value it does not know (an unknown name or number, a
  // schema with no numbers) is left as it is, for Check to report.
  enum class EnumEncoding { kNames, kNumbers };
  void RecodeEnums(nlohmann::json& value, absl::string_view schema_name, EnumEncoding to) const;

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

  // The document's schemas compiled once, at construction: a check then
  // follows pointers and hashed lookups instead of the document's nested
  // maps (each lookup there compared schema names that share a
  // 23-character prefix: a Vertex body's check was a sixth of its create).
  struct Message;
  // What a value at one place must be.
  struct Node {
    enum class Kind { kMessage, kString, kInteger, kNumber, kBoolean, kArray, kMap, kAny, kUnsupported };
    enum class Format { kNone, kInt64, kUint64, kInt32, kUint32, kDatetime, kDuration, kByte };
    Kind kind = Kind::kUnsupported;
    Format format = Format::kNone;
    const Message* message = nullptr;  // kMessage; null for a $ref the document lacks
    std::string name;                  // kMessage: the $ref; kUnsupported: the type it names
    std::unique_ptr<Node> element;     // kArray: its items; kMap: additionalProperties (null: none)
    std::vector<std::string> enum_names;          // kString: the values allowed (empty: any), in order
    absl::flat_hash_set<std::string> enum_set;    // the same, to look up
  };
  struct Message {
    std::string short_name;  // for errors: the name after its last '_'
    absl::flat_hash_map<std::string, Node> properties;
  };
  // A value of message `name` (its message null when the document has none).
  Node MessageNode(std::string name) const;
  Node Compile(const nlohmann::json& type) const;
  // `ignore_here`: an entry of `ignore` may name this value or one below it.
  void CheckValue(const nlohmann::json& value, const Node& type, const Trail& trail, bool ignore_here,
                  const std::vector<std::string>& ignore, std::vector<common::FieldViolation>* out,
                  std::vector<nlohmann::json::json_pointer>* where) const;
  void RecodeValue(nlohmann::json& value, const nlohmann::json& type, const nlohmann::json* numbers,
                   EnumEncoding to) const;
  nlohmann::json schemas_;
  nlohmann::json enum_numbers_;
  std::map<std::string, Message, std::less<>> messages_;  // by schema name; addresses stable
};

}  // namespace mle::codec
