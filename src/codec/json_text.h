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

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mle::codec {

// As nlohmann::json::parse(text): the value, or throws what it throws
// (nlohmann::json::parse_error, out_of_range) for a text that is not one
// JSON value.
nlohmann::json ParseJson(std::string_view text);

// As value.dump(indent, ' ', false, error_handler_t::replace): compact for
// indent < 0, else pretty with `indent` spaces a level.
std::string DumpJson(const nlohmann::json& value, int indent = -1);

}  // namespace mle::codec
