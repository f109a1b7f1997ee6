// What the handlers of the Google-style APIs on mlengined's main route table
// share: one request (Call), the services they call, and the helpers that
// check query parameters and render results. Internal to api/.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "api/access.h"
#include "api/http_server.h"
#include "api/route_table.h"
#include "codec/discovery.h"
#include "iam/iam_service.h"
#include "service/backup_service.h"
#include "service/cluster_view.h"
#include "service/disk_watch.h"
#include "service/job_runs.h"
#include "service/job_service.h"
#include "service/log_service.h"
#include "service/operation_log.h"
#include "service/quota_service.h"
#include "service/study_service.h"
#include "service/webhook_service.h"

namespace mle::api {

// One request to a route.
struct Call {
  std::string method;
  RequestPath path;  // decoded segments (from "v1" on) and the custom verb
  PathVars vars;     // the route's variables: project, job, account, ...
  std::multimap<std::string, std::string> query;
  std::string body;
  bool pretty = true;
  iam::Principal caller;
  bool authenticated = false;  // caller is who the token says
  std::string authorization;   // the Authorization header it came with (to authenticate it again)
  iam::Resource resource;      // what the path names (its project canonical: an id, not a number)
  std::shared_ptr<PendingAudit> audit;  // an audited route's line; null otherwise
  // `$alt=json;enum-encoding=int` (alt's other spelling, as
  // @google-cloud/aiplatform's REST mode sends it): enums travel as their
  // proto numbers, in the request's body and the response's. alt reads
  // "json" then.
  bool enum_numbers = false;

  std::string Param(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? "" : it->second;
  }
  const std::string& Var(absl::string_view name) const { return vars.find(name)->second; }
};

// What the routes' handlers call.
struct Services {
  service::JobService& jobs;
  service::LogService& logs;
  iam::IamService& iam;
  service::QuotaService& quotas;
  service::StudyService& studies;
  service::OperationLog& operations;
  const service::JobRuns& runs;
  const service::ClusterService& cluster;
  service::BackupService* backups = nullptr;  // none: this server takes no backups
  service::WebhookService* webhooks = nullptr;  // none: this server has no webhooks
  const service::DiskWatch* disk = nullptr;      // none: not watched
};

using HandlerFn = void (*)(const Services&, const Call&, Responder);

// Unknown query parameters are refused, never ignored; so is an `alt`
// other than json, or than one of `alts` where a method serves others.
absl::Status CheckQuery(const Call& call, std::initializer_list<absl::string_view> method_params,
                        std::initializer_list<absl::string_view> alts = {"json"});

// A request whose body has no fields (a cancel's, a stop's): its query
// checked (no parameters of its own) and its body, empty or `{}`, against
// `schema` of `document`. INVALID_ARGUMENT with each violation otherwise.
absl::Status CheckEmptyBody(const Call& call, const codec::DiscoverySchema& document, absl::string_view schema);
// Answers `{}` once `st` is OK, the error otherwise.
std::function<void(absl::Status)> ReplyEmpty(Responder respond, bool pretty);

HttpResponse Render(const nlohmann::json& value, bool pretty, int status = 200);
// The permission that reads a job, by the API that made it: ml.jobs.get,
// or Vertex AI's aiplatform.customJobs.get or hyperparameterTuningJobs.get
// (their users may hold only theirs). A job that does not exist is ml v1's:
// whoever may read jobs learns it is NOT_FOUND.
const char* JobReadPermission(const service::JobService& jobs, const std::string& project, const std::string& job);
// An audited create's line of the audit log, to go in the created thing's
// own commit (one disk flush answers the call); none when the call is not
// audited. The handler sets call.audit->written once that commit is done.
std::vector<db::Mutation> AuditLineOf(const Services& s, const Call& call);
HttpResponse Fail(const absl::Status& s, bool pretty);

// The handlers of the identity APIs (iam_routes.cc), named by their
// discovery method ids.
namespace iam_routes {
void GetProject(const Services&, const Call&, Responder);            // cloudresourcemanager.projects.get
void ListProjects(const Services&, const Call&, Responder);          // ...projects.list (those the caller may get)
void GetProjectPolicy(const Services&, const Call&, Responder);      // ...projects.getIamPolicy
void SetProjectPolicy(const Services&, const Call&, Responder);      // ...projects.setIamPolicy
void TestProjectPermissions(const Services&, const Call&, Responder);
void GetJobPolicy(const Services&, const Call&, Responder);          // ml.projects.jobs.getIamPolicy
void SetJobPolicy(const Services&, const Call&, Responder);
void TestJobPermissions(const Services&, const Call&, Responder);
void CreateAccount(const Services&, const Call&, Responder);         // iam.projects.serviceAccounts.create
void ListAccounts(const Services&, const Call&, Responder);
void GetAccount(const Services&, const Call&, Responder);
void DeleteAccount(const Services&, const Call&, Responder);
void GetAccountPolicy(const Services&, const Call&, Responder);
void SetAccountPolicy(const Services&, const Call&, Responder);
void TestAccountPermissions(const Services&, const Call&, Responder);
void GenerateAccessToken(const Services&, const Call&, Responder);   // iamcredentials
void GenerateServiceIdentity(const Services&, const Call&, Responder);  // serviceusage v1beta1
// The operator's admin API and the audit log (mlengine's own).
void ListUsers(const Services&, const Call&, Responder);
void CreateUser(const Services&, const Call&, Responder);
void DeleteUser(const Services&, const Call&, Responder);
void GenerateUserToken(const Services&, const Call&, Responder);
void ReadAuditLog(const Services&, const Call&, Responder);
void GetQuotas(const Services&, const Call&, Responder);
void SetQuotas(const Services&, const Call&, Responder);
void CreateBackup(const Services&, const Call&, Responder);  // mlengine.backups.create (operator)
void ReportUsage(const Services&, const Call&, Responder);   // mlengine.usage.get (operator)
void ResetQuotas(const Services&, const Call&, Responder);
void GetProjectQuotas(const Services&, const Call&, Responder);  // a project's own, for its members
void WhoAmI(const Services&, const Call&, Responder);            // the caller's principal (mlengine.whoami)
void ServerStatus(const Services&, const Call&, Responder);      // mlengine.status.get: a full disk, say
}  // namespace iam_routes

// A project's webhooks (webhook_routes.cc; docs/notifications.md).
namespace webhook_routes {
void CreateWebhook(const Services&, const Call&, Responder);  // mlengine.projects.webhooks.create
void ListWebhooks(const Services&, const Call&, Responder);
void GetWebhook(const Services&, const Call&, Responder);
void DeleteWebhook(const Services&, const Call&, Responder);
}  // namespace webhook_routes

// The read-only views the web console needs beyond the ml API
// (console_routes.cc): mlengine's own methods.
namespace console_routes {
void JobReplicas(const Services&, const Call&, Responder);  // mlengine.projects.jobs.replicas
void JobMetrics(const Services&, const Call&, Responder);   // mlengine.projects.jobs.metrics
void JobWaiting(const Services&, const Call&, Responder);   // mlengine.projects.jobs.waiting
void GetCluster(const Services&, const Call&, Responder);   // mlengine.cluster.get
}  // namespace console_routes

// The handlers of the study API and projects.locations (study_routes.cc),
// named by their discovery method ids (ml.projects.locations...).
namespace study_routes {
void GetLocation(const Services&, const Call&, Responder);    // ml.projects.locations.get
void ListLocations(const Services&, const Call&, Responder);  // ...locations.list
void CreateStudy(const Services&, const Call&, Responder);    // ...locations.studies.create
void GetStudy(const Services&, const Call&, Responder);
void ListStudies(const Services&, const Call&, Responder);
void DeleteStudy(const Services&, const Call&, Responder);
void CreateTrial(const Services&, const Call&, Responder);  // ...studies.trials.create
void GetTrial(const Services&, const Call&, Responder);
void ListTrials(const Services&, const Call&, Responder);
void DeleteTrial(const Services&, const Call&, Responder);
void AddMeasurement(const Services&, const Call&, Responder);
void CompleteTrial(const Services&, const Call&, Responder);
void StopTrial(const Services&, const Call&, Responder);
void SuggestTrials(const Services&, const Call&, Responder);
void CheckEarlyStoppingState(const Services&, const Call&, Responder);
void ListOptimalTrials(const Services&, const Call&, Responder);
void GetOperation(const Services&, const Call&, Responder);  // ...locations.operations.get
void CancelOperation(const Services&, const Call&, Responder);
}  // namespace study_routes

// Vertex AI's aiplatform v1 custom jobs, tuning jobs and operations
// (vertex_routes.cc), named by their discovery method ids
// (aiplatform.projects.locations.customJobs..., ...hyperparameterTuningJobs...).
namespace vertex_routes {
void CreateCustomJob(const Services&, const Call&, Responder);
void ListCustomJobs(const Services&, const Call&, Responder);
void GetCustomJob(const Services&, const Call&, Responder);
void CancelCustomJob(const Services&, const Call&, Responder);
void DeleteCustomJob(const Services&, const Call&, Responder);  // a long-running Operation, done at once
void CreateTuningJob(const Services&, const Call&, Responder);
void ListTuningJobs(const Services&, const Call&, Responder);
void GetTuningJob(const Services&, const Call&, Responder);
void CancelTuningJob(const Services&, const Call&, Responder);
void DeleteTuningJob(const Services&, const Call&, Responder);
// ...locations.operations: get and cancel answer for Vertex's operations
// and, by the same path, ml v1's study operations (each with its own
// permission: the route is Access::kSelf); list, delete and wait are
// Vertex's. Also served under /ui/, where @google-cloud/aiplatform polls.
void GetOperation(const Services&, const Call&, Responder);
void CancelOperation(const Services&, const Call&, Responder);
void ListOperations(const Services&, const Call&, Responder);
void DeleteOperation(const Services&, const Call&, Responder);
void WaitOperation(const Services&, const Call&, Responder);
// The same under a job (customJobs.operations, hyperparameterTuningJobs.
// operations: those on that job); list, delete and wait are the above.
void GetJobOperation(const Services&, const Call&, Responder);
void CancelJobOperation(const Services&, const Call&, Responder);
}  // namespace vertex_routes

}  // namespace mle::api
