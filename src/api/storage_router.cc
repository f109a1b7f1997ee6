#include "api/storage_router.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/http_util.h"
#include "api/multipart.h"
#include "api/route_table.h"
#include "codec/job_codec.h"
#include "common/status.h"
#include "common/time_format.h"
#include "iam/roles.h"

namespace mle::api {

namespace {

using nlohmann::json;
using buckets::ObjectInfo;
using buckets::Preconditions;
using buckets::WriteOptions;

// Parameters any storage method accepts (Google's standard ones, and some the
// Cloud Storage clients send that change nothing here).
constexpr absl::string_view kCommonParams[] = {"$.xgafv",   "access_token",    "alt",         "callback",
                                               "fields",    "key",             "oauth_token", "prettyPrint",
                                               "quotaUser", "upload_protocol", "userProject", "projection"};
// The preconditions on the object a method writes or reads.
#define MLE_OBJECT_PRECONDITIONS "ifGenerationMatch", "ifGenerationNotMatch", "ifMetagenerationMatch", \
                                 "ifMetagenerationNotMatch"
#define MLE_SOURCE_PRECONDITIONS "ifSourceGenerationMatch", "ifSourceGenerationNotMatch", \
                                 "ifSourceMetagenerationMatch", "ifSourceMetagenerationNotMatch"

// Object names may hold raw '/' and ':' and empty segments ("a//b").
constexpr PathSyntax kStoragePathSyntax{.custom_verbs = false, .ignore_empty_segments = false};
// Small JSON bodies that uploads carry (resumable session metadata) are read
// from their file up to this size.
constexpr int64_t kMaxUploadJsonBytes = 1 << 20;

// One request to a storage route.
struct StorageCall {
  std::string method;
  RequestPath path;
  PathVars vars;  // bucket, object (decoded)
  QueryParams query;
  bool pretty = true;
  iam::Principal caller;
  // How clients reach this server: "http://HOST[/_token/TOKEN]", for the
  // links and session URIs handed out.
  std::string base_url;

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
  call.base_url = absl::StrCat("http://", req.host.empty() ? "localhost" : req.host,
                               req.path_token.empty() ? "" : absl::StrCat("/_token/", req.path_token));
  return call;
}

// The Authorization the request stands for: its header, or the token of a
// "/_token/TOKEN" path prefix (which must then agree with the header).
absl::StatusOr<std::string> EffectiveAuthorization(const HttpRequest& req) {
  if (req.path_token.empty()) return req.authorization;
  const std::string from_path = "Bearer " + req.path_token;
  if (!req.authorization.empty()) {
    const bool same = absl::StartsWithIgnoreCase(req.authorization, "Bearer ") &&
                      absl::StripAsciiWhitespace(absl::string_view(req.authorization).substr(7)) == req.path_token;
    if (!same) {
      return absl::UnauthenticatedError(
          "The request carries two different credentials: a /_token/ path prefix and an Authorization header. "
          "Send one of them (or the same token in both).");
    }
  }
  return from_path;
}

// Google's error body, with the Cloud Storage "errors" list ({domain,
// reason, message}) its clients read, and the HTTP status a store reason
// asks for (412 conditionNotMet, 409 conflict, 416 range).
HttpResponse StorageError(const absl::Status& status, bool pretty) {
  json body = codec::EncodeError(status);
  int http = common::HttpStatusForCode(status.code());
  std::string reason;
  if (auto r = buckets::ReasonOf(status)) {
    http = r->http_status;
    reason = r->reason;
  } else {
    switch (status.code()) {
      case absl::StatusCode::kNotFound: reason = "notFound"; break;
      case absl::StatusCode::kInvalidArgument: reason = "invalid"; break;
      case absl::StatusCode::kUnauthenticated: reason = "required"; break;
      case absl::StatusCode::kPermissionDenied: reason = "forbidden"; break;
      case absl::StatusCode::kAlreadyExists: reason = "conflict"; break;
      case absl::StatusCode::kFailedPrecondition: reason = "failedPrecondition"; break;
      default: reason = "backendError";
    }
  }
  body["error"]["code"] = http;
  body["error"]["errors"] =
      json::array({{{"domain", "global"}, {"reason", reason}, {"message", std::string(status.message())}}});
  return RenderJson(body, pretty, http);
}

// Unknown parameters are refused (as the ml API does), never silently
// ignored: e.g. a precondition this server did not check would be a lie.
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

// An int64 query parameter (nullopt when absent).
absl::StatusOr<std::optional<int64_t>> Int64Param(const StorageCall& call, const std::string& name) {
  if (!call.Has(name)) return std::optional<int64_t>();
  int64_t v = 0;
  if (!absl::SimpleAtoi(call.Param(name), &v)) {
    return BadParam(name, absl::StrCat("must be an integer (int64), got \"", call.Param(name), "\""));
  }
  return std::optional<int64_t>(v);
}

// The four preconditions, named with `prefix` ("if" or "ifSource").
absl::StatusOr<Preconditions> PreconditionsOf(const StorageCall& call, const std::string& prefix = "if") {
  Preconditions p;
  std::pair<const char*, std::optional<int64_t>*> rows[] = {
      {"GenerationMatch", &p.generation_match},
      {"GenerationNotMatch", &p.generation_not_match},
      {"MetagenerationMatch", &p.metageneration_match},
      {"MetagenerationNotMatch", &p.metageneration_not_match},
  };
  for (auto& [suffix, field] : rows) {
    auto v = Int64Param(call, prefix + suffix);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  return p;
}

// PreconditionsOf, and `generation_param` (a generation to act on): without
// object versions, a precondition on the live generation.
absl::StatusOr<Preconditions> PreconditionsAt(const StorageCall& call, const std::string& prefix,
                                             const std::string& generation_param) {
  auto p = PreconditionsOf(call, prefix);
  if (!p.ok()) return p.status();
  auto generation = Int64Param(call, generation_param);
  if (!generation.ok()) return generation.status();
  if (*generation) p->generation_match = **generation;
  return p;
}

// The `generation` parameter: without object versions, only the live
// generation exists.
absl::Status CheckGeneration(const StorageCall& call, const std::string& param, const ObjectInfo& info) {
  auto g = Int64Param(call, param);
  if (!g.ok()) return g.status();
  if (*g && **g != info.generation) {
    return absl::NotFoundError(absl::StrCat("No such object: ", info.bucket, "/", info.name, " at generation ", **g,
                                            " (the live generation is ", info.generation,
                                            "; mlengine keeps no older versions)."));
  }
  return absl::OkStatus();
}

std::string Encoded(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::AsciiStrToUpper(absl::BytesToHexString(std::string(1, static_cast<char>(c)))));
    }
  }
  return out;
}

std::string ContentTypeOf(const ObjectInfo& o) {
  return o.attrs.content_type.empty() ? "application/octet-stream" : o.attrs.content_type;
}

std::string EtagOf(const ObjectInfo& o) {
  return absl::Base64Escape(absl::StrCat(o.generation, "/", o.metageneration));
}

json ObjectJson(const ObjectInfo& o, const std::string& base_url) {
  const std::string path = absl::StrCat("/storage/v1/b/", Encoded(o.bucket), "/o/", Encoded(o.name));
  json j = {{"kind", "storage#object"},
            {"id", absl::StrCat(o.bucket, "/", o.name, "/", o.generation)},
            {"selfLink", absl::StrCat(base_url, path)},
            {"mediaLink", absl::StrCat(base_url, path, "?generation=", o.generation, "&alt=media")},
            {"name", o.name},
            {"bucket", o.bucket},
            {"generation", std::to_string(o.generation)},
            {"metageneration", std::to_string(o.metageneration)},
            {"contentType", ContentTypeOf(o)},
            {"storageClass", "STANDARD"},
            {"size", std::to_string(o.size)},
            {"etag", EtagOf(o)},
            {"timeCreated", common::FormatRfc3339(o.created)},
            {"updated", common::FormatRfc3339(o.updated)},
            {"timeStorageClassUpdated", common::FormatRfc3339(o.created)}};
  // Unknown for files a trainer wrote and nobody read yet (listings do not
  // read files); a get computes them.
  if (o.checksums) {
    j["md5Hash"] = common::Md5Base64(*o.checksums);
    j["crc32c"] = common::Crc32cBase64(o.checksums->crc32c);
  }
  if (!o.attrs.metadata.empty()) j["metadata"] = o.attrs.metadata;
  return j;
}

json BucketJson(const buckets::BucketInfo& b) {
  return {{"kind", "storage#bucket"},
          {"id", b.name},
          {"name", b.name},
          {"location", "US"},
          {"storageClass", "STANDARD"},
          {"metageneration", "1"},
          {"timeCreated", common::FormatRfc3339(b.created)},
          {"updated", common::FormatRfc3339(b.updated)}};
}

// Runs `task` on a worker; 503 when the router is stopping.
void Submit(StorageRouter::Workers& workers, const Responder& respond, bool pretty, std::function<void()> task) {
  if (!workers.Post(std::move(task))) {
    respond(StorageError(absl::UnavailableError("The server is shutting down."), pretty));
  }
}

// What the routes' handlers use.
struct Context {
  buckets::BucketStore& store;
  StorageRouter::Workers& workers;
  iam::IamService& iam;
};

using CallPtr = std::shared_ptr<const StorageCall>;

// ---- object resources given in request bodies ----

// The writable fields of an object resource (contentType, metadata, and for
// uploads name and checksums) applied to `options`; others Cloud Storage
// has that mlengine does not keep are refused rather than dropped.
absl::Status ApplyObjectResource(const json& body, bool patch, WriteOptions& options, std::string* name) {
  if (!body.is_object()) {
    return common::InvalidArgumentWithViolations("Invalid object resource.", {{"(body)", "must be a JSON object"}});
  }
  std::vector<common::FieldViolation> violations;
  static const std::set<std::string> kIgnored = {
      "kind", "id", "selfLink", "mediaLink", "bucket", "generation", "metageneration", "size", "etag",
      "timeCreated", "updated", "timeStorageClassUpdated", "storageClass", "owner", "acl", "contentEncoding",
      "timeDeleted", "componentCount"};
  for (const auto& [key, value] : body.items()) {
    if (key == "name") {
      if (!value.is_string()) {
        violations.push_back({"name", "must be a string"});
      } else if (name != nullptr) {
        *name = value.get<std::string>();
      }
    } else if (key == "contentType") {
      if (value.is_null()) {
        options.attrs.content_type.clear();
      } else if (!value.is_string()) {
        violations.push_back({"contentType", "must be a string"});
      } else {
        options.attrs.content_type = value.get<std::string>();
      }
    } else if (key == "metadata") {
      if (value.is_null()) {
        options.attrs.metadata.clear();
        continue;
      }
      if (!value.is_object()) {
        violations.push_back({"metadata", "must be an object of string values"});
        continue;
      }
      if (!patch) options.attrs.metadata.clear();
      for (const auto& [k, v] : value.items()) {
        if (v.is_null()) {
          options.attrs.metadata.erase(k);
        } else if (v.is_string()) {
          options.attrs.metadata[k] = v.get<std::string>();
        } else if (v.is_number() || v.is_boolean()) {
          options.attrs.metadata[k] = v.dump();
        } else {
          violations.push_back({"metadata." + k, "must be a string"});
        }
      }
    } else if (key == "md5Hash" && value.is_string()) {
      auto md5 = common::Md5FromBase64(value.get<std::string>());
      if (!md5) {
        violations.push_back({"md5Hash", "must be the base64 of a 16-byte MD5 digest"});
      } else {
        options.expected_md5 = *md5;
      }
    } else if (key == "crc32c" && value.is_string()) {
      auto crc = common::Crc32cFromBase64(value.get<std::string>());
      if (!crc) {
        violations.push_back({"crc32c", "must be the base64 of the 4 big-endian bytes of a CRC32C"});
      } else {
        options.expected_crc32c = *crc;
      }
    } else if (kIgnored.count(key) == 0 && !value.is_null()) {
      violations.push_back({key, "is not supported by mlengine's object store"});
    }
  }
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid object resource.", violations);
  if (auto s = buckets::ValidateAttrs(options.attrs); !s.ok()) {
    return common::InvalidArgumentWithViolations("Invalid object resource.", {{"metadata", std::string(s.message())}});
  }
  return absl::OkStatus();
}

// "crc32c=...,md5=..." (x-goog-hash) into expected checksums.
absl::Status ApplyGoogHash(const std::string& header, WriteOptions& options) {
  if (header.empty()) return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(header, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "crc32c") {
      auto crc = common::Crc32cFromBase64(value);
      if (!crc) return BadParam("x-goog-hash", "crc32c must be the base64 of 4 big-endian bytes");
      options.expected_crc32c = *crc;
    } else if (key == "md5") {
      auto md5 = common::Md5FromBase64(value);
      if (!md5) return BadParam("x-goog-hash", "md5 must be the base64 of a 16-byte digest");
      options.expected_md5 = *md5;
    }
  }
  return absl::OkStatus();
}

// The body of a streamed upload request that is small JSON (a resumable
// session's metadata); {} when empty.
absl::StatusOr<json> UploadJson(const HttpRequest& req) {
  std::string text = req.body;
  if (!req.body_file.empty()) {
    if (req.body_size > static_cast<uint64_t>(kMaxUploadJsonBytes)) {
      return common::InvalidArgumentWithViolations(
          "Invalid upload request.", {{"(body)", absl::StrCat("the object's metadata is larger than ",
                                                              kMaxUploadJsonBytes, " bytes")}});
    }
    int fd = ::open(req.body_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::InternalError("cannot read the request body");
    text.resize(req.body_size);
    ssize_t n = ::pread(fd, text.data(), text.size(), 0);
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) return absl::InternalError("cannot read the request body");
  }
  return ParseJsonBody(text, /*allow_empty=*/true);
}

// ---- uploads ----

// The upload's parameters and names: everything knowable before the body
// arrives.
absl::Status CheckUploadCall(const StorageCall& call) {
  if (auto s = CheckQuery(call, {"uploadType", "name", "upload_id", "predefinedAcl", MLE_OBJECT_PRECONDITIONS});
      !s.ok()) {
    return s;
  }
  if (auto s = CheckBucketName(call.Var("bucket")); !s.ok()) return s;
  std::vector<common::FieldViolation> violations;
  const std::string type = call.Param("uploadType");
  if (call.method == "POST") {
    if (type != "media" && type != "multipart" && type != "resumable") {
      violations.push_back({"uploadType", type.empty() ? "is required: media, multipart or resumable"
                                                       : absl::StrCat("\"", type, "\" is not supported: use media, "
                                                                      "multipart or resumable")});
    }
    if (type == "media" && !call.Has("name")) violations.push_back({"name", "is required: the object's name"});
  } else if (!call.Has("upload_id")) {
    violations.push_back({"upload_id", "is required: the session URI returned by uploadType=resumable"});
  }
  if (call.Has("name")) {
    if (auto s = buckets::ValidateObjectName(call.Param("name")); !s.ok()) {
      violations.push_back({"name", std::string(s.message())});
    }
  }
  if (auto p = PreconditionsOf(call); !p.ok()) return p.status();
  if (!violations.empty()) return common::InvalidArgumentWithViolations("Invalid upload request.", violations);
  return absl::OkStatus();
}

// Options common to every upload type: the query's preconditions.
absl::StatusOr<WriteOptions> UploadOptions(const StorageCall& call) {
  WriteOptions options;
  auto p = PreconditionsOf(call);
  if (!p.ok()) return p.status();
  options.preconditions = *p;
  return options;
}

// "Range: bytes=0-N" for a session holding N+1 bytes (none when empty).
void AddReceivedRange(HttpResponse& r, int64_t received) {
  if (received > 0) r.headers.emplace_back("Range", absl::StrCat("bytes=0-", received - 1));
}

HttpResponse Incomplete(int64_t received) {
  HttpResponse r;
  r.status = 308;
  r.content_type = "text/plain; charset=utf-8";
  AddReceivedRange(r, received);
  return r;
}

// A resumable PUT's Content-Range: "bytes A-B/TOTAL", "bytes A-B/*",
// "bytes A-*/*" (the rest of the object in this body), "bytes */TOTAL"
// (status, or the end of an upload whose bytes all arrived) or "bytes */*"
// (status).
struct ContentRange {
  bool has_bytes = false;
  int64_t first = 0;
  int64_t last = -1;
  std::optional<int64_t> total;
};

absl::StatusOr<ContentRange> ParseContentRange(absl::string_view header, uint64_t body_size) {
  ContentRange r;
  auto bad = [&](absl::string_view why) {
    return BadParam("Content-Range", absl::StrCat("\"", header, "\" ", why,
                                                  ": use \"bytes FIRST-LAST/TOTAL\", \"bytes FIRST-LAST/*\", "
                                                  "\"bytes */TOTAL\" or \"bytes */*\""));
  };
  if (header.empty()) {  // the whole object in one request
    r.has_bytes = body_size > 0;
    r.last = static_cast<int64_t>(body_size) - 1;
    r.total = static_cast<int64_t>(body_size);
    return r;
  }
  absl::string_view v = absl::StripAsciiWhitespace(header);
  if (!absl::StartsWith(v, "bytes ")) return bad("is not a byte range");
  v.remove_prefix(6);
  const size_t slash = v.find('/');
  if (slash == absl::string_view::npos) return bad("has no total");
  const absl::string_view range = v.substr(0, slash), total = v.substr(slash + 1);
  if (total != "*") {
    int64_t t = 0;
    if (!absl::SimpleAtoi(total, &t) || t < 0) return bad("has a malformed total");
    r.total = t;
  }
  if (absl::EndsWith(range, "-*")) {
    // "bytes FIRST-*/...": the body is the rest of the object, however long
    // (a stream of unknown size sent in one request); it ends the upload.
    if (!absl::SimpleAtoi(range.substr(0, range.size() - 2), &r.first) || r.first < 0) {
      return bad("has a malformed range");
    }
    r.has_bytes = body_size > 0;
    r.last = r.first + static_cast<int64_t>(body_size) - 1;
    if (!r.total) r.total = r.first + static_cast<int64_t>(body_size);
  } else if (range != "*") {
    const size_t dash = range.find('-');
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(range.substr(0, dash), &r.first) ||
        !absl::SimpleAtoi(range.substr(dash + 1), &r.last) || r.first < 0 || r.last < r.first) {
      return bad("has a malformed range");
    }
    r.has_bytes = true;
    if (static_cast<uint64_t>(r.last - r.first + 1) != body_size) {
      return bad(absl::StrCat("announces ", r.last - r.first + 1, " bytes but the body has ", body_size));
    }
    if (r.total && r.last >= *r.total) return bad("ends beyond its total");
  } else if (body_size != 0) {
    return bad("has no range for the body's bytes");
  }
  return r;
}

// A download's Range header on an object of `size` bytes: [first, last];
// nullopt for the whole object; 416 (reason requestedRangeNotSatisfiable)
// when it cannot be met.
absl::StatusOr<std::optional<std::pair<int64_t, int64_t>>> ParseRange(absl::string_view header, int64_t size) {
  using Result = std::optional<std::pair<int64_t, int64_t>>;
  header = absl::StripAsciiWhitespace(header);
  if (header.empty()) return Result();
  auto unsatisfiable = [&] {
    return buckets::WithReason(
        absl::OutOfRangeError(absl::StrCat("The requested range \"", header, "\" cannot be satisfied: the object has ",
                                           size, " bytes.")),
        "requestedRangeNotSatisfiable", 416);
  };
  if (!absl::StartsWith(header, "bytes=") || header.find(',') != absl::string_view::npos) {
    return BadParam("Range", absl::StrCat("\"", header, "\" is not a single byte range (bytes=FIRST-LAST, "
                                                        "bytes=FIRST- or bytes=-SUFFIX)"));
  }
  const absl::string_view spec = header.substr(6);
  const size_t dash = spec.find('-');
  if (dash == absl::string_view::npos) return BadParam("Range", absl::StrCat("\"", header, "\" has no '-'"));
  const absl::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
  int64_t first = 0, last = size - 1;
  if (a.empty()) {  // the last N bytes
    int64_t n = 0;
    if (!absl::SimpleAtoi(b, &n) || n < 0) return BadParam("Range", absl::StrCat("\"", header, "\" is malformed"));
    if (n == 0) return unsatisfiable();
    first = std::max<int64_t>(0, size - n);
  } else {
    if (!absl::SimpleAtoi(a, &first) || first < 0 || (!b.empty() && (!absl::SimpleAtoi(b, &last) || last < first))) {
      return BadParam("Range", absl::StrCat("\"", header, "\" is malformed"));
    }
    last = std::min(last, size - 1);
  }
  if (first >= size) {
    if (size == 0 && first == 0 && b.empty()) return Result();  // "bytes=0-" of an empty object
    return unsatisfiable();
  }
  return Result(std::make_pair(first, last));
}

// The object's identity and checksums in the headers clients verify a
// download with.
void AddObjectHeaders(HttpResponse& r, const ObjectInfo& o) {
  r.content_type = ContentTypeOf(o);
  if (o.checksums) {
    r.headers.emplace_back("x-goog-hash", absl::StrCat("crc32c=", common::Crc32cBase64(o.checksums->crc32c),
                                                       ",md5=", common::Md5Base64(*o.checksums)));
  }
  r.headers.emplace_back("x-goog-generation", std::to_string(o.generation));
  r.headers.emplace_back("x-goog-metageneration", std::to_string(o.metageneration));
  r.headers.emplace_back("x-goog-stored-content-encoding", "identity");
  r.headers.emplace_back("x-goog-stored-content-length", std::to_string(o.size));
  r.headers.emplace_back("x-goog-storage-class", "STANDARD");
  r.headers.emplace_back("ETag", absl::StrCat("\"", EtagOf(o), "\""));
  r.headers.emplace_back("Accept-Ranges", "bytes");
  r.headers.emplace_back("Last-Modified", absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", o.updated, absl::UTCTimeZone()));
}

// ---- the routes' handlers: checks on the io thread, store calls on a worker ----

void InsertMedia(const Context& c, CallPtr call, std::shared_ptr<HttpRequest> req, WriteOptions options,
                 Responder respond) {
  const bool pretty = call->pretty;
  if (!req->content_type.empty() && !absl::StartsWith(req->content_type, "application/octet-stream")) {
    options.attrs.content_type = req->content_type;
  }
  if (auto s = ApplyGoogHash(req->Header("x-goog-hash"), options); !s.ok()) return respond(StorageError(s, pretty));
  Submit(c.workers, respond, pretty, [&store = c.store, call, req, options, respond, pretty] {
    const std::string& bucket = call->Var("bucket");
    if (auto b = store.EnsureBucket(bucket); !b.ok()) return respond(StorageError(b.status(), pretty));
    const std::string name = call->Param("name");
    auto put = req->body_file.empty()
                   ? store.Put(bucket, name, req->body, options)
                   : store.PutFile(bucket, name, req->body_file, options, req->body_checksums);
    if (!put.ok()) return respond(StorageError(put.status(), pretty));
    respond(RenderJson(ObjectJson(*put, call->base_url), pretty));
  });
}

void InsertMultipart(const Context& c, CallPtr call, std::shared_ptr<HttpRequest> req, WriteOptions options,
                     Responder respond) {
  const bool pretty = call->pretty;
  Submit(c.workers, respond, pretty, [&store = c.store, call, req, options, respond, pretty]() mutable {
    auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
    int fd = req->body_file.empty() ? -1 : ::open(req->body_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(absl::InternalError("cannot read the uploaded body"));
    buckets::ScopedFd body(fd);
    auto parts = SplitMultipartRelated(body.get(), static_cast<int64_t>(req->body_size), req->content_type);
    if (!parts.ok()) return fail(parts.status());
    auto resource = ParseJsonBody(parts->metadata, /*allow_empty=*/true);
    if (!resource.ok()) return fail(resource.status());
    std::string name = call->Param("name");
    if (auto s = ApplyObjectResource(*resource, false, options, &name); !s.ok()) return fail(s);
    if (options.attrs.content_type.empty() && !parts->media_content_type.empty() &&
        !absl::StartsWith(parts->media_content_type, "application/octet-stream")) {
      options.attrs.content_type = parts->media_content_type;
    }
    if (name.empty()) {
      return fail(common::InvalidArgumentWithViolations("Invalid upload request.",
                                                        {{"name", "is required: in the metadata part or the query"}}));
    }
    if (auto s = CheckObjectName(name, "name"); !s.ok()) return fail(s);
    const std::string& bucket = call->Var("bucket");
    if (auto b = store.EnsureBucket(bucket); !b.ok()) return fail(b.status());
    auto put = store.PutRange(bucket, name, body.get(), parts->media_offset, parts->media_length, options);
    if (!put.ok()) return fail(put.status());
    respond(RenderJson(ObjectJson(*put, call->base_url), pretty));
  });
}

void StartResumable(const Context& c, CallPtr call, std::shared_ptr<HttpRequest> req, WriteOptions options,
                    Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  auto resource = UploadJson(*req);
  if (!resource.ok()) return fail(resource.status());
  std::string name = call->Param("name");
  if (auto s = ApplyObjectResource(*resource, false, options, &name); !s.ok()) return fail(s);
  if (options.attrs.content_type.empty()) {
    const std::string announced = req->Header("x-upload-content-type");
    if (!announced.empty() && !absl::StartsWith(announced, "application/octet-stream")) {
      options.attrs.content_type = announced;
    }
  }
  if (name.empty()) {
    return fail(common::InvalidArgumentWithViolations("Invalid upload request.",
                                                      {{"name", "is required: in the body or the query"}}));
  }
  if (auto s = CheckObjectName(name, "name"); !s.ok()) return fail(s);
  buckets::SessionRecord record;
  record.bucket = call->Var("bucket");
  record.name = name;
  record.owner = call->caller.Member();
  record.options = options;
  Submit(c.workers, respond, pretty, [&store = c.store, call, record, respond, pretty]() mutable {
    if (auto b = store.EnsureBucket(record.bucket); !b.ok()) return respond(StorageError(b.status(), pretty));
    // A precondition that already fails is refused now, not after the bytes.
    auto current = store.Stat(record.bucket, record.name, false);
    if (!current.ok() && current.status().code() != absl::StatusCode::kNotFound) {
      return respond(StorageError(current.status(), pretty));
    }
    if (auto s = buckets::CheckPreconditions(record.options.preconditions, current.ok() ? &*current : nullptr,
                                             absl::StrCat("gs://", record.bucket, "/", record.name));
        !s.ok()) {
      return respond(StorageError(s, pretty));
    }
    auto session = store.CreateUpload(record);
    if (!session.ok()) return respond(StorageError(session.status(), pretty));
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/plain; charset=utf-8";
    // The session URI keeps the way this client reached us (/_token/ too).
    r.headers.emplace_back("Location",
                           absl::StrCat(call->base_url, "/upload/storage/v1/b/", Encoded(record.bucket),
                                        "/o?uploadType=resumable&name=", Encoded(record.name),
                                        "&upload_id=", session->id));
    r.headers.emplace_back("X-GUploader-UploadID", session->id);
    respond(std::move(r));
  });
}

void InsertObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckUploadCall(*call); !s.ok()) return respond(StorageError(s, pretty));
  auto options = UploadOptions(*call);
  if (!options.ok()) return respond(StorageError(options.status(), pretty));
  auto req = std::make_shared<HttpRequest>(std::move(request));
  const std::string type = call->Param("uploadType");
  if (type == "multipart") return InsertMultipart(c, call, req, *options, respond);
  if (type == "resumable") return StartResumable(c, call, req, *options, respond);
  InsertMedia(c, call, req, *options, respond);
}

// The session a PUT or DELETE on a session URI names, if it is the
// caller's and for this bucket.
absl::StatusOr<buckets::UploadSession> CallersSession(const buckets::BucketStore& store, const StorageCall& call) {
  auto session = store.GetUpload(call.Param("upload_id"));
  if (!session.ok()) return session.status();
  if (session->record.bucket != call.Var("bucket") ||
      (call.Has("name") && call.Param("name") != session->record.name)) {
    return absl::InvalidArgumentError("The upload_id belongs to another bucket or object than the URI names.");
  }
  if (!call.caller.IsOperator() && session->record.owner != call.caller.Member()) {
    return absl::PermissionDeniedError("This upload session was started by someone else; only they may continue it.");
  }
  return session;
}

void PutResumable(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckUploadCall(*call); !s.ok()) return respond(StorageError(s, pretty));
  auto range = ParseContentRange(request.Header("content-range"), request.body_size + request.body.size());
  if (!range.ok()) return respond(StorageError(range.status(), pretty));
  WriteOptions final_expected;
  if (auto s = ApplyGoogHash(request.Header("x-goog-hash"), final_expected); !s.ok()) {
    return respond(StorageError(s, pretty));
  }
  auto req = std::make_shared<HttpRequest>(std::move(request));
  Submit(c.workers, respond, pretty, [&store = c.store, call, req, range = *range, final_expected, respond,
                                      pretty] {
    auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
    auto session = CallersSession(store, *call);
    if (!session.ok()) return fail(session.status());
    int64_t received = session->received;
    if (range.has_bytes) {
      if (req->body_file.empty()) return fail(absl::InternalError("the piece was not streamed to a file"));
      auto appended = store.AppendUpload(session->id, range.first, req->body_file);
      if (!appended.ok()) return fail(appended.status());
      received = *appended;
    }
    if (range.total && received > *range.total) {
      return fail(BadParam("Content-Range", absl::StrCat("the total ", *range.total, " is less than the ", received,
                                                         " bytes already received")));
    }
    if (!range.total || received < *range.total) return respond(Incomplete(received));
    auto info = store.FinishUpload(session->id, &final_expected);
    if (!info.ok()) return fail(info.status());
    respond(RenderJson(ObjectJson(*info, call->base_url), pretty));
  });
}

void CancelResumable(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckUploadCall(*call); !s.ok()) return respond(StorageError(s, pretty));
  Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
    auto session = CallersSession(store, *call);
    if (!session.ok()) return respond(StorageError(session.status(), pretty));
    if (auto s = store.CancelUpload(session->id); !s.ok()) return respond(StorageError(s, pretty));
    // What Cloud Storage answers a cancelled session with.
    HttpResponse r;
    r.status = 499;
    r.content_type = "text/plain; charset=utf-8";
    respond(std::move(r));
  });
}

void ListBuckets(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
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
    if (!list.ok()) return respond(StorageError(list.status(), pretty));
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
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
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
    if (!b.ok()) return respond(StorageError(b.status(), pretty));
    if (project.empty()) return respond(RenderJson(BucketJson(*b), pretty));  // the operator's, nobody else's
    // The bucket belongs to the project from now on: its policy governs it.
    iam.SetBucketProject(name, project, [b = *b, respond, pretty](absl::Status st) {
      if (!st.ok()) return respond(StorageError(st, pretty));
      respond(RenderJson(BucketJson(b), pretty));
    });
  });
}

void GetBucket(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckQuery(*call, {}); !s.ok()) return respond(StorageError(s, pretty));
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return respond(StorageError(s, pretty));
  Submit(c.workers, respond, pretty, [&store = c.store, call, respond, pretty] {
    auto b = store.GetBucket(call->Var("bucket"));
    if (!b.ok()) return respond(StorageError(b.status(), pretty));
    respond(RenderJson(BucketJson(*b), pretty));
  });
}

void DeleteBucket(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  if (auto s = CheckQuery(*call, {}); !s.ok()) return respond(StorageError(s, pretty));
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return respond(StorageError(s, pretty));
  Submit(c.workers, respond, pretty, [&store = c.store, &iam = c.iam, call, respond, pretty] {
    const std::string& bucket = call->Var("bucket");
    if (auto s = store.DeleteBucket(bucket); !s.ok()) return respond(StorageError(s, pretty));
    auto done = [respond, pretty](absl::Status st) {
      if (!st.ok()) return respond(StorageError(st, pretty));
      HttpResponse r;
      r.status = 204;
      respond(std::move(r));
    };
    // Its project no longer owns it: a bucket of this name created later
    // starts afresh.
    if (!iam.BucketProject(bucket)) return done(absl::OkStatus());
    iam.ClearBucketProject(bucket, done);
  });
}

void ListObjects(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"prefix", "delimiter", "pageToken", "maxResults", "startOffset", "endOffset",
                                  "versions", "includeTrailingDelimiter"});
      !s.ok()) {
    return fail(s);
  }
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  buckets::ListObjectsRequest list;
  list.prefix = call->Param("prefix");
  list.delimiter = call->Param("delimiter");
  list.page_token = call->Param("pageToken");
  list.start_offset = call->Param("startOffset");
  list.end_offset = call->Param("endOffset");
  for (const char* flag : {"versions", "includeTrailingDelimiter"}) {
    const std::string v = call->Param(flag);
    if (!v.empty() && v != "true" && v != "false") return fail(BadParam(flag, "must be true or false"));
  }
  // Without versioning the live objects are every version there is, and
  // no object name can end in '/' (so none equals a prefix).
  list.include_trailing_delimiter = call->Param("includeTrailingDelimiter") == "true";
  if (const std::string max = call->Param("maxResults"); !max.empty()) {
    if (!absl::SimpleAtoi(max, &list.max_results) || list.max_results < 1) {
      return fail(BadParam("maxResults", absl::StrCat("must be a positive integer, got \"", max, "\"")));
    }
  }
  Submit(c.workers, respond, pretty, [&store = c.store, call, list, respond, pretty] {
    auto result = store.List(call->Var("bucket"), list);
    if (!result.ok()) {
      if (result.status().code() == absl::StatusCode::kInvalidArgument) {
        return respond(StorageError(BadParam("pageToken", std::string(result.status().message())), pretty));
      }
      return respond(StorageError(result.status(), pretty));
    }
    json items = json::array();
    for (const auto& o : result->items) items.push_back(ObjectJson(o, call->base_url));
    json out = {{"kind", "storage#objects"}, {"items", items}, {"prefixes", result->prefixes}};
    if (!result->next_page_token.empty()) out["nextPageToken"] = result->next_page_token;
    respond(RenderJson(out, pretty));
  });
}

// The object's metadata, or with alt=media its bytes (a Range of them).
void GetObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"generation", MLE_OBJECT_PRECONDITIONS}, /*media_allowed=*/true); !s.ok()) {
    return fail(s);
  }
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  auto pre = PreconditionsOf(*call);
  if (!pre.ok()) return fail(pre.status());
  const bool media = call->Param("alt") == "media";
  const std::string range_header = request.Header("range");
  Submit(c.workers, respond, pretty, [&store = c.store, call, pre = *pre, media, range_header, respond, pretty] {
    auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
    // Checksums computed for the very file opened, so the headers match the bytes.
    auto object = store.OpenObject(call->Var("bucket"), call->Var("object"), /*compute_checksums=*/true);
    if (!object.ok()) return fail(object.status());
    const ObjectInfo& info = object->info;
    if (auto s = CheckGeneration(*call, "generation", info); !s.ok()) return fail(s);
    if (auto s = buckets::CheckPreconditions(pre, &info, absl::StrCat("gs://", info.bucket, "/", info.name));
        !s.ok()) {
      return fail(s);
    }
    if (!media) return respond(RenderJson(ObjectJson(info, call->base_url), pretty));
    auto range = ParseRange(range_header, info.size);
    if (!range.ok()) {
      HttpResponse r = StorageError(range.status(), pretty);
      if (r.status == 416) r.headers.emplace_back("Content-Range", absl::StrCat("bytes */", info.size));
      return respond(std::move(r));
    }
    HttpResponse r;
    AddObjectHeaders(r, info);
    if (*range) {
      r.status = 206;
      r.body_offset = static_cast<uint64_t>((*range)->first);
      r.body_length = (*range)->second - (*range)->first + 1;
      r.headers.emplace_back("Content-Range",
                             absl::StrCat("bytes ", (*range)->first, "-", (*range)->second, "/", info.size));
    } else {
      r.body_length = info.size;  // what was checksummed, even if the file grows meanwhile
    }
    r.body_fd = OwnBodyFd(object->fd.release());
    respond(std::move(r));
  });
}

void DeleteObject(const Context& c, CallPtr call, HttpRequest, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"generation", MLE_OBJECT_PRECONDITIONS}); !s.ok()) return fail(s);
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  auto pre = PreconditionsAt(*call, "if", "generation");  // a generation to delete: the live one
  if (!pre.ok()) return fail(pre.status());
  Submit(c.workers, respond, pretty, [&store = c.store, call, pre = *pre, respond, pretty] {
    if (auto s = store.Delete(call->Var("bucket"), call->Var("object"), pre); !s.ok()) {
      return respond(StorageError(s, pretty));
    }
    HttpResponse r;
    r.status = 204;
    respond(std::move(r));
  });
}

// PATCH (merge) and PUT (replace) of an object's metadata.
void UpdateObjectAttrs(const Context& c, CallPtr call, HttpRequest request, Responder respond, bool patch) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"generation", "predefinedAcl", MLE_OBJECT_PRECONDITIONS}); !s.ok()) return fail(s);
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  auto pre = PreconditionsAt(*call, "if", "generation");
  if (!pre.ok()) return fail(pre.status());
  auto body = ParseJsonBody(request.body, false);
  if (!body.ok()) return fail(body.status());
  // Checked now, so a malformed body is refused without touching the disk.
  WriteOptions probe;
  if (auto s = ApplyObjectResource(*body, patch, probe, nullptr); !s.ok()) return fail(s);
  Submit(c.workers, respond, pretty, [&store = c.store, call, pre = *pre, body = *body, patch, respond, pretty] {
    auto info = store.UpdateAttrs(call->Var("bucket"), call->Var("object"), pre, [&](buckets::ObjectAttrs& attrs) {
      WriteOptions options;
      options.attrs = attrs;
      if (!patch && !body.contains("contentType")) options.attrs.content_type.clear();
      if (!patch && !body.contains("metadata")) options.attrs.metadata.clear();
      auto s = ApplyObjectResource(body, patch, options, nullptr);
      attrs = options.attrs;
      return s;
    });
    if (!info.ok()) return respond(StorageError(info.status(), pretty));
    respond(RenderJson(ObjectJson(*info, call->base_url), pretty));
  });
}

void PatchObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  UpdateObjectAttrs(c, std::move(call), std::move(request), std::move(respond), /*patch=*/true);
}

void UpdateObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  UpdateObjectAttrs(c, std::move(call), std::move(request), std::move(respond), /*patch=*/false);
}

void ComposeObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  if (auto s = CheckQuery(*call, {"destinationPredefinedAcl", "kmsKeyName", MLE_OBJECT_PRECONDITIONS}); !s.ok()) {
    return fail(s);
  }
  if (auto s = CheckBucketName(call->Var("bucket")); !s.ok()) return fail(s);
  if (auto s = CheckObjectName(call->Var("object"), "object"); !s.ok()) return fail(s);
  auto pre = PreconditionsOf(*call);
  if (!pre.ok()) return fail(pre.status());
  auto body = ParseJsonBody(request.body, false);
  if (!body.ok()) return fail(body.status());
  WriteOptions options;
  options.preconditions = *pre;
  if (body->is_object() && body->contains("destination")) {
    if (auto s = ApplyObjectResource((*body)["destination"], false, options, nullptr); !s.ok()) return fail(s);
  }
  std::vector<buckets::ComposeSource> sources;
  std::vector<common::FieldViolation> violations;
  const json* list = body->is_object() && body->contains("sourceObjects") ? &(*body)["sourceObjects"] : nullptr;
  if (list == nullptr || !list->is_array() || list->empty() ||
      list->size() > static_cast<size_t>(buckets::kMaxComposeSources)) {
    violations.push_back({"sourceObjects", absl::StrCat("is required: 1 to ", buckets::kMaxComposeSources,
                                                        " objects of this bucket, in order")});
  } else {
    for (size_t i = 0; i < list->size(); ++i) {
      const json& item = (*list)[i];
      const std::string field = absl::StrCat("sourceObjects[", i, "]");
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
        violations.push_back({field + ".name", "is required: a string"});
        continue;
      }
      buckets::ComposeSource source;
      source.name = item["name"].get<std::string>();
      if (auto s = buckets::ValidateObjectName(source.name); !s.ok()) {
        violations.push_back({field + ".name", std::string(s.message())});
      }
      auto int64_of = [&](const json& v, const std::string& f) -> std::optional<int64_t> {
        int64_t out = 0;
        if (v.is_number_integer()) return v.get<int64_t>();
        if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &out)) return out;
        violations.push_back({f, "must be an integer"});
        return std::nullopt;
      };
      if (item.contains("generation")) source.if_generation_match = int64_of(item["generation"], field + ".generation");
      if (item.contains("objectPreconditions") && item["objectPreconditions"].is_object() &&
          item["objectPreconditions"].contains("ifGenerationMatch")) {
        source.if_generation_match = int64_of(item["objectPreconditions"]["ifGenerationMatch"],
                                              field + ".objectPreconditions.ifGenerationMatch");
      }
      sources.push_back(std::move(source));
    }
  }
  if (!violations.empty()) return fail(common::InvalidArgumentWithViolations("Invalid compose request.", violations));
  Submit(c.workers, respond, pretty, [&store = c.store, call, sources, options, respond, pretty] {
    auto info = store.Compose(call->Var("bucket"), call->Var("object"), sources, options);
    if (!info.ok()) return respond(StorageError(info.status(), pretty));
    respond(RenderJson(ObjectJson(*info, call->base_url), pretty));
  });
}

// copyTo, and rewriteTo (which finishes in one call here: done, no token).
void CopyOrRewrite(const Context& c, CallPtr call, HttpRequest request, Responder respond, bool rewrite) {
  const bool pretty = call->pretty;
  auto fail = [&](const absl::Status& s) { respond(StorageError(s, pretty)); };
  absl::Status query = rewrite ? CheckQuery(*call, {"sourceGeneration", "destinationPredefinedAcl", "rewriteToken",
                                                    "maxBytesRewrittenPerCall", "destinationKmsKeyName",
                                                    MLE_OBJECT_PRECONDITIONS, MLE_SOURCE_PRECONDITIONS})
                               : CheckQuery(*call, {"sourceGeneration", "destinationPredefinedAcl",
                                                    "destinationKmsKeyName", MLE_OBJECT_PRECONDITIONS,
                                                    MLE_SOURCE_PRECONDITIONS});
  if (!query.ok()) return fail(query);
  for (const char* b : {"sourceBucket", "destinationBucket"}) {
    if (auto s = CheckBucketName(call->Var(b), b); !s.ok()) return fail(s);
  }
  for (const char* o : {"sourceObject", "destinationObject"}) {
    if (auto s = CheckObjectName(call->Var(o), o); !s.ok()) return fail(s);
  }
  if (call->Has("destinationKmsKeyName")) {
    return fail(BadParam("destinationKmsKeyName", "customer-managed encryption keys are not supported"));
  }
  if (rewrite && call->Has("rewriteToken") && !call->Param("rewriteToken").empty()) {
    return fail(BadParam("rewriteToken", "this server finishes every rewrite in one call and hands out no tokens"));
  }
  auto pre = PreconditionsOf(*call);
  if (!pre.ok()) return fail(pre.status());
  auto source_pre = PreconditionsAt(*call, "ifSource", "sourceGeneration");
  if (!source_pre.ok()) return fail(source_pre.status());
  auto body = ParseJsonBody(request.body, true);
  if (!body.ok()) return fail(body.status());
  WriteOptions probe;
  if (auto s = ApplyObjectResource(*body, true, probe, nullptr); !s.ok()) return fail(s);
  Submit(c.workers, respond, pretty, [&store = c.store, call, pre = *pre, source_pre = *source_pre, body = *body,
                                      rewrite, respond, pretty] {
    // The destination's metadata: the source's, with what the body sets.
    auto info = store.Copy(call->Var("sourceBucket"), call->Var("sourceObject"), source_pre,
                           call->Var("destinationBucket"), call->Var("destinationObject"),
                           [&](buckets::ObjectAttrs& attrs) {
                             WriteOptions options;
                             options.attrs = attrs;
                             if (body.contains("metadata")) options.attrs.metadata.clear();
                             auto s = ApplyObjectResource(body, true, options, nullptr);
                             attrs = options.attrs;
                             return s;
                           },
                           pre);
    if (!info.ok()) return respond(StorageError(info.status(), pretty));
    json resource = ObjectJson(*info, call->base_url);
    if (!rewrite) return respond(RenderJson(resource, pretty));
    const std::string size = std::to_string(info->size);
    respond(RenderJson({{"kind", "storage#rewriteResponse"},
                        {"totalBytesRewritten", size},
                        {"objectSize", size},
                        {"done", true},
                        {"resource", resource}},
                       pretty));
  });
}

void CopyObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  CopyOrRewrite(c, std::move(call), std::move(request), std::move(respond), /*rewrite=*/false);
}

void RewriteObject(const Context& c, CallPtr call, HttpRequest request, Responder respond) {
  CopyOrRewrite(c, std::move(call), std::move(request), std::move(respond), /*rewrite=*/true);
}

using HandlerFn = void (*)(const Context&, CallPtr, HttpRequest, Responder);

// The permission a route needs, on the bucket its path names (`bucket_var`)
// or on the project its `project` parameter names (which then is required
// of anyone but the operator, as Google requires it). Copies also need
// storage.objects.get on the source's bucket.
enum class Scope { kBucket, kProjectParam };
struct Route {
  HandlerFn handler;
  const char* permission;
  Scope scope = Scope::kBucket;
  bool audited = false;  // it changes something
  bool upload = false;   // its body is streamed to a file (an "/upload/" route)
  const char* bucket_var = "bucket";
  const char* source_permission = nullptr;  // on the "sourceBucket" variable
};

namespace perm = iam::perm;

// Every Cloud Storage route mlengine serves (names: the JSON API's method ids).
const RouteTable<Route>& Routes() {
  static const auto* routes = new RouteTable<Route>(
      kStoragePathSyntax,
      {
          {"POST", "upload/storage/v1/b/{bucket}/o", "storage.objects.insert",
           {&InsertObject, perm::kObjectsCreate, Scope::kBucket, true, true}},
          // A resumable upload's session URI: its pieces and its cancellation.
          {"PUT", "upload/storage/v1/b/{bucket}/o", "storage.objects.insert",
           {&PutResumable, perm::kObjectsCreate, Scope::kBucket, true, true}},
          {"DELETE", "upload/storage/v1/b/{bucket}/o", "storage.objects.insert.cancel",
           {&CancelResumable, perm::kObjectsCreate, Scope::kBucket, true, true}},
          {"GET", "storage/v1/b", "storage.buckets.list", {&ListBuckets, perm::kBucketsList, Scope::kProjectParam}},
          {"POST", "storage/v1/b", "storage.buckets.insert",
           {&InsertBucket, perm::kBucketsCreate, Scope::kProjectParam, true}},
          {"GET", "storage/v1/b/{bucket}", "storage.buckets.get", {&GetBucket, perm::kBucketsGet}},
          {"DELETE", "storage/v1/b/{bucket}", "storage.buckets.delete",
           {&DeleteBucket, perm::kBucketsDelete, Scope::kBucket, true}},
          {"GET", "storage/v1/b/{bucket}/o", "storage.objects.list", {&ListObjects, perm::kObjectsList}},
          // Before the {object=**} routes: clients percent-encode names here.
          {"POST", "storage/v1/b/{bucket}/o/{object}/compose", "storage.objects.compose",
           {&ComposeObject, perm::kObjectsCreate, Scope::kBucket, true}},
          {"POST", "storage/v1/b/{sourceBucket}/o/{sourceObject}/copyTo/b/{destinationBucket}/o/{destinationObject}",
           "storage.objects.copy",
           {&CopyObject, perm::kObjectsCreate, Scope::kBucket, true, false, "destinationBucket", perm::kObjectsGet}},
          {"POST",
           "storage/v1/b/{sourceBucket}/o/{sourceObject}/rewriteTo/b/{destinationBucket}/o/{destinationObject}",
           "storage.objects.rewrite",
           {&RewriteObject, perm::kObjectsCreate, Scope::kBucket, true, false, "destinationBucket",
            perm::kObjectsGet}},
          {"GET", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.get", {&GetObject, perm::kObjectsGet}},
          {"PATCH", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.patch",
           {&PatchObject, perm::kObjectsUpdate, Scope::kBucket, true}},
          {"PUT", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.update",
           {&UpdateObject, perm::kObjectsUpdate, Scope::kBucket, true}},
          {"DELETE", "storage/v1/b/{bucket}/o/{object=**}", "storage.objects.delete",
           {&DeleteObject, perm::kObjectsDelete, Scope::kBucket, true}},
      });
  return *routes;
}

// May the caller use the route?
absl::Status CheckAccess(const AccessGate& gate, const Route& route, const StorageCall& call) {
  if (route.scope == Scope::kBucket) {
    if (route.source_permission != nullptr) {
      if (auto s = gate.Check(call.caller, route.source_permission, iam::Resource::Bucket(call.Var("sourceBucket")));
          !s.ok()) {
        return s;
      }
    }
    return gate.Check(call.caller, route.permission, iam::Resource::Bucket(call.Var(route.bucket_var)));
  }
  const std::string project = call.Param("project");
  if (project.empty()) {
    if (call.caller.IsOperator()) return absl::OkStatus();
    return BadParam("project", "is required: the project whose buckets these are");
  }
  return gate.Check(call.caller, route.permission, iam::Resource::Project(project));
}

// The audit line of a call that changes a bucket or an object: in the
// bucket's project (or the `project` a bucket is created in).
db::AuditRecord AuditRecordOf(const iam::IamService& iam, const std::string& method, const Route& route,
                              const StorageCall& call, const std::string& request_id) {
  db::AuditRecord record;
  record.principal = call.caller.Member();
  record.method = method;
  record.request_id = request_id;
  if (call.vars.count(route.bucket_var)) {
    const std::string& bucket = call.Var(route.bucket_var);
    const std::string object_var = route.bucket_var == std::string("bucket") ? "object" : "destinationObject";
    std::string object = call.vars.count(object_var) ? call.Var(object_var) : call.Param("name");
    record.project = iam.BucketProject(bucket).value_or("");
    record.resource = absl::StrCat(iam::BucketResource(bucket), object.empty() ? "" : "/objects/" + object);
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

void StorageRouter::CheckUpload(const HttpRequest& head,
                                std::function<void(std::optional<HttpResponse>)> done) const {
  auto call = ParseStorageCall(head);
  if (!call.ok()) return done(StorageError(call.status(), true));
  auto found = Routes().Find(call->method, call->path);
  const bool upload = found.route != nullptr && found.route->handler.upload;
  auto refuse = [&](const absl::Status& s) {
    HttpResponse refusal = StorageError(s, call->pretty);
    if (upload) refusal.route = found.route->name;
    return refusal;
  };
  auto authorization = EffectiveAuthorization(head);
  if (!authorization.ok()) return done(refuse(authorization.status()));
  auto caller = gate_.Authenticate(*authorization, call->Param("access_token"));
  if (!caller.ok()) return done(refuse(caller.status()));
  if (!upload) return done(refuse(NoRoute(head)));
  call->caller = *std::move(caller);
  call->vars = std::move(found.vars);
  absl::Status checked = CheckUploadCall(*call);
  if (checked.ok()) checked = CheckAccess(gate_, found.route->handler, *call);
  if (checked.ok()) checked = CheckRoom(found.route->name);
  if (checked.ok()) return done(std::nullopt);
  // A write refused: in the audit log first, as Handle records one.
  Responder respond = [done](HttpResponse r) { done(std::move(r)); };
  if (found.route->handler.audited) {
    respond = RecordInAuditLog(iam_, AuditRecordOf(iam_, found.route->name, found.route->handler, *call,
                                                   head.request_id),
                               std::move(respond));
  }
  respond(refuse(checked));
}

void StorageRouter::Handle(HttpRequest request, Responder respond) const {
  auto parsed = ParseStorageCall(request);
  if (!parsed.ok()) return respond(StorageError(parsed.status(), true));
  auto call = std::make_shared<StorageCall>(*std::move(parsed));
  const bool pretty = call->pretty;
  auto found = Routes().Find(call->method, call->path);
  if (found.route != nullptr) respond = NameResponses(std::move(respond), found.route->name);
  auto authorization = EffectiveAuthorization(request);
  if (!authorization.ok()) return respond(StorageError(authorization.status(), pretty));
  auto caller = gate_.Authenticate(*authorization, call->Param("access_token"));
  if (!caller.ok()) return respond(StorageError(caller.status(), pretty));
  call->caller = *std::move(caller);
  if (found.route == nullptr) return respond(StorageError(NoRoute(request), pretty));
  call->vars = std::move(found.vars);
  const Route& route = found.route->handler;
  if (route.audited) {
    respond = RecordInAuditLog(iam_, AuditRecordOf(iam_, found.route->name, route, *call, request.request_id),
                               std::move(respond));
  }
  if (auto s = CheckAccess(gate_, route, *call); !s.ok()) return respond(StorageError(s, pretty));
  if (auto s = CheckRoom(found.route->name); !s.ok()) return respond(StorageError(s, pretty));
  route.handler(Context{store_, *workers_, iam_}, std::move(call), std::move(request), std::move(respond));
}

absl::Status StorageRouter::CheckRoom(absl::string_view method) const {
  // The methods that store new bytes; a delete, a metadata change or a
  // read goes on (freeing space must stay possible).
  static const absl::flat_hash_set<absl::string_view> kWrites = {
      "storage.objects.insert", "storage.objects.compose", "storage.objects.copy", "storage.objects.rewrite"};
  if (disk_ == nullptr || !kWrites.contains(method)) return absl::OkStatus();
  return disk_->CheckRoom("the object was not stored; objects already stored are intact");
}

}  // namespace mle::api
