#include "service/tuning_job.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tuning/stopping.h"

namespace mle::service {
namespace {

using model::HyperparameterOutput;
using model::HyperparameterSpec;
using model::JobState;

tuning::Scale ScaleOf(const std::string& s) {
  if (s == "UNIT_LINEAR_SCALE") return tuning::Scale::kLinear;
  if (s == "UNIT_LOG_SCALE") return tuning::Scale::kLog;
  if (s == "UNIT_REVERSE_LOG_SCALE") return tuning::Scale::kReverseLog;
  return tuning::Scale::kNone;
}

// The value of parameter `p` written as `text` (what HyperparametersOf wrote).
std::optional<tuning::Value> ReadValue(const tuning::ParamSpec& p, const std::string& text) {
  switch (p.type) {
    case tuning::ParamType::kCategorical:
      return tuning::Value(text);
    case tuning::ParamType::kInteger: {
      int64_t i = 0;
      if (!absl::SimpleAtoi(text, &i)) return std::nullopt;
      return tuning::Value(i);
    }
    case tuning::ParamType::kDouble:
    case tuning::ParamType::kDiscrete: {
      double d = 0;
      if (!absl::SimpleAtod(text, &d)) return std::nullopt;
      return tuning::Value(d);
    }
  }
  return std::nullopt;
}

bool Succeeded(const HyperparameterOutput& t) { return t.state == JobState::kSucceeded; }

}  // namespace

std::string MetricTagOf(const HyperparameterSpec& h) {
  return h.hyperparameter_metric_tag.empty() ? kDefaultMetricTag : h.hyperparameter_metric_tag;
}

int32_t MaxTrialsOf(const HyperparameterSpec& h) { return std::max(1, h.max_trials.value_or(1)); }

int32_t MaxParallelTrialsOf(const HyperparameterSpec& h) {
  return std::clamp(h.max_parallel_trials.value_or(1), 1, MaxTrialsOf(h));
}

tuning::StudySpec StudySpecOf(const HyperparameterSpec& h) {
  tuning::StudySpec spec;
  spec.metrics.push_back({MetricTagOf(h), h.goal == "MINIMIZE" ? tuning::Goal::kMinimize : tuning::Goal::kMaximize});
  if (h.algorithm == "GRID_SEARCH") {
    spec.algorithm = tuning::Algorithm::kGrid;
  } else if (h.algorithm == "RANDOM_SEARCH") {
    spec.algorithm = tuning::Algorithm::kRandom;
  } else {
    spec.algorithm = tuning::Algorithm::kBayesian;
  }
  for (const auto& p : h.params) {
    tuning::ParamSpec s;
    s.name = p.parameter_name;
    if (p.type == "INTEGER") {
      s.type = tuning::ParamType::kInteger;
    } else if (p.type == "CATEGORICAL") {
      s.type = tuning::ParamType::kCategorical;
    } else if (p.type == "DISCRETE") {
      s.type = tuning::ParamType::kDiscrete;
    } else {
      s.type = tuning::ParamType::kDouble;
    }
    s.min = p.min_value.value_or(0);
    s.max = p.max_value.value_or(0);
    s.categories = p.categorical_values;
    s.discrete = p.discrete_values;
    s.scale = ScaleOf(p.scale_type);
    spec.params.push_back(std::move(s));
  }
  return spec;
}

std::vector<tuning::Trial> StudyTrialsOf(const HyperparameterSpec& h, const std::vector<HyperparameterOutput>& trials) {
  const tuning::StudySpec spec = StudySpecOf(h);
  const std::string tag = MetricTagOf(h);
  std::vector<tuning::Trial> out;
  out.reserve(trials.size());
  for (const auto& t : trials) {
    tuning::Trial trial;
    for (const auto& p : spec.params) {
      auto text = t.hyperparameters.find(p.name);
      if (text == t.hyperparameters.end()) continue;
      if (auto v = ReadValue(p, text->second)) trial.params[p.name] = *v;
    }
    for (const auto& m : t.all_metrics) {
      if (!m.objective_value) continue;
      trial.measurements.push_back({m.training_step.value_or(0), 0, {{tag, *m.objective_value}}});
    }
    if (!model::IsTerminal(t.state)) {
      trial.state = tuning::TrialState::kActive;
    } else if (Succeeded(t) && t.final_metric && t.final_metric->objective_value) {
      trial.state = t.is_trial_stopped_early ? tuning::TrialState::kStopped : tuning::TrialState::kCompleted;
      trial.final_measurement =
          tuning::Measurement{t.final_metric->training_step.value_or(0), 0, {{tag, *t.final_metric->objective_value}}};
    } else {
      trial.state = tuning::TrialState::kInfeasible;
    }
    out.push_back(std::move(trial));
  }
  return out;
}

std::map<std::string, std::string> HyperparametersOf(const tuning::Assignment& a) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : a) out[name] = tuning::FormatValue(value);
  return out;
}

model::Job TrialJobOf(const model::Job& tuning_job, const std::string& trial_id,
                      const std::map<std::string, std::string>& hyperparameters) {
  model::Job trial;
  trial.project = tuning_job.project;
  trial.job_id = model::TrialJobId(tuning_job.job_id, trial_id);
  trial.trial_of = tuning_job.job_id;
  trial.trial_id = trial_id;
  trial.labels = tuning_job.labels;
  trial.creator = tuning_job.creator;
  trial.resolved_images = tuning_job.resolved_images;
  model::TrainingInput t = tuning_job.training_input.value_or(model::TrainingInput{});
  const std::optional<HyperparameterSpec> h = std::move(t.hyperparameters);
  t.hyperparameters.reset();
  if (h) {
    for (const auto& p : h->params) {
      auto v = hyperparameters.find(p.parameter_name);
      if (v != hyperparameters.end()) t.args.push_back(absl::StrCat("--", p.parameter_name, "=", v->second));
    }
  }
  // ml v1 gives a trial the job's jobDir with the trial's number; Vertex
  // keeps baseOutputDirectory and puts AIP_MODEL_DIR and its siblings under
  // the number (runtime/replica_env.h).
  trial.vertex = tuning_job.vertex;
  if (!t.job_dir.empty() && !trial.vertex) {
    while (t.job_dir.size() > 1 && t.job_dir.back() == '/') t.job_dir.pop_back();
    t.job_dir = absl::StrCat(t.job_dir, "/", trial_id);
  }
  trial.training_input = std::move(t);
  return trial;
}

bool FailureLimitReached(const HyperparameterSpec& h, int32_t failed, int32_t succeeded) {
  if (failed <= 0) return false;
  if (h.max_failed_trials.value_or(0) > 0) return failed >= *h.max_failed_trials;
  const int32_t max_trials = MaxTrialsOf(h);
  if (succeeded == 0 && failed >= std::min(max_trials, 3)) return true;
  return failed > max_trials / 2;
}

TuningStep PlanTuning(const HyperparameterSpec& h, const TuningState& state) {
  TuningStep step;
  int32_t active = 0, failed = 0, succeeded = 0, succeeded_total = 0;
  std::vector<std::string> running;
  for (size_t i = 0; i < state.trials.size(); ++i) {
    const HyperparameterOutput& t = state.trials[i];
    if (!model::IsTerminal(t.state)) {
      ++active;
      if (t.state != JobState::kCancelling) running.push_back(t.trial_id);
      continue;
    }
    if (Succeeded(t)) ++succeeded_total;
    if (static_cast<int32_t>(i) < state.inherited) continue;
    if (t.state == JobState::kFailed) ++failed;
    if (Succeeded(t)) ++succeeded;
  }
  const int32_t total = static_cast<int32_t>(state.trials.size());
  if (state.cancelling) {
    step.stop = running;
    if (active == 0) step.finish = JobState::kCancelled;
    return step;
  }
  if (FailureLimitReached(h, failed, succeeded)) {
    step.stop = running;
    if (active == 0) {
      step.finish = JobState::kFailed;
      step.message = absl::StrCat(
          "Hyperparameter tuning failed: ", failed, failed == 1 ? " trial" : " trials", " failed",
          h.max_failed_trials.value_or(0) > 0
              ? absl::StrCat(" (maxFailedTrials is ", *h.max_failed_trials, ")")
              : std::string(" (maxFailedTrials is unset: a job fails after min(maxTrials, 3) failures before any "
                            "success, or failures in more than half of maxTrials)"),
          state.last_failed_trial.empty() ? "" : absl::StrCat(". Trial ", state.last_failed_trial, ": "),
          state.last_failure);
    }
    return step;
  }
  const int32_t max_trials = MaxTrialsOf(h);
  if (total >= max_trials || state.exhausted) {
    if (active > 0) return step;
    if (succeeded_total > 0) {
      step.finish = JobState::kSucceeded;
    } else {
      step.finish = JobState::kFailed;
      step.message = total == 0 ? "Hyperparameter tuning failed: the search space has no point to try."
                                : absl::StrCat("Hyperparameter tuning failed: none of the ", total,
                                               total == 1 ? " trial" : " trials", " succeeded",
                                               state.last_failed_trial.empty()
                                                   ? std::string(".")
                                                   : absl::StrCat(". Trial ", state.last_failed_trial, ": ",
                                                                  state.last_failure));
    }
    return step;
  }
  step.start = std::max(0, std::min(MaxParallelTrialsOf(h) - active, max_trials - total));
  return step;
}

std::vector<HyperparameterOutput> SortedBestFirst(const HyperparameterSpec& h,
                                                  const std::vector<HyperparameterOutput>& trials) {
  const tuning::StudySpec spec = StudySpecOf(h);
  std::vector<size_t> order = tuning::BestFirst(spec.metrics.front(), StudyTrialsOf(h, trials));
  std::vector<HyperparameterOutput> out;
  out.reserve(trials.size());
  for (size_t i : order) out.push_back(trials[i]);
  return out;
}

int64_t TrialNumber(const std::string& trial_id) {
  int64_t n = 0;
  return absl::SimpleAtoi(trial_id, &n) ? n : 0;
}

}  // namespace mle::service
