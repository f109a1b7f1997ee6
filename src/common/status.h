// Status helpers. mlengine reports every failure as an absl::Status whose
// code is a google.rpc.Code (absl's canonical codes are exactly those), so the
// wire error falls out of one mapping in api/. An INVALID_ARGUMENT status may
// carry the list of field violations (google.rpc.BadRequest) as a payload.
// Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"

namespace mle::common {

struct FieldViolation {
  std::string field;        // wire path, e.g. "trainingInput.workerCount"
  std::string description;  // for a person: what is wrong, what is allowed
  bool operator==(const FieldViolation&) const = default;
};

// INVALID_ARGUMENT carrying `violations`; the message lists them all.
absl::Status InvalidArgumentWithViolations(absl::string_view summary,
                                           const std::vector<FieldViolation>& violations);
// The violations attached by InvalidArgumentWithViolations (empty if none).
std::vector<FieldViolation> GetFieldViolations(const absl::Status& status);

// An IAM refusal as Google's APIs give it: PERMISSION_DENIED with a
// google.rpc.ErrorInfo (reason IAM_PERMISSION_DENIED, the permission and
// the resource) beside the message.
struct PermissionInfo {
  std::string permission;  // "storage.objects.create"
  std::string resource;    // "projects/_/buckets/b"
};
absl::Status PermissionDeniedWithInfo(absl::string_view message, const PermissionInfo& info);
std::optional<PermissionInfo> GetPermissionInfo(const absl::Status& status);

// google.rpc.Code names, absl::StatusCode and the HTTP statuses Google APIs
// use, from one table: the server renders errors with it, the CLI reads them
// back with it.
//
// The canonical name of a code, e.g. "INVALID_ARGUMENT" ("UNKNOWN" for a
// code outside google.rpc.Code).
absl::string_view CodeName(absl::StatusCode code);
// The code named `name` (as CodeName spells it); nullopt for another name.
std::optional<absl::StatusCode> CodeFromName(absl::string_view name);
// The HTTP status Google APIs use for a code (400, 401, 404, 409, ...).
int HttpStatusForCode(absl::StatusCode code);
// The code an HTTP error status stands for when the body does not name one:
// the code Google maps that status to (400 INVALID_ARGUMENT, 409
// ALREADY_EXISTS, ...); otherwise INTERNAL for 5xx, UNKNOWN for the rest.
absl::StatusCode CodeForHttpStatus(int http_status);

}  // namespace mle::common
