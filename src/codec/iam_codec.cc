#include "codec/iam_codec.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& description) {
  return common::InvalidArgumentWithViolations("Invalid JSON payload received.", {{field, description}});
}

// Unknown fields are refused, as Google's ESF does.
absl::Status OnlyFields(const json& object, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : object.items()) {
    bool ok = false;
    for (const char* f : known) ok = ok || k == f;
    if (!ok) {
      return Bad(where.empty() ? k : absl::StrCat(where, ".", k),
                 absl::StrCat("Unknown name \"", k, "\"", where.empty() ? "" : absl::StrCat(" at '", where, "'"),
                              ": Cannot find field."));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> StringArray(const json& value, const std::string& field) {
  if (!value.is_array()) return Bad(field, "must be a list of strings");
  std::vector<std::string> out;
  for (const auto& v : value) {
    if (!v.is_string()) return Bad(field, "must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

absl::StatusOr<iam::Policy> DecodePolicy(const json& p) {
  if (!p.is_object()) return Bad("policy", "must be an object");
  if (auto s = OnlyFields(p, "policy", {"version", "bindings", "etag", "auditConfigs"}); !s.ok()) return s;
  iam::Policy policy;
  if (p.contains("version")) {
    if (!p["version"].is_number_integer()) return Bad("policy.version", "must be an integer");
    policy.version = p["version"].get<int32_t>();
  }
  if (p.contains("auditConfigs") && !(p["auditConfigs"].is_array() && p["auditConfigs"].empty())) {
    return Bad("policy.auditConfigs",
               "audit configs are not supported: mlengine records every change in its own audit log (mlengine "
               "audit list)");
  }
  if (p.contains("bindings")) {
    if (!p["bindings"].is_array()) return Bad("policy.bindings", "must be a list of bindings");
    int i = 0;
    for (const auto& b : p["bindings"]) {
      const std::string where = absl::StrCat("policy.bindings[", i++, "]");
      if (!b.is_object()) return Bad(where, "must be an object");
      if (auto s = OnlyFields(b, where, {"role", "members", "condition"}); !s.ok()) return s;
      if (b.contains("condition") && !b["condition"].is_null()) {
        return Bad(where + ".condition", "conditional role bindings are not supported by mlengine");
      }
      if (!b.contains("role") || !b["role"].is_string()) return Bad(where + ".role", "is required: a role name");
      iam::Binding binding;
      binding.role = b["role"].get<std::string>();
      if (b.contains("members")) {
        auto members = StringArray(b["members"], where + ".members");
        if (!members.ok()) return members.status();
        binding.members = *std::move(members);
      }
      policy.bindings.push_back(std::move(binding));
    }
  }
  return policy;
}

}  // namespace

json EncodePolicy(const iam::Policy& policy) {
  json out = {{"version", policy.version}, {"etag", iam::EtagOf(policy.revision)}};
  if (!policy.bindings.empty()) {
    json bindings = json::array();
    for (const auto& b : policy.bindings) bindings.push_back({{"role", b.role}, {"members", b.members}});
    out["bindings"] = bindings;
  }
  return out;
}

absl::StatusOr<SetIamPolicyRequest> DecodeSetIamPolicyRequest(const json& body) {
  if (!body.is_object()) return Bad("", "the request body must be a JSON object");
  if (auto s = OnlyFields(body, "", {"policy", "updateMask"}); !s.ok()) return s;
  if (!body.contains("policy")) return Bad("policy", "is required");
  SetIamPolicyRequest req;
  auto policy = DecodePolicy(body["policy"]);
  if (!policy.ok()) return policy.status();
  req.policy = *std::move(policy);
  if (body["policy"].contains("etag")) {
    if (!body["policy"]["etag"].is_string()) return Bad("policy.etag", "must be a string");
    req.etag = body["policy"]["etag"].get<std::string>();
  }
  if (body.contains("updateMask")) {
    if (!body["updateMask"].is_string()) return Bad("updateMask", "must be a string of comma-separated paths");
    bool bindings = false, etag = false;
    for (absl::string_view path : absl::StrSplit(body["updateMask"].get<std::string>(), ',', absl::SkipWhitespace())) {
      path = absl::StripAsciiWhitespace(path);
      if (path == "bindings") {
        bindings = true;
      } else if (path == "etag") {
        etag = true;
      } else if (path != "version" && path != "auditConfigs") {
        return Bad("updateMask", absl::StrCat("\"", path, "\" is not a field of Policy that can be set"));
      }
    }
    req.set_bindings = bindings;
    if (!etag) req.etag.reset();
  }
  return req;
}

absl::Status CheckGetIamPolicyRequest(const json& body) {
  if (body.is_null()) return absl::OkStatus();
  if (!body.is_object()) return Bad("", "the request body must be a JSON object");
  if (auto s = OnlyFields(body, "", {"options"}); !s.ok()) return s;
  if (body.contains("options")) {
    const json& o = body["options"];
    if (!o.is_object()) return Bad("options", "must be an object");
    if (auto s = OnlyFields(o, "options", {"requestedPolicyVersion"}); !s.ok()) return s;
    if (o.contains("requestedPolicyVersion")) {
      const json& v = o["requestedPolicyVersion"];
      if (!v.is_number_integer() || (v != 0 && v != 1 && v != 3)) {
        return Bad("options.requestedPolicyVersion", "must be 0, 1 or 3");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> DecodeTestIamPermissionsRequest(const json& body) {
  if (!body.is_object()) return Bad("", "the request body must be a JSON object");
  if (auto s = OnlyFields(body, "", {"permissions"}); !s.ok()) return s;
  if (!body.contains("permissions")) return std::vector<std::string>{};
  return StringArray(body["permissions"], "permissions");
}

json EncodeTestIamPermissionsResponse(const std::vector<std::string>& permissions) {
  json out = json::object();
  if (!permissions.empty()) out["permissions"] = permissions;
  return out;
}

json EncodeServiceAccount(const iam::ServiceAccount& a) {
  json out = {{"name", absl::StrCat("projects/", a.project, "/serviceAccounts/", a.email)},
              {"projectId", a.project},
              {"uniqueId", a.unique_id},
              {"email", a.email},
              {"oauth2ClientId", a.unique_id}};
  if (!a.display_name.empty()) out["displayName"] = a.display_name;
  if (!a.description.empty()) out["description"] = a.description;
  return out;
}

absl::StatusOr<CreateServiceAccountRequest> DecodeCreateServiceAccountRequest(const json& body) {
  if (!body.is_object()) return Bad("", "the request body must be a JSON object");
  if (auto s = OnlyFields(body, "", {"accountId", "serviceAccount"}); !s.ok()) return s;
  CreateServiceAccountRequest req;
  if (!body.contains("accountId") || !body["accountId"].is_string()) {
    return Bad("accountId", "is required: 6-30 characters, e.g. \"trainer\"");
  }
  req.account_id = body["accountId"].get<std::string>();
  if (body.contains("serviceAccount")) {
    const json& sa = body["serviceAccount"];
    if (!sa.is_object()) return Bad("serviceAccount", "must be an object");
    if (auto s = OnlyFields(sa, "serviceAccount",
                            {"displayName", "description", "name", "projectId", "uniqueId", "email", "etag",
                             "oauth2ClientId", "disabled"});
        !s.ok()) {
      return s;
    }
    for (const char* f : {"displayName", "description"}) {
      if (sa.contains(f) && !sa[f].is_string()) return Bad(absl::StrCat("serviceAccount.", f), "must be a string");
    }
    req.fields.display_name = sa.value("displayName", "");
    req.fields.description = sa.value("description", "");
  }
  return req;
}

absl::StatusOr<GenerateAccessTokenRequest> DecodeGenerateAccessTokenRequest(const json& body) {
  if (!body.is_object()) return Bad("", "the request body must be a JSON object");
  if (auto s = OnlyFields(body, "", {"delegates", "scope", "lifetime"}); !s.ok()) return s;
  GenerateAccessTokenRequest req;
  if (!body.contains("scope")) return Bad("scope", "is required, e.g. [\"https://www.googleapis.com/auth/cloud-platform\"]");
  auto scope = StringArray(body["scope"], "scope");
  if (!scope.ok()) return scope.status();
  if (scope->empty()) return Bad("scope", "must name at least one scope");
  req.scope = *std::move(scope);
  if (body.contains("delegates")) {
    auto delegates = StringArray(body["delegates"], "delegates");
    if (!delegates.ok()) return delegates.status();
    req.delegates = *std::move(delegates);
  }
  if (body.contains("lifetime")) {
    if (!body["lifetime"].is_string()) return Bad("lifetime", "must be a duration string such as \"3600s\"");
    auto d = common::ParseDuration(body["lifetime"].get<std::string>());
    if (!d) return Bad("lifetime", "must be a duration in seconds such as \"3600s\"");
    req.lifetime = *d;
  }
  return req;
}

json EncodeAccessToken(const iam::IssuedToken& token) {
  return {{"accessToken", token.token}, {"expireTime", common::FormatRfc3339(token.expire_time)}};
}

json EncodeServiceIdentityOperation(const iam::ServiceAccount& identity, const std::string& parent) {
  return {{"name", absl::StrCat("operations/finished.", parent, ".tpu.googleapis.com")},
          {"done", true},
          {"response",
           {{"@type", "type.googleapis.com/google.api.serviceusage.v1beta1.ServiceIdentity"},
            {"email", identity.email},
            {"uniqueId", identity.unique_id}}}};
}

}  // namespace mle::codec
