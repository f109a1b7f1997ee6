#include "absl/strings/string_view.h"
#include "common/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mle::common {
namespace {

constexpr absl::string_view kBadRequestUrl = "type.googleapis.com/google.rpc.BadRequest";
constexpr absl::string_view kErrorInfoUrl = "type.googleapis.com/google.rpc.ErrorInfo";

// google.rpc.Code, in its order. `canonical_for_http`: the code an HTTP
// status stands for when several codes share it (google/rpc/code.proto).
struct CodeRow {
  absl::StatusCode code;
  absl::string_view name;
  int http;
  bool canonical_for_http;
};
constexpr CodeRow kCodes[] = {
    {absl::StatusCode::kOk, "OK", 200, false},  // never what an error stands for
    {absl::StatusCode::kCancelled, "CANCELLED", 499, true},
    {absl::StatusCode::kUnknown, "UNKNOWN", 500, false},
    {absl::StatusCode::kInvalidArgument, "INVALID_ARGUMENT", 400, true},
    {absl::StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED", 504, true},
    {absl::StatusCode::kNotFound, "NOT_FOUND", 404, true},
    {absl::StatusCode::kAlreadyExists, "ALREADY_EXISTS", 409, true},
    {absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED", 403, true},
    {absl::StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED", 429, true},
    {absl::StatusCode::kFailedPrecondition, "FAILED_PRECONDITION", 400, false},
    {absl::StatusCode::kAborted, "ABORTED", 409, false},
    {absl::StatusCode::kOutOfRange, "OUT_OF_RANGE", 400, false},
    {absl::StatusCode::kUnimplemented, "UNIMPLEMENTED", 501, true},
    {absl::StatusCode::kInternal, "INTERNAL", 500, true},
    {absl::StatusCode::kUnavailable, "UNAVAILABLE", 503, true},
    {absl::StatusCode::kDataLoss, "DATA_LOSS", 500, false},
    {absl::StatusCode::kUnauthenticated, "UNAUTHENTICATED", 401, true},
};

const CodeRow* RowOf(absl::StatusCode code) {
  for (const CodeRow& row : kCodes) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

// Payload encoding: records "field\x1f description\x1e" (unit and record
// separators never appear in our field paths; descriptions are escaped).
std::string Escape(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\x1e' || c == '\x1f') continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::Status InvalidArgumentWithViolations(absl::string_view summary,
                                           const std::vector<FieldViolation>& violations) {
  std::vector<std::string> parts;
  std::string payload;
  for (const auto& v : violations) {
    parts.push_back(absl::StrCat(v.field, ": ", v.description));
    absl::StrAppend(&payload, Escape(v.field), "\x1f", Escape(v.description), "\x1e");
  }
  std::string message(summary);
  if (!parts.empty()) absl::StrAppend(&message, " ", absl::StrJoin(parts, "; "));
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kBadRequestUrl, absl::Cord(payload));
  return status;
}

std::vector<FieldViolation> GetFieldViolations(const absl::Status& status) {
  std::vector<FieldViolation> out;
  auto payload = status.GetPayload(kBadRequestUrl);
  if (!payload) return out;
  std::string flat(*payload);
  for (absl::string_view record : absl::StrSplit(flat, '\x1e', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(record, absl::MaxSplits('\x1f', 1));
    out.push_back({std::string(kv.first), std::string(kv.second)});
  }
  return out;
}

absl::Status PermissionDeniedWithInfo(absl::string_view message, const PermissionInfo& info) {
  absl::Status status = absl::PermissionDeniedError(message);
  status.SetPayload(kErrorInfoUrl, absl::Cord(absl::StrCat(Escape(info.permission), "\x1f", Escape(info.resource))));
  return status;
}

std::optional<PermissionInfo> GetPermissionInfo(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorInfoUrl);
  if (!payload) return std::nullopt;
  std::pair<std::string, std::string> kv = absl::StrSplit(std::string(*payload), absl::MaxSplits('\x1f', 1));
  return PermissionInfo{kv.first, kv.second};
}

absl::string_view CodeName(absl::StatusCode code) {
  const CodeRow* row = RowOf(code);
  return row == nullptr ? "UNKNOWN" : row->name;
}

std::optional<absl::StatusCode> CodeFromName(absl::string_view name) {
  for (const CodeRow& row : kCodes) {
    if (row.name == name) return row.code;
  }
  return std::nullopt;
}

int HttpStatusForCode(absl::StatusCode code) {
  const CodeRow* row = RowOf(code);
  return row == nullptr ? 500 : row->http;
}

absl::StatusCode CodeForHttpStatus(int http_status) {
  for (const CodeRow& row : kCodes) {
    if (row.http == http_status && row.canonical_for_http) return row.code;
  }
  return http_status >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kUnknown;
}

}  // namespace mle::common
