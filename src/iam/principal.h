// Who calls: the operator (the admin token of mlengined's data directory),
// a user the operator created, or a service account of a project. IAM
// policies name principals as members ("user:EMAIL",
// "serviceAccount:EMAIL"). Plain values; pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mle::iam {

enum class PrincipalKind { kOperator, kUser, kServiceAccount };

struct Principal {
  PrincipalKind kind = PrincipalKind::kUser;
  std::string email;  // empty for the operator

  static Principal Operator() { return {PrincipalKind::kOperator, ""}; }
  static Principal User(std::string email) { return {PrincipalKind::kUser, std::move(email)}; }
  static Principal ServiceAccount(std::string email) { return {PrincipalKind::kServiceAccount, std::move(email)}; }

  bool IsOperator() const { return kind == PrincipalKind::kOperator; }
  // "user:alice@example.com", "serviceAccount:trainer@p.iam.mlengine.local";
  // "operator" for the operator (never a member of a policy).
  std::string Member() const;
  bool operator==(const Principal&) const = default;
};

// The member strings a policy may hold: "user:EMAIL", "serviceAccount:EMAIL"
// and "allAuthenticatedUsers" (any caller with a valid token). The email is
// returned lower-cased (as Google stores it); INVALID_ARGUMENT saying what
// is wrong otherwise.
absl::StatusOr<std::string> CanonicalMember(absl::string_view member);

// Whether `email` is an acceptable address: local@domain, at most 254
// characters, letters, digits and ".-_+" in the local part, a dotted domain.
bool ValidEmail(absl::string_view email);

// The principal a canonical "user:" / "serviceAccount:" member names; nullopt
// for "allAuthenticatedUsers".
std::optional<Principal> PrincipalOfMember(absl::string_view member);

inline constexpr char kAllAuthenticatedUsers[] = "allAuthenticatedUsers";

}  // namespace mle::iam
