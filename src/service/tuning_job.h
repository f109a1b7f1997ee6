// A hyperparameter tuning job as policy: pure functions from a job's
// HyperparameterSpec and its trials (trainingOutput.trials) to the study the
// optimizer sees, the job each trial runs as, and what the tuning job does
// next. TuningCoordinator (tuning_coordinator.h) is the impure shell around
// them. No I/O, no clock, no locks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/job.h"
#include "tuning/space.h"

namespace mle::service {

inline constexpr char kDefaultMetricTag[] = "training/hptuning/metric";

// hyperparameterMetricTag, or the default.
std::string MetricTagOf(const model::HyperparameterSpec& h);
// maxTrials and maxParallelTrials with AI Platform's defaults (1), the
// second never above the first.
int32_t MaxTrialsOf(const model::HyperparameterSpec& h);
int32_t MaxParallelTrialsOf(const model::HyperparameterSpec& h);

// The optimizer's view: one metric (the tag, with the job's goal;
// GOAL_TYPE_UNSPECIFIED maximises) and the params in order.
tuning::StudySpec StudySpecOf(const model::HyperparameterSpec& h);
// Each output trial as the optimizer sees it: unfinished trials are active;
// a SUCCEEDED trial with a final metric completed (stopped, when stopped
// early); every other finished trial infeasible (it failed, was cancelled,
// or reported nothing). Its values are read back from their text by type.
std::vector<tuning::Trial> StudyTrialsOf(const model::HyperparameterSpec& h,
                                         const std::vector<model::HyperparameterOutput>& trials);
// A suggestion as the trial's hyperparameters (name -> the text it receives).
std::map<std::string, std::string> HyperparametersOf(const tuning::Assignment& a);

// The job trial `trial_id` runs as: the tuning job's trainingInput without
// hyperparameters, its args followed by "--NAME=VALUE" for each parameter in
// the spec's order, and its jobDir JOB_DIR/TRIAL_ID.
model::Job TrialJobOf(const model::Job& tuning_job, const std::string& trial_id,
                      const std::map<std::string, std::string>& hyperparameters);

// How many failed trials fail the job: maxFailedTrials, or when it is unset
// (0) mlengine's rule: min(maxTrials, 3) failures before any trial
// succeeded, or failures in more than half of maxTrials.
bool FailureLimitReached(const model::HyperparameterSpec& h, int32_t failed, int32_t succeeded);

// What the tuning job does next, from its trials: how many new trials to
// start, which running ones to stop, and whether it ends (and how).
struct TuningStep {
  int32_t start = 0;
  std::vector<std::string> stop;  // trial ids
  std::optional<model::JobState> finish;
  std::string message;  // errorMessage when it finishes FAILED
};
struct TuningState {
  std::vector<model::HyperparameterOutput> trials;  // every trial, inherited ones too
  // Trials of the job this one resumed (resumePreviousJobId): they count
  // towards maxTrials and inform the optimizer, but their failures are not
  // this job's.
  int32_t inherited = 0;
  bool cancelling = false;
  bool exhausted = false;             // the optimizer has nothing new (a finished grid)
  std::string last_failure;           // what the last failed trial's job said
  std::string last_failed_trial;
};
TuningStep PlanTuning(const model::HyperparameterSpec& h, const TuningState& state);

// Trials best first (completed by objective, then stopped early, then the
// rest), for the job's final trainingOutput.
std::vector<model::HyperparameterOutput> SortedBestFirst(const model::HyperparameterSpec& h,
                                                         const std::vector<model::HyperparameterOutput>& trials);

// The numeric value of a trial id ("7" -> 7; 0 when not a number).
int64_t TrialNumber(const std::string& trial_id);

}  // namespace mle::service
