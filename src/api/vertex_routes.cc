// The handlers of Vertex AI's aiplatform v1 customJobs (api/aiplatform.v1.json),
// named by their discovery method ids. A custom job is an ml v1 job made
// from its spec (model/vertex.h): the same admission, queue and executors;
// this API sees only its own jobs, ml v1 only its.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>
#include <random>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/field_mask.h"
#include "api/api_call.h"
#include "api/http_util.h"
#include "codec/discovery.h"
#include "codec/vertex_codec.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::api::vertex_routes {
namespace {

using nlohmann::json;

// Vertex names a job by a number the server picks: 19 decimal digits.
std::string NewJobId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<uint64_t> digits(1'000'000'000'000'000'000ULL, 9'223'372'036'854'775'807ULL);
  return absl::StrCat(digits(rng));
}

std::string Name(const Call& call) {
  return absl::StrCat("projects/", call.Var("project"), "/locations/", call.Var("location"), "/customJobs/",
                      call.Var("job"));
}

absl::Status NotFound(const Call& call) {
  return absl::NotFoundError(absl::StrCat("The CustomJob does not exist: ", Name(call), "."));
}

// The custom job the path names: a Vertex job of that location, else
// NOT_FOUND as for no job at all (an ml v1 job's id is not a custom job).
absl::StatusOr<model::Job> FindCustomJob(const Services& s, const Call& call) {
  auto job = s.jobs.GetJob(call.Var("project"), call.Var("job"));
  if (!job.ok()) return absl::IsNotFound(job.status()) ? NotFound(call) : job.status();
  if (!model::IsVertexJob(*job) || job->vertex->location != call.Var("location")) return NotFound(call);
  return job;
}

// A FieldMask path as the wire spells it, for FieldMask (api/field_mask.h):
// each segment in lowerCamelCase ("job_spec.worker_pool_specs" ->
// "jobSpec/workerPoolSpecs").
std::string WirePath(absl::string_view path) {
  std::string out;
  bool upper = false;
  for (char c : path) {
    if (c == '_') {
      upper = true;
    } else if (c == '.') {
      out += '/';
      upper = false;
    } else {
      out += upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c;
      upper = false;
    }
  }
  return out;
}

}  // namespace

void CreateCustomJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  codec::DecodedVertexJob decoded = codec::DecodeCustomJob(*body, call.Var("location"));
  decoded.job.job_id = NewJobId();
  std::vector<db::Mutation> audit_line = AuditLineOf(s, call);
  s.jobs.CreateJob(
      call.Var("project"), std::move(decoded.job),
      [respond, pretty, audit = call.audit](absl::StatusOr<model::Job> j) {
        if (!j.ok()) return respond(RenderError(j.status(), pretty));
        if (audit != nullptr) audit->written = true;
        respond(Render(codec::EncodeCustomJob(*j), pretty));
      },
      std::move(decoded.violations), call.caller, std::move(audit_line), /*validate_only=*/false);
}

void ListCustomJobs(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"filter", "pageSize", "pageToken", "readMask"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  service::ListJobsRequest list;
  list.filter = call.Param("filter");
  list.page_token = call.Param("pageToken");
  list.vertex_location = call.Var("location");
  if (const std::string size = call.Param("pageSize"); !size.empty() && !absl::SimpleAtoi(size, &list.page_size)) {
    return respond(Fail(BadParam("pageSize", absl::StrCat("must be an integer, got \"", size, "\"")), pretty));
  }
  // readMask (a protobuf FieldMask: "display_name,jobSpec.workerPoolSpecs"):
  // each job with only those fields.
  std::optional<FieldMask> mask;
  if (const std::string read_mask = call.Param("readMask"); !read_mask.empty()) {
    std::vector<std::string> paths;
    for (absl::string_view path : absl::StrSplit(read_mask, ',', absl::SkipWhitespace())) {
      paths.push_back(WirePath(absl::StripAsciiWhitespace(path)));
    }
    auto parsed = FieldMask::Parse(absl::StrJoin(paths, ","));
    if (!parsed.ok()) {
      return respond(Fail(BadParam("readMask", absl::StrCat("not a field mask (paths like display_name,state "
                                                            "separated by commas): \"", read_mask, "\"")),
                          pretty));
    }
    mask = *std::move(parsed);
  }
  auto result = s.jobs.ListJobs(call.Var("project"), list);
  if (!result.ok()) return respond(Fail(result.status(), pretty));
  json out = codec::EncodeListCustomJobsResponse(result->jobs, result->next_page_token);
  if (mask && out.contains("customJobs")) {
    for (json& job : out["customJobs"]) job = mask->Apply(job);
  }
  respond(Render(out, pretty));
}

void GetCustomJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = FindCustomJob(s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  respond(Render(codec::EncodeCustomJob(*job), pretty));
}

void CancelCustomJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, true);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (auto v = codec::DiscoverySchema::Aiplatform().Check(*body, "GoogleCloudAiplatformV1CancelCustomJobRequest");
      !v.empty()) {
    return respond(Fail(common::InvalidArgumentWithViolations("Invalid JSON payload received.", v), pretty));
  }
  auto job = FindCustomJob(s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  s.jobs.CancelJob(
      call.Var("project"), call.Var("job"),
      [respond, pretty](absl::Status st) {
        if (!st.ok()) return respond(RenderError(st, pretty));
        respond(Render(json::object(), pretty));
      },
      call.caller);
}

void DeleteCustomJob(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = FindCustomJob(s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  const std::string operation = absl::StrCat("projects/", call.Var("project"), "/locations/", call.Var("location"),
                                             "/operations/", NewJobId());
  s.jobs.DeleteJob(call.Var("project"), call.Var("job"), [respond, pretty, operation](absl::Status st) {
    if (!st.ok()) return respond(RenderError(st, pretty));
    // Done at once: the job is gone when the answer comes (a client that
    // waits on the operation finds it done without asking again).
    const std::string now = common::FormatRfc3339(absl::Now());
    respond(Render(json{{"name", operation},
                        {"done", true},
                        {"metadata",
                         {{"@type", "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"},
                          {"genericMetadata", {{"createTime", now}, {"updateTime", now}}}}},
                        {"response", {{"@type", "type.googleapis.com/google.protobuf.Empty"}}}},
                   pretty));
  });
}

}  // namespace mle::api::vertex_routes
