#include "service/job_credentials.h"

#include <future>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/time_format.h"

namespace mle::service {

absl::StatusOr<executor::Credential> JobCredentials::IssueFor(const model::Job& job) {
  std::string account = job.training_input ? absl::AsciiStrToLower(job.training_input->service_account) : "";
  if (account.empty()) {
    auto project = jobs_.FindProject(job.project);
    if (!project) return absl::NotFoundError(absl::StrCat("project ", job.project, " is not known"));
    account = project->service_account;
  }
  absl::Duration lifetime = absl::Hours(24 * 7);
  if (job.training_input && job.training_input->scheduling &&
      !job.training_input->scheduling->max_running_time.empty()) {
    lifetime = common::ParseDuration(job.training_input->scheduling->max_running_time).value_or(lifetime);
  }
  std::promise<absl::StatusOr<iam::IssuedToken>> issued;
  iam_.IssueToken(iam::Principal::ServiceAccount(account), lifetime + absl::Hours(1),
                  iam::JobTokenPurpose(job.project, job.job_id),
                  [&issued](absl::StatusOr<iam::IssuedToken> t) { issued.set_value(std::move(t)); });
  auto token = issued.get_future().get();
  if (!token.ok()) return token.status();
  return executor::Credential{account, token->token};
}

}  // namespace mle::service
