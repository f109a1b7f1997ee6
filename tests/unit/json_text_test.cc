#include "codec/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mle::codec {
namespace {

using nlohmann::json;

// Equal as nlohmann's `==` cannot say: same types all the way down (1u and
// 1 compare equal there), same members, same bytes.
void ExpectSameTree(const json& got, const json& want, const std::string& where) {
  ASSERT_EQ(got.type(), want.type()) << where;
  if (got.is_object()) {
    ASSERT_EQ(got.size(), want.size()) << where;
    for (auto it = want.begin(); it != want.end(); ++it) {
      ASSERT_TRUE(got.contains(it.key())) << where << "." << it.key();
      ExpectSameTree(got.at(it.key()), it.value(), where + "." + it.key());
    }
  } else if (got.is_array()) {
    ASSERT_EQ(got.size(), want.size()) << where;
    for (size_t i = 0; i < want.size(); ++i) ExpectSameTree(got[i], want[i], where + "[" + std::to_string(i) + "]");
  } else if (got.is_number_float()) {
    // Bitwise: -0.0 against 0.0, and the last digit of a long decimal.
    const double a = got.get<double>(), b = want.get<double>();
    ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << where << ": " << a << " vs " << b;
  } else {
    ASSERT_EQ(got, want) << where;
  }
}

// What nlohmann's parse gives for `text`: its tree, or its error's text.
struct Outcome {
  json value;
  std::string error;
};
template <typename Parse>
Outcome Run(Parse parse, const std::string& text) {
  try {
    return {parse(text), ""};
  } catch (const json::exception& e) {
    return {json(), e.what()};
  }
}

void ExpectParsesAsNlohmann(const std::string& text) {
  const Outcome want = Run([](const std::string& t) { return json::parse(t); }, text);
  const Outcome got = Run([](const std::string& t) { return ParseJson(t); }, text);
  ASSERT_EQ(got.error, want.error) << text;
  if (want.error.empty()) ExpectSameTree(got.value, want.value, "text " + text);
}

TEST(JsonTextTest, ParsesEachTextAsNlohmannDoes) {
  const std::vector<std::string> texts = {
      // values and types
      "{}", "[]", "null", "true", "false", "0", "-0", "1", "-1", "0.0", "-0.0", "1.5", "1e2", "1E-2", "-1.25e+3",
      "4294967295", "4294967296", "-2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
      "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1e-400", "0.1", "3.141592653589793238",
      "123456789012345678901234567890", "\"\"", "\"a\\\"b\\\\c\\/d\"", "\"\\b\\f\\n\\r\\t\"", "\"\\u0041\\u00e9\"",
      "\"\\ud83d\\ude00\"", "\"caf\xc3\xa9\"", "  { \"a\" : [ 1 , 2 ] }  \n",
      R"({"jobId":"j","trainingInput":{"scaleTier":"BASIC","args":["--x","1"],"hyperparameters":{"goal":"MAXIMIZE"}}})",
      R"({"a":1,"a":2})", R"({"a":{"b":{"c":[[],[{}],[[1]]]}}})", R"([1,"two",3.0,null,true,{"k":"v"}])",
      // refused by both, with nlohmann's words
      "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{'a':1}", "nul", "tru", "01", "1.", ".5", "+1", "1e", "--1", "NaN",
      "Infinity", "[1 2]", "{\"a\" 1}", "{1:2}", "\"abc", "\"\\x\"", "\"\\u12\"", "\"tab\there\"", "1e999", "-1e999",
      "{} {}", "[] x", "/* c */ {}", "{\"a\":1}//", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
      "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", std::string("{}\0x", 4), std::string("\"a\0b\"", 5),
      // read by nlohmann where RapidJSON refuses: a UTF-8 byte order mark
      "\xEF\xBB\xBF{\"a\":1}",
  };
  for (const auto& text : texts) ExpectParsesAsNlohmann(text);
}

// A fixed spread of trees of every kind, printed by nlohmann, read back.
json RandomTree(std::mt19937_64& rng, int depth) {
  const std::vector<std::string> words = {"", "a", "jobId", "with space", "quote\"d", "back\\slash", "tab\t",
                                          "new\nline", "caf\xc3\xa9", "\x01", "emoji \xf0\x9f\x98\x80", "/slash",
                                          "del\x7f"};
  switch (rng() % (depth > 3 ? 6 : 8)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng()) >> (rng() % 64);
    case 3: return static_cast<uint64_t>(rng()) >> (rng() % 64);
    case 4: {
      const double choices[] = {0.0, -0.0, 0.1, 1e21, 1e-7, 123.456, -2.5e300, 5e-324, 1.0 / 3};
      return choices[rng() % 9] * (rng() % 2 ? 1 : static_cast<double>(rng() % 1000));
    }
    case 5: return words[rng() % words.size()];
    case 6: {
      json o = json::object();
      for (int i = rng() % 5; i > 0; --i) o[words[rng() % words.size()] + std::to_string(rng() % 3)] = RandomTree(rng, depth + 1);
      return o;
    }
    default: {
      json a = json::array();
      for (int i = rng() % 5; i > 0; --i) a.push_back(RandomTree(rng, depth + 1));
      return a;
    }
  }
}

TEST(JsonTextTest, WritesAndReadsRandomTreesAsNlohmannDoes) {
  std::mt19937_64 rng(20261207);
  for (int i = 0; i < 3000; ++i) {
    const json tree = RandomTree(rng, 0);
    for (int indent : {-1, 2, 4}) {
      const std::string want = tree.dump(indent, ' ', false, json::error_handler_t::replace);
      ASSERT_EQ(DumpJson(tree, indent), want) << "indent " << indent;
      ExpectParsesAsNlohmann(want);
    }
  }
}

TEST(JsonTextTest, WritesAsNlohmannDoes) {
  const std::vector<json> values = {
      json::object(), json::array(), json{{"a", json::object()}, {"b", json::array()}},
      json::parse(R"({"jobSpec":{"workerPoolSpecs":[{"machineSpec":{"machineType":"n1-standard-4"},"replicaCount":"1"}]}})"),
      json(std::string("bad utf-8 \xff here")),  // nlohmann's replacement character
      json{{"k\xc3\xa9y", 1}}, json{{"nan", std::nan("")}, {"inf", HUGE_VAL}},
      json(std::vector<int>{1, 2, 3}), json(-0.0), json(1e21), json(1.0), json(0.5), json(nullptr),
  };
  for (const auto& v : values) {
    for (int indent : {-1, 0, 2}) {
      EXPECT_EQ(DumpJson(v, indent), v.dump(indent, ' ', false, json::error_handler_t::replace)) << v.dump();
    }
  }
}

// The two sinks an encoder writes to: the tree, and its text without it;
// the text gives up on members out of nlohmann's order and on strings it
// could write otherwise.
TEST(JsonTextTest, SinksWriteTheTreeAndItsText) {
  auto write = [](JsonSink& out, const std::vector<std::string>& keys, const std::string& value) {
    out.StartObject();
    for (const auto& key : keys) {
      out.Key(key);
      out.StartArray();
      out.String(value);
      out.Int64(-7);
      out.Bool(true);
      out.StartObject();
      out.EndObject();
      out.EndArray();
    }
    out.EndObject();
  };
  const json want = json::parse(R"({"a":["v",-7,true,{}],"b":["v",-7,true,{}]})");
  JsonSink tree = JsonSink::Tree();
  write(tree, {"a", "b"}, "v");
  ExpectSameTree(tree.TakeTree(), want, "tree");
  for (int indent : {-1, 2}) {
    JsonSink text = JsonSink::Text(indent);
    write(text, {"a", "b"}, "v");
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text.TakeText(), want.dump(indent));
  }
  struct Case {
    std::vector<std::string> keys;
    std::string value;
  };
  for (const Case& c : std::vector<Case>{{{"b", "a"}, "v"}, {{"a", "a"}, "v"}, {{"a"}, "tab\t"}, {{"\xc3\xa9"}, "v"},
                                         {{"a"}, "caf\xc3\xa9"}}) {
    JsonSink text = JsonSink::Text(-1);
    write(text, c.keys, c.value);
    EXPECT_FALSE(text.ok()) << c.keys[0] << " " << c.value;
  }
}

}  // namespace
}  // namespace mle::codec
