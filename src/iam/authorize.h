// The one authorization decision: may this principal use this permission on
// this resource, given the policies that apply to it (the resource's own and
// its project's; a policy lower in the hierarchy only adds)? Pure functions of
// their arguments; thread-safe. IamService gathers the policies; the API
// layer asks before it calls a service.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "iam/identity.h"
#include "iam/policy.h"
#include "iam/principal.h"

namespace mle::iam {

// The policies on the way from a resource up to its project (either may be
// absent: nobody set one).
using PolicyChain = std::vector<const Policy*>;

// Whether some policy of `chain` grants `permission` to `who` (the operator
// holds every permission).
bool Grants(const Principal& who, absl::string_view permission, const PolicyChain& chain);

// OK when some policy of `chain` grants `permission` to `who` (the operator
// holds every permission); PERMISSION_DENIED in Google's words otherwise:
// "Permission 'ml.jobs.get' denied on resource 'projects/p/jobs/j' (or it
// may not exist)." The same answer whether or not the resource exists, so a
// caller without access learns nothing.
absl::Status Authorize(const Principal& who, absl::string_view permission, absl::string_view resource,
                       const PolicyChain& chain);
// That refusal: Google's sentence, then the roles that grant the permission
// and how an owner grants one to `member` (the caller refused: "user:EMAIL",
// "serviceAccount:EMAIL"); with a google.rpc.ErrorInfo (reason
// IAM_PERMISSION_DENIED, the permission, the resource).
absl::Status PermissionDenied(absl::string_view permission, absl::string_view resource,
                              absl::string_view member = "user:EMAIL");

// The subset of `permissions` that `chain` grants `who`, in their order
// (testIamPermissions).
std::vector<std::string> HeldPermissions(const Principal& who, const std::vector<std::string>& permissions,
                                         const PolicyChain& chain);

// No one grants more than they hold: every permission of every role that
// `after` adds to `before` must be held by `who` on the resource now
// (`chain`). PERMISSION_DENIED naming the role and the first permission the
// caller lacks. The operator may grant anything.
absl::Status CheckNoEscalation(const Principal& who, const Policy& before, const Policy& after,
                               absl::string_view resource, const PolicyChain& chain);

// Resource names, as Google spells them in messages and policies.
std::string ProjectResource(absl::string_view project);
std::string JobResource(absl::string_view project, absl::string_view job);
std::string ServiceAccountResource(absl::string_view project, absl::string_view email);
std::string BucketResource(absl::string_view bucket);

}  // namespace mle::iam
