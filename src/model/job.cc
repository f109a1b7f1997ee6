#include "model/job.h"

#include "absl/strings/str_cat.h"

namespace mle::model {

std::string JobName(const Job& job) {
  return absl::StrCat("projects/", job.project, "/jobs/", job.job_id);
}

}  // namespace mle::model
