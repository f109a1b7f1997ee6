#include "api/api_router.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "api/api_call.h"
#include "api/field_mask.h"
#include "api/http_util.h"
#include "api/route_table.h"
#include "codec/discovery.h"
#include "codec/job_codec.h"
#include "common/status.h"
#include "iam/roles.h"
#include "obs/log.h"

namespace mle::api {
namespace {

using nlohmann::json;

// Query parameters every Google API accepts (discovery "parameters").
constexpr absl::string_view kStandardParams[] = {
    "$.xgafv", "access_token", "alt", "callback", "fields", "key", "oauth_token",
    "prettyPrint", "quotaUser", "uploadType", "upload_protocol"};

constexpr PathSyntax kMlPathSyntax{.custom_verbs = true, .ignore_empty_segments = true};

absl::StatusOr<Call> ParseCall(const HttpRequest& req) {
  Call call;
  call.method = req.method;
  auto target = ParseTarget(req.target);
  if (!target.ok()) return target.status();
  call.query = std::move(target->query);
  // `$alt` is alt's other spelling (Google's system parameters); its
  // `json;enum-encoding=int` is JSON with enums as numbers.
  if (auto it = call.query.find("$alt"); it != call.query.end()) {
    std::string alt = it->second;
    call.query.erase(it);
    if (!call.query.count("alt")) call.query.emplace("alt", std::move(alt));
  }
  if (auto it = call.query.find("alt"); it != call.query.end() && it->second == "json;enum-encoding=int") {
    it->second = "json";
    call.enum_numbers = true;
  }
  auto path = SplitRequestPath(target->raw_path, kMlPathSyntax);
  if (!path.ok()) return path.status();
  call.path = *std::move(path);
  call.body = req.body;
  return call;
}

}  // namespace

absl::Status CheckQuery(const Call& call, std::initializer_list<absl::string_view> method_params,
                        std::initializer_list<absl::string_view> alts) {
  std::vector<common::FieldViolation> violations;
  for (const auto& [k, v] : call.query) {
    bool known = std::find(std::begin(kStandardParams), std::end(kStandardParams), k) != std::end(kStandardParams) ||
                 std::find(method_params.begin(), method_params.end(), k) != method_params.end();
    if (!known) {
      violations.push_back({k, absl::StrCat("Unknown query parameter \"", k, "\": it cannot be bound for this method")});
    }
  }
  const std::string alt = call.Param("alt");
  if (!alt.empty() && std::find(alts.begin(), alts.end(), alt) == alts.end()) {
    violations.push_back({"alt", alts.size() == 1 ? std::string("only alt=json is supported")
                                                  : absl::StrCat("must be one of: ", absl::StrJoin(alts, ", "))});
  }
  const std::string xgafv = call.Param("$.xgafv");
  if (!xgafv.empty() && xgafv != "1" && xgafv != "2") violations.push_back({"$.xgafv", "must be 1 or 2"});
  const std::string pretty = call.Param("prettyPrint");
  if (!pretty.empty() && pretty != "true" && pretty != "false") {
    violations.push_back({"prettyPrint", "must be true or false"});
  }
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid query parameters.", violations);
  return absl::OkStatus();
}

absl::Status CheckEmptyBody(const Call& call, const codec::DiscoverySchema& document, absl::string_view schema) {
  if (auto st = CheckQuery(call, {}); !st.ok()) return st;
  auto body = ParseJsonBody(call.body, /*allow_empty=*/true);
  if (!body.ok()) return body.status();
  std::vector<common::FieldViolation> violations =
      body->is_object()
          ? document.Check(*body, schema)
          : std::vector<common::FieldViolation>{
                {"(body)", absl::StrCat("the request body must be a JSON object (", schema, ")")}};
  if (violations.empty()) return absl::OkStatus();
  return common::InvalidArgumentWithViolations("Invalid JSON payload received.", violations);
}

std::function<void(absl::Status)> ReplyEmpty(Responder respond, bool pretty) {
  return [respond = std::move(respond), pretty](absl::Status st) {
    if (!st.ok()) return respond(RenderError(st, pretty));
    respond(RenderJson(json::object(), pretty));
  };
}

HttpResponse Render(const json& value, bool pretty, int status) { return RenderJson(value, pretty, status); }
HttpResponse Fail(const absl::Status& s, bool pretty) { return RenderError(s, pretty); }

namespace {

absl::Status NoRoute(const Call& call) {
  return absl::NotFoundError(absl::StrCat("The requested URL ", call.method, " /",
                                          absl::StrJoin(call.path.segments, "/"), call.path.verb.empty() ? "" : ":",
                                          call.path.verb,
                                          " was not found on this server. See the ml v1 discovery document for the "
                                          "routes mlengine serves."));
}

bool ValidProjectId(const std::string& id) {
  if (id.empty() || id.size() > 100) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != ':') return false;
  }
  return true;
}

// ---- the routes' handlers: each checks its query, body and calls the service ----

}  // namespace

const char* JobReadPermission(const service::JobService& jobs, const std::string& project, const std::string& job) {
  using JobApi = service::JobService::JobApi;
  switch (jobs.ApiOf(project, job)) {
    case JobApi::kCustomJob:
      return iam::perm::kCustomJobsGet;
    case JobApi::kTuningJob:
      return iam::perm::kHyperparameterTuningJobsGet;
    case JobApi::kNone:
    case JobApi::kMl:
      break;
  }
  return iam::perm::kJobsGet;
}

std::vector<db::Mutation> AuditLineOf(const Services& s, const Call& call) {
  if (call.audit == nullptr) return {};
  db::AuditRecord record = call.audit->record;
  record.outcome = "OK";
  return {s.iam.AuditWrite(std::move(record))};
}

namespace {

void GetConfig(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.jobs.GetConfig(call.Var("project"), [respond, pretty](absl::StatusOr<model::Project> p) {
    if (!p.ok()) return respond(RenderError(p.status(), pretty));
    respond(Render(codec::EncodeGetConfigResponse(*p), pretty));
  });
}

void CreateJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"validateOnly"}); !st.ok()) return respond(Fail(st, pretty));
  // validateOnly=true (mlengine's, as Google's newer APIs have it): every
  // check a create makes, nothing stored; the CLI asks before it builds
  // and uploads a package for a job that would be refused.
  const std::string validate = call.Param("validateOnly");
  if (!validate.empty() && validate != "true" && validate != "false") {
    return respond(Fail(BadParam("validateOnly", "must be true or false"), pretty));
  }
  const bool validate_only = validate == "true";
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  codec::DecodedJob decoded = codec::DecodeJob(*body);
  std::vector<db::Mutation> audit_line = validate_only ? std::vector<db::Mutation>{} : AuditLineOf(s, call);
  s.jobs.CreateJob(
      call.Var("project"), std::move(decoded.job),
      [respond, pretty, audit = call.audit](absl::StatusOr<model::Job> j) {
        if (!j.ok()) return respond(RenderError(j.status(), pretty));
        if (audit != nullptr) audit->written = true;
        // Answered on the store's callback thread: encoded where it is written.
        respond(RenderJsonDeferred([job = *std::move(j)] { return codec::EncodeJob(job); }, pretty));
      },
      std::move(decoded.violations), call.caller, std::move(audit_line), validate_only);
}

void ListJobs(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"filter", "pageSize", "pageToken"}); !st.ok()) return respond(Fail(st, pretty));
  service::ListJobsRequest list;
  list.filter = call.Param("filter");
  list.page_token = call.Param("pageToken");
  if (const std::string size = call.Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &list.page_size)) {
    return respond(Fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")), pretty));
  }
  auto result = s.jobs.ListJobs(call.Var("project"), list);
  if (!result.ok()) return respond(Fail(result.status(), pretty));
  respond(Render(codec::EncodeListJobsResponse(result->jobs, result->next_page_token), pretty));
}

// A page of a job's log as the logs endpoint answers it.
json LogPageJson(const service::LogResult& r) {
  json entries = json::array();
  for (const auto& e : r.page.entries) {
    json entry = {{"timestamp", e.timestamp},
                  {"taskName", e.task_name},
                  {"stream", e.is_stderr ? "stderr" : "stdout"},
                  {"severity", e.is_stderr ? "ERROR" : "INFO"},
                  {"message", e.message}};
    if (!e.trial_id.empty()) entry["trialId"] = e.trial_id;
    entries.push_back(std::move(entry));
  }
  json out = {{"entries", std::move(entries)}, {"nextPageToken", r.page.next_page_token}};
  if (r.job_ended) out["jobEnded"] = true;
  return out;
}

// One server-sent event: "data: JSON" (on one line) and a blank line;
// `event` names it where it is not a page.
std::string SseEvent(const json& data, const std::string& event = "") {
  std::string out = event.empty() ? "" : absl::StrCat("event: ", event, "\n");
  absl::StrAppend(&out, "data: ", data.dump(-1, ' ', false, json::error_handler_t::replace), "\n\n");
  return out;
}

// A follower of a job's log over a streamed response (alt=sse): each page
// one event, encoded once for every follower at the same place.
// Its caller's access is checked again before a page when the last check
// is kRecheck old: a token revoked, or a role taken away, ends the stream
// with that error at the next page (a quiet stream gets one every
// LogService::kHeartbeat).
class SseLogFollower : public service::LogFollower {
 public:
  using Check = std::function<absl::Status()>;
  static constexpr absl::Duration kRecheck = absl::Seconds(5);
  SseLogFollower(std::shared_ptr<BodyStream> stream, Check still_allowed)
      : stream_(std::move(stream)), still_allowed_(std::move(still_allowed)), checked_(absl::Now()) {}
  bool Ready() const override { return stream_->idle(); }
  bool Gone() const override { return stream_->closed(); }
  // Called for one follower at a time (LogService), so checked_ needs no lock.
  void Send(std::shared_ptr<const service::SharedPage> page) override {
    if (const absl::Time now = absl::Now(); now - checked_ >= kRecheck) {
      checked_ = now;
      if (absl::Status st = still_allowed_(); !st.ok()) return End(st);
    }
    stream_->Write(page->Encoded("sse", [](const service::LogResult& r) { return SseEvent(LogPageJson(r)); }));
  }
  void End(absl::Status status) override {
    if (!status.ok()) stream_->Write(std::make_shared<const std::string>(SseEvent(codec::EncodeError(status), "error")));
    stream_->End();
  }

 private:
  const std::shared_ptr<BodyStream> stream_;
  const Check still_allowed_;
  absl::Time checked_;
};

// mlengine's log endpoint (stock gcloud reads Cloud Logging instead); see
// docs/runtime-contract.md. alt=sse follows the log in one streamed response.
void ReadLogs(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  // The route checked JobReadPermission (Access::kJobRead); a stream checks it again.
  const char* permission = JobReadPermission(s.jobs, call.Var("project"), call.Var("job"));
  if (auto st = CheckQuery(call, {"pageToken", "taskName", "trialId", "waitSeconds"}, {"json", "sse"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  service::LogRequest request;
  request.page_token = call.Param("pageToken");
  request.task_name = call.Param("taskName");
  request.trial_id = call.Param("trialId");
  if (const std::string w = call.Param("waitSeconds"); !w.empty()) {
    int seconds = 0;
    if (!absl::SimpleAtoi(w, &seconds) || seconds < 0 || seconds > 30) {
      return respond(Fail(BadParam("waitSeconds", "must be a whole number of seconds from 0 to 30"), pretty));
    }
    request.wait = absl::Seconds(seconds);
  }
  if (call.Param("alt") == "sse") {
    auto stream = std::make_shared<BodyStream>();
    // The caller as the route's check saw it, checked again as the stream
    // goes on (IamService outlives the followers; the router does not).
    SseLogFollower::Check still_allowed = [&iam = s.iam, authorization = call.authorization,
                                           access_token = call.Param("access_token"), resource = call.resource,
                                           permission] {
      const AccessGate gate(iam);
      auto who = gate.Authenticate(authorization, access_token);
      if (!who.ok()) return who.status();
      return gate.Check(*who, permission, resource);
    };
    auto st = s.logs.Follow(call.Var("project"), call.Var("job"), std::move(request),
                            std::make_shared<SseLogFollower>(stream, std::move(still_allowed)));
    if (!st.ok()) return respond(Fail(st, pretty));
    HttpResponse response;
    response.content_type = "text/event-stream; charset=UTF-8";
    response.stream = std::move(stream);
    return respond(std::move(response));
  }
  s.logs.Read(call.Var("project"), call.Var("job"), std::move(request),
              [respond, pretty](absl::StatusOr<service::LogResult> r) {
                if (!r.ok()) return respond(RenderError(r.status(), pretty));
                respond(Render(LogPageJson(*r), pretty));
              });
}

// A job of Vertex AI's API is not one of ml v1's: NOT_FOUND, as for no job.
absl::Status MlJobOnly(const Services& s, const Call& call) {
  using JobApi = service::JobService::JobApi;
  if (const JobApi api = s.jobs.ApiOf(call.Var("project"), call.Var("job"));
      api == JobApi::kCustomJob || api == JobApi::kTuningJob) {
    return absl::NotFoundError(
        absl::StrCat("Job projects/", call.Var("project"), "/jobs/", call.Var("job"), " not found."));
  }
  return absl::OkStatus();
}

void CancelJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckEmptyBody(call, codec::DiscoverySchema::Embedded(), "GoogleCloudMlV1__CancelJobRequest");
      !st.ok()) {
    return respond(Fail(st, pretty));
  }
  if (auto st = MlJobOnly(s, call); !st.ok()) return respond(Fail(st, pretty));
  s.jobs.CancelJob(call.Var("project"), call.Var("job"), ReplyEmpty(std::move(respond), pretty), call.caller);
}

void GetJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (auto st = MlJobOnly(s, call); !st.ok()) return respond(Fail(st, pretty));
  auto job = s.jobs.GetJob(call.Var("project"), call.Var("job"));
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  respond(Render(codec::EncodeJob(*job), pretty));
}

void PatchJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"updateMask"}); !st.ok()) return respond(Fail(st, pretty));
  if (auto st = MlJobOnly(s, call); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto job = codec::DecodeJobRequest(*body);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  service::PatchJobRequest patch;
  for (auto path : absl::StrSplit(call.Param("updateMask"), ',', absl::SkipWhitespace())) {
    patch.update_mask.push_back(std::string(absl::StripAsciiWhitespace(path)));
  }
  patch.labels = job->labels;
  if (body->contains("etag") && (*body)["etag"].is_string()) patch.etag = (*body)["etag"].get<std::string>();
  s.jobs.PatchJob(call.Var("project"), call.Var("job"), std::move(patch),
                  [respond, pretty](absl::StatusOr<model::Job> j) {
                    if (!j.ok()) return respond(RenderError(j.status(), pretty));
                    respond(Render(codec::EncodeJob(*j), pretty));
                  });
}

// What a route checks before its handler runs: a permission on the
// resource its path names (Call::resource: the deepest of project, job and
// service account), every authenticated caller (e.g. testIamPermissions),
// the operator alone, the permission that reads the job the path names,
// whichever API made it (kJobRead: JobReadPermission), or nothing the gate
// can know (kSelf: the handler decides, e.g. a token's delegation chain).
enum class Access { kPermission, kAnyCaller, kOperator, kJobRead, kSelf };

struct Route {
  HandlerFn handler;
  Access access = Access::kPermission;
  const char* permission = nullptr;  // kPermission
  bool audited = false;              // it changes something: the audit log records each call
};

constexpr bool kAudited = true;
namespace perm = iam::perm;

// Every route of the ml v1, cloudresourcemanager v1, iam v1, iamcredentials
// v1 and serviceusage v1beta1 APIs mlengine serves, and its own admin API
// (names: the discovery documents' method ids).
const RouteTable<Route>& Routes() {
  using namespace iam_routes;  // NOLINT: the handlers of the identity APIs
  static const auto* routes = new RouteTable<Route>(
      kMlPathSyntax,
      {
          // ml v1
          {"GET", "v1/projects/{project}:getConfig", "ml.projects.getConfig",
           {&GetConfig, Access::kPermission, perm::kProjectsGetConfig}},
          {"POST", "v1/projects/{project}/jobs", "ml.projects.jobs.create",
           {&CreateJob, Access::kPermission, perm::kJobsCreate, kAudited}},
          {"GET", "v1/projects/{project}/jobs", "ml.projects.jobs.list",
           {&ListJobs, Access::kPermission, perm::kJobsList}},
          {"GET", "v1/projects/{project}/jobs/{job}/logs", "mlengine.projects.jobs.logs",
           {&ReadLogs, Access::kJobRead}},
          {"GET", "v1/projects/{project}/jobs/{job}/replicas", "mlengine.projects.jobs.replicas",
           {&console_routes::JobReplicas, Access::kJobRead}},
          {"GET", "v1/projects/{project}/jobs/{job}/metrics", "mlengine.projects.jobs.metrics",
           {&console_routes::JobMetrics, Access::kJobRead}},
          {"GET", "v1/projects/{project}/jobs/{job}/waiting", "mlengine.projects.jobs.waiting",
           {&console_routes::JobWaiting, Access::kJobRead}},
          {"POST", "v1/projects/{project}/jobs/{job}:cancel", "ml.projects.jobs.cancel",
           {&CancelJob, Access::kPermission, perm::kJobsCancel, kAudited}},
          {"GET", "v1/projects/{project}/jobs/{job}:getIamPolicy", "ml.projects.jobs.getIamPolicy",
           {&GetJobPolicy, Access::kPermission, perm::kJobsGetIamPolicy}},
          {"POST", "v1/projects/{project}/jobs/{job}:setIamPolicy", "ml.projects.jobs.setIamPolicy",
           {&SetJobPolicy, Access::kPermission, perm::kJobsSetIamPolicy, kAudited}},
          {"POST", "v1/projects/{project}/jobs/{job}:testIamPermissions", "ml.projects.jobs.testIamPermissions",
           {&TestJobPermissions, Access::kAnyCaller}},
          {"GET", "v1/projects/{project}/jobs/{job}", "ml.projects.jobs.get",
           {&GetJob, Access::kPermission, perm::kJobsGet}},
          {"PATCH", "v1/projects/{project}/jobs/{job}", "ml.projects.jobs.patch",
           {&PatchJob, Access::kPermission, perm::kJobsUpdate, kAudited}},
          // ml v1: projects.locations, the study API (Vizier) and its operations
          {"GET", "v1/projects/{project}/locations", "ml.projects.locations.list",
           {&study_routes::ListLocations, Access::kPermission, perm::kLocationsList}},
          {"GET", "v1/projects/{project}/locations/{location}", "ml.projects.locations.get",
           {&study_routes::GetLocation, Access::kPermission, perm::kLocationsGet}},
          // Vertex AI (aiplatform v1): custom jobs
          {"POST", "v1/projects/{project}/locations/{location}/customJobs",
           "aiplatform.projects.locations.customJobs.create",
           {&vertex_routes::CreateCustomJob, Access::kPermission, perm::kCustomJobsCreate, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/customJobs",
           "aiplatform.projects.locations.customJobs.list",
           {&vertex_routes::ListCustomJobs, Access::kPermission, perm::kCustomJobsList}},
          {"POST", "v1/projects/{project}/locations/{location}/customJobs/{job}:cancel",
           "aiplatform.projects.locations.customJobs.cancel",
           {&vertex_routes::CancelCustomJob, Access::kPermission, perm::kCustomJobsCancel, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/customJobs/{job}",
           "aiplatform.projects.locations.customJobs.get",
           {&vertex_routes::GetCustomJob, Access::kPermission, perm::kCustomJobsGet}},
          {"DELETE", "v1/projects/{project}/locations/{location}/customJobs/{job}",
           "aiplatform.projects.locations.customJobs.delete",
           {&vertex_routes::DeleteCustomJob, Access::kPermission, perm::kCustomJobsDelete, kAudited}},
          // Vertex AI (aiplatform v1): hyperparameter tuning jobs
          {"POST", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs",
           "aiplatform.projects.locations.hyperparameterTuningJobs.create",
           {&vertex_routes::CreateTuningJob, Access::kPermission, perm::kHyperparameterTuningJobsCreate, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs",
           "aiplatform.projects.locations.hyperparameterTuningJobs.list",
           {&vertex_routes::ListTuningJobs, Access::kPermission, perm::kHyperparameterTuningJobsList}},
          {"POST", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}:cancel",
           "aiplatform.projects.locations.hyperparameterTuningJobs.cancel",
           {&vertex_routes::CancelTuningJob, Access::kPermission, perm::kHyperparameterTuningJobsCancel, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}",
           "aiplatform.projects.locations.hyperparameterTuningJobs.get",
           {&vertex_routes::GetTuningJob, Access::kPermission, perm::kHyperparameterTuningJobsGet}},
          {"DELETE", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}",
           "aiplatform.projects.locations.hyperparameterTuningJobs.delete",
           {&vertex_routes::DeleteTuningJob, Access::kPermission, perm::kHyperparameterTuningJobsDelete, kAudited}},
          // Operations: get and cancel are ml v1's (study operations) and
          // Vertex's by the same path, each checked with its own permission;
          // list, delete and wait Vertex's. /ui/: where @google-cloud/aiplatform's
          // REST mode polls them.
          {"GET", "v1/projects/{project}/locations/{location}/operations/{operation}",
           "ml.projects.locations.operations.get", {&vertex_routes::GetOperation, Access::kSelf}},
          {"POST", "v1/projects/{project}/locations/{location}/operations/{operation}:cancel",
           "ml.projects.locations.operations.cancel",
           {&vertex_routes::CancelOperation, Access::kSelf, nullptr, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/operations", "aiplatform.projects.locations.operations.list",
           {&vertex_routes::ListOperations, Access::kPermission, perm::kVertexOperationsList}},
          {"DELETE", "v1/projects/{project}/locations/{location}/operations/{operation}", "aiplatform.projects.locations.operations.delete",
           {&vertex_routes::DeleteOperation, Access::kPermission, perm::kVertexOperationsDelete, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/operations/{operation}:wait", "aiplatform.projects.locations.operations.wait",
           {&vertex_routes::WaitOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"GET", "v1/projects/{project}/locations/{location}/customJobs/{job}/operations/{operation}", "aiplatform.projects.locations.customJobs.operations.get",
           {&vertex_routes::GetJobOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"POST", "v1/projects/{project}/locations/{location}/customJobs/{job}/operations/{operation}:cancel", "aiplatform.projects.locations.customJobs.operations.cancel",
           {&vertex_routes::CancelJobOperation, Access::kPermission, perm::kVertexOperationsCancel, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/customJobs/{job}/operations", "aiplatform.projects.locations.customJobs.operations.list",
           {&vertex_routes::ListOperations, Access::kPermission, perm::kVertexOperationsList}},
          {"DELETE", "v1/projects/{project}/locations/{location}/customJobs/{job}/operations/{operation}", "aiplatform.projects.locations.customJobs.operations.delete",
           {&vertex_routes::DeleteOperation, Access::kPermission, perm::kVertexOperationsDelete, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/customJobs/{job}/operations/{operation}:wait", "aiplatform.projects.locations.customJobs.operations.wait",
           {&vertex_routes::WaitOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"GET", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}/operations/{operation}", "aiplatform.projects.locations.hyperparameterTuningJobs.operations.get",
           {&vertex_routes::GetJobOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"POST", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}/operations/{operation}:cancel", "aiplatform.projects.locations.hyperparameterTuningJobs.operations.cancel",
           {&vertex_routes::CancelJobOperation, Access::kPermission, perm::kVertexOperationsCancel, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}/operations", "aiplatform.projects.locations.hyperparameterTuningJobs.operations.list",
           {&vertex_routes::ListOperations, Access::kPermission, perm::kVertexOperationsList}},
          {"DELETE", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}/operations/{operation}", "aiplatform.projects.locations.hyperparameterTuningJobs.operations.delete",
           {&vertex_routes::DeleteOperation, Access::kPermission, perm::kVertexOperationsDelete, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/hyperparameterTuningJobs/{job}/operations/{operation}:wait", "aiplatform.projects.locations.hyperparameterTuningJobs.operations.wait",
           {&vertex_routes::WaitOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"GET", "ui/projects/{project}/locations/{location}/operations/{operation}",
           "aiplatform.ui.projects.locations.operations.get", {&vertex_routes::GetOperation, Access::kSelf}},
          {"POST", "ui/projects/{project}/locations/{location}/operations/{operation}:cancel",
           "aiplatform.ui.projects.locations.operations.cancel",
           {&vertex_routes::CancelOperation, Access::kSelf, nullptr, kAudited}},
          {"GET", "ui/projects/{project}/locations/{location}/operations", "aiplatform.ui.projects.locations.operations.list",
           {&vertex_routes::ListOperations, Access::kPermission, perm::kVertexOperationsList}},
          {"DELETE", "ui/projects/{project}/locations/{location}/operations/{operation}", "aiplatform.ui.projects.locations.operations.delete",
           {&vertex_routes::DeleteOperation, Access::kPermission, perm::kVertexOperationsDelete, kAudited}},
          {"POST", "ui/projects/{project}/locations/{location}/operations/{operation}:wait", "aiplatform.ui.projects.locations.operations.wait",
           {&vertex_routes::WaitOperation, Access::kPermission, perm::kVertexOperationsList}},
          {"POST", "v1/projects/{project}/locations/{location}/studies", "ml.projects.locations.studies.create",
           {&study_routes::CreateStudy, Access::kPermission, perm::kStudiesCreate, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/studies", "ml.projects.locations.studies.list",
           {&study_routes::ListStudies, Access::kPermission, perm::kStudiesList}},
          {"GET", "v1/projects/{project}/locations/{location}/studies/{study}", "ml.projects.locations.studies.get",
           {&study_routes::GetStudy, Access::kPermission, perm::kStudiesGet}},
          {"DELETE", "v1/projects/{project}/locations/{location}/studies/{study}",
           "ml.projects.locations.studies.delete",
           {&study_routes::DeleteStudy, Access::kPermission, perm::kStudiesDelete, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials",
           "ml.projects.locations.studies.trials.create",
           {&study_routes::CreateTrial, Access::kPermission, perm::kTrialsCreate, kAudited}},
          {"GET", "v1/projects/{project}/locations/{location}/studies/{study}/trials",
           "ml.projects.locations.studies.trials.list",
           {&study_routes::ListTrials, Access::kPermission, perm::kTrialsList}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials:suggest",
           "ml.projects.locations.studies.trials.suggest",
           {&study_routes::SuggestTrials, Access::kPermission, perm::kTrialsCreate, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials:listOptimalTrials",
           "ml.projects.locations.studies.trials.listOptimalTrials",
           {&study_routes::ListOptimalTrials, Access::kPermission, perm::kTrialsList}},
          {"GET", "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}",
           "ml.projects.locations.studies.trials.get",
           {&study_routes::GetTrial, Access::kPermission, perm::kTrialsGet}},
          {"DELETE", "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}",
           "ml.projects.locations.studies.trials.delete",
           {&study_routes::DeleteTrial, Access::kPermission, perm::kTrialsDelete, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}:addMeasurement",
           "ml.projects.locations.studies.trials.addMeasurement",
           {&study_routes::AddMeasurement, Access::kPermission, perm::kTrialsUpdate, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}:complete",
           "ml.projects.locations.studies.trials.complete",
           {&study_routes::CompleteTrial, Access::kPermission, perm::kTrialsUpdate, kAudited}},
          {"POST", "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}:stop",
           "ml.projects.locations.studies.trials.stop",
           {&study_routes::StopTrial, Access::kPermission, perm::kTrialsUpdate, kAudited}},
          {"POST",
           "v1/projects/{project}/locations/{location}/studies/{study}/trials/{trial}:checkEarlyStoppingState",
           "ml.projects.locations.studies.trials.checkEarlyStoppingState",
           {&study_routes::CheckEarlyStoppingState, Access::kPermission, perm::kTrialsUpdate, kAudited}},
          // cloudresourcemanager v1 (list: every caller, each sees the projects it may get)
          {"GET", "v1/projects", "cloudresourcemanager.projects.list", {&ListProjects, Access::kAnyCaller}},
          {"GET", "v1/projects/{project}", "cloudresourcemanager.projects.get",
           {&GetProject, Access::kPermission, perm::kProjectsGet}},
          {"POST", "v1/projects/{project}:getIamPolicy", "cloudresourcemanager.projects.getIamPolicy",
           {&GetProjectPolicy, Access::kPermission, perm::kProjectsGetIamPolicy}},
          {"POST", "v1/projects/{project}:setIamPolicy", "cloudresourcemanager.projects.setIamPolicy",
           {&SetProjectPolicy, Access::kPermission, perm::kProjectsSetIamPolicy, kAudited}},
          {"POST", "v1/projects/{project}:testIamPermissions", "cloudresourcemanager.projects.testIamPermissions",
           {&TestProjectPermissions, Access::kAnyCaller}},
          // iam v1 and iamcredentials v1
          {"POST", "v1/projects/{project}/serviceAccounts", "iam.projects.serviceAccounts.create",
           {&CreateAccount, Access::kPermission, perm::kServiceAccountsCreate, kAudited}},
          {"GET", "v1/projects/{project}/serviceAccounts", "iam.projects.serviceAccounts.list",
           {&ListAccounts, Access::kPermission, perm::kServiceAccountsList}},
          {"POST", "v1/projects/{project}/serviceAccounts/{account}:getIamPolicy",
           "iam.projects.serviceAccounts.getIamPolicy",
           {&GetAccountPolicy, Access::kPermission, perm::kServiceAccountsGetIamPolicy}},
          {"POST", "v1/projects/{project}/serviceAccounts/{account}:setIamPolicy",
           "iam.projects.serviceAccounts.setIamPolicy",
           {&SetAccountPolicy, Access::kPermission, perm::kServiceAccountsSetIamPolicy, kAudited}},
          {"POST", "v1/projects/{project}/serviceAccounts/{account}:testIamPermissions",
           "iam.projects.serviceAccounts.testIamPermissions", {&TestAccountPermissions, Access::kAnyCaller}},
          {"POST", "v1/projects/{project}/serviceAccounts/{account}:generateAccessToken",
           "iamcredentials.projects.serviceAccounts.generateAccessToken",
           {&GenerateAccessToken, Access::kSelf, nullptr, kAudited}},
          {"GET", "v1/projects/{project}/serviceAccounts/{account}", "iam.projects.serviceAccounts.get",
           {&GetAccount, Access::kPermission, perm::kServiceAccountsGet}},
          {"DELETE", "v1/projects/{project}/serviceAccounts/{account}", "iam.projects.serviceAccounts.delete",
           {&DeleteAccount, Access::kPermission, perm::kServiceAccountsDelete, kAudited}},
          // serviceusage v1beta1: the TPU guide's service identity
          {"POST", "v1beta1/projects/{project}/services/{service}:generateServiceIdentity",
           "serviceusage.services.generateServiceIdentity",
           {&GenerateServiceIdentity, Access::kPermission, perm::kServicesEnable, kAudited}},
          // mlengine's own: the operator's users and tokens, a project's audit log
          {"GET", "mlengine/v1/users", "mlengine.users.list", {&ListUsers, Access::kOperator}},
          {"POST", "mlengine/v1/users", "mlengine.users.create", {&CreateUser, Access::kOperator, nullptr, kAudited}},
          {"POST", "mlengine/v1/users/{user}:generateToken", "mlengine.users.generateToken",
           {&GenerateUserToken, Access::kOperator, nullptr, kAudited}},
          {"DELETE", "mlengine/v1/users/{user}", "mlengine.users.delete",
           {&DeleteUser, Access::kOperator, nullptr, kAudited}},
          {"GET", "mlengine/v1/projects/{project}/auditLog", "mlengine.projects.auditLog.list",
           {&ReadAuditLog, Access::kPermission, perm::kAuditLogList}},
          {"GET", "mlengine/v1/projects/{project}/quotas", "mlengine.projects.quotas.get",
           {&GetProjectQuotas, Access::kPermission, perm::kProjectsGetConfig}},
          {"GET", "mlengine/v1/whoami", "mlengine.whoami", {&WhoAmI, Access::kAnyCaller}},
          {"GET", "mlengine/v1/status", "mlengine.status.get", {&ServerStatus, Access::kAnyCaller}},
          {"GET", "mlengine/v1/cluster", "mlengine.cluster.get", {&console_routes::GetCluster, Access::kAnyCaller}},
          {"GET", "mlengine/v1/quotas", "mlengine.quotas.get", {&GetQuotas, Access::kOperator}},
          {"PUT", "mlengine/v1/quotas", "mlengine.quotas.set", {&SetQuotas, Access::kOperator, nullptr, kAudited}},
          {"DELETE", "mlengine/v1/quotas", "mlengine.quotas.reset",
           {&ResetQuotas, Access::kOperator, nullptr, kAudited}},
          {"POST", "mlengine/v1/backups", "mlengine.backups.create", {&CreateBackup, Access::kOperator}},
          {"GET", "mlengine/v1/usage", "mlengine.usage.get", {&ReportUsage, Access::kOperator}},
          // mlengine's own: a project's webhooks, its owner's
          {"POST", "mlengine/v1/projects/{project}/webhooks", "mlengine.projects.webhooks.create",
           {&webhook_routes::CreateWebhook, Access::kPermission, perm::kWebhooksUpdate, kAudited}},
          {"GET", "mlengine/v1/projects/{project}/webhooks", "mlengine.projects.webhooks.list",
           {&webhook_routes::ListWebhooks, Access::kPermission, perm::kWebhooksList}},
          {"GET", "mlengine/v1/projects/{project}/webhooks/{webhook}", "mlengine.projects.webhooks.get",
           {&webhook_routes::GetWebhook, Access::kPermission, perm::kWebhooksList}},
          {"DELETE", "mlengine/v1/projects/{project}/webhooks/{webhook}", "mlengine.projects.webhooks.delete",
           {&webhook_routes::DeleteWebhook, Access::kPermission, perm::kWebhooksUpdate, kAudited}},
      });
  return *routes;
}

// A project named by its number (serviceusage's projects/<serviceAccountProject>)
// is the project with that number, when there is one: its id from then on,
// for the gate, the handler and the audit log alike.
void CanonicalizeProject(const Services& s, Call* call) {
  auto it = call->vars.find("project");
  if (it == call->vars.end()) return;
  const std::string& ref = it->second;
  int64_t number = 0;
  if (!ref.empty() && absl::ascii_isdigit(static_cast<unsigned char>(ref[0])) && absl::SimpleAtoi(ref, &number)) {
    if (auto p = s.jobs.FindProjectByNumber(number)) it->second = p->id;
  }
}

// The resource the path names: a service account ("projects/-/serviceAccounts/ID":
// the account's own project and email), a job, or a project.
iam::Resource ResourceOf(const Services& s, const Call& call) {
  const std::string project = call.vars.count("project") ? call.Var("project") : "";
  if (call.vars.count("account")) {
    auto a = s.iam.GetServiceAccount(project, call.Var("account"));
    if (a.ok()) return iam::Resource::Account(a->project, a->email);
    return iam::Resource::Account(project, call.Var("account"));
  }
  if (call.vars.count("job")) return iam::Resource::Job(project, call.Var("job"));
  return iam::Resource::Project(project);
}

// May the caller use the route? PERMISSION_DENIED saying which permission on
// which resource otherwise.
absl::Status CheckAccess(const Services& s, const Route& route, const Call& call) {
  switch (route.access) {
    case Access::kSelf:
    case Access::kAnyCaller:
      return absl::OkStatus();
    case Access::kOperator:
      if (call.caller.IsOperator()) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "Only this mlengine's operator may manage users, their tokens and quotas: ask them.");
    case Access::kJobRead:
      return s.iam.Authorize(call.caller, JobReadPermission(s.jobs, call.Var("project"), call.Var("job")), call.resource);
    case Access::kPermission:
      break;
  }
  return s.iam.Authorize(call.caller, route.permission, call.resource);
}

}  // namespace

std::string ApiRouter::ErrorBody(int http_status, const std::string& status, const std::string& message) {
  json error = {{"error", {{"code", http_status}, {"message", message}, {"status", status}}}};
  return error.dump(2) + "\n";
}

void ApiRouter::Handle(HttpRequest request, Responder respond) const {
  auto parsed = ParseCall(request);
  if (!parsed.ok()) return respond(RenderError(parsed.status(), true));
  auto call = std::make_shared<Call>(*std::move(parsed));
  call->pretty = call->Param("prettyPrint") != "false";
  const bool pretty = call->pretty;
  auto found = Routes().Find(call->method, call->path);
  if (found.route != nullptr) respond = NameResponses(std::move(respond), found.route->name);

  // Partial responses (`fields`): applied to successful replies only.
  if (const std::string fields = call->Param("fields"); !fields.empty()) {
    auto mask = FieldMask::Parse(fields);
    if (!mask.ok()) return respond(Fail(mask.status(), pretty));
    respond = [respond, mask = *std::move(mask), pretty](HttpResponse r) {
      if (r.status == 200) {
        json body = json::parse(r.Body(), nullptr, false);
        if (!body.is_discarded()) r = Render(mask.Apply(body), pretty);
      }
      respond(std::move(r));
    };
  }

  const bool audited = found.route != nullptr && found.route->handler.audited;
  auto audit = [&] {
    db::AuditRecord record;
    record.principal = call->authenticated ? call->caller.Member() : "unauthenticated";
    record.method = found.route->name;
    record.request_id = request.request_id;
    record.resource = absl::StrCat("/", absl::StrJoin(call->path.segments, "/"), call->path.verb.empty() ? "" : ":",
                                   call->path.verb);
    record.project = call->resource.project;
    call->audit = std::make_shared<PendingAudit>();
    call->audit->record = std::move(record);
    respond = RecordInAuditLog(services_.iam, call->audit, std::move(respond));
  };
  auto caller = gate_.Authenticate(request.authorization, call->Param("access_token"));
  if (!caller.ok()) {
    if (audited) audit();
    return respond(Fail(caller.status(), pretty));
  }
  call->caller = *std::move(caller);
  call->authenticated = true;
  call->authorization = request.authorization;

  // Every route is under {v1,v1beta1,mlengine/v1}/projects/{project}, or
  // mlengine/v1/users: a malformed project id is named as such, whatever
  // follows it.
  const auto& seg = call->path.segments;
  const size_t at = !seg.empty() && seg[0] == "mlengine" ? 2 : 1;
  if (seg.size() >= at + 2 && seg[at] == "projects" && !ValidProjectId(seg[at + 1])) {
    return respond(Fail(common::InvalidArgumentWithViolations(
                            "Invalid resource name.",
                            {{"name", "the project id must be 1-100 characters of letters, digits, '-', '_', '.' "
                                      "or ':' (as in projects/my-project)"}}),
                        pretty));
  }
  if (found.route == nullptr) return respond(Fail(NoRoute(*call), pretty));
  call->vars = std::move(found.vars);
  CanonicalizeProject(services_, call.get());
  call->resource = ResourceOf(services_, *call);
  if (audited) audit();
  if (auto st = CheckAccess(services_, found.route->handler, *call); !st.ok()) return respond(Fail(st, pretty));
  found.route->handler.handler(services_, *call, std::move(respond));
}

}  // namespace mle::api
