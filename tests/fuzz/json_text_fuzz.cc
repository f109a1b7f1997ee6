// Fuzzes codec/json_text.h against nlohmann, the library whose answers it
// must give: for every input, ParseJson and nlohmann::json::parse agree on
// the error (its text) or on the tree (types included, doubles bit for
// bit), and DumpJson writes the tree byte for byte as nlohmann's dump,
// compact and pretty.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codec/json_text.h"

namespace {

using nlohmann::json;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "json_text_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool SameTree(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !SameTree(it.value(), *other)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameTree(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  json want, got;
  std::string want_error, got_error;
  try {
    want = json::parse(text);
  } catch (const json::exception& e) {
    want_error = e.what();
  }
  try {
    got = mle::codec::ParseJson(text);
  } catch (const json::exception& e) {
    got_error = e.what();
  }
  if (got_error != want_error) Fail("the errors differ", want_error + "\nagainst\n" + got_error);
  if (!want_error.empty()) return 0;
  if (!SameTree(got, want)) Fail("the trees differ", want.dump() + "\nagainst\n" + got.dump());
  for (int indent : {-1, 2}) {
    if (mle::codec::DumpJson(want, indent) != want.dump(indent, ' ', false, json::error_handler_t::replace)) {
      Fail("the texts differ", want.dump(indent, ' ', false, json::error_handler_t::replace));
    }
  }
  return 0;
}
