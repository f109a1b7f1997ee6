// AccessGate: the one authentication and authorization step of every API
// mlengined serves (ml, iam, iamcredentials, cloudresourcemanager,
// serviceusage, storage, the operator's admin API). It reads the bearer
// token (Authorization header or access_token parameter), asks IamService
// whose it is, and whether that principal holds a permission on a
// resource. Thread-safe; holds no state of its own.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/http_server.h"
#include "db/store.h"
#include "iam/iam_service.h"

namespace mle::api {

class AccessGate {
 public:
  explicit AccessGate(const iam::IamService& iam) : iam_(iam) {}

  // `authorization`: the Authorization header ("Bearer <token>");
  // `access_token`: the query parameter (either may be empty).
  // UNAUTHENTICATED saying what to send, or the caller.
  absl::StatusOr<iam::Principal> Authenticate(absl::string_view authorization, absl::string_view access_token) const;

  absl::Status Check(const iam::Principal& who, absl::string_view permission, const iam::Resource& resource) const {
    return iam_.Authorize(who, permission, resource);
  }

  const iam::IamService& iam() const { return iam_; }

 private:
  const iam::IamService& iam_;
};

// An audited call's line in the audit log (RecordInAuditLog writes it once
// the call is answered; Call::audit carries it to the handler). A handler
// whose effect is one commit may write the line, outcome OK, in that same
// commit (IamService::AuditWrite) and mark it written: the call is then
// answered after one disk flush, not two.
struct PendingAudit {
  db::AuditRecord record;
  std::atomic<bool> written{false};
};

// `respond`, preceded by appending `record` (its outcome taken from the
// response) to the audit log: the call is answered once the line is durable.
Responder RecordInAuditLog(iam::IamService& iam, db::AuditRecord record, Responder respond);
// The same for `audit`, unless the handler wrote the line in its own commit.
Responder RecordInAuditLog(iam::IamService& iam, std::shared_ptr<PendingAudit> audit, Responder respond);

}  // namespace mle::api
