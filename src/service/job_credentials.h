// JobCredentials: mlengined's CredentialIssuer. A job's replicas get a token
// of the account the job runs as: its trainingInput.serviceAccount (the
// submitter held actAs on it), or its project's default account. The token
// is issued for iam::JobTokenPurpose, lives as long as the job may run
// (maxRunningTime, 7 days by default, plus an hour) and is revoked when the
// job ends (JobService::Record). Thread-safe.
#pragma once

#include "executor/executor.h"
#include "iam/iam_service.h"
#include "service/job_service.h"

namespace mle::service {

class JobCredentials final : public executor::CredentialIssuer {
 public:
  JobCredentials(iam::IamService& iam, const JobService& jobs) : iam_(iam), jobs_(jobs) {}
  absl::StatusOr<executor::Credential> IssueFor(const model::Job& job, bool outlives_machine) override;

 private:
  iam::IamService& iam_;
  const JobService& jobs_;
};

// JobBucketAccess: mlengined's BucketAccessPolicy, decided by IAM for the
// account the job runs as (as JobCredentials chooses it). Thread-safe.
class JobBucketAccess final : public executor::BucketAccessPolicy {
 public:
  JobBucketAccess(const iam::IamService& iam, const JobService& jobs) : iam_(iam), jobs_(jobs) {}
  std::vector<executor::BucketGrant> BucketsFor(const model::Job& job) const override;

 private:
  const iam::IamService& iam_;
  const JobService& jobs_;
};

}  // namespace mle::service
