// The identities and resources of IAM as plain values: service accounts,
// users, issued tokens, and the resource a permission is checked on.
// Plain values; not thread-safe; copy freely.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "iam/roles.h"

namespace mle::iam {

// A resource a permission is checked on.
struct Resource {
  ResourceKind kind = ResourceKind::kProject;
  std::string project;  // kProject, kJob, kServiceAccount
  std::string id;       // the job id, the account's email, the bucket's name
  static Resource Project(std::string p) { return {ResourceKind::kProject, std::move(p), ""}; }
  static Resource Job(std::string p, std::string j) { return {ResourceKind::kJob, std::move(p), std::move(j)}; }
  static Resource Account(std::string p, std::string email) {
    return {ResourceKind::kServiceAccount, std::move(p), std::move(email)};
  }
  static Resource Bucket(std::string b) { return {ResourceKind::kBucket, "", std::move(b)}; }
  std::string Name() const;  // "projects/p/jobs/j", ...
};

struct ServiceAccount {
  std::string project;
  std::string account_id;  // the part before '@'
  std::string email;
  std::string unique_id;   // 21 digits, stable
  std::string display_name;
  std::string description;
  absl::Time create_time;
  // Created by mlengine for the project (its TPU service identity), not by a
  // caller: it cannot be deleted.
  bool service_agent = false;
};

struct User {
  std::string email;
  absl::Time create_time;
};

struct IssuedToken {
  std::string token;  // shown once; only its hash is kept
  absl::Time expire_time;
};

// The accounts mlengine keeps for each project: the default one its jobs
// run as, and its TPU service identity (the TPU guide's access steps).
inline constexpr char kDefaultAccountDomain[] = "@cloud-ml.mlengine.iam.local";
// What a project's default account holds in the project's initial policy.
inline constexpr char kInitialDefaultAccountRole[] = "roles/storage.objectAdmin";
inline constexpr char kTpuAccountDomain[] = "@cloud-tpu.mlengine.iam.local";
std::string DefaultAccountEmail(int64_t project_number);  // service-NUMBER@cloud-ml.mlengine.iam.local
std::string TpuAccountEmail(int64_t project_number);      // service-NUMBER@cloud-tpu.mlengine.iam.local

// What the token of a job's replicas is issued for ("job:p/j"): revoked
// with IamService::RevokeTokens when the job ends.
std::string JobTokenPurpose(const std::string& project, const std::string& job_id);

}  // namespace mle::iam
