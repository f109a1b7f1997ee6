// Pieces every router of the HTTP surface shares: percent-decoding, splitting
// a request target into its path and query, and rendering JSON results and
// errors in Google's format ({"error": {"code", "message", "status",
// "details"}}, the details carrying BadRequest.fieldViolations).
// Pure functions, thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/http_server.h"

namespace mle::api {

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, as in query
// strings); nullopt when an escape is malformed.
std::optional<std::string> PercentDecode(absl::string_view s, bool plus_is_space);

using QueryParams = std::multimap<std::string, std::string>;

// A request target split at '?': the raw (still encoded) path and the
// decoded query parameters. INVALID_ARGUMENT naming a badly encoded parameter.
struct Target {
  std::string raw_path;
  QueryParams query;
};
absl::StatusOr<Target> ParseTarget(absl::string_view target);

// The first value of a query parameter, or "".
std::string QueryParam(const QueryParams& query, const std::string& name);

// INVALID_ARGUMENT with one field violation on a query parameter.
absl::Status BadParam(const std::string& name, const std::string& description);

// A JSON request body; INVALID_ARGUMENT (field "(body)") when it is not JSON,
// nests deeper than 64 levels, or is empty (unless `allow_empty`: then {}).
absl::StatusOr<nlohmann::json> ParseJsonBody(const std::string& body, bool allow_empty);

// `value` as the response body (pretty: indented, with a final newline).
HttpResponse RenderJson(const nlohmann::json& value, bool pretty, int status = 200);
// A 200 whose JSON is encoded and rendered where the response is written
// (HttpResponse::deferred_body): for an answer made on a thread that others
// wait on, such as the store's callback thread.
HttpResponse RenderJsonDeferred(std::function<nlohmann::json()> encode, bool pretty);
// The same two for a codec that writes the text itself (a JSON text as
// DumpJson gives it, codec/json_text.h) for the indent they pass: 2 when
// pretty, else -1 (compact).
HttpResponse RenderJsonText(const std::function<std::string(int indent)>& write, bool pretty);
HttpResponse RenderJsonTextDeferred(std::function<std::string(int indent)> write, bool pretty);
// `status` as Google's error body, with the HTTP status of its code.
HttpResponse RenderError(const absl::Status& status, bool pretty);

}  // namespace mle::api
