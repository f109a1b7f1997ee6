#include "codec/json_text.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <rapidjson/memorystream.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mle::codec {
namespace {

using nlohmann::json;

// A string both libraries write byte for byte alike: printable ASCII
// (RapidJSON escapes `"` and `\` as nlohmann does, and nothing else here).
bool Plain(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

// Writes `v` with RapidJSON's writer; false where nlohmann's text could
// differ (a control or non-ASCII byte in a string or key), and the caller
// has nlohmann write the whole value.
template <typename Writer>
bool Write(const json& v, Writer& w) {
  switch (v.type()) {
    case json::value_t::object:
      w.StartObject();
      for (const auto& [key, child] : v.get_ref<const json::object_t&>()) {
        if (!Plain(key)) return false;
        w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
        if (!Write(child, w)) return false;
      }
      w.EndObject();
      return true;
    case json::value_t::array:
      w.StartArray();
      for (const json& child : v.get_ref<const json::array_t&>()) {
        if (!Write(child, w)) return false;
      }
      w.EndArray();
      return true;
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (!Plain(s)) return false;
      w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
      return true;
    }
    case json::value_t::boolean:
      w.Bool(v.get<bool>());
      return true;
    case json::value_t::number_integer:
      w.Int64(v.get<json::number_integer_t>());
      return true;
    case json::value_t::number_unsigned:
      w.Uint64(v.get<json::number_unsigned_t>());
      return true;
    case json::value_t::number_float: {
      // nlohmann's digits (its shortest round trip, "1e+21", null for NaN).
      const std::string digits = v.dump();
      w.RawValue(digits.data(), digits.size(), rapidjson::kNumberType);
      return true;
    }
    case json::value_t::null:
      w.Null();
      return true;
    default:  // binary and discarded: nlohmann's own
      return false;
  }
}

}  // namespace

// RapidJSON's reader events, building nlohmann's tree as its own parser
// would: integers as nlohmann types them (unsigned when not negative),
// the last of a repeated key kept. A string holding a UTF-16 surrogate
// (RapidJSON passes a lone "\udc00" through; nlohmann refuses it) stops
// the parse, and nlohmann parses the text instead.
class JsonSink::Builder {
 public:
  json Take() { return std::move(root_); }

  bool Null() { return Put(nullptr); }
  bool Bool(bool b) { return Put(b); }
  // Numbers come as their text (kParseNumbersAsStringsFlag), converted as
  // nlohmann's lexer does: strtoull or strtoll where the text is an
  // integer that fits, else strtod; a double out of range is nlohmann's
  // error to give. (RapidJSON's own conversion differs in the last digit
  // without its full-precision mode, and that mode passes 0 to clz for
  // "0e40".)
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    number_.assign(s, n);
    const char* text = number_.c_str();
    char* end = nullptr;
    if (number_.find_first_of(".eE") == std::string::npos) {
      errno = 0;
      if (number_[0] == '-') {
        const long long v = std::strtoll(text, &end, 10);
        if (errno == 0 && end == text + n) return Put(static_cast<json::number_integer_t>(v));
      } else {
        const unsigned long long v = std::strtoull(text, &end, 10);
        if (errno == 0 && end == text + n) return Put(static_cast<json::number_unsigned_t>(v));
      }
    }
    const double d = std::strtod(text, &end);
    if (end != text + n || !std::isfinite(d)) return false;
    return Put(d);
  }
  // Not called with kParseNumbersAsStringsFlag; the reader's interface.
  bool Int(int) { return false; }
  bool Uint(unsigned) { return false; }
  bool Int64(int64_t) { return false; }
  bool Uint64(uint64_t) { return false; }
  bool Double(double) { return false; }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (HasSurrogate(s, n)) return false;
    return Put(std::string(s, n));
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (HasSurrogate(s, n)) return false;
    key_.assign(s, n);
    return true;
  }
  bool StartObject() { return Open(json::object()); }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool StartArray() { return Open(json::array()); }
  bool EndArray(rapidjson::SizeType) { return Close(); }

  // For JsonSink::Tree: a value, a key, a container opened and closed.
  template <typename T>
  bool Put(T&& v) {
    Insert(json(std::forward<T>(v)));
    return true;
  }
  void SetKey(std::string_view key) { key_.assign(key.data(), key.size()); }
  bool Open(json&& container) {
    stack_.push_back(Insert(std::move(container)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

 private:
  // A surrogate code point in UTF-8: ED A0..BF.
  static bool HasSurrogate(const char* s, size_t n) {
    for (const char* p = static_cast<const char*>(std::memchr(s, '\xED', n)); p != nullptr;
         p = static_cast<const char*>(std::memchr(p + 1, '\xED', n - (p + 1 - s)))) {
      if (p + 1 < s + n && static_cast<unsigned char>(p[1]) >= 0xA0) return true;
    }
    return false;
  }

  json* Insert(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      auto& items = top.get_ref<json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    auto& members = top.get_ref<json::object_t&>();
    return &members.insert_or_assign(std::move(key_), std::move(v)).first->second;
  }
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  std::string number_;
};

json ParseJson(std::string_view text) {
  // RapidJSON reads a NUL as the end of the text; nlohmann as a byte.
  if (text.find('\0') == std::string_view::npos) {
    JsonSink::Builder builder;
    rapidjson::Reader reader;
    // The bytes as they are (RapidJSON's EncodedInputStream would skip a
    // byte order mark, or any one of its three bytes alone).
    rapidjson::MemoryStream in(text.data(), text.size());
    constexpr unsigned kFlags =
        rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseIterativeFlag;
    if (reader.Parse<kFlags>(in, builder)) return builder.Take();
  }
  // Refused (or cut short) by RapidJSON: nlohmann's answer, value or error.
  return json::parse(text.begin(), text.end());
}

class JsonSink::Writer {
 public:
  explicit Writer(int indent) {
    if (indent < 0) {
      compact_.emplace(buffer_);
    } else {
      pretty_.emplace(buffer_);
      pretty_->SetIndent(' ', static_cast<unsigned>(indent));
    }
  }
  template <typename F>
  void Do(F f) {
    if (pretty_) {
      f(*pretty_);
    } else {
      f(*compact_);
    }
  }
  std::string Take() { return std::string(buffer_.GetString(), buffer_.GetSize()); }

 private:
  rapidjson::StringBuffer buffer_;
  std::optional<rapidjson::Writer<rapidjson::StringBuffer>> compact_;
  std::optional<rapidjson::PrettyWriter<rapidjson::StringBuffer>> pretty_;
};

JsonSink::JsonSink() = default;
JsonSink::JsonSink(JsonSink&&) noexcept = default;
JsonSink& JsonSink::operator=(JsonSink&&) noexcept = default;
JsonSink::~JsonSink() = default;

JsonSink JsonSink::Tree() {
  JsonSink sink;
  sink.builder_ = std::make_unique<Builder>();
  return sink;
}

JsonSink JsonSink::Text(int indent) {
  JsonSink sink;
  sink.writer_ = std::make_unique<Writer>(indent);
  return sink;
}

void JsonSink::StartObject() {
  if (builder_) {
    builder_->Open(json::object());
  } else if (ok_) {
    last_keys_.emplace_back();
    writer_->Do([](auto& w) { w.StartObject(); });
  }
}
void JsonSink::EndObject() {
  if (builder_) {
    builder_->Close();
  } else if (ok_) {
    last_keys_.pop_back();
    writer_->Do([](auto& w) { w.EndObject(); });
  }
}
void JsonSink::StartArray() {
  if (builder_) {
    builder_->Open(json::array());
  } else if (ok_) {
    writer_->Do([](auto& w) { w.StartArray(); });
  }
}
void JsonSink::EndArray() {
  if (builder_) {
    builder_->Close();
  } else if (ok_) {
    writer_->Do([](auto& w) { w.EndArray(); });
  }
}
void JsonSink::Key(std::string_view key) {
  if (builder_) return builder_->SetKey(key);
  if (!ok_) return;
  // nlohmann's order: each key after the last ("" before the first; an
  // empty key is left to the tree).
  std::string& last = last_keys_.back();
  if (!Plain(key) || key <= last) {
    ok_ = false;
    return;
  }
  last.assign(key.data(), key.size());
  writer_->Do([&](auto& w) { w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size())); });
}
void JsonSink::String(std::string_view s) {
  if (builder_) {
    builder_->Put(std::string(s));
  } else if (ok_ && !Plain(s)) {
    ok_ = false;
  } else if (ok_) {
    writer_->Do([&](auto& w) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); });
  }
}
void JsonSink::Int64(int64_t v) {
  if (builder_) {
    builder_->Put(static_cast<json::number_integer_t>(v));
  } else if (ok_) {
    writer_->Do([&](auto& w) { w.Int64(v); });
  }
}
void JsonSink::Bool(bool v) {
  if (builder_) {
    builder_->Put(v);
  } else if (ok_) {
    writer_->Do([&](auto& w) { w.Bool(v); });
  }
}
void JsonSink::Value(const json& v) {
  if (builder_) {
    builder_->Put(v);
  } else if (ok_) {
    writer_->Do([&](auto& w) { ok_ = Write(v, w); });
  }
}
json JsonSink::TakeTree() { return builder_ ? builder_->Take() : json(); }
std::string JsonSink::TakeText() { return writer_ ? writer_->Take() : std::string(); }

std::string DumpJson(const json& value, int indent) {
  JsonSink text = JsonSink::Text(indent);
  text.Value(value);
  if (!text.ok()) return value.dump(indent, ' ', false, json::error_handler_t::replace);
  return text.TakeText();
}

}  // namespace mle::codec
