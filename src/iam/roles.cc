#include "iam/roles.h"

#include <algorithm>
#include <set>

namespace mle::iam {
namespace {

using namespace perm;  // NOLINT: the tables below read as lists of permissions

std::vector<std::string> Union(std::initializer_list<std::vector<std::string>> parts) {
  std::set<std::string> all;
  for (const auto& p : parts) all.insert(p.begin(), p.end());
  return {all.begin(), all.end()};
}

// Studies, trials, locations and operations go with the jobs: readers read them, writers change them.
const std::vector<std::string> kStudiesRead = {kStudiesGet,   kStudiesList,  kTrialsGet,    kTrialsList,
                                               kLocationsGet, kLocationsList, kOperationsGet};
const std::vector<std::string> kStudiesWrite = {kStudiesCreate, kStudiesDelete, kTrialsCreate,
                                                kTrialsUpdate,  kTrialsDelete,  kOperationsCancel};
const std::vector<std::string> kMlRead =
    Union({{kJobsGet, kJobsList, kJobsGetIamPolicy, kProjectsGetConfig, kProjectsGet}, kStudiesRead});
const std::vector<std::string> kMlWrite = Union({{kJobsCreate, kJobsCancel, kJobsUpdate}, kStudiesWrite});
const std::vector<std::string> kVertexRead = {kCustomJobsGet,
                                              kCustomJobsList,
                                              kHyperparameterTuningJobsGet,
                                              kHyperparameterTuningJobsList,
                                              kVertexOperationsList,
                                              kProjectsGet};
const std::vector<std::string> kVertexWrite = {kCustomJobsCreate,
                                               kCustomJobsCancel,
                                               kCustomJobsDelete,
                                               kHyperparameterTuningJobsCreate,
                                               kHyperparameterTuningJobsCancel,
                                               kHyperparameterTuningJobsDelete,
                                               kVertexOperationsCancel,
                                               kVertexOperationsDelete};
const std::vector<std::string> kStorageObjectsRead = {kObjectsGet, kObjectsList};
const std::vector<std::string> kStorageObjectsWrite = {kObjectsCreate, kObjectsDelete, kObjectsUpdate};
const std::vector<std::string> kStorageBuckets = {kBucketsCreate, kBucketsDelete, kBucketsGet, kBucketsList};

const std::vector<std::string> kViewer = Union({kMlRead,
                                                kVertexRead,
                                                kStorageObjectsRead,
                                                {kBucketsGet, kBucketsList, kProjectsGetIamPolicy,
                                                 kServiceAccountsGet, kServiceAccountsList,
                                                 kServiceAccountsGetIamPolicy}});
const std::vector<std::string> kEditor =
    Union({kViewer, kMlWrite, kVertexWrite, kStorageObjectsWrite, kStorageBuckets,
           {kServiceAccountsCreate, kServiceAccountsDelete, kServiceAccountsActAs, kServicesEnable}});
const std::vector<std::string> kOwner =
    Union({kEditor,
           {kJobsSetIamPolicy, kProjectsSetIamPolicy, kServiceAccountsSetIamPolicy, kServiceAccountsGetAccessToken,
            kAuditLogList, kWebhooksList, kWebhooksUpdate}});

constexpr auto kProject = ResourceKind::kProject;
constexpr auto kJob = ResourceKind::kJob;
constexpr auto kAccount = ResourceKind::kServiceAccount;

std::vector<Role> BuildRoles() {
  return {
      {"roles/owner", "Owner", kOwner, {kProject, kJob, kAccount}},
      {"roles/editor", "Editor", kEditor, {kProject, kJob, kAccount}},
      {"roles/viewer", "Viewer", kViewer, {kProject, kJob, kAccount}},
      {"roles/ml.admin", "AI Platform Admin", Union({kMlRead, kMlWrite, {kJobsSetIamPolicy}}), {kProject, kJob}},
      {"roles/ml.developer", "AI Platform Developer", Union({kMlRead, kMlWrite}), {kProject, kJob}},
      {"roles/ml.viewer", "AI Platform Viewer", kMlRead, {kProject, kJob}},
      {"roles/aiplatform.admin", "Vertex AI Administrator", Union({kVertexRead, kVertexWrite}), {kProject, kJob}},
      {"roles/aiplatform.user", "Vertex AI User", Union({kVertexRead, kVertexWrite}), {kProject, kJob}},
      {"roles/aiplatform.viewer", "Vertex AI Viewer", kVertexRead, {kProject, kJob}},
      // What the project's TPU service account needs to act for it.
      {kServiceAgentRole, "Cloud ML Service Agent",
       Union({{kJobsGet, kJobsList, kProjectsGetConfig, kProjectsGet, kBucketsGet}, kStorageObjectsRead,
              {kObjectsCreate}}),
       {kProject}},
      {"roles/iam.serviceAccountTokenCreator", "Service Account Token Creator",
       {kServiceAccountsGet, kServiceAccountsGetAccessToken},
       {kProject, kAccount}},
      {"roles/iam.serviceAccountUser", "Service Account User",
       {kServiceAccountsActAs, kServiceAccountsGet, kServiceAccountsList},
       {kProject, kAccount}},
      {"roles/storage.admin", "Storage Admin", Union({kStorageBuckets, kStorageObjectsRead, kStorageObjectsWrite}),
       {kProject}},
      {"roles/storage.objectAdmin", "Storage Object Admin", Union({kStorageObjectsRead, kStorageObjectsWrite}),
       {kProject}},
      {"roles/storage.objectViewer", "Storage Object Viewer", kStorageObjectsRead, {kProject}},
  };
}

}  // namespace

const std::vector<Role>& Roles() {
  static const auto* roles = [] {
    auto* built = new std::vector<Role>(BuildRoles());
    for (Role& r : *built) std::sort(r.permissions.begin(), r.permissions.end());  // RoleGrants searches
    return built;
  }();
  return *roles;
}

const Role* FindRole(absl::string_view name) {
  for (const Role& r : Roles()) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

bool RoleGrants(absl::string_view role, absl::string_view permission) {
  const Role* r = FindRole(role);
  return r != nullptr && std::binary_search(r->permissions.begin(), r->permissions.end(), permission);
}

const std::vector<std::string>& KnownPermissions() {
  static const auto* all = [] {
    std::set<std::string> s;
    for (const Role& r : Roles()) s.insert(r.permissions.begin(), r.permissions.end());
    return new std::vector<std::string>(s.begin(), s.end());
  }();
  return *all;
}

bool IsKnownPermission(absl::string_view permission) {
  const auto& all = KnownPermissions();
  return std::binary_search(all.begin(), all.end(), permission);
}

}  // namespace mle::iam
