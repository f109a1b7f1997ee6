// TuningJobStudies: a hyperparameter tuning job seen as a study of the ml v1
// study API (StudyService's JobStudies seam). The study is named by the job's
// id in its region; its config is the job's HyperparameterSpec (one metric:
// the job's hyperparameterMetricTag with its goal), its trials the job's
// trainingOutput.trials (ids as numbers, measurements from allMetrics).
// Read-only: the job runs its trials. Thread-safe (reads JobService only).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "service/job_service.h"
#include "service/study_service.h"

namespace mle::service {

class TuningJobStudies final : public JobStudies {
 public:
  explicit TuningJobStudies(const JobService& jobs) : jobs_(jobs) {}

  std::optional<tuning::Study> Find(const std::string& project, const std::string& study_id) const override;
  std::vector<tuning::Study> List(const std::string& project, const std::string& location) const override;
  std::vector<tuning::StudyTrial> Trials(const std::string& project, const std::string& study_id) const override;

 private:
  const JobService& jobs_;
};

// The pure mapping, for tests: a tuning job's study and trials.
tuning::Study StudyOfJob(const model::Job& job);
std::vector<tuning::StudyTrial> StudyTrialsOfJob(const model::Job& job);

}  // namespace mle::service
