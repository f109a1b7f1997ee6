// Roles as data: each predefined role of AI Platform's world mlengine
// offers, with its permissions, and the resource types it may be granted on.
// A permission is "service.resource.verb" (ml.jobs.create); every API
// method checks exactly one (see the route tables in api/).
// Immutable tables; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mle::iam {

// The kinds of resource permissions are checked on. Policies attach to
// projects, jobs and service accounts; a bucket follows its project's.
enum class ResourceKind { kProject, kJob, kServiceAccount, kBucket };

namespace perm {
inline constexpr char kJobsCreate[] = "ml.jobs.create";
inline constexpr char kJobsGet[] = "ml.jobs.get";
inline constexpr char kJobsList[] = "ml.jobs.list";
inline constexpr char kJobsCancel[] = "ml.jobs.cancel";
inline constexpr char kJobsUpdate[] = "ml.jobs.update";
inline constexpr char kJobsGetIamPolicy[] = "ml.jobs.getIamPolicy";
inline constexpr char kJobsSetIamPolicy[] = "ml.jobs.setIamPolicy";
inline constexpr char kProjectsGetConfig[] = "ml.projects.getConfig";
// The study API (Vizier), projects.locations and their operations.
inline constexpr char kStudiesCreate[] = "ml.studies.create";
inline constexpr char kStudiesGet[] = "ml.studies.get";
inline constexpr char kStudiesList[] = "ml.studies.list";
inline constexpr char kStudiesDelete[] = "ml.studies.delete";
inline constexpr char kTrialsCreate[] = "ml.trials.create";
inline constexpr char kTrialsGet[] = "ml.trials.get";
inline constexpr char kTrialsList[] = "ml.trials.list";
inline constexpr char kTrialsUpdate[] = "ml.trials.update";
inline constexpr char kTrialsDelete[] = "ml.trials.delete";
inline constexpr char kLocationsGet[] = "ml.locations.get";
inline constexpr char kLocationsList[] = "ml.locations.list";
inline constexpr char kOperationsGet[] = "ml.operations.get";
inline constexpr char kOperationsCancel[] = "ml.operations.cancel";

// Vertex AI's (aiplatform v1): its custom jobs and tuning jobs.
inline constexpr char kCustomJobsCreate[] = "aiplatform.customJobs.create";
inline constexpr char kCustomJobsGet[] = "aiplatform.customJobs.get";
inline constexpr char kCustomJobsList[] = "aiplatform.customJobs.list";
inline constexpr char kCustomJobsCancel[] = "aiplatform.customJobs.cancel";
inline constexpr char kCustomJobsDelete[] = "aiplatform.customJobs.delete";
inline constexpr char kHyperparameterTuningJobsCreate[] = "aiplatform.hyperparameterTuningJobs.create";
inline constexpr char kHyperparameterTuningJobsGet[] = "aiplatform.hyperparameterTuningJobs.get";
inline constexpr char kHyperparameterTuningJobsList[] = "aiplatform.hyperparameterTuningJobs.list";
inline constexpr char kHyperparameterTuningJobsCancel[] = "aiplatform.hyperparameterTuningJobs.cancel";
inline constexpr char kHyperparameterTuningJobsDelete[] = "aiplatform.hyperparameterTuningJobs.delete";
// Its long-running operations (a job's deletion): read with list, as
// Vertex's roles do; cancelled and deleted with mlengine's own two.
inline constexpr char kVertexOperationsList[] = "aiplatform.operations.list";
inline constexpr char kVertexOperationsCancel[] = "aiplatform.operations.cancel";
inline constexpr char kVertexOperationsDelete[] = "aiplatform.operations.delete";

inline constexpr char kProjectsGet[] = "resourcemanager.projects.get";
inline constexpr char kProjectsGetIamPolicy[] = "resourcemanager.projects.getIamPolicy";
inline constexpr char kProjectsSetIamPolicy[] = "resourcemanager.projects.setIamPolicy";

inline constexpr char kServiceAccountsCreate[] = "iam.serviceAccounts.create";
inline constexpr char kServiceAccountsGet[] = "iam.serviceAccounts.get";
inline constexpr char kServiceAccountsList[] = "iam.serviceAccounts.list";
inline constexpr char kServiceAccountsDelete[] = "iam.serviceAccounts.delete";
inline constexpr char kServiceAccountsActAs[] = "iam.serviceAccounts.actAs";
inline constexpr char kServiceAccountsGetAccessToken[] = "iam.serviceAccounts.getAccessToken";
inline constexpr char kServiceAccountsGetIamPolicy[] = "iam.serviceAccounts.getIamPolicy";
inline constexpr char kServiceAccountsSetIamPolicy[] = "iam.serviceAccounts.setIamPolicy";

inline constexpr char kServicesEnable[] = "serviceusage.services.enable";

inline constexpr char kBucketsCreate[] = "storage.buckets.create";
inline constexpr char kBucketsGet[] = "storage.buckets.get";
inline constexpr char kBucketsList[] = "storage.buckets.list";
inline constexpr char kBucketsDelete[] = "storage.buckets.delete";
inline constexpr char kObjectsCreate[] = "storage.objects.create";
inline constexpr char kObjectsGet[] = "storage.objects.get";
inline constexpr char kObjectsList[] = "storage.objects.list";
inline constexpr char kObjectsDelete[] = "storage.objects.delete";
inline constexpr char kObjectsUpdate[] = "storage.objects.update";

// Reading the project's audit log (Google keeps it as private log entries).
inline constexpr char kAuditLogList[] = "logging.privateLogEntries.list";
// A project's webhooks (mlengine's own; its owners').
inline constexpr char kWebhooksList[] = "mlengine.webhooks.list";
inline constexpr char kWebhooksUpdate[] = "mlengine.webhooks.update";
}  // namespace perm

struct Role {
  std::string name;   // "roles/ml.developer"
  std::string title;  // "AI Platform Developer"
  std::vector<std::string> permissions;
  // Where it may be granted (a project always; some on jobs or accounts too).
  std::vector<ResourceKind> grantable_on;
};

// Every role mlengine offers, in a stable order.
const std::vector<Role>& Roles();
// The role named `name`, or null.
const Role* FindRole(absl::string_view name);
// Whether the role grants the permission (false for an unknown role).
bool RoleGrants(absl::string_view role, absl::string_view permission);
// Every permission some role grants (what testIamPermissions may ask about).
const std::vector<std::string>& KnownPermissions();
bool IsKnownPermission(absl::string_view permission);

// The role the project's TPU service account needs (the guide's step 3).
inline constexpr char kServiceAgentRole[] = "roles/ml.serviceAgent";

}  // namespace mle::iam
