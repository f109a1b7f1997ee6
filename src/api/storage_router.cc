#include "api/storage_router.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/http_util.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::api {

namespace {

using nlohmann::json;

constexpr absl::string_view kStoragePrefix = "/storage/v1/b";
constexpr absl::string_view kUploadPrefix = "/upload";

// Parameters any storage method accepts (Google's standard ones, and two the
// Cloud Storage clients send that change nothing here).
constexpr absl::string_view kCommonParams[] = {"$.xgafv",  "access_token", "alt",         "callback",
                                               "fields",   "key",          "oauth_token", "prettyPrint",
                                               "quotaUser", "upload_protocol", "userProject", "projection"};

enum class Resource { kBuckets, kBucket, kObjects, kObject };

struct StorageCall {
  bool upload = false;
  std::string method;
  Resource resource = Resource::kBuckets;
  std::string bucket;
  std::string object;  // kObject only (decoded)
  QueryParams query;
  bool pretty = true;

  std::string Param(const std::string& name) const { return QueryParam(query, name); }
  bool Has(const std::string& name) const { return query.count(name) > 0; }
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
  absl::string_view path = target->raw_path;
  if (absl::StartsWith(path, kUploadPrefix)) {
    call.upload = true;
    path.remove_prefix(kUploadPrefix.size());
  }
  if (!absl::StartsWith(path, kStoragePrefix)) return NoRoute(req);
  path.remove_prefix(kStoragePrefix.size());
  if (path.empty() || path == "/") {
    call.resource = Resource::kBuckets;
    return call;
  }
  if (path.front() != '/') return NoRoute(req);
  path.remove_prefix(1);
  absl::string_view bucket = path.substr(0, path.find('/'));
  path.remove_prefix(bucket.size());
  auto decoded = PercentDecode(bucket, false);
  if (!decoded) return absl::InvalidArgumentError("The request path is not correctly percent-encoded.");
  call.bucket = *decoded;
  if (path.empty() || path == "/") {
    call.resource = Resource::kBucket;
    return call;
  }
  if (path == "/o" || path == "/o/") {
    call.resource = Resource::kObjects;
    return call;
  }
  if (!absl::StartsWith(path, "/o/")) return NoRoute(req);
  path.remove_prefix(3);
  // Everything after ".../o/" is the object name: "%2F" and raw '/' alike.
  decoded = PercentDecode(path, false);
  if (!decoded) return absl::InvalidArgumentError("The request path is not correctly percent-encoded.");
  call.resource = Resource::kObject;
  call.object = *decoded;
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

// The upload's route, parameters and names: everything knowable before the
// body arrives.
absl::Status CheckUploadCall(const HttpRequest& req, const StorageCall& call) {
  if (call.resource != Resource::kObjects || call.method != "POST") return NoRoute(req);
  if (auto s = CheckQuery(call, {"uploadType", "name"}); !s.ok()) return s;
  if (auto s = CheckBucketName(call.bucket); !s.ok()) return s;
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

}  // namespace

namespace {
// Runs `task` on a worker; 503 when the router is stopping.
void Submit(StorageRouter::Workers& workers, const Responder& respond, bool pretty, std::function<void()> task) {
  if (!workers.Post(std::move(task))) {
    respond(RenderError(absl::UnavailableError("The server is shutting down."), pretty));
  }
}
}  // namespace

StorageRouter::StorageRouter(buckets::BucketStore& store, const Authenticator& auth, int workers)
    : store_(store), auth_(auth), workers_(std::make_unique<Workers>(workers, Workers::OnStop::kDrain)) {}

StorageRouter::~StorageRouter() = default;

void StorageRouter::Stop() { workers_->Stop(); }

bool StorageRouter::Serves(absl::string_view target) {
  return absl::StartsWith(target, "/storage/") || absl::StartsWith(target, "/upload/");
}

std::optional<HttpResponse> StorageRouter::CheckUpload(const HttpRequest& head) const {
  auto call = ParseStorageCall(head);
  if (!call.ok()) return RenderError(call.status(), true);
  const std::string token = call->Param("access_token");
  if (auto s = auth_.Check(head.authorization, token); !s.ok()) return RenderError(s, call->pretty);
  if (!call->upload) return RenderError(NoRoute(head), call->pretty);
  if (auto s = CheckUploadCall(head, *call); !s.ok()) return RenderError(s, call->pretty);
  return std::nullopt;
}

void StorageRouter::Handle(HttpRequest request, Responder respond) const {
  auto parsed = ParseStorageCall(request);
  if (!parsed.ok()) return respond(RenderError(parsed.status(), true));
  auto call = std::make_shared<StorageCall>(*std::move(parsed));
  const bool pretty = call->pretty;
  auto fail = [respond, pretty](const absl::Status& s) { respond(RenderError(s, pretty)); };
  if (auto s = auth_.Check(request.authorization, call->Param("access_token")); !s.ok()) return fail(s);

  buckets::BucketStore& store = store_;
  const std::string& m = call->method;

  if (call->upload) {
    if (auto s = CheckUploadCall(request, *call); !s.ok()) return fail(s);
    auto req = std::make_shared<HttpRequest>(std::move(request));
    return Submit(*workers_, respond, pretty, [&store, call, req, respond, pretty] {
      if (auto b = store.EnsureBucket(call->bucket); !b.ok()) return respond(RenderError(b.status(), pretty));
      const std::string name = call->Param("name");
      auto put = req->body_file.empty()
                     ? store.Put(call->bucket, name, req->body)
                     : store.PutFile(call->bucket, name, req->body_file,
                                     req->body_sha256.empty() ? std::nullopt
                                                              : std::optional<std::string>(req->body_sha256));
      if (!put.ok()) return respond(RenderError(put.status(), pretty));
      respond(RenderJson(ObjectJson(*put), pretty));
    });
  }

  switch (call->resource) {
    case Resource::kBuckets: {
      if (m == "GET") {
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
        return Submit(*workers_, respond, pretty, [&store, call, after, max_results, respond, pretty] {
          auto list = store.ListBuckets();
          if (!list.ok()) return respond(RenderError(list.status(), pretty));
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
      if (m == "POST") {
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
        return Submit(*workers_, respond, pretty, [&store, name, respond, pretty] {
          auto b = store.CreateBucket(name);
          if (!b.ok()) return respond(RenderError(b.status(), pretty));
          respond(RenderJson(BucketJson(*b), pretty));
        });
      }
      return fail(NoRoute(request));
    }
    case Resource::kBucket: {
      if (m != "GET") return fail(NoRoute(request));
      if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
      if (auto s = CheckBucketName(call->bucket); !s.ok()) return fail(s);
      return Submit(*workers_, respond, pretty, [&store, call, respond, pretty] {
        auto b = store.GetBucket(call->bucket);
        if (!b.ok()) return respond(RenderError(b.status(), pretty));
        respond(RenderJson(BucketJson(*b), pretty));
      });
    }
    case Resource::kObjects: {
      if (m != "GET") return fail(NoRoute(request));
      if (auto s = CheckQuery(*call, {"prefix", "delimiter", "pageToken", "maxResults"}); !s.ok()) return fail(s);
      if (auto s = CheckBucketName(call->bucket); !s.ok()) return fail(s);
      buckets::ListObjectsRequest list;
      list.prefix = call->Param("prefix");
      list.delimiter = call->Param("delimiter");
      list.page_token = call->Param("pageToken");
      if (const std::string max = call->Param("maxResults"); !max.empty()) {
        if (!absl::SimpleAtoi(max, &list.max_results) || list.max_results < 1) {
          return fail(BadParam("maxResults", absl::StrCat("must be a positive integer, got \"", max, "\"")));
        }
      }
      return Submit(*workers_, respond, pretty, [&store, call, list, respond, pretty] {
        auto result = store.List(call->bucket, list);
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
    case Resource::kObject: {
      if (m == "GET") {
        if (auto s = CheckQuery(*call, {}, /*media_allowed=*/true); !s.ok()) return fail(s);
      } else if (m == "DELETE") {
        if (auto s = CheckQuery(*call, {}); !s.ok()) return fail(s);
      } else {
        return fail(NoRoute(request));
      }
      if (auto s = CheckBucketName(call->bucket); !s.ok()) return fail(s);
      if (auto s = CheckObjectName(call->object, "object"); !s.ok()) return fail(s);
      if (m == "DELETE") {
        return Submit(*workers_, respond, pretty, [&store, call, respond, pretty] {
          if (auto s = store.Delete(call->bucket, call->object); !s.ok()) return respond(RenderError(s, pretty));
          HttpResponse r;
          r.status = 204;
          respond(std::move(r));
        });
      }
      if (call->Param("alt") == "media") {
        return Submit(*workers_, respond, pretty, [&store, call, respond, pretty] {
          auto object = store.OpenObject(call->bucket, call->object);
          if (!object.ok()) return respond(RenderError(object.status(), pretty));
          HttpResponse r;
          r.content_type = "application/octet-stream";
          r.body_fd = OwnBodyFd(object->fd.release());
          respond(std::move(r));
        });
      }
      return Submit(*workers_, respond, pretty, [&store, call, respond, pretty] {
        auto info = store.Stat(call->bucket, call->object, /*compute_sha256=*/true);
        if (!info.ok()) return respond(RenderError(info.status(), pretty));
        respond(RenderJson(ObjectJson(*info), pretty));
      });
    }
  }
  return fail(NoRoute(request));
}

}  // namespace mle::api
