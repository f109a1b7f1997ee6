// The study model of the ml v1 study API (AI Platform Vizier): a Study (its
// StudyConfig as the wire has it, state, times), its Trials, and the
// long-running operations suggest and checkEarlyStoppingState answer with.
// Plain values with no I/O and no JSON (codec/study_codec.h maps them to and
// from the wire); the pure rules over them live here too: StudyConfig's
// validation, its conversion to the optimizers' StudySpec (tuning/space.h)
// and back, and the check of a trial's parameters against the config.
//
// A tuning job's study is the same model (StudyConfig from its
// HyperparameterSpec through FromSpec); StudyService serves both.
// Plain values and pure functions: thread-safe, copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/status.h"
#include "tuning/space.h"

namespace mle::tuning {

// ---- StudyConfig: what the wire carries, presence included ----

// kUnspecified is ALGORITHM_UNSPECIFIED (Vizier's default: the Gaussian
// process bandit, as kGaussianProcessBandit).
enum class StudyAlgorithm { kUnspecified, kGaussianProcessBandit, kGridSearch, kRandomSearch };

// automatedStoppingConfig: median or decay curve. mlengine judges both with
// the median rule (ShouldStopMedian); useElapsedTime compares measurements
// by elapsed time instead of steps.
enum class StoppingRule { kNone, kMedian, kDecayCurve };
struct AutomatedStoppingConfig {
  StoppingRule rule = StoppingRule::kNone;  // kNone: the object is there but sets neither rule
  bool use_elapsed_time = false;
};

struct MetricConfig {
  std::string metric;
  std::optional<Goal> goal;  // nullopt: GOAL_TYPE_UNSPECIFIED (maximize)
};

struct ParameterConfig {
  struct DoubleRange {
    std::optional<double> min, max;
  };
  struct IntRange {
    std::optional<int64_t> min, max;
  };
  std::string parameter;
  std::optional<ParamType> type;  // nullopt: PARAMETER_TYPE_UNSPECIFIED (refused)
  std::optional<DoubleRange> double_value_spec;
  std::optional<IntRange> integer_value_spec;
  std::optional<std::vector<std::string>> categorical_values;
  std::optional<std::vector<double>> discrete_values;
  Scale scale = Scale::kNone;
  std::vector<ParameterConfig> children;  // childParameterSpecs
  std::optional<std::vector<std::string>> parent_categorical_values;
  std::optional<std::vector<double>> parent_discrete_values;
  std::optional<std::vector<int64_t>> parent_int_values;
};

struct StudyConfig {
  StudyAlgorithm algorithm = StudyAlgorithm::kUnspecified;
  std::optional<AutomatedStoppingConfig> automated_stopping;
  std::vector<MetricConfig> metrics;
  std::vector<ParameterConfig> parameters;
};

// Every semantic violation of `config` (at least one metric, unique metric
// names, at least one parameter, each value spec matching its type, log
// scales over positive values, children matching their parent's values,
// grid search over INTEGER/CATEGORICAL/DISCRETE only), with wire paths under
// `prefix` ("studyConfig.parameters[0].doubleValueSpec.maxValue"). Empty
// when valid.
std::vector<common::FieldViolation> ValidateStudyConfig(const StudyConfig& config,
                                                        const std::string& prefix = "studyConfig");

// The optimizers' view of a valid config, and a config for a spec (a tuning
// job's study). FromSpec(ToSpec(c)) keeps everything the optimizers use.
StudySpec ToSpec(const StudyConfig& config);
StudyConfig FromSpec(const StudySpec& spec);

// ---- Study ----

enum class StudyState { kActive, kInactive, kCompleted };

struct Study {
  std::string project;
  std::string location;  // a region, e.g. us-central1
  std::string study_id;
  StudyConfig config;
  StudyState state = StudyState::kActive;
  std::string inactive_reason;
  absl::Time create_time = absl::UnixEpoch();

  // projects/P/locations/L/studies/S
  std::string Name() const;
};

// ---- Trials ----

// REQUESTED: asked for by trials.create, not yet handed out by suggest.
// ACTIVE: suggested (or created) and running. STOPPING: the service asked it
// to stop (trials.stop, or an early-stopping check said so). COMPLETED: done,
// with a final measurement or infeasible.
enum class TrialStatus { kRequested, kActive, kStopping, kCompleted };

struct TrialMetric {
  std::string metric;
  double value = 0;
};

struct TrialMeasurement {
  int64_t step_count = 0;
  absl::Duration elapsed_time;
  std::vector<TrialMetric> metrics;
};

struct TrialParameter {
  std::string parameter;
  Value value;  // double: floatValue, int64_t: intValue, string: stringValue
};

struct StudyTrial {
  std::string study;  // the study's name (Study::Name())
  int64_t id = 0;     // 1, 2, ...; never reused within a study
  TrialStatus state = TrialStatus::kActive;
  std::vector<TrialParameter> parameters;
  std::vector<TrialMeasurement> measurements;  // ordered by (step_count, elapsed_time)
  std::optional<TrialMeasurement> final_measurement;
  std::string client_id;
  bool infeasible = false;
  std::string infeasible_reason;
  std::optional<absl::Time> start_time;
  std::optional<absl::Time> end_time;

  // STUDY/trials/ID
  std::string Name() const;
};

// Every violation of `parameters` against `config` (prefix: "parameters"):
// unknown or repeated names, a value of the wrong kind or outside its spec,
// a missing parameter, a child whose parent does not take a matching value.
std::vector<common::FieldViolation> CheckTrialParameters(const StudyConfig& config,
                                                         const std::vector<TrialParameter>& parameters,
                                                         const std::string& prefix = "parameters");

// The trial as the optimizers see it. With `elapsed_as_step`, each
// measurement's step is its elapsed time in milliseconds (stopping rules
// that use elapsed time).
Trial ToOptimizerTrial(const StudyTrial& trial, bool elapsed_as_step = false);
// A suggestion as trial parameters, in the config's order (children after
// their parent).
std::vector<TrialParameter> ToTrialParameters(const StudyConfig& config, const Assignment& assignment);

// ---- Locations (projects.locations): the regions that serve studies ----

struct Location {
  std::string project;
  std::string location;                   // a region
  std::vector<std::string> accelerators;  // TRAINING's availableAccelerators (enum names)

  // projects/P/locations/L
  std::string Name() const;
};

// ---- Operations of the study API ----

enum class OperationKind { kSuggestTrials, kCheckEarlyStoppingState };

struct StudyOperation {
  std::string project;
  std::string location;
  std::string id;
  OperationKind kind = OperationKind::kSuggestTrials;
  std::string study;  // study name
  absl::Time create_time = absl::UnixEpoch();
  absl::Time start_time = absl::UnixEpoch();
  absl::Time end_time = absl::UnixEpoch();
  bool done = false;
  // kSuggestTrials
  std::string client_id;
  int32_t suggestion_count = 0;
  std::vector<StudyTrial> trials;
  StudyState study_state = StudyState::kActive;
  // kCheckEarlyStoppingState
  std::string trial;  // trial name
  bool should_stop = false;

  // projects/P/locations/L/operations/ID
  std::string Name() const;
};

}  // namespace mle::tuning
