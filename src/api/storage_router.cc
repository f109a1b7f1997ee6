#include "api/storage_router.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/http_util.h"
#include "api/route_table.h"
#include "common/status.h"
#include "common/time_format.h"
#include "iam/roles.h"

namespace mle::api {

namespace {

using nlohmann::json;

// Parameters any storage method accepts (Google's standard ones, and two the
// Cloud Storage clients send that change nothing here).
constexpr absl::string_view kCommonParams[] = {"$.xgafv",  "access_token", "alt",         "callback",
                                               "fields",   "key",          "oauth_token", "prettyPrint",
                                               "quotaUser", "upload_protocol", "userProject", "projection"};

// Object names may hold raw '/' and ':' and empty segments ("a//b").
constexpr PathSyntax kStoragePathSyntax{.custom_verbs = false, .ignore_empty_segments = false};

// One request to a storage route.
struct StorageCall {
  std::string method;
  RequestPath path;
  PathVars vars;  // bucket, object (decoded)
  QueryParams query;
  bool pretty = true;
  iam::Principal caller;

  std::string Param(const std::string& name) const { return QueryParam(query, name); }
  bool Has(const std::string& name) const { return query.count(name) > 0; }
  const std::string& Var(absl::string_view name) const { return vars.find(name)->second; }
};

absl::Status NoRoute(const HttpRequest& req) {
  absl::string_view target = req.target;
  target = target.substr(0, target.find('?'));
  return absl::NotFoundError(absl::StrCat("The requested URL ", req.method, " ", target,
                                          " was not found on this server. mlengine serves the Cloud Storage JSON "
                                          "API routes listed in docs/runtime-contract.md."));
}

absl::StatusOr<StorageCall> ParseStorageCall(const HttpRequest& req) {
  StorageCall call;
  call.method = req.method;
  auto target = ParseTarget(req.target);
  if (!target.ok()) return target.status();
  call.query = std::move(target->query);
  call.pretty = call.Param("prettyPrint") != "false";
  auto path = SplitRequestPath(target->raw_path, kStoragePathSyntax);
  if (!path.ok()) return path.status();
  call.path = *std::move(path);
  return call;
}

// Unknown parameters are refused (as the ml API does), never silently
// ignored: e.g. ifGenerationMatch would otherwise promise a precondition
// this server does not check.
absl::Status CheckQuery(const StorageCall& call, std::initializer_list<absl::string_view> method_params,
                        bool media_allowed = false) {
  std::vector<common::FieldViolation> violations;
  for (const auto& [k, v] : call.query) {
    bool known = std::find(std::begin(kCommonParams), std::end(kCommonParams), k) != std::end(kCommonParams) ||
                 std::find(method_params.begin(), method_params.end(), k) != method_params.end();
    if (!known) {
      violations.push_back({k, absl::StrCat("Unknown query parameter \"", k,
                                            "\": mlengine's object store does not offer it for this method")});
    }
  }
  const std::string alt = call.Param("alt");
  if (!alt.empty() && alt != "json" && !(media_allowed && alt == "media")) {
    violations.push_back({"alt", media_allowed ? "must be json or media" : "only alt=json is supported here"});
  }
  const std::string pretty = call.Param("prettyPrint");
  if (!pretty.empty() && pretty != "true" && pretty != "false") {
    violations.push_back({"prettyPrint", "must be true or false"});
  }
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid query parameters.", violations);
  return absl::OkStatus();
}

absl::Status CheckBucketName(const std::string& bucket, const std::string& field = "bucket") {
  if (auto s = buckets::ValidateBucketName(bucket); !s.ok()) {
    return common::InvalidArgumentWithViolations("Invalid bucket name.", {{field, std::string(s.message())}});
  }
  return absl::OkStatus();
}

absl::Status CheckObjectName(const std::string& name, const std::string& field) {
  if (auto s = buckets::ValidateObjectName(name); !s.ok()) {
    return common::InvalidArgumentWithViolations("Invalid object name.", {{field, std::string(s.message())}});
  }
  return absl::OkStatus();
}

// The upload's parameters and names: everything knowable before the body
// arrives.
absl::Status CheckUploadCall(const StorageCall& call) {
  if (auto s = CheckQuery(call, {"uploadType", "name"}); !s.ok()) return s;
  if (auto s = CheckBucketName(call.Var("bucket")); !s.ok()) return s;
  std::vector<common::FieldViolation> violations;
  const std::string type = call.Param("uploadType");
  if (type != "media") {
    violations.push_back({"uploadType", type.empty() ? "is required: only uploadType=media is supported"
                                                     : absl::StrCat("\"", type, "\" is not supported: only "
                                                                    "uploadType=media (the body is the object's bytes)")});
  }
  if (!call.Has("name")) {
    violations.push_back({"name", "is required: the object's name"});
  } else if (auto s = buckets::ValidateObjectName(call.Param("name")); !s.ok()) {
    violations.push_back({"name", std::string(s.message())});
  }
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid upload request.", violations);
  return absl::OkStatus();
}

json ObjectJson(const buckets::ObjectInfo& o) {
  json j = {{"kind", "storage#object"},
            {"name", o.name},
            {"bucket", o.bucket},
            {"size", std::to_string(o.size)},
            {"updated", common::FormatRfc3339(o.updated)}};
  // Unknown for files a trainer wrote, until someone asks for that object.
  if (!o.sha256.empty()) j["metadata"] = {{"sha256", o.sha256}};
  return j;
}

json BucketJson(const buckets::BucketInfo& b) {
  return {{"kind", "storage#bucket"},
          {"id", b.name},
          {"name", b.name},
          {"timeCreated", common::FormatRfc3339(b.created)},
          {"updated", common::FormatRfc3339(b.updated)}};
}

// Runs `task` on a worker; 503 when the router is stopping.
void Submit(StorageRouter::Workers& workers, const Responder& respond, bool pretty, std::function<void()> task) {
  if (!workers.Post(std::move(task))) {
    respond(RenderError(absl::UnavailableError("The server is shutting down."), pretty));
  }
}

// What the routes' handlers use.
struct Context {
  buckets::BucketStore& store;
  StorageRouter::Workers& workers;
  iam::IamService& iam;
};

using CallPtr = std::shared_ptr<const StorageCall>;

// ---- the routes' handlers: checks on the io thread, store calls on a worker ----

void InsertObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckUploadCall(*call); !s.ok()) return respond(RenderError(s, pretty));
  auto req = std::make_shared<HttpRequest>(std::move(request));
  Submit(c.workers, respond, pretty, [&store = c.store, call, req, respond, pretty] {
    const std::string& bucket = call->Var("bucket");
    if (auto b = store.EnsureBucket(bucket); !b.ok()) return respond(RenderError(b.status(), pretty));
    const std::string name = call->Param("name");
    auto put = req->body_file.empty()
                   ? store.Put(bucket, name, req->body)
                   : store.PutFile(bucket, name, req->body_file,
                                   req->body_sha256.empty() ? std::nullopt
                                                            : std::optional<std::string>(req->body_sha256));
    if (!put.ok()) return respond(RenderError(put.status(), pretty));
    respond(RenderJson(ObjectJson(*put), pretty));
  });
}

void ListBuckets(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"project", "prefix", "pageToken", "maxResults"}); !s.ok()) return fail(s);
  int max_results = 1000;
  if (const std::string max = call->Param("maxResults"); !max.empty()) {
    if (!absl::SimpleAtoi(max, &max_results) || max_results < 1) {
      return fail(BadParam("maxResults", absl::StrCat("must be a positive integer, got \"", max, "\"")));
    }
  }
  std::string after;
  if (!absl::WebSafeBase64Unescape(call->Param("pageToken"), &after)) {
    return fail(BadParam("pageToken", "is not a page token this server returned"));
  }
  max_results = std::min(max_results, 1000);
  // The operator sees every bucket; anyone else those of the project they
  // may list (the gate checked storage.buckets.list on it).
  std::optional<std::set<std::string>> visible;
  if (!call->caller.IsOperator()) {
    const auto owned = c.iam.BucketsOf(call->Param("project"));
    visible.emplace(owned.begin(), owned.end());
  }
  Submit(c.workers, respond, pretty, [&store = c.store, call, after, max_results, respond, pretty, visible] {
    auto list = store.ListBuckets();
    if (!list.ok()) return respond(RenderError(list.status(), pretty));
    if (visible) std::erase_if(*list, [&](const buckets::BucketInfo& b) { return !visible->count(b.name); });
    json items = json::array();
    const std::string prefix = call->Param("prefix");
    std::string next;
    for (const auto& b : *list) {
      if (!absl::StartsWith(b.name, prefix) || (!after.empty() && b.name <= after)) continue;
      if (static_cast<int>(items.size()) == max_results) {
        next = absl::WebSafeBase64Escape(items.back()["name"].get<std::string>());
        break;
      }
      items.push_back(BucketJson(b));
    }
    json out = {{"kind", "storage#buckets"}, {"items", items}};
    if (!next.empty()) out["nextPageToken"] = next;
    respond(RenderJson(out, pretty));
  });
}

void InsertBucket(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"project", "predefinedAcl", "predefinedDefaultObjectAcl"}); !s.ok()) {
    return fail(s);
  }
  auto body = ParseJsonBody(request.body, false);
  if (!body.ok()) return fail(body.status());
  if (!body->is_object() || !body->contains("name") || !(*body)["name"].is_string()) {
    return fail(common::InvalidArgumentWithViolations("Invalid bucket resource.",
                                                      {{"name", "is required: the bucket's name, a string"}}));
  }
  const std::string name = (*body)["name"].get<std::string>();
  if (auto s = CheckBucketName(name, "name"); !s.ok()) return fail(s);
  const std::string project = call->Param("project");
  Submit(c.workers, respond, pretty, [&store = c.store, &iam = c.iam, name, project, respond, pretty] {
    auto b = store.CreateBucket(name);
    if (!b.ok()) return respond(RenderError(b.status(), pretty));
    if (project.empty()) return respond(RenderJson(BucketJson(*b), pretty));  // the operator's, nobody else's
    // The bucket belongs to the project from now on: its policy governs it.
    iam.SetBucketProject(name, project, [b = *b, respond, pretty](absl::Status st) {
      if (!st.ok()) return respond(RenderError(st, pretty));
      respond(RenderJson(BucketJson(b), pretty));
    });
  });
}

void GetBucket(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckQuery(*call, {}); !s.ok()) return respond(RenderError(s, pretty));
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return respond(RenderError(s, pretty));
  Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
    auto b = store.GetBucket(call->Var("bucket"));
    if (!b.ok()) return respond(RenderError(b.status(), pretty));
    respond(RenderJson(BucketJson(*b), pretty));
  });
}

void ListObjects(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"prefix", "delimiter", "pageToken", "maxResults"}); !s.ok()) return fail(s);
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  buckets::ListObjectsRequest list;
  list.prefix = call->Param("prefix");
  list.delimiter = call->Param("delimiter");
  list.page_token = call->Param("pageToken");
  if (const std::string max = call->Param("maxResults"); !max.empty()) {
    if (!absl::SimpleAtoi(max, &list.max_results) || list.max_results < 1) {
      return fail(BadParam("maxResults", absl::StrCat("must be a positive integer, got \"", max, "\"")));
    }
  }
  Submit(c.workers, respond, pretty, [&store = c.store, call, list, respond, pretty] {
    auto result = store.List(call->Var("bucket"), list);
    if (!result.ok()) {
      if (result.status().code() == absl::StatusCode::kInvalidArgument) {
        return respond(RenderError(BadParam("pageToken", std::string(result.status().message())), pretty));
      }
      return respond(RenderError(result.status(), pretty));
    }
    json items = json::array();
    for (const auto& o : result->items) items.push_back(ObjectJson(o));
    json out = {{"kind", "storage#objects"}, {"items", items}, {"prefixes", result->prefixes}};
    if (!result->next_page_token.empty()) out["nextPageToken"] = result->next_page_token;
    respond(RenderJson(out, pretty));
  });
}

// The object's metadata, or with alt=media its bytes.
void GetObject(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = CheckQuery(*call, {}, /*media_allowed=*/true); !s.ok()) return fail(s);
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  if (call->Param("alt") == "media") {
    return Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
      auto object = store.OpenObject(call->Var("bucket"), call->Var("object"));
      if (!object.ok()) return respond(RenderError(object.status(), pretty));
      HttpResponse r;
      r.content_type = "application/octet-stream";
      r.body_fd = OwnBodyFd(object->fd.release());
      respond(std::move(r));
    });
  }
  Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
    auto info = store.Stat(call->Var("bucket"), call->Var("object"), /*compute_sha256=*/true);
    if (!info.ok()) return respond(RenderError(info.status(), pretty));
    respond(RenderJson(ObjectJson(*info), pretty));
  });
}

void DeleteObject(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
    if (auto s = store.Delete(call->Var("bucket"), call->Var("object")); !s.ok()) {
      return respond(RenderError(s, pretty));
    }
    HttpResponse r;
    r.status = 204;
    respond(std::move(r));
  });
}

using HandlerFn = void (*)(const Context&, CallPtr, HttpRequest, Responder);

// The permission a route needs, on the bucket its path names or on the
// project its `project` parameter names (which then is required of anyone
// but the operator, as Google requires it).
enum class Scope { kBucket, kProjectParam };
struct Route {
  HandlerFn handler;
  const char* permission;
  Scope scope = Scope::kBucket;
  bool audited = false;  // it changes something
};

constexpr absl::string_view kInsertObject = "storage.objects.insert";
namespace perm = iam::perm;

// Every Cloud Storage route mlengine serves (names: the JSON API's method ids).
const RouteTable<Route>& Routes() {
  static const auto* routes = new RouteTable<Route>(
      kStoragePathSyntax,
      {
          {"POST", "upload/storage/v1/b/{bucket}/o", std::string(kInsertObject),
           {&InsertObject, perm::kObjectsCreate, Scope::kBucket, true}},
          {"GET", "storage/v1/b", "storage.buckets.list", {&ListBuckets, perm::kBucketsList, Scope::kProjectParam}},
          {"POST", "storage/v1/b", "storage.buckets.insert",
           {&InsertBucket, perm::kBucketsCreate, Scope::kProjectParam, true}},
          {"GET", "storage/v1/b/{bucket}", "storage.buckets.get", {&GetBucket, perm::kBucketsGet}},
          {"GET", "storage/v1/b/{bucket}/o", "storage.objects.list", {&ListObjects, perm::kObjectsList}},
          {"GET", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.get", {&GetObject, perm::kObjectsGet}},
          {"DELETE", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.delete",
           {&DeleteObject, perm::kObjectsDelete, Scope::kBucket, true}},
      });
  return *routes;
}

// May the caller use the route?
absl::Status CheckAccess(const AccessGate& gate, const Route& route, const StorageCall& call) {
  if (route.scope == Scope::kBucket) return gate.Check(call.caller, route.permission, iam::Resource::Bucket(call.Var("bucket")));
  const std::string project = call.Param("project");
  if (project.empty()) {
    if (call.caller.IsOperator()) return absl::OkStatus();
    return BadParam("project", "is required: the project whose buckets these are");
  }
  return gate.Check(call.caller, route.permission, iam::Resource::Project(project));
}

// The audit line of a call that changes a bucket or an object: in the
// bucket's project (or the `project` a bucket is created in).
db::AuditRecord AuditRecordOf(const iam::IamService& iam, const std::string& method, const StorageCall& call,
                              const std::string& request_id) {
  db::AuditRecord record;
  record.principal = call.caller.Member();
  record.method = method;
  record.request_id = request_id;
  if (call.vars.count("bucket")) {
    record.project = iam.BucketProject(call.Var("bucket")).value_or("");
    record.resource = absl::StrCat(iam::BucketResource(call.Var("bucket")),
                                   call.vars.count("object") ? "/objects/" + call.Var("object") : "");
  } else {
    record.project = call.Param("project");
    record.resource = absl::StrCat("projects/", call.Param("project"));
  }
  return record;
}

}  // namespace

StorageRouter::StorageRouter(buckets::BucketStore& store, iam::IamService& iam, int workers)
    : store_(store), iam_(iam), gate_(iam), workers_(std::make_unique<Workers>(workers, Workers::OnStop::kDrain)) {}

StorageRouter::~StorageRouter() = default;

void StorageRouter::Stop() { workers_->Stop(); }

bool StorageRouter::Serves(absl::string_view target) {
  return absl::StartsWith(target, "/storage/") || absl::StartsWith(target, "/upload/");
}

std::optional<HttpResponse> StorageRouter::CheckUpload(const HttpRequest& head) const {
  auto call = ParseStorageCall(head);
  if (!call.ok()) return RenderError(call.status(), true);
  auto found = Routes().Find(call->method, call->path);
  const bool upload = found.route != nullptr && found.route->name == kInsertObject;
  auto refuse = [&](const absl::Status& s) {
    HttpResponse refusal = RenderError(s, call->pretty);
    if (upload) refusal.route = found.route->name;
    return refusal;
  };
  auto caller = gate_.Authenticate(head.authorization, call->Param("access_token"));
  if (!caller.ok()) return refuse(caller.status());
  if (!upload) return refuse(NoRoute(head));
  call->caller = *std::move(caller);
  call->vars = std::move(found.vars);
  if (auto s = CheckUploadCall(*call); !s.ok()) return refuse(s);
  if (auto s = CheckAccess(gate_, found.route->handler, *call); !s.ok()) return refuse(s);
  return std::nullopt;
}

void StorageRouter::Handle(HttpRequest request, Responder respond) const {
  auto parsed = ParseStorageCall(request);
  if (!parsed.ok()) return respond(RenderError(parsed.status(), true));
  auto call = std::make_shared<StorageCall>(*std::move(parsed));
  const bool pretty = call->pretty;
  auto found = Routes().Find(call->method, call->path);
  if (found.route != nullptr) respond = NameResponses(std::move(respond), found.route->name);
  auto caller = gate_.Authenticate(request.authorization, call->Param("access_token"));
  if (!caller.ok()) return respond(RenderError(caller.status(), pretty));
  call->caller = *std::move(caller);
  if (found.route == nullptr) return respond(RenderError(NoRoute(request), pretty));
  call->vars = std::move(found.vars);
  const Route& route = found.route->handler;
  if (route.audited) {
    respond = RecordInAuditLog(iam_, AuditRecordOf(iam_, found.route->name, *call, request.request_id),
                               std::move(respond));
  }
  if (auto s = CheckAccess(gate_, route, *call); !s.ok()) return respond(RenderError(s, pretty));
  route.handler(Context{store_, *workers_, iam_}, std::move(call), std::move(request), std::move(respond));
}

}  // namespace mle::api
