#include "service/job_studies.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/tuning_job.h"

namespace mle::service {

using model::JobState;

tuning::Study StudyOfJob(const model::Job& job) {
  const model::HyperparameterSpec& h = *job.training_input->hyperparameters;
  tuning::Study s;
  s.project = job.project;
  s.location = job.training_input->region;
  s.study_id = job.job_id;
  s.config = tuning::FromSpec(StudySpecOf(h));
  s.state = model::IsTerminal(job.state) ? tuning::StudyState::kCompleted : tuning::StudyState::kActive;
  s.create_time = job.create_time.value_or(absl::UnixEpoch());
  return s;
}

std::vector<tuning::StudyTrial> StudyTrialsOfJob(const model::Job& job) {
  std::vector<tuning::StudyTrial> out;
  if (!job.training_output) return out;
  const model::HyperparameterSpec& h = *job.training_input->hyperparameters;
  const tuning::Study study = StudyOfJob(job);
  const std::string tag = MetricTagOf(h);
  const auto& outputs = job.training_output->trials;
  const std::vector<tuning::Trial> seen = StudyTrialsOf(h, outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const model::HyperparameterOutput& t = outputs[i];
    tuning::StudyTrial s;
    s.study = study.Name();
    s.id = TrialNumber(t.trial_id);
    if (!model::IsTerminal(t.state)) {
      s.state = t.state == JobState::kCancelling ? tuning::TrialStatus::kStopping : tuning::TrialStatus::kActive;
    } else {
      s.state = tuning::TrialStatus::kCompleted;
    }
    s.parameters = tuning::ToTrialParameters(study.config, seen[i].params);
    for (const auto& m : t.all_metrics) {
      if (!m.objective_value) continue;
      s.measurements.push_back({m.training_step.value_or(0), absl::ZeroDuration(), {{tag, *m.objective_value}}});
    }
    if (t.final_metric && t.final_metric->objective_value && t.state == JobState::kSucceeded) {
      s.final_measurement = tuning::TrialMeasurement{t.final_metric->training_step.value_or(0), absl::ZeroDuration(),
                                                     {{tag, *t.final_metric->objective_value}}};
    } else if (model::IsTerminal(t.state)) {
      s.infeasible = true;
      s.infeasible_reason = t.state == JobState::kSucceeded
                                ? absl::StrCat("the trial reported no ", tag)
                                : absl::StrCat("the trial's job ended ", std::string(model::JobStateName(t.state)));
    }
    s.start_time = t.start_time;
    s.end_time = t.end_time;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::optional<tuning::Study> TuningJobStudies::Find(const std::string& project, const std::string& study_id) const {
  auto job = jobs_.GetJob(project, study_id);
  if (!job.ok() || !model::IsTuningJob(*job)) return std::nullopt;
  return StudyOfJob(*job);
}

std::vector<tuning::Study> TuningJobStudies::List(const std::string& project, const std::string& location) const {
  std::vector<tuning::Study> out;
  ListJobsRequest request;
  request.page_size = 100;
  for (;;) {
    auto page = jobs_.ListJobs(project, request);
    if (!page.ok()) break;
    for (const auto& job : page->jobs) {
      if (model::IsTuningJob(job) && job.training_input->region == location) out.push_back(StudyOfJob(job));
    }
    if (page->next_page_token.empty()) break;
    request.page_token = page->next_page_token;
  }
  return out;
}

std::vector<tuning::StudyTrial> TuningJobStudies::Trials(const std::string& project, const std::string& study_id) const {
  auto job = jobs_.GetJob(project, study_id);
  if (!job.ok() || !model::IsTuningJob(*job)) return {};
  return StudyTrialsOfJob(*job);
}

}  // namespace mle::service
