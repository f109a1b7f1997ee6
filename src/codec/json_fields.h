// Readers of the fields of a JSON body already checked against the
// discovery schema, and the encoding of doubles the schema allows as
// strings; the codecs' shared vocabulary (internal to mle_codec).
//
// A missing or null field reads as absent (nullopt, "", nullptr). int64 and
// double fields may arrive as JSON strings, as proto3's JSON mapping allows
// ("12", "NaN", "Infinity", "-Infinity"); a string that does not parse
// reads as absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace mle::codec {

const nlohmann::json* Obj(const nlohmann::json& o, const char* key);
std::string Str(const nlohmann::json& o, const char* key);
std::optional<int64_t> Int64(const nlohmann::json& o, const char* key);
std::optional<double> Double(const nlohmann::json& o, const char* key);
// An RFC 3339 timestamp; absent when it is not a string or does not parse.
std::optional<absl::Time> Time(const nlohmann::json& o, const char* key);
// `body` without the values at `where` (the pointers a schema check gave
// for its violations): an object's member is dropped, a list's element set
// to null, so what is left decodes without the values it refused.
nlohmann::json WithoutValuesAt(const nlohmann::json& body, const std::vector<nlohmann::json::json_pointer>& where);
// A double as proto3's JSON mapping writes it: NaN and the infinities as
// the strings "NaN", "Infinity", "-Infinity".
nlohmann::json EncodeDouble(double d);

}  // namespace mle::codec
