// Fuzzes the jobs.list filter: JobFilter::Parse on any text, and every filter
// that parses is evaluated against jobs covering each key it can name (set
// and unset times, labels, training input or none). A parse error must be
// INVALID_ARGUMENT (what the API returns as 400), never anything else.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "service/job_filter.h"

namespace {

std::vector<mle::model::Job> Jobs() {
  std::vector<mle::model::Job> jobs(2);
  mle::model::Job& full = jobs[0];
  full.job_id = "census_2024_a";
  full.state = mle::model::JobState::kFailed;
  full.error_message = "The replica master 0 exited with a non-zero status of 1.";
  full.create_time = absl::FromUnixSeconds(1704067200);
  full.start_time = absl::FromUnixSeconds(1704067260);
  full.end_time = absl::FromUnixSeconds(1704070800);
  full.labels = {{"team", "vision"}, {"owner", "ada-lovelace"}};
  mle::model::TrainingInput t;
  t.region = "us-central1";
  t.scale_tier = "CUSTOM";
  t.runtime_version = "2.11";
  t.python_version = "3.7";
  t.python_module = "trainer.task";
  t.master_type = "n1-standard-4";
  t.worker_type = "n1-standard-8";
  full.training_input = t;
  jobs[1].job_id = "x";  // queued, no times, no labels, no training input
  jobs[1].state = mle::model::JobState::kQueued;
  return jobs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<mle::model::Job> jobs = Jobs();
  auto filter = mle::service::JobFilter::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!filter.ok()) {
    if (filter.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "job_filter_fuzz: a parse error that is not INVALID_ARGUMENT: %s\n",
                   filter.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  for (const auto& job : jobs) {
    if (!filter->Matches(job) && filter->empty()) {
      std::fprintf(stderr, "job_filter_fuzz: an empty filter refused job %s\n", job.job_id.c_str());
      std::abort();
    }
  }
  return 0;
}
