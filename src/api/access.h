// AccessGate: the one authentication and authorization step of every API
// mlengined serves (ml, iam, iamcredentials, cloudresourcemanager,
// serviceusage, storage, the operator's admin API). It reads the bearer
// token (Authorization header or access_token parameter), asks IamService
// whose it is, and whether that principal holds a permission on a
// resource. Thread-safe; holds no state of its own.
#pragma once

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

// `respond`, preceded by appending `record` (its outcome taken from the
// response) to the audit log: the call is answered once the line is durable.
Responder RecordInAuditLog(iam::IamService& iam, db::AuditRecord record, Responder respond);

}  // namespace mle::api
