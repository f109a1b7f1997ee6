// JSON text <-> nlohmann::json where requests and stored rows pass: every
// API body parsed, every answer rendered, every job row written and read.
//
// RapidJSON's reader and writer do the bytes, at about half of nlohmann's
// cost for each (a create spends a fifth of its CPU on JSON text). What
// comes out is exactly what nlohmann's parse and dump give: wherever the
// two libraries could differ (a text RapidJSON refuses, a string with a
// control or non-ASCII byte, a double's digits), nlohmann does that part,
// so errors, escapes and numbers read as they did. Pure, thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mle::codec {

// As nlohmann::json::parse(text): the value, or throws what it throws
// (nlohmann::json::parse_error, out_of_range) for a text that is not one
// JSON value.
nlohmann::json ParseJson(std::string_view text);

// As value.dump(indent, ' ', false, error_handler_t::replace): compact for
// indent < 0, else pretty with `indent` spaces a level.
std::string DumpJson(const nlohmann::json& value, int indent = -1);

// What an encoder writes a value to, member by member (an encoder written
// once for both; codec/vertex_codec.cc): Tree() builds nlohmann's tree,
// Text(indent) writes the text DumpJson(tree, indent) gives, without
// building it. Members are written in the order nlohmann keeps them (by
// key); Text gives up (ok() false) on a key out of that order and on a
// string nlohmann could write otherwise (a control or non-ASCII byte), and
// the caller writes the tree instead.
class JsonSink {
 public:
  static JsonSink Tree();
  static JsonSink Text(int indent);  // as DumpJson's
  JsonSink(JsonSink&&) noexcept;
  JsonSink& operator=(JsonSink&&) noexcept;
  ~JsonSink();

  void StartObject();
  void EndObject();
  void StartArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view s);
  void Int64(int64_t v);
  void Bool(bool v);
  void Value(const nlohmann::json& v);  // a whole value, as it is

  bool ok() const { return ok_; }   // Text: false once it gave up
  nlohmann::json TakeTree();        // Tree's
  std::string TakeText();           // Text's

  class Builder;  // Tree's (also ParseJson's, for RapidJSON's reader)

 private:
  class Writer;  // Text's
  JsonSink();

  std::unique_ptr<Builder> builder_;
  std::unique_ptr<Writer> writer_;
  // Text: per open object, the last key written (its members come sorted).
  std::vector<std::string> last_keys_;
  bool ok_ = true;
};

}  // namespace mle::codec
