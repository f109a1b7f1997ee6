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
#include "api/field_mask.h"
#include "api/http_util.h"
#include "api/route_table.h"
#include "codec/discovery.h"
#include "codec/job_codec.h"
#include "common/status.h"

namespace mle::api {
namespace {

using nlohmann::json;

// Query parameters every Google API accepts (discovery "parameters").
constexpr absl::string_view kStandardParams[] = {
    "$.xgafv", "access_token", "alt", "callback", "fields", "key", "oauth_token",
    "prettyPrint", "quotaUser", "uploadType", "upload_protocol"};

// One request to an ml v1 route.
struct Call {
  std::string method;
  RequestPath path;  // decoded segments (from "v1" on) and the custom verb
  PathVars vars;     // the route's variables: project, job
  std::multimap<std::string, std::string> query;
  std::string body;
  bool pretty = true;

  std::string Param(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? "" : it->second;
  }
  const std::string& Var(absl::string_view name) const { return vars.find(name)->second; }
};

constexpr PathSyntax kMlPathSyntax{.custom_verbs = true, .ignore_empty_segments = true};

absl::StatusOr<Call> ParseCall(const HttpRequest& req) {
  Call call;
  call.method = req.method;
  auto target = ParseTarget(req.target);
  if (!target.ok()) return target.status();
  call.query = std::move(target->query);
  auto path = SplitRequestPath(target->raw_path, kMlPathSyntax);
  if (!path.ok()) return path.status();
  call.path = *std::move(path);
  call.body = req.body;
  return call;
}

absl::Status CheckQuery(const Call& call, std::initializer_list<absl::string_view> method_params) {
  std::vector<common::FieldViolation> violations;
  for (const auto& [k, v] : call.query) {
    bool known = std::find(std::begin(kStandardParams), std::end(kStandardParams), k) != std::end(kStandardParams) ||
                 std::find(method_params.begin(), method_params.end(), k) != method_params.end();
    if (!known) {
      violations.push_back({k, absl::StrCat("Unknown query parameter \"", k, "\": it cannot be bound for this method")});
    }
  }
  const std::string alt = call.Param("alt");
  if (!alt.empty() && alt != "json") violations.push_back({"alt", "only alt=json is supported"});
  const std::string xgafv = call.Param("$.xgafv");
  if (!xgafv.empty() && xgafv != "1" && xgafv != "2") violations.push_back({"$.xgafv", "must be 1 or 2"});
  const std::string pretty = call.Param("prettyPrint");
  if (!pretty.empty() && pretty != "true" && pretty != "false") {
    violations.push_back({"prettyPrint", "must be true or false"});
  }
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid query parameters.", violations);
  return absl::OkStatus();
}

HttpResponse Render(const json& value, bool pretty, int status = 200) { return RenderJson(value, pretty, status); }

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

HttpResponse Fail(const absl::Status& s, bool pretty) { return RenderError(s, pretty); }

// ---- the routes' handlers: each checks its query, body and calls the service ----

void GetConfig(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.jobs.GetConfig(call.Var("project"), [respond, pretty](absl::StatusOr<model::Project> p) {
    if (!p.ok()) return respond(RenderError(p.status(), pretty));
    respond(Render(codec::EncodeGetConfigResponse(*p), pretty));
  });
}

void CreateJob(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  codec::DecodedJob decoded = codec::DecodeJob(*body);
  s.jobs.CreateJob(
      call.Var("project"), std::move(decoded.job),
      [respond, pretty](absl::StatusOr<model::Job> j) {
        if (!j.ok()) return respond(RenderError(j.status(), pretty));
        respond(Render(codec::EncodeJob(*j), pretty));
      },
      std::move(decoded.violations));
}

void ListJobs(const ApiRouter::Services& s, const Call& call, Responder respond) {
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

// mlengine's log endpoint (stock gcloud reads Cloud Logging instead); see
// docs/runtime-contract.md.
void ReadLogs(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"pageToken", "taskName", "waitSeconds"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  service::LogRequest request;
  request.page_token = call.Param("pageToken");
  request.task_name = call.Param("taskName");
  if (const std::string w = call.Param("waitSeconds"); !w.empty()) {
    int seconds = 0;
    if (!absl::SimpleAtoi(w, &seconds) || seconds < 0 || seconds > 30) {
      return respond(Fail(BadParam("waitSeconds", "must be a whole number of seconds from 0 to 30"), pretty));
    }
    request.wait = absl::Seconds(seconds);
  }
  s.logs.Read(call.Var("project"), call.Var("job"), std::move(request),
              [respond, pretty](absl::StatusOr<service::LogResult> r) {
                if (!r.ok()) return respond(RenderError(r.status(), pretty));
                json entries = json::array();
                for (const auto& e : r->page.entries) {
                  entries.push_back({{"timestamp", e.timestamp},
                                     {"taskName", e.task_name},
                                     {"stream", e.is_stderr ? "stderr" : "stdout"},
                                     {"severity", e.is_stderr ? "ERROR" : "INFO"},
                                     {"message", e.message}});
                }
                json out = {{"entries", entries}, {"nextPageToken", r->page.next_page_token}};
                if (r->job_ended) out["jobEnded"] = true;
                respond(Render(out, pretty));
              });
}

void CancelJob(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, true);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (auto v = codec::DiscoverySchema::Embedded().Check(*body, "GoogleCloudMlV1__CancelJobRequest"); !v.empty()) {
    return respond(Fail(common::InvalidArgumentWithViolations("Invalid JSON payload received.", v), pretty));
  }
  s.jobs.CancelJob(call.Var("project"), call.Var("job"), [respond, pretty](absl::Status st) {
    if (!st.ok()) return respond(RenderError(st, pretty));
    respond(Render(json::object(), pretty));
  });
}

// jobs.getIamPolicy, setIamPolicy, testIamPermissions (any HTTP method).
void IamNotOffered(const ApiRouter::Services&, const Call& call, Responder respond) {
  respond(Fail(absl::UnimplementedError(absl::StrCat("jobs.", call.path.verb,
                                                     " is not offered by mlengine yet: access is controlled by the "
                                                     "server's tokens.")),
               call.pretty));
}

void GetJob(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = s.jobs.GetJob(call.Var("project"), call.Var("job"));
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  respond(Render(codec::EncodeJob(*job), pretty));
}

void PatchJob(const ApiRouter::Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"updateMask"}); !st.ok()) return respond(Fail(st, pretty));
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

using Handler = void (*)(const ApiRouter::Services&, const Call&, Responder);

// Every ml v1 route mlengine serves (names: the discovery document's method ids).
const RouteTable<Handler>& Routes() {
  static const auto* routes = new RouteTable<Handler>(
      kMlPathSyntax,
      {
          {"GET", "v1/projects/{project}:getConfig", "ml.projects.getConfig", &GetConfig},
          {"POST", "v1/projects/{project}/jobs", "ml.projects.jobs.create", &CreateJob},
          {"GET", "v1/projects/{project}/jobs", "ml.projects.jobs.list", &ListJobs},
          {"GET", "v1/projects/{project}/jobs/{job}/logs", "mlengine.projects.jobs.logs", &ReadLogs},
          {"POST", "v1/projects/{project}/jobs/{job}:cancel", "ml.projects.jobs.cancel", &CancelJob},
          {"*", "v1/projects/{project}/jobs/{job}:getIamPolicy", "ml.projects.jobs.getIamPolicy", &IamNotOffered},
          {"*", "v1/projects/{project}/jobs/{job}:setIamPolicy", "ml.projects.jobs.setIamPolicy", &IamNotOffered},
          {"*", "v1/projects/{project}/jobs/{job}:testIamPermissions", "ml.projects.jobs.testIamPermissions",
           &IamNotOffered},
          {"GET", "v1/projects/{project}/jobs/{job}", "ml.projects.jobs.get", &GetJob},
          {"PATCH", "v1/projects/{project}/jobs/{job}", "ml.projects.jobs.patch", &PatchJob},
      });
  return *routes;
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
        json body = json::parse(r.body, nullptr, false);
        if (!body.is_discarded()) r = Render(mask.Apply(body), pretty);
      }
      respond(std::move(r));
    };
  }

  if (auto s = auth_.Check(request.authorization, call->Param("access_token")); !s.ok()) {
    return respond(Fail(s, pretty));
  }

  // Every route is under v1/projects/{project}: a malformed project id is
  // named as such, whatever follows it.
  const auto& seg = call->path.segments;
  if (seg.size() >= 3 && seg[0] == "v1" && seg[1] == "projects" && !ValidProjectId(seg[2])) {
    return respond(Fail(common::InvalidArgumentWithViolations(
                            "Invalid resource name.",
                            {{"name", "the project id must be 1-100 characters of letters, digits, '-', '_', '.' "
                                      "or ':' (as in projects/my-project)"}}),
                        pretty));
  }
  if (found.route == nullptr) return respond(Fail(NoRoute(*call), pretty));
  call->vars = std::move(found.vars);
  found.route->handler(services_, *call, std::move(respond));
}

}  // namespace mle::api
