#include "iam/policy.h"

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "iam/principal.h"

namespace mle::iam {

std::string EtagOf(int64_t revision) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i) {
    bytes[i] = static_cast<char>(revision & 0xff);
    revision >>= 8;
  }
  return absl::Base64Escape(bytes);
}

absl::string_view ResourceKindName(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kProject:
      return "project";
    case ResourceKind::kJob:
      return "job";
    case ResourceKind::kServiceAccount:
      return "service account";
    case ResourceKind::kBucket:
      return "bucket";
  }
  return "resource";
}

absl::Status NormalizePolicy(ResourceKind kind, Policy* policy) {
  if (policy->version != 0 && policy->version != 1 && policy->version != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("Policy version ", policy->version, " is not valid: use 1 (0 and 3 are accepted as 1)."));
  }
  policy->version = 1;  // no conditions: every policy is a version-1 policy
  std::set<std::string> roles;
  int members = 0;
  for (Binding& b : policy->bindings) {
    const Role* role = FindRole(b.role);
    if (role == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Role (", b.role, ") does not exist. mlengine's roles are listed in docs/operations.md (Users, roles and "
          "quotas)."));
    }
    if (std::find(role->grantable_on.begin(), role->grantable_on.end(), kind) == role->grantable_on.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Role ", b.role, " is not supported for this resource: it cannot be granted on a ",
                       ResourceKindName(kind), "."));
    }
    if (!roles.insert(b.role).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Role ", b.role, " appears in two bindings: put all of its members in one binding."));
    }
    if (b.members.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("The binding of ", b.role, " has no members."));
    }
    std::set<std::string> seen;
    for (std::string& m : b.members) {
      auto canonical = CanonicalMember(m);
      if (!canonical.ok()) return canonical.status();
      if (!seen.insert(*canonical).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("Member ", *canonical, " appears twice in the binding of ", b.role, "."));
      }
      m = *std::move(canonical);
    }
    members += static_cast<int>(b.members.size());
  }
  if (members > kMaxPolicyMembers) {
    return absl::InvalidArgumentError(absl::StrCat("The policy has ", members, " members; a policy may have at most ",
                                                   kMaxPolicyMembers, "."));
  }
  return absl::OkStatus();
}

bool PolicyGrants(const Policy& policy, const std::string& member, absl::string_view permission) {
  for (const Binding& b : policy.bindings) {
    if (!RoleGrants(b.role, permission)) continue;
    for (const std::string& m : b.members) {
      if (m == member || m == kAllAuthenticatedUsers) return true;
    }
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> AddedGrants(const Policy& before, const Policy& after) {
  std::set<std::pair<std::string, std::string>> had;
  for (const Binding& b : before.bindings) {
    for (const auto& m : b.members) had.insert({b.role, m});
  }
  std::vector<std::pair<std::string, std::string>> added;
  for (const Binding& b : after.bindings) {
    for (const auto& m : b.members) {
      if (!had.count({b.role, m})) added.push_back({b.role, m});
    }
  }
  return added;
}

}  // namespace mle::iam
