#include "absl/strings/string_view.h"
#include "api/api_router.h"

#include "api/field_mask.h"
#include "api/http_util.h"

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

struct Call {
  std::string method;
  std::vector<std::string> segments;  // decoded path segments after "v1"
  std::string verb;                   // custom method after ':' in the last segment
  std::multimap<std::string, std::string> query;
  std::string body;
  bool pretty = true;

  std::string Param(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? "" : it->second;
  }
};

absl::StatusOr<Call> ParseCall(const HttpRequest& req) {
  Call call;
  call.method = req.method;
  auto target = ParseTarget(req.target);
  if (!target.ok()) return target.status();
  call.query = std::move(target->query);
  absl::string_view path = target->raw_path;
  // The custom verb ("...:cancel") is split off before decoding, so an
  // encoded ':' (%3A) in a resource id stays part of the id.
  std::vector<absl::string_view> raw = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (!raw.empty()) {
    absl::string_view& last = raw.back();
    if (auto colon = last.rfind(':'); colon != absl::string_view::npos) {
      call.verb = std::string(last.substr(colon + 1));
      last = last.substr(0, colon);
    }
  }
  for (auto s : raw) {
    auto d = PercentDecode(s, false);
    if (!d) return absl::InvalidArgumentError("The request path is not correctly percent-encoded.");
    call.segments.push_back(*d);
  }
  call.body = req.body;
  return call;
}

// Checks the query against the method's own parameters and the standard ones.
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
  return absl::NotFoundError(absl::StrCat("The requested URL ", call.method, " /", absl::StrJoin(call.segments, "/"),
                                          call.verb.empty() ? "" : ":", call.verb,
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
  auto fail = [respond, pretty](const absl::Status& s) { respond(RenderError(s, pretty)); };

  // Partial responses (`fields`): applied to successful replies only.
  if (const std::string fields = call->Param("fields"); !fields.empty()) {
    auto mask = FieldMask::Parse(fields);
    if (!mask.ok()) return fail(mask.status());
    respond = [respond, mask = *std::move(mask), pretty](HttpResponse r) {
      if (r.status == 200) {
        json body = json::parse(r.body, nullptr, false);
        if (!body.is_discarded()) r = Render(mask.Apply(body), pretty);
      }
      respond(std::move(r));
    };
  }

  if (auto s = auth_.Check(request.authorization, call->Param("access_token")); !s.ok()) return fail(s);

  const auto& seg = call->segments;
  if (seg.size() < 3 || seg[0] != "v1" || seg[1] != "projects") return fail(NoRoute(*call));
  const std::string& project = seg[2];
  if (!ValidProjectId(project)) {
    return fail(common::InvalidArgumentWithViolations(
        "Invalid resource name.",
        {{"name", "the project id must be 1-100 characters of letters, digits, '-', '_', '.' or ':' "
                  "(as in projects/my-project)"}}));
  }
  const std::string& m = call->method;

  // v1/projects/{p}:getConfig
  if (seg.size() == 3) {
    if (call->verb != "getConfig" || m != "GET") return fail(NoRoute(*call));
    if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
    return jobs_.GetConfig(project, [respond, pretty](absl::StatusOr<model::Project> p) {
      if (!p.ok()) return respond(RenderError(p.status(), pretty));
      respond(Render(codec::EncodeGetConfigResponse(*p), pretty));
    });
  }
  if (seg[3] != "jobs") return fail(NoRoute(*call));

  // v1/projects/{p}/jobs
  if (seg.size() == 4 && call->verb.empty()) {
    if (m == "POST") {
      if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
      auto body = ParseJsonBody(call->body, false);
      if (!body.ok()) return fail(body.status());
      codec::DecodedJob decoded = codec::DecodeJob(*body);
      return jobs_.CreateJob(
          project, std::move(decoded.job),
          [respond, pretty](absl::StatusOr<model::Job> j) {
            if (!j.ok()) return respond(RenderError(j.status(), pretty));
            respond(Render(codec::EncodeJob(*j), pretty));
          },
          std::move(decoded.violations));
    }
    if (m == "GET") {
      if (auto s = CheckQuery(*call, {"filter", "pageSize", "pageToken"}); !s.ok()) return fail(s);
      service::ListJobsRequest list;
      list.filter = call->Param("filter");
      list.page_token = call->Param("pageToken");
      if (const std::string size = call->Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &list.page_size)) {
        return fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")));
      }
      auto result = jobs_.ListJobs(project, list);
      if (!result.ok()) return fail(result.status());
      return respond(Render(codec::EncodeListJobsResponse(result->jobs, result->next_page_token), pretty));
    }
    return fail(NoRoute(*call));
  }

  // v1/projects/{p}/jobs/{j}/logs: mlengine's log endpoint (stock gcloud read
  // Cloud Logging instead); see docs/runtime-contract.md.
  if (seg.size() == 6 && seg[5] == "logs" && call->verb.empty() && m == "GET") {
    if (auto s = CheckQuery(*call, {"pageToken", "taskName", "waitSeconds"}); !s.ok()) return fail(s);
    service::LogRequest request;
    request.page_token = call->Param("pageToken");
    request.task_name = call->Param("taskName");
    if (const std::string w = call->Param("waitSeconds"); !w.empty()) {
      int seconds = 0;
      if (!absl::SimpleAtoi(w, &seconds) || seconds < 0 || seconds > 30) {
        return fail(BadParam("waitSeconds", "must be a whole number of seconds from 0 to 30"));
      }
      request.wait = absl::Seconds(seconds);
    }
    return logs_.Read(project, seg[4], std::move(request), [respond, pretty](absl::StatusOr<service::LogResult> r) {
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

  if (seg.size() != 5) return fail(NoRoute(*call));
  const std::string& job_id = seg[4];

  if (call->verb == "cancel") {
    if (m != "POST") return fail(NoRoute(*call));
    if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
    auto body = ParseJsonBody(call->body, true);
    if (!body.ok()) return fail(body.status());
    if (auto v = codec::DiscoverySchema::Embedded().Check(*body, "GoogleCloudMlV1__CancelJobRequest"); !v.empty()) {
      return fail(common::InvalidArgumentWithViolations("Invalid JSON payload received.", v));
    }
    return jobs_.CancelJob(project, job_id, [respond, pretty](absl::Status s) {
      if (!s.ok()) return respond(RenderError(s, pretty));
      respond(Render(json::object(), pretty));
    });
  }
  if (call->verb == "getIamPolicy" || call->verb == "setIamPolicy" || call->verb == "testIamPermissions") {
    return fail(absl::UnimplementedError(absl::StrCat(
        "jobs.", call->verb, " is not offered by mlengine yet: access is controlled by the server's tokens.")));
  }
  if (!call->verb.empty()) return fail(NoRoute(*call));

  if (m == "GET") {
    if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
    auto job = jobs_.GetJob(project, job_id);
    if (!job.ok()) return fail(job.status());
    return respond(Render(codec::EncodeJob(*job), pretty));
  }
  if (m == "PATCH") {
    if (auto s = CheckQuery(*call, {"updateMask"}); !s.ok()) return fail(s);
    auto body = ParseJsonBody(call->body, false);
    if (!body.ok()) return fail(body.status());
    auto job = codec::DecodeJobRequest(*body);
    if (!job.ok()) return fail(job.status());
    service::PatchJobRequest patch;
    for (auto path : absl::StrSplit(call->Param("updateMask"), ',', absl::SkipWhitespace())) {
      patch.update_mask.push_back(std::string(absl::StripAsciiWhitespace(path)));
    }
    patch.labels = job->labels;
    if (body->contains("etag") && (*body)["etag"].is_string()) patch.etag = (*body)["etag"].get<std::string>();
    return jobs_.PatchJob(project, job_id, std::move(patch), [respond, pretty](absl::StatusOr<model::Job> j) {
      if (!j.ok()) return respond(RenderError(j.status(), pretty));
      respond(Render(codec::EncodeJob(*j), pretty));
    });
  }
  return fail(NoRoute(*call));
}

}  // namespace mle::api
