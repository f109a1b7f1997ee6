#include "api/access.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/status.h"
#include "obs/log.h"

namespace mle::api {

absl::StatusOr<iam::Principal> AccessGate::Authenticate(absl::string_view authorization,
                                                        absl::string_view access_token) const {
  absl::string_view token = access_token;
  if (!authorization.empty()) {
    if (!absl::StartsWithIgnoreCase(authorization, "Bearer ")) {
      return absl::UnauthenticatedError(
          "Request had an Authorization header that is not a bearer token. Send \"Authorization: Bearer <token>\" "
          "with the token this mlengine's operator gave you (`mlengine auth login EMAIL --token-file=FILE` makes "
          "the CLI send it).");
    }
    token = absl::StripAsciiWhitespace(authorization.substr(7));
  }
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "Request is missing required authentication credential. Send \"Authorization: Bearer <token>\" with the "
        "token this mlengine's operator gave you (`mlengine auth login EMAIL --token-file=FILE` makes the CLI "
        "send it).");
  }
  return iam_.Authenticate(token);
}

namespace {

// The canonical code a response carries ("OK", "PERMISSION_DENIED", ...).
std::string OutcomeOf(HttpResponse& r) {
  if (r.status < 300) return "OK";
  const auto body = nlohmann::json::parse(r.Body(), nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].contains("status") &&
      body["error"]["status"].is_string()) {
    return body["error"]["status"].get<std::string>();
  }
  return std::string(common::CodeName(common::CodeForHttpStatus(r.status)));
}

}  // namespace

Responder RecordInAuditLog(iam::IamService& iam, db::AuditRecord record, Responder respond) {
  auto audit = std::make_shared<PendingAudit>();
  audit->record = std::move(record);
  return RecordInAuditLog(iam, std::move(audit), std::move(respond));
}

Responder RecordInAuditLog(iam::IamService& iam, std::shared_ptr<PendingAudit> audit, Responder respond) {
  return [&iam, audit = std::move(audit), respond = std::move(respond)](HttpResponse r) mutable {
    if (audit->written) return respond(std::move(r));
    db::AuditRecord record = audit->record;
    record.outcome = OutcomeOf(r);
    iam.Audit(std::move(record), [respond, r = std::move(r)](absl::Status st) mutable {
      if (!st.ok()) obs::Log("audit").error("could not record a call in the audit log: {}", st.ToString());
      respond(std::move(r));
    });
  };
}

}  // namespace mle::api
