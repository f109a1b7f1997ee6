// The pure part of IAM as tables: which role grants which permission (every
// method's permission x every role), how policies are checked, who may grant
// what, and the authorization decision along a resource's chain.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "iam/authorize.h"
#include "iam/policy.h"
#include "iam/principal.h"
#include "iam/roles.h"
#include "iam/tokens.h"

namespace mle::iam {
namespace {

// Every permission an API method checks, and the roles that must hold it.
// A role not listed must not.
struct Row {
  const char* permission;
  std::set<std::string> roles;
};

const std::set<std::string> kBasic = {"roles/owner", "roles/editor", "roles/viewer"};
std::set<std::string> With(std::set<std::string> a, std::initializer_list<std::string> b) {
  a.insert(b.begin(), b.end());
  return a;
}

const std::vector<Row> kTable = {
    // ml v1
    {perm::kProjectsGetConfig,
     With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer", "roles/ml.serviceAgent"})},
    {perm::kJobsCreate, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kJobsGet, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer", "roles/ml.serviceAgent"})},
    {perm::kJobsList, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer", "roles/ml.serviceAgent"})},
    {perm::kJobsCancel, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kJobsUpdate, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kJobsGetIamPolicy, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kJobsSetIamPolicy, {"roles/owner", "roles/ml.admin"}},
    // ml v1: the study API, locations and their operations go with the jobs
    {perm::kStudiesGet, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kStudiesList, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kTrialsGet, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kTrialsList, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kLocationsGet, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kLocationsList, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kOperationsGet, With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer"})},
    {perm::kStudiesCreate, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kStudiesDelete, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kTrialsCreate, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kTrialsUpdate, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kTrialsDelete, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    {perm::kOperationsCancel, {"roles/owner", "roles/editor", "roles/ml.admin", "roles/ml.developer"}},
    // Vertex AI (aiplatform v1)
    {perm::kCustomJobsCreate, {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kCustomJobsGet, With(kBasic, {"roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kCustomJobsList,
     With(kBasic, {"roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kCustomJobsCancel, {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kCustomJobsDelete, {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kHyperparameterTuningJobsCreate,
     {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kHyperparameterTuningJobsGet,
     With(kBasic, {"roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kHyperparameterTuningJobsList,
     With(kBasic, {"roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kHyperparameterTuningJobsCancel,
     {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kHyperparameterTuningJobsDelete,
     {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kVertexOperationsList,
     With(kBasic, {"roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kVertexOperationsCancel, {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    {perm::kVertexOperationsDelete, {"roles/owner", "roles/editor", "roles/aiplatform.admin", "roles/aiplatform.user"}},
    // cloudresourcemanager v1
    {perm::kProjectsGet,
     With(kBasic, {"roles/ml.admin", "roles/ml.developer", "roles/ml.viewer", "roles/ml.serviceAgent",
                   "roles/aiplatform.admin", "roles/aiplatform.user", "roles/aiplatform.viewer"})},
    {perm::kProjectsGetIamPolicy, kBasic},
    {perm::kProjectsSetIamPolicy, {"roles/owner"}},
    // iam v1, iamcredentials v1
    {perm::kServiceAccountsCreate, {"roles/owner", "roles/editor"}},
    {perm::kServiceAccountsGet,
     With(kBasic, {"roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountUser"})},
    {perm::kServiceAccountsList, With(kBasic, {"roles/iam.serviceAccountUser"})},
    {perm::kServiceAccountsDelete, {"roles/owner", "roles/editor"}},
    {perm::kServiceAccountsActAs, {"roles/owner", "roles/editor", "roles/iam.serviceAccountUser"}},
    {perm::kServiceAccountsGetAccessToken, {"roles/owner", "roles/iam.serviceAccountTokenCreator"}},
    {perm::kServiceAccountsGetIamPolicy, kBasic},
    {perm::kServiceAccountsSetIamPolicy, {"roles/owner"}},
    // serviceusage v1beta1
    {perm::kServicesEnable, {"roles/owner", "roles/editor"}},
    // storage
    {perm::kBucketsCreate, {"roles/owner", "roles/editor", "roles/storage.admin"}},
    {perm::kBucketsGet, With(kBasic, {"roles/storage.admin", "roles/ml.serviceAgent"})},
    {perm::kBucketsList, With(kBasic, {"roles/storage.admin"})},
    {perm::kObjectsCreate,
     {"roles/owner", "roles/editor", "roles/storage.admin", "roles/storage.objectAdmin", "roles/ml.serviceAgent"}},
    {perm::kObjectsGet, With(kBasic, {"roles/storage.admin", "roles/storage.objectAdmin", "roles/storage.objectViewer",
                                      "roles/ml.serviceAgent"})},
    {perm::kObjectsList, With(kBasic, {"roles/storage.admin", "roles/storage.objectAdmin",
                                       "roles/storage.objectViewer", "roles/ml.serviceAgent"})},
    {perm::kObjectsDelete, {"roles/owner", "roles/editor", "roles/storage.admin", "roles/storage.objectAdmin"}},
    {perm::kObjectsUpdate, {"roles/owner", "roles/editor", "roles/storage.admin", "roles/storage.objectAdmin"}},
    {perm::kBucketsDelete, {"roles/owner", "roles/editor", "roles/storage.admin"}},
    // the audit log
    {perm::kAuditLogList, {"roles/owner"}},
    {perm::kWebhooksList, {"roles/owner"}},
    {perm::kWebhooksUpdate, {"roles/owner"}},
};

TEST(RolesTest, EveryMethodsPermissionIsHeldByExactlyTheRolesOfTheTable) {
  for (const Row& row : kTable) {
    for (const Role& role : Roles()) {
      const bool want = row.roles.count(role.name) > 0;
      EXPECT_EQ(RoleGrants(role.name, row.permission), want) << role.name << " / " << row.permission;
    }
  }
}

TEST(RolesTest, EveryGrantedPermissionIsOneAMethodChecks) {
  std::set<std::string> checked;
  for (const Row& row : kTable) checked.insert(row.permission);
  for (const auto& p : KnownPermissions()) EXPECT_TRUE(checked.count(p)) << p << " is granted but no row checks it";
  EXPECT_FALSE(RoleGrants("roles/no.such", perm::kJobsGet));
}

TEST(AuthorizeTest, EveryRoleAllowsAndDeniesAlongTheChain) {
  const Principal alice = Principal::User("alice@example.com");
  for (const Row& row : kTable) {
    for (const Role& role : Roles()) {
      Policy project;
      project.bindings = {{role.name, {"user:alice@example.com"}}};
      const absl::Status s = Authorize(alice, row.permission, "projects/p", {&project});
      if (row.roles.count(role.name)) {
        EXPECT_TRUE(s.ok()) << role.name << " / " << row.permission << ": " << s;
      } else {
        EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << role.name << " / " << row.permission;
        // Google's sentence, then every role that grants it (the table's).
        std::vector<std::string> granting;
        for (const Role& r : Roles()) {
          if (row.roles.count(r.name)) granting.push_back(r.name);
        }
        EXPECT_EQ(s.message().substr(0, s.message().find(" An owner")),
                  absl::StrCat("Permission '", row.permission, "' denied on resource 'projects/p' (or it may not exist).",
                               granting.empty() ? "" : absl::StrCat(" Roles that grant it: ", absl::StrJoin(granting, ", "),
                                                                     ".")));
        auto info = common::GetPermissionInfo(s);
        ASSERT_TRUE(info.has_value());
        EXPECT_EQ(info->permission, row.permission);
        EXPECT_EQ(info->resource, "projects/p");
      }
    }
  }
}

TEST(AuthorizeTest, APolicyLowerInTheChainAddsAndNoPolicyDenies) {
  const Principal bob = Principal::User("bob@example.com");
  Policy job;
  job.bindings = {{"roles/ml.viewer", {"user:bob@example.com"}}};
  Policy project;
  project.bindings = {{"roles/ml.developer", {"user:carol@example.com"}}};
  EXPECT_TRUE(Authorize(bob, perm::kJobsGet, "projects/p/jobs/j", {&job, &project}).ok());
  EXPECT_FALSE(Authorize(bob, perm::kJobsCancel, "projects/p/jobs/j", {&job, &project}).ok());
  EXPECT_FALSE(Authorize(bob, perm::kJobsGet, "projects/p/jobs/other", {&project}).ok());
  EXPECT_FALSE(Authorize(bob, perm::kJobsGet, "projects/q", {}).ok());
  EXPECT_TRUE(Authorize(Principal::Operator(), perm::kProjectsSetIamPolicy, "projects/q", {}).ok());
  Policy everyone;
  everyone.bindings = {{"roles/viewer", {kAllAuthenticatedUsers}}};
  EXPECT_TRUE(Authorize(bob, perm::kJobsList, "projects/q", {&everyone}).ok());
  EXPECT_EQ(HeldPermissions(bob, {perm::kJobsList, perm::kJobsCreate, perm::kJobsGet}, {&everyone}),
            (std::vector<std::string>{perm::kJobsList, perm::kJobsGet}));
}

struct PolicyCase {
  const char* name;
  ResourceKind kind;
  Policy policy;
  std::string error;  // empty: accepted
};

TEST(PolicyTest, NormalizeRefusesWhatIsMalformed) {
  std::vector<std::string> many;
  for (int i = 0; i <= kMaxPolicyMembers; ++i) many.push_back(absl::StrCat("user:u", i, "@example.com"));
  const std::vector<PolicyCase> cases = {
      {"ok", ResourceKind::kProject, {1, {{"roles/viewer", {"user:Alice@Example.com"}}}}, ""},
      {"unknown role", ResourceKind::kProject, {1, {{"roles/superuser", {"user:a@example.com"}}}},
       "Role (roles/superuser) does not exist."},
      {"not grantable here", ResourceKind::kJob, {1, {{"roles/storage.admin", {"user:a@example.com"}}}},
       "Role roles/storage.admin is not supported for this resource: it cannot be granted on a job."},
      {"role twice", ResourceKind::kProject,
       {1, {{"roles/viewer", {"user:a@example.com"}}, {"roles/viewer", {"user:b@example.com"}}}},
       "Role roles/viewer appears in two bindings"},
      {"member twice", ResourceKind::kProject, {1, {{"roles/viewer", {"user:a@example.com", "user:A@example.com"}}}},
       "Member user:a@example.com appears twice"},
      {"no members", ResourceKind::kProject, {1, {{"roles/viewer", {}}}}, "has no members"},
      {"bad member type", ResourceKind::kProject, {1, {{"roles/viewer", {"group:g@example.com"}}}},
       "is of type \"group\""},
      {"bad email", ResourceKind::kProject, {1, {{"roles/viewer", {"user:not-an-email"}}}},
       "does not name a valid email address"},
      {"no prefix", ResourceKind::kProject, {1, {{"roles/viewer", {"alice@example.com"}}}}, "is not of the form"},
      {"allUsers", ResourceKind::kProject, {1, {{"roles/viewer", {"allUsers"}}}}, "allUsers cannot be granted"},
      {"version 2", ResourceKind::kProject, {2, {}}, "Policy version 2 is not valid"},
      {"too many members", ResourceKind::kProject, {1, {{"roles/viewer", many}}}, "may have at most 1500"},
  };
  for (const auto& c : cases) {
    Policy p = c.policy;
    const absl::Status s = NormalizePolicy(c.kind, &p);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_NE(std::string(s.message()).find(c.error), std::string::npos) << c.name << ": " << s.message();
    }
  }
  Policy p{1, {{"roles/viewer", {"user:Alice@Example.com"}}}};
  ASSERT_TRUE(NormalizePolicy(ResourceKind::kProject, &p).ok());
  EXPECT_EQ(p.bindings[0].members[0], "user:alice@example.com");
}

TEST(EscalationTest, NoOneGrantsMoreThanTheyHold) {
  const Principal dev = Principal::User("dev@example.com");
  const Principal admin = Principal::User("admin@example.com");
  Policy project{1, {{"roles/ml.developer", {"user:dev@example.com"}}, {"roles/ml.admin", {"user:admin@example.com"}}}};
  Policy job_before;
  Policy job_after{1, {{"roles/owner", {"user:dev@example.com"}}}};
  // ml.admin may set a job's policy, but not grant owner there: it lacks owner's permissions.
  absl::Status s = CheckNoEscalation(admin, job_before, job_after, "projects/p/jobs/j", {&job_before, &project});
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(std::string(s.message()).find("cannot grant roles/owner"), std::string::npos) << s;
  Policy job_viewer{1, {{"roles/ml.viewer", {"user:dev@example.com"}}}};
  EXPECT_TRUE(CheckNoEscalation(admin, job_before, job_viewer, "projects/p/jobs/j", {&job_before, &project}).ok());
  // A developer granting itself ml.admin on a job: it lacks ml.jobs.setIamPolicy.
  Policy dev_admin{1, {{"roles/ml.admin", {"user:dev@example.com"}}}};
  EXPECT_FALSE(CheckNoEscalation(dev, job_before, dev_admin, "projects/p/jobs/j", {&job_before, &project}).ok());
  // Removing grants is never an escalation; the operator may grant anything.
  EXPECT_TRUE(CheckNoEscalation(dev, job_after, job_before, "projects/p/jobs/j", {}).ok());
  EXPECT_TRUE(CheckNoEscalation(Principal::Operator(), job_before, job_after, "projects/p/jobs/j", {}).ok());
}

TEST(TokensTest, AreRandomAndStoredAsHashes) {
  const std::string a = NewToken(), b = NewToken();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("mle1.", 0), 0u);
  EXPECT_EQ(a.size(), 5u + 43u);
  EXPECT_EQ(TokenHash(a).size(), 64u);
  EXPECT_NE(TokenHash(a), TokenHash(b));
  EXPECT_TRUE(SameHash(TokenHash(a), TokenHash(a)));
  EXPECT_FALSE(SameHash(TokenHash(a), TokenHash(b)));
  EXPECT_FALSE(SameHash("abc", "abcd"));
  EXPECT_EQ(EtagOf(0), "AAAAAAAAAAA=");
  EXPECT_NE(EtagOf(1), EtagOf(2));
}

}  // namespace
}  // namespace mle::iam
