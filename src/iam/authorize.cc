#include "iam/authorize.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace mle::iam {
bool Grants(const Principal& who, absl::string_view permission, const PolicyChain& chain) {
  if (who.IsOperator()) return true;
  const std::string member = who.Member();
  for (const Policy* p : chain) {
    if (p != nullptr && PolicyGrants(*p, member, permission)) return true;
  }
  return false;
}

absl::Status Authorize(const Principal& who, absl::string_view permission, absl::string_view resource,
                       const PolicyChain& chain) {
  if (Grants(who, permission, chain)) return absl::OkStatus();
  return PermissionDenied(permission, resource, who.Member());
}

absl::Status PermissionDenied(absl::string_view permission, absl::string_view resource, absl::string_view member) {
  // Google's sentence first (scripts match it), then what would grant it.
  std::string message =
      absl::StrCat("Permission '", permission, "' denied on resource '", resource, "' (or it may not exist).");
  std::vector<std::string> roles;
  for (const Role& r : Roles()) {
    if (RoleGrants(r.name, permission)) roles.push_back(r.name);
  }
  if (!roles.empty()) {
    absl::StrAppend(&message, " Roles that grant it: ", absl::StrJoin(roles, ", "),
                    ". An owner of the project grants one with `mlengine projects add-iam-policy-binding PROJECT "
                    "--member=", member, " --role=ROLE` (docs/access.md).");
  }
  return common::PermissionDeniedWithInfo(message, {std::string(permission), std::string(resource)});
}

std::vector<std::string> HeldPermissions(const Principal& who, const std::vector<std::string>& permissions,
                                         const PolicyChain& chain) {
  std::vector<std::string> held;
  for (const auto& p : permissions) {
    if (Grants(who, p, chain)) held.push_back(p);
  }
  return held;
}

absl::Status CheckNoEscalation(const Principal& who, const Policy& before, const Policy& after,
                               absl::string_view resource, const PolicyChain& chain) {
  if (who.IsOperator()) return absl::OkStatus();
  for (const auto& [role, member] : AddedGrants(before, after)) {
    const Role* r = FindRole(role);
    if (r == nullptr) continue;  // NormalizePolicy refused it already
    for (const auto& p : r->permissions) {
      if (Grants(who, p, chain)) continue;
      return absl::PermissionDeniedError(absl::StrCat(
          who.Member(), " cannot grant ", role, " to ", member, " on '", resource, "': the role includes '", p,
          "', which the caller does not hold there. Only a principal holding every permission of a role may grant "
          "it."));
    }
  }
  return absl::OkStatus();
}

std::string ProjectResource(absl::string_view project) { return absl::StrCat("projects/", project); }
std::string JobResource(absl::string_view project, absl::string_view job) {
  return absl::StrCat("projects/", project, "/jobs/", job);
}
std::string ServiceAccountResource(absl::string_view project, absl::string_view email) {
  return absl::StrCat("projects/", project, "/serviceAccounts/", email);
}
std::string BucketResource(absl::string_view bucket) { return absl::StrCat("projects/_/buckets/", bucket); }

std::string DefaultAccountEmail(int64_t project_number) {
  return absl::StrCat("service-", project_number, kDefaultAccountDomain);
}
std::string TpuAccountEmail(int64_t project_number) {
  return absl::StrCat("service-", project_number, kTpuAccountDomain);
}
std::string JobTokenPurpose(const std::string& project, const std::string& job_id) {
  return absl::StrCat("job:", project, "/", job_id);
}

std::string Resource::Name() const {
  switch (kind) {
    case ResourceKind::kProject:
      return ProjectResource(project);
    case ResourceKind::kJob:
      return JobResource(project, id);
    case ResourceKind::kServiceAccount:
      return ServiceAccountResource(project, id);
    case ResourceKind::kBucket:
      return BucketResource(id);
  }
  return "";
}


}  // namespace mle::iam
