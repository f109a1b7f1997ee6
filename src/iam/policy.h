// IAM policies: who holds which role on a resource (bindings), versioned by
// an etag for read-modify-write (a stale etag is ABORTED), and the pure rules
// a policy must follow before it is stored. Plain values; pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "iam/roles.h"

namespace mle::iam {

struct Binding {
  std::string role;
  std::vector<std::string> members;  // canonical (CanonicalMember)
  bool operator==(const Binding&) const = default;
};

struct Policy {
  int32_t version = 1;
  std::vector<Binding> bindings;
  // Counts the policy's changes; the wire etag encodes it (EtagOf).
  int64_t revision = 0;
  bool operator==(const Policy&) const = default;
};

// Google's limit: at most 1,500 members in all the bindings of one policy.
inline constexpr int kMaxPolicyMembers = 1500;

// The etag of a policy at `revision`: base64 of the revision, 8 bytes.
std::string EtagOf(int64_t revision);

// Checks a policy sent with setIamPolicy for a resource of `kind`, and puts
// its members in canonical form: known roles grantable on that kind, member
// syntax, no role twice, no member twice in a binding, no empty binding, at
// most kMaxPolicyMembers members, version 0, 1 or 3. INVALID_ARGUMENT naming
// the first problem found otherwise.
absl::Status NormalizePolicy(ResourceKind kind, Policy* policy);

// Whether some binding of `policy` gives `member` (or allAuthenticatedUsers)
// a role that grants `permission`.
bool PolicyGrants(const Policy& policy, const std::string& member, absl::string_view permission);

// The bindings of `after` that `before` lacks, as (role, member) pairs.
std::vector<std::pair<std::string, std::string>> AddedGrants(const Policy& before, const Policy& after);

// The resource kind's name in messages ("project", "job", "service account").
absl::string_view ResourceKindName(ResourceKind kind);

}  // namespace mle::iam
