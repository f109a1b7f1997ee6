// The handlers of Vertex AI's aiplatform v1 customJobs and
// hyperparameterTuningJobs, and of its operations (api/aiplatform.v1.json),
// named by their discovery method ids. A Vertex job is an ml v1 job made
// from its spec (model/vertex.h): the same admission, queue and executors;
// each API sees only its own jobs, and each of Vertex's two collections
// only its own kind.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/api_call.h"
#include "api/field_mask.h"
#include "api/http_util.h"
#include "codec/discovery.h"
#include "codec/vertex_codec.h"
#include "common/status.h"
#include "common/time_format.h"
#include "iam/roles.h"
#include "service/operation_log.h"

namespace mle::api::vertex_routes {
namespace {

using nlohmann::json;

// What tells the two collections apart.
struct Kind {
  bool tuning;
  const char* type;            // "CustomJob"
  const char* collection;      // "customJobs"
  const char* schema;          // the resource's schema
  const char* list_schema;     // its list's
  const char* cancel_request;  // the cancel body's schema
};
constexpr Kind kCustomJobs{false,
                           "CustomJob",
                           "customJobs",
                           "GoogleCloudAiplatformV1CustomJob",
                           "GoogleCloudAiplatformV1ListCustomJobsResponse",
                           "GoogleCloudAiplatformV1CancelCustomJobRequest"};
constexpr Kind kTuningJobs{true,
                           "HyperparameterTuningJob",
                           "hyperparameterTuningJobs",
                           "GoogleCloudAiplatformV1HyperparameterTuningJob",
                           "GoogleCloudAiplatformV1ListHyperparameterTuningJobsResponse",
                           "GoogleCloudAiplatformV1CancelHyperparameterTuningJobRequest"};

// A value of schema `schema`, its enums as numbers where the call asked for
// them (Call::enum_numbers).
json EnumsAs(json value, const char* schema, bool enum_numbers) {
  if (enum_numbers) {
    codec::DiscoverySchema::Aiplatform().RecodeEnums(value, schema, codec::DiscoverySchema::EnumEncoding::kNumbers);
  }
  return value;
}

HttpResponse RenderAs(json value, const char* schema, bool enum_numbers, bool pretty) {
  return Render(EnumsAs(std::move(value), schema, enum_numbers), pretty);
}

absl::Status NotFound(const Kind& kind, const Call& call) {
  return absl::NotFoundError(absl::StrCat("The ", kind.type, " does not exist: projects/", call.Var("project"),
                                          "/locations/", call.Var("location"), "/", kind.collection, "/",
                                          call.Var("job"), "."));
}

// The job the path names: a Vertex job of that location and kind, else
// NOT_FOUND as for no job at all (an ml v1 job's id is not a custom job, a
// custom job's not a tuning job).
absl::StatusOr<model::Job> FindVertexJob(const Kind& kind, const Services& s, const Call& call) {
  auto job = s.jobs.GetJob(call.Var("project"), call.Var("job"));
  if (!job.ok()) return absl::IsNotFound(job.status()) ? NotFound(kind, call) : job.status();
  if (!model::IsVertexJob(*job) || job->vertex->location != call.Var("location") ||
      job->vertex->IsTuningJob() != kind.tuning) {
    return NotFound(kind, call);
  }
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

template <const Kind& K>
void Create(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (call.enum_numbers) {
    codec::DiscoverySchema::Aiplatform().RecodeEnums(*body, K.schema, codec::DiscoverySchema::EnumEncoding::kNames);
  }
  codec::DecodedVertexJob decoded = K.tuning ? codec::DecodeHyperparameterTuningJob(*body, call.Var("location"))
                                             : codec::DecodeCustomJob(*body, call.Var("location"));
  decoded.job.job_id = service::NewVertexId();
  std::vector<db::Mutation> audit_line = AuditLineOf(s, call);
  s.jobs.CreateJob(
      call.Var("project"), std::move(decoded.job),
      [respond, pretty, numbers = call.enum_numbers, audit = call.audit](absl::StatusOr<model::Job> j) {
        if (!j.ok()) return respond(RenderError(j.status(), pretty));
        if (audit != nullptr) audit->written = true;
        // Answered on the store's callback thread: encoded where it is written.
        if (numbers) {
          return respond(RenderJsonDeferred(
              [job = *std::move(j)] { return EnumsAs(codec::EncodeVertexJob(job), K.schema, true); }, pretty));
        }
        respond(RenderJsonTextDeferred(
            [job = *std::move(j)](int indent) { return codec::VertexJobText(job, indent); }, pretty));
      },
      std::move(decoded.violations), call.caller, std::move(audit_line), /*validate_only=*/false);
}

template <const Kind& K>
void List(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"filter", "pageSize", "pageToken", "readMask"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  service::ListJobsRequest list;
  list.filter = call.Param("filter");
  list.page_token = call.Param("pageToken");
  list.vertex_location = call.Var("location");
  list.vertex_tuning = K.tuning;
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
  json out = codec::EncodeListVertexJobsResponse(result->jobs, K.tuning, result->next_page_token);
  if (mask && out.contains(K.collection)) {
    for (json& job : out[K.collection]) job = mask->Apply(job);
  }
  respond(RenderAs(std::move(out), K.list_schema, call.enum_numbers, pretty));
}

template <const Kind& K>
void Get(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = FindVertexJob(K, s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  if (call.enum_numbers) return respond(RenderAs(codec::EncodeVertexJob(*job), K.schema, true, pretty));
  respond(RenderJsonText([&](int indent) { return codec::VertexJobText(*job, indent); }, pretty));
}

template <const Kind& K>
void Cancel(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckEmptyBody(call, codec::DiscoverySchema::Aiplatform(), K.cancel_request); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  auto job = FindVertexJob(K, s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  s.jobs.CancelJob(call.Var("project"), call.Var("job"), ReplyEmpty(std::move(respond), pretty), call.caller);
}

// A done Operation as Vertex renders one.
json RenderOperation(const service::OperationRecord& op) {
  const std::string time = common::FormatRfc3339(op.create_time);
  return json{{"name", op.Name()},
              {"done", true},
              {"metadata",
               {{"@type", op.metadata_type},
                {"genericMetadata", {{"createTime", time}, {"updateTime", common::FormatRfc3339(op.update_time)}}}}},
              {"response", {{"@type", op.response_type}}}};
}

template <const Kind& K>
void Delete(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = FindVertexJob(K, s, call);
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  const std::string target = codec::VertexJobName(*job);
  s.jobs.DeleteJob(call.Var("project"), call.Var("job"),
                   [&s, respond, pretty, target, project = call.Var("project"),
                    location = call.Var("location")](absl::Status st) {
                     if (!st.ok()) return respond(RenderError(st, pretty));
                     // Done at once: the job is gone when the answer comes (a
                     // client that waits on the operation finds it done).
                     const service::OperationRecord op = s.operations.Add(
                         project, location, target,
                         "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                         "type.googleapis.com/google.protobuf.Empty", absl::Now());
                     respond(Render(RenderOperation(op), pretty));
                   });
}

// The job whose operations the path names ("projects/P/locations/L/
// customJobs/J" for .../customJobs/J/operations), or "" for a location's.
std::string OperationScope(const Call& call) {
  if (!call.vars.count("job")) return "";
  const auto& segments = call.path.segments;
  const bool tuning = std::find(segments.begin(), segments.end(), "hyperparameterTuningJobs") != segments.end();
  const char* collection = tuning ? "hyperparameterTuningJobs" : "customJobs";
  return absl::StrCat("projects/", call.Var("project"), "/locations/", call.Var("location"), "/", collection, "/",
                      call.Var("job"));
}

absl::Status OperationNotFound(const Call& call) {
  std::string scope = OperationScope(call);
  if (scope.empty()) scope = absl::StrCat("projects/", call.Var("project"), "/locations/", call.Var("location"));
  return absl::NotFoundError(absl::StrCat("Operation ", scope, "/operations/", call.Var("operation"), " not found."));
}

// The operation the path names; under a job's path, only one on that job.
absl::StatusOr<service::OperationRecord> FindOperation(const Services& s, const Call& call) {
  auto op = s.operations.Get(call.Var("project"), call.Var("location"), call.Var("operation"));
  const std::string scope = OperationScope(call);
  if (!op || (!scope.empty() && op->target != scope)) return OperationNotFound(call);
  return *op;
}

}  // namespace

void CreateCustomJob(const Services& s, const Call& c, Responder r) { Create<kCustomJobs>(s, c, std::move(r)); }
void ListCustomJobs(const Services& s, const Call& c, Responder r) { List<kCustomJobs>(s, c, std::move(r)); }
void GetCustomJob(const Services& s, const Call& c, Responder r) { Get<kCustomJobs>(s, c, std::move(r)); }
void CancelCustomJob(const Services& s, const Call& c, Responder r) { Cancel<kCustomJobs>(s, c, std::move(r)); }
void DeleteCustomJob(const Services& s, const Call& c, Responder r) { Delete<kCustomJobs>(s, c, std::move(r)); }
void CreateTuningJob(const Services& s, const Call& c, Responder r) { Create<kTuningJobs>(s, c, std::move(r)); }
void ListTuningJobs(const Services& s, const Call& c, Responder r) { List<kTuningJobs>(s, c, std::move(r)); }
void GetTuningJob(const Services& s, const Call& c, Responder r) { Get<kTuningJobs>(s, c, std::move(r)); }
void CancelTuningJob(const Services& s, const Call& c, Responder r) { Cancel<kTuningJobs>(s, c, std::move(r)); }
void DeleteTuningJob(const Services& s, const Call& c, Responder r) { Delete<kTuningJobs>(s, c, std::move(r)); }

// ---- projects.locations.operations (Vertex's and, by the same path, ml
// v1's study operations) ----

namespace {

// The path of get and cancel is ml v1's too, for its study API's
// operations: one Vertex's API made (`vertex`) is Vertex's, checked with
// `vertex_permission`; any other is handed to ml v1's `ml_handler`, checked
// with `ml_permission`. False when the call was answered here (refused or
// handed on); true when the caller goes on with a Vertex operation.
bool VertexOperationCall(const Services& s, const Call& call, Responder& respond, bool vertex,
                         const char* vertex_permission, const char* ml_permission, HandlerFn ml_handler) {
  const bool pretty = call.pretty;
  if (auto st = s.iam.Authorize(call.caller, vertex ? vertex_permission : ml_permission, call.resource); !st.ok()) {
    respond(Fail(st, pretty));
    return false;
  }
  if (!vertex) {
    ml_handler(s, call, std::move(respond));
    return false;
  }
  if (auto st = CheckQuery(call, {}); !st.ok()) {
    respond(Fail(st, pretty));
    return false;
  }
  return true;
}

}  // namespace

void GetOperation(const Services& s, const Call& call, Responder respond) {
  auto op = s.operations.Get(call.Var("project"), call.Var("location"), call.Var("operation"));
  if (!VertexOperationCall(s, call, respond, op.has_value(), iam::perm::kVertexOperationsList,
                           iam::perm::kOperationsGet, &study_routes::GetOperation)) {
    return;
  }
  respond(Render(RenderOperation(*op), call.pretty));
}

void CancelOperation(const Services& s, const Call& call, Responder respond) {
  const bool vertex = s.operations.Get(call.Var("project"), call.Var("location"), call.Var("operation")).has_value();
  if (!VertexOperationCall(s, call, respond, vertex, iam::perm::kVertexOperationsCancel,
                           iam::perm::kOperationsCancel, &study_routes::CancelOperation)) {
    return;
  }
  auto body = ParseJsonBody(call.body, true);
  if (!body.ok()) return respond(Fail(body.status(), call.pretty));
  // Every operation here is done: cancelling one changes nothing, as
  // google.longrunning says of a done operation.
  respond(Render(json::object(), call.pretty));
}

void ListOperations(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"filter", "pageSize", "pageToken", "returnPartialSuccess"}); !st.ok()) {
    return respond(Fail(st, pretty));
  }
  // Every operation is done: a filter on `done` is all there is to ask.
  const std::string filter(absl::StripAsciiWhitespace(call.Param("filter")));
  bool none = false;
  if (filter == "done=false" || filter == "done = false") {
    none = true;
  } else if (!filter.empty() && filter != "done=true" && filter != "done = true") {
    return respond(Fail(BadParam("filter", absl::StrCat("mlengine filters operations on done only (done=true or "
                                                        "done=false); got \"", filter, "\"")),
                        pretty));
  }
  int32_t page_size = 100;
  if (const std::string size = call.Param("pageSize"); !size.empty()) {
    if (!absl::SimpleAtoi(size, &page_size) || page_size < 0) {
      return respond(Fail(BadParam("pageSize", absl::StrCat("must be a non-negative integer, got \"", size, "\"")),
                          pretty));
    }
    page_size = page_size == 0 ? 100 : std::min(page_size, 1000);
  }
  std::optional<int64_t> after;
  if (const std::string token = call.Param("pageToken"); !token.empty()) {
    int64_t sequence = 0;
    if (!absl::SimpleAtoi(token, &sequence)) {
      return respond(Fail(BadParam("pageToken", "not a page token this server gave"), pretty));
    }
    after = sequence;
  }
  bool more = false;
  std::vector<service::OperationRecord> ops;
  if (!none) {
    ops = s.operations.List(call.Var("project"), call.Var("location"), after, static_cast<size_t>(page_size), &more,
                            OperationScope(call));
  }
  json list = json::array();
  for (const auto& op : ops) list.push_back(RenderOperation(op));
  json out = json::object();
  if (!list.empty()) out["operations"] = std::move(list);
  if (more && !ops.empty()) out["nextPageToken"] = absl::StrCat(ops.back().sequence);
  respond(Render(out, pretty));
}

void DeleteOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto op = FindOperation(s, call);
  if (!op.ok() || !s.operations.Delete(op->project, op->location, op->id)) {
    return respond(Fail(OperationNotFound(call), pretty));
  }
  respond(Render(json::object(), pretty));
}

void GetJobOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto op = FindOperation(s, call);
  if (!op.ok()) return respond(Fail(op.status(), pretty));
  respond(Render(RenderOperation(*op), pretty));
}

void CancelJobOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto body = ParseJsonBody(call.body, true);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  auto op = FindOperation(s, call);
  if (!op.ok()) return respond(Fail(op.status(), pretty));
  // Done: cancelling it changes nothing.
  respond(Render(json::object(), pretty));
}

void WaitOperation(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"timeout"}); !st.ok()) return respond(Fail(st, pretty));
  // Done already: no wait.
  auto op = FindOperation(s, call);
  if (!op.ok()) return respond(Fail(op.status(), pretty));
  respond(Render(RenderOperation(*op), pretty));
}

}  // namespace mle::api::vertex_routes
