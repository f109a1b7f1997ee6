#include "service/job_credentials.h"

#include <future>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/time_format.h"
#include "iam/roles.h"

namespace mle::service {

namespace {

// The account a job runs as: its trainingInput.serviceAccount, or its
// project's default account.
absl::StatusOr<std::string> AccountOf(const model::Job& job, const JobService& jobs) {
  std::string account = job.training_input ? absl::AsciiStrToLower(job.training_input->service_account) : "";
  if (account.empty()) {
    auto project = jobs.FindProject(job.project);
    if (!project) return absl::NotFoundError(absl::StrCat("project ", job.project, " is not known"));
    account = project->service_account;
  }
  return account;
}

}  // namespace

absl::StatusOr<executor::Credential> JobCredentials::IssueFor(const model::Job& job, bool outlives_machine) {
  auto found = AccountOf(job, jobs_);
  if (!found.ok()) return found.status();
  const std::string account = *found;
  absl::Duration lifetime = absl::Hours(24 * 7);
  if (job.training_input && job.training_input->scheduling &&
      !job.training_input->scheduling->max_running_time.empty()) {
    lifetime = common::ParseDuration(job.training_input->scheduling->max_running_time).value_or(lifetime);
  }
  std::promise<absl::StatusOr<iam::IssuedToken>> issued;
  iam_.IssueToken(iam::Principal::ServiceAccount(account), lifetime + absl::Hours(1),
                  iam::JobTokenPurpose(job.project, job.job_id),
                  [&issued](absl::StatusOr<iam::IssuedToken> t) { issued.set_value(std::move(t)); },
                  outlives_machine ? db::Sync::kDurable : db::Sync::kLazy);
  auto token = issued.get_future().get();
  if (!token.ok()) return token.status();
  return executor::Credential{account, token->token};
}

std::vector<executor::BucketGrant> JobBucketAccess::BucketsFor(const model::Job& job) const {
  std::vector<executor::BucketGrant> out;
  auto account = AccountOf(job, jobs_);
  if (!account.ok()) return out;
  const iam::Principal who = iam::Principal::ServiceAccount(*account);
  for (const auto& bucket : iam_.OwnedBuckets()) {
    const iam::Resource r = iam::Resource::Bucket(bucket);
    if (!iam_.Authorize(who, iam::perm::kObjectsGet, r).ok()) continue;
    out.push_back({bucket, iam_.Authorize(who, iam::perm::kObjectsCreate, r).ok()});
  }
  return out;
}

}  // namespace mle::service
