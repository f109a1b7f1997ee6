// The wire forms of IAM: Policy (ml v1, Cloud Resource Manager v1 and IAM
// v1 spell it alike), SetIamPolicyRequest, TestIamPermissions, ServiceAccount
// (iam v1), the access token of iamcredentials v1 and serviceusage's
// ServiceIdentity operation. Decoders refuse what the discovery documents do
// not allow (wrong types, unknown fields) with INVALID_ARGUMENT naming the
// field, and what mlengine does not offer (conditions, audit configs) saying
// so. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iam/identity.h"
#include "iam/policy.h"

namespace mle::codec {

nlohmann::json EncodePolicy(const iam::Policy& policy);

struct SetIamPolicyRequest {
  iam::Policy policy;                // members as sent (IamService normalizes)
  std::optional<std::string> etag;   // absent: overwrite
  bool set_bindings = true;          // updateMask has "bindings" (the default)
};
// `body` of setIamPolicy ({policy, updateMask}).
absl::StatusOr<SetIamPolicyRequest> DecodeSetIamPolicyRequest(const nlohmann::json& body);

// `body` of getIamPolicy (CRM: {options: {requestedPolicyVersion}}); may be
// null (the ml and iam APIs' GET form has no body).
absl::Status CheckGetIamPolicyRequest(const nlohmann::json& body);

// `body` of testIamPermissions ({permissions: [...]}).
absl::StatusOr<std::vector<std::string>> DecodeTestIamPermissionsRequest(const nlohmann::json& body);
nlohmann::json EncodeTestIamPermissionsResponse(const std::vector<std::string>& permissions);

nlohmann::json EncodeServiceAccount(const iam::ServiceAccount& account);
struct CreateServiceAccountRequest {
  std::string account_id;
  iam::ServiceAccount fields;  // displayName, description
};
absl::StatusOr<CreateServiceAccountRequest> DecodeCreateServiceAccountRequest(const nlohmann::json& body);

struct GenerateAccessTokenRequest {
  std::vector<std::string> delegates;
  std::vector<std::string> scope;
  absl::Duration lifetime = absl::Hours(1);
};
absl::StatusOr<GenerateAccessTokenRequest> DecodeGenerateAccessTokenRequest(const nlohmann::json& body);
nlohmann::json EncodeAccessToken(const iam::IssuedToken& token);

// The finished Operation generateServiceIdentity answers with.
nlohmann::json EncodeServiceIdentityOperation(const iam::ServiceAccount& identity, const std::string& parent);

}  // namespace mle::codec
