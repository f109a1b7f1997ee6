// The handlers of the identity APIs: each checks its query and body,
// calls IamService (or JobService for projects) and renders the result.
// Access was checked by the route table's gate before any of them runs.

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/api_call.h"
#include "api/http_util.h"
#include "codec/iam_codec.h"
#include "common/status.h"
#include "common/time_format.h"
#include "iam/roles.h"
#include "service/project_list.h"
#include "service/usage_report.h"

namespace mle::api::iam_routes {
namespace {

using nlohmann::json;

// A request body: `{}` when empty (the clients send none for some POSTs).
absl::StatusOr<json> Body(const Call& call) { return ParseJsonBody(call.body, /*allow_empty=*/true); }

std::function<void(absl::StatusOr<iam::Policy>)> RenderPolicy(Responder respond, bool pretty) {
  return [respond, pretty](absl::StatusOr<iam::Policy> p) {
    if (!p.ok()) return respond(Fail(p.status(), pretty));
    respond(Render(codec::EncodePolicy(*p), pretty));
  };
}

void GetPolicy(const Services& s, const Call& call, const iam::Resource& resource, bool body_allowed,
               Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"options.requestedPolicyVersion"}); !st.ok()) return respond(Fail(st, pretty));
  if (const std::string v = call.Param("options.requestedPolicyVersion"); !v.empty() && v != "0" && v != "1" &&
                                                                           v != "3") {
    return respond(Fail(BadParam("options.requestedPolicyVersion", "must be 0, 1 or 3"), pretty));
  }
  if (body_allowed) {
    auto body = Body(call);
    if (!body.ok()) return respond(Fail(body.status(), pretty));
    if (auto st = codec::CheckGetIamPolicyRequest(body->empty() ? json() : *body); !st.ok()) {
      return respond(Fail(st, pretty));
    }
  }
  respond(Render(codec::EncodePolicy(s.iam.GetPolicy(resource)), pretty));
}

void SetPolicy(const Services& s, const Call& call, const iam::Resource& resource, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeSetIamPolicyRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  if (!request->set_bindings) request->policy.bindings = s.iam.GetPolicy(resource).bindings;
  s.iam.SetPolicy(call.caller, resource, std::move(request->policy), std::move(request->etag),
                  RenderPolicy(std::move(respond), pretty));
}

void TestPermissions(const Services& s, const Call& call, const iam::Resource& resource, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = Body(call);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto permissions = codec::DecodeTestIamPermissionsRequest(body->empty() ? json::object() : *body);
  if (!permissions.ok()) return respond(Fail(permissions.status(), pretty));
  auto held = s.iam.TestPermissions(call.caller, resource, *permissions);
  if (!held.ok()) return respond(Fail(held.status(), pretty));
  respond(Render(codec::EncodeTestIamPermissionsResponse(*held), pretty));
}

// A job's policy is about a job that exists (the caller may see it: the gate
// checked the permission on it).
absl::Status JobExists(const Services& s, const Call& call) {
  return s.jobs.GetJob(call.Var("project"), call.Var("job")).status();
}

}  // namespace

// ---- cloudresourcemanager v1 ----

namespace {

// A Project as cloudresourcemanager v1 renders it.
json EncodeProject(const model::Project& p) {
  return {{"projectId", p.id},
          {"projectNumber", std::to_string(p.number)},
          {"name", p.id},
          {"lifecycleState", "ACTIVE"},
          {"createTime", common::FormatRfc3339(p.create_time)}};
}

}  // namespace

void GetProject(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.jobs.GetConfig(call.Var("project"), [respond, pretty](absl::StatusOr<model::Project> p) {
    if (!p.ok()) return respond(Fail(p.status(), pretty));
    respond(Render(EncodeProject(*p), pretty));
  });
}

void ListProjects(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"filter", "pageSize", "pageToken"}); !st.ok()) return respond(Fail(st, pretty));
  service::ListProjectsRequest request;
  request.filter = call.Param("filter");
  request.page_token = call.Param("pageToken");
  if (const std::string size = call.Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &request.page_size)) {
    return respond(Fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")), pretty));
  }
  const iam::Principal& caller = call.caller;
  auto page = service::ListProjectsPage(s.jobs.ListProjects(), request, [&](const model::Project& p) {
    return s.iam.Authorize(caller, iam::perm::kProjectsGet, iam::Resource::Project(p.id)).ok();
  });
  if (!page.ok()) return respond(Fail(page.status(), pretty));
  json projects = json::array();
  for (const auto& p : page->projects) projects.push_back(EncodeProject(p));
  json out = {{"projects", std::move(projects)}};
  if (!page->next_page_token.empty()) out["nextPageToken"] = page->next_page_token;
  respond(Render(out, pretty));
}

// A project's policy starts as the project's initial one (its default
// account's binding), which needs the project's number: a policy read or
// set before the project's first job or getConfig makes the project first,
// so the first binding an operator adds keeps the initial ones beside it.
template <class Then>
void WithProject(const Services& s, const Call& call, Responder respond, Then then) {
  s.jobs.GetConfig(call.Var("project"), [s, call, respond, then](absl::StatusOr<model::Project> p) mutable {
    if (!p.ok()) return respond(Fail(p.status(), call.pretty));
    then(s, call, std::move(respond));
  });
}

void GetProjectPolicy(const Services& s, const Call& call, Responder respond) {
  WithProject(s, call, std::move(respond), [](const Services& s, const Call& call, Responder respond) {
    GetPolicy(s, call, call.resource, true, std::move(respond));
  });
}
void SetProjectPolicy(const Services& s, const Call& call, Responder respond) {
  WithProject(s, call, std::move(respond), [](const Services& s, const Call& call, Responder respond) {
    SetPolicy(s, call, call.resource, std::move(respond));
  });
}
void TestProjectPermissions(const Services& s, const Call& call, Responder respond) {
  TestPermissions(s, call, call.resource, std::move(respond));
}

// ---- ml v1 jobs ----

void GetJobPolicy(const Services& s, const Call& call, Responder respond) {
  if (auto st = JobExists(s, call); !st.ok()) return respond(Fail(st, call.pretty));
  GetPolicy(s, call, call.resource, false, std::move(respond));
}
void SetJobPolicy(const Services& s, const Call& call, Responder respond) {
  if (auto st = JobExists(s, call); !st.ok()) return respond(Fail(st, call.pretty));
  SetPolicy(s, call, call.resource, std::move(respond));
}
void TestJobPermissions(const Services& s, const Call& call, Responder respond) {
  TestPermissions(s, call, call.resource, std::move(respond));
}

// ---- iam v1 service accounts ----

void CreateAccount(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeCreateServiceAccountRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  s.iam.CreateServiceAccount(call.Var("project"), request->account_id, std::move(request->fields),
                             [respond, pretty](absl::StatusOr<iam::ServiceAccount> a) {
                               if (!a.ok()) return respond(Fail(a.status(), pretty));
                               respond(Render(codec::EncodeServiceAccount(*a), pretty));
                             });
}

void ListAccounts(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"pageSize", "pageToken"}); !st.ok()) return respond(Fail(st, pretty));
  int page_size = 0;
  if (const std::string size = call.Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &page_size)) {
    return respond(Fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")), pretty));
  }
  auto page = s.iam.ListServiceAccounts(call.Var("project"), page_size, call.Param("pageToken"));
  if (!page.ok()) return respond(Fail(page.status(), pretty));
  json accounts = json::array();
  for (const auto& a : page->accounts) accounts.push_back(codec::EncodeServiceAccount(a));
  json out = json::object();
  if (!accounts.empty()) out["accounts"] = accounts;
  if (!page->next_page_token.empty()) out["nextPageToken"] = page->next_page_token;
  respond(Render(out, pretty));
}

void GetAccount(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto a = s.iam.GetServiceAccount(call.Var("project"), call.Var("account"));
  if (!a.ok()) return respond(Fail(a.status(), pretty));
  respond(Render(codec::EncodeServiceAccount(*a), pretty));
}

void DeleteAccount(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.iam.DeleteServiceAccount(call.Var("project"), call.Var("account"), [respond, pretty](absl::Status st) {
    if (!st.ok()) return respond(Fail(st, pretty));
    respond(Render(json::object(), pretty));
  });
}

void GetAccountPolicy(const Services& s, const Call& call, Responder respond) {
  GetPolicy(s, call, call.resource, true, std::move(respond));
}
void SetAccountPolicy(const Services& s, const Call& call, Responder respond) {
  SetPolicy(s, call, call.resource, std::move(respond));
}
void TestAccountPermissions(const Services& s, const Call& call, Responder respond) {
  TestPermissions(s, call, call.resource, std::move(respond));
}

// ---- iamcredentials v1 ----

void GenerateAccessToken(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto request = codec::DecodeGenerateAccessTokenRequest(*body);
  if (!request.ok()) return respond(Fail(request.status(), pretty));
  s.iam.GenerateAccessToken(call.caller, call.Var("project"), call.Var("account"), request->delegates,
                            request->lifetime, [respond, pretty](absl::StatusOr<iam::IssuedToken> t) {
                              if (!t.ok()) return respond(Fail(t.status(), pretty));
                              respond(Render(codec::EncodeAccessToken(*t), pretty));
                            });
}

// ---- serviceusage v1beta1 ----

void GenerateServiceIdentity(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = Body(call);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (!body->empty()) {
    return respond(Fail(common::InvalidArgumentWithViolations("Invalid JSON payload received.",
                                                             {{"", "the request body must be {} (or empty)"}}),
                        pretty));
  }
  // The project may be new (named by its id): register it, as getConfig would.
  s.jobs.GetConfig(call.Var("project"), [&iam = s.iam, service = call.Var("service"), respond,
                                         pretty](absl::StatusOr<model::Project> p) {
    if (!p.ok()) return respond(Fail(p.status(), pretty));
    iam.GenerateServiceIdentity(*p, service, [respond, pretty, parent = "projects/" + p->id](
                                                 absl::StatusOr<iam::ServiceAccount> a) {
      if (!a.ok()) return respond(Fail(a.status(), pretty));
      respond(Render(codec::EncodeServiceIdentityOperation(*a, parent), pretty));
    });
  });
}

// ---- the operator's admin API ----

void ListUsers(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  json users = json::array();
  for (const auto& u : s.iam.ListUsers()) {
    users.push_back({{"email", u.email}, {"createTime", common::FormatRfc3339(u.create_time)}});
  }
  respond(Render({{"users", users}}, pretty));
}

void CreateUser(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (!body->is_object() || !body->contains("email") || !(*body)["email"].is_string() || body->size() != 1) {
    return respond(Fail(common::InvalidArgumentWithViolations("Invalid JSON payload received.",
                                                             {{"email", "is required, and the only field"}}),
                        pretty));
  }
  s.iam.CreateUser((*body)["email"].get<std::string>(), [respond, pretty](absl::StatusOr<iam::User> u) {
    if (!u.ok()) return respond(Fail(u.status(), pretty));
    respond(Render({{"email", u->email}, {"createTime", common::FormatRfc3339(u->create_time)}}, pretty));
  });
}

void DeleteUser(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.iam.DeleteUser(call.Var("user"), [respond, pretty](absl::Status st) {
    if (!st.ok()) return respond(Fail(st, pretty));
    respond(Render(json::object(), pretty));
  });
}

// A user's long-lived token: lifetime "Ns", default 30 days, at most a year.
void GenerateUserToken(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = Body(call);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  absl::Duration lifetime = absl::Hours(24 * 30);
  if (!body->empty()) {
    const bool ok_shape = body->is_object() && body->size() == 1 && body->contains("lifetime") &&
                          (*body)["lifetime"].is_string();
    auto d = ok_shape ? common::ParseDuration((*body)["lifetime"].get<std::string>()) : std::nullopt;
    if (!d || *d <= absl::ZeroDuration() || *d > absl::Hours(24 * 366)) {
      return respond(Fail(common::InvalidArgumentWithViolations(
                              "Invalid JSON payload received.",
                              {{"lifetime", "must be a duration from 1s to 366 days, e.g. \"2592000s\""}}),
                          pretty));
    }
    lifetime = *d;
  }
  s.iam.IssueToken(iam::Principal::User(absl::AsciiStrToLower(call.Var("user"))), lifetime, "user",
                   [respond, pretty](absl::StatusOr<iam::IssuedToken> t) {
                     if (!t.ok()) return respond(Fail(t.status(), pretty));
                     respond(Render(codec::EncodeAccessToken(*t), pretty));
                   });
}

void ReadAuditLog(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"pageSize", "pageToken"}); !st.ok()) return respond(Fail(st, pretty));
  db::AuditQuery query;
  query.project = call.Var("project");
  if (const std::string size = call.Param("pageSize"); !size.empty()) {
    if (!absl::SimpleAtoi(size, &query.limit) || query.limit < 1 || query.limit > 1000) {
      return respond(Fail(BadParam("pageSize", "must be an integer from 1 to 1000"), pretty));
    }
  }
  if (const std::string token = call.Param("pageToken"); !token.empty()) {
    if (!absl::SimpleAtoi(token, &query.before_sequence) || query.before_sequence < 1) {
      return respond(Fail(BadParam("pageToken", "is not a page token this server returned"), pretty));
    }
  }
  auto lines = s.iam.ReadAudit(query);
  if (!lines.ok()) return respond(Fail(lines.status(), pretty));
  json entries = json::array();
  for (const auto& r : *lines) {
    entries.push_back({{"time", common::FormatRfc3339(absl::FromUnixMicros(r.time_us))},
                       {"principal", r.principal},
                       {"method", r.method},
                       {"resource", r.resource},
                       {"outcome", r.outcome},
                       {"requestId", r.request_id}});
  }
  json out = {{"entries", entries}};
  if (static_cast<int>(lines->size()) == query.limit) out["nextPageToken"] = std::to_string(lines->back().sequence);
  respond(Render(out, pretty));
}

// ---- quotas and fair-share weights (docs/scheduling.md) ----

namespace {
json QuotasJson(const service::QuotaService::Current& c) {
  json out = service::EncodeQuotaSettings(c.settings);
  out["source"] = c.from_file ? "configuration file" : "admin API";
  return out;
}
}  // namespace

void GetQuotas(const Services& s, const Call& call, Responder respond) {
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, call.pretty));
  respond(Render(QuotasJson(s.quotas.Get()), call.pretty));
}

void SetQuotas(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  // Each section the body has replaces the one in force; QuotaService
  // keeps the others (a file for one project keeps the defaults).
  service::QuotaSections present;
  auto settings = service::DecodeQuotaSettings(*body, &present);
  if (!settings.ok()) return respond(Fail(settings.status(), pretty));
  s.quotas.Set(*std::move(settings), present, [&quotas = s.quotas, respond, pretty](absl::Status st) {
    if (!st.ok()) return respond(Fail(st, pretty));
    respond(Render(QuotasJson(quotas.Get()), pretty));
  });
}

// ---- backups (docs/operations.md) ----

// POST /mlengine/v1/backups {"destination": DIR}: a backup of the data
// directory written into DIR (backup/backup.h), answered once it is whole.
void CreateBackup(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (s.backups == nullptr) return respond(Fail(absl::UnimplementedError("This mlengined takes no backups."), pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  const auto destination = body->is_object() ? body->find("destination") : body->end();
  if (destination == body->end() || !destination->is_string() || destination->get<std::string>().empty()) {
    return respond(Fail(common::InvalidArgumentWithViolations(
                            "The backup needs a destination.",
                            {{"destination", "the directory to write the backup into, on mlengined's machine: an "
                                             "absolute path, new or empty, outside the data directory"}}),
                        pretty));
  }
  for (const auto& [key, value] : body->items()) {
    if (key != "destination") {
      return respond(Fail(common::InvalidArgumentWithViolations(
                              "Invalid JSON payload received.", {{key, "unknown field: a backup takes destination"}}),
                          pretty));
    }
  }
  s.backups->Start(destination->get<std::string>(), [respond, pretty,
                                                     to = destination->get<std::string>()](
                                                        absl::StatusOr<backup::Summary> done) {
    if (!done.ok()) return respond(Fail(done.status(), pretty));
    json answer = backup::SummaryJson(*done);
    answer["destination"] = to;
    respond(Render(answer, pretty));
  });
}

// ---- usage accounting (docs/operations.md) ----

namespace {
json UsageJson(const model::Usage& u) {
  return {{"mlUnits", u.ml_units},       {"cpuHours", u.cpu_hours}, {"gpuHours", u.gpu_hours},
          {"tpuCoreHours", u.tpu_core_hours}, {"runHours", u.run_hours}, {"queueHours", u.queue_hours}};
}
}  // namespace

// GET /mlengine/v1/usage?startTime=&endTime=&groupBy=project,user&project=:
// what jobs used within [startTime, endTime) (RFC 3339; open bounds by
// default), per project, user or both (service/usage_report.h).
void ReportUsage(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"startTime", "endTime", "groupBy", "project"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  service::UsageQuery query;
  for (const char* name : {"startTime", "endTime"}) {
    const std::string text = call.Param(name);
    if (text.empty()) continue;
    const std::optional<absl::Time> t = common::ParseRfc3339(text);
    if (!t) return respond(Fail(BadParam(name, "must be a time in RFC 3339, e.g. 2026-11-01T00:00:00Z"), pretty));
    (std::string_view(name) == "startTime" ? query.period.start : query.period.end) = *t;
  }
  if (query.period.start && query.period.end && *query.period.end <= *query.period.start) {
    return respond(Fail(BadParam("endTime", "must be after startTime"), pretty));
  }
  query.by_project = false;
  const std::string group_by = call.Param("groupBy").empty() ? "project" : call.Param("groupBy");
  for (absl::string_view part : absl::StrSplit(group_by, ',')) {
    if (part == "project") {
      query.by_project = true;
    } else if (part == "user") {
      query.by_user = true;
    } else if (part != "none") {
      return respond(Fail(BadParam("groupBy", "must be project, user, project,user or none"), pretty));
    }
  }
  query.project = call.Param("project");
  json rows = json::array();
  model::Usage total;
  int64_t jobs = 0;
  for (const auto& row : s.jobs.ReportUsage(query)) {
    json r = UsageJson(row.usage);
    if (query.by_project) r["project"] = row.project;
    if (query.by_user) r["user"] = row.user;
    r["jobs"] = row.jobs;
    rows.push_back(std::move(r));
    total += row.usage;
    jobs += row.jobs;
  }
  json out = {{"rows", rows}, {"total", UsageJson(total)}};
  out["total"]["jobs"] = jobs;
  if (query.period.start) out["startTime"] = common::FormatRfc3339(*query.period.start);
  if (query.period.end) out["endTime"] = common::FormatRfc3339(*query.period.end);
  respond(Render(out, pretty));
}

void ResetQuotas(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  s.quotas.Reset([&quotas = s.quotas, respond, pretty](absl::Status st) {
    if (!st.ok()) return respond(Fail(st, pretty));
    respond(Render(QuotasJson(quotas.Get()), pretty));
  });
}

// What applies to one project: its limits in every region it has its own,
// the limits of every other region, and its fair-share weight (1 unless set).
// Unlimited resources are left out.
void GetProjectQuotas(const Services& s, const Call& call, Responder respond) {
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, call.pretty));
  const service::QuotaSettings settings = s.quotas.Get().settings;
  auto quotas = scheduler::Quotas::Compile(settings.quotas);
  if (!quotas.ok()) return respond(Fail(quotas.status(), call.pretty));  // applied settings compile
  auto limits_json = [](const scheduler::QuotaLimits& limits) {
    json out = json::object();
    for (int i = 0; i < scheduler::kQuotaResourceCount; ++i) {
      const auto r = static_cast<scheduler::QuotaResource>(i);
      if (limits[i] == scheduler::kUnlimited) continue;
      out[scheduler::QuotaResourceName(r)] =
          r == scheduler::QuotaResource::kCpus ? json(limits[i] / 1000.0) : json(limits[i]);
    }
    return out;
  };
  const std::string& project = call.resource.project;
  json regions = json::object();
  if (auto it = settings.quotas.projects.find(project); it != settings.quotas.projects.end()) {
    for (const auto& [region, amounts] : it->second) regions[region] = limits_json(quotas->For(project, region));
  }
  auto weight = settings.shares.find(project);
  respond(Render({{"project", project},
                  {"otherRegions", limits_json(quotas->For(project, ""))},
                  {"regions", regions},
                  {"share", weight == settings.shares.end() ? 1 : weight->second}},
                 call.pretty));
}

// ---- mlengine's own ----

void WhoAmI(const Services&, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  respond(Render({{"principal", call.caller.Member()}, {"operator", call.caller.IsOperator()}}, pretty));
}

// GET /mlengine/v1/status: what every signed-in caller should know of the
// service (the console's banner): whether its data directory's disk is full.
// The operator also gets the figures and the path.
void ServerStatus(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  json disk = {{"full", false}};
  if (s.disk != nullptr) {
    const service::DiskState d = s.disk->State();
    disk["full"] = d.full;
    if (d.full) {
      disk["message"] = "mlengine's disk is full: new jobs and uploads are refused until the operator frees "
                        "space. Jobs already running go on.";
    }
    if (call.caller.IsOperator()) {
      disk["path"] = s.disk->path();
      disk["sizeBytes"] = d.size_bytes;
      disk["freeBytes"] = d.free_bytes;
      disk["reserveBytes"] = d.reserve_bytes;
    }
  }
  respond(Render({{"dataDisk", disk}}, pretty));
}

}  // namespace mle::api::iam_routes
