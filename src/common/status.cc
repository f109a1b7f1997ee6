#include "absl/strings/string_view.h"
#include "common/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mle::common {
namespace {

constexpr absl::string_view kBadRequestUrl = "type.googleapis.com/google.rpc.BadRequest";

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

absl::string_view CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kUnknown: return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted: return "ABORTED";
    case absl::StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal: return "INTERNAL";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss: return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

int HttpStatusForCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

}  // namespace mle::common
