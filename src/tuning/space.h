// The search space and the trials of a study, as the optimizers see them:
// plain values with no I/O and no JSON. A tuning job's HyperparameterSpec and
// a study's StudyConfig (ml v1 Vizier) both map onto these types (the service
// layer converts them); everything in src/tuning/ is pure code over them.
// Plain values: not thread-safe, copy freely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mle::tuning {

enum class ParamType { kDouble, kInteger, kCategorical, kDiscrete };
// kNone: no scaling declared. The optimizers treat kNone like kLinear.
enum class Scale { kNone, kLinear, kLog, kReverseLog };

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kDouble;
  double min = 0, max = 0;              // kDouble, kInteger (integral for kInteger); min < max
  std::vector<std::string> categories;  // kCategorical, unique
  std::vector<double> discrete;         // kDiscrete, strictly increasing
  Scale scale = Scale::kNone;           // kDouble, kInteger, kDiscrete; kLog/kReverseLog need min > 0
  // Conditional parameters (study API only): a child is part of a trial only
  // when this parameter takes one of the child's `parent_*` values.
  std::vector<ParamSpec> children;
  std::vector<std::string> parent_categories;  // when this spec is a child of a kCategorical
  std::vector<double> parent_discrete;         // ... of a kDiscrete
  std::vector<int64_t> parent_ints;            // ... of a kInteger
};

enum class Goal { kMaximize, kMinimize };
struct MetricSpec {
  std::string name;
  Goal goal = Goal::kMaximize;
};

// kBayesian is ALGORITHM_UNSPECIFIED and GAUSSIAN_PROCESS_BANDIT.
enum class Algorithm { kBayesian, kGrid, kRandom };

struct StudySpec {
  std::vector<ParamSpec> params;
  std::vector<MetricSpec> metrics;  // at least one; the first is the objective of single-objective search
  Algorithm algorithm = Algorithm::kBayesian;
};

// One parameter's value: double (kDouble, kDiscrete), int64_t (kInteger) or
// string (kCategorical).
using Value = std::variant<double, int64_t, std::string>;
using Assignment = std::map<std::string, Value>;  // parameter name -> value

// The text a trial receives for a value (`--name=TEXT`): integers without a
// decimal point, doubles in the shortest form that reads back exactly,
// categories as given.
std::string FormatValue(const Value& v);

struct Measurement {
  int64_t step = 0;
  double elapsed_seconds = 0;
  std::map<std::string, double> metrics;  // metric name -> value
};

enum class TrialState {
  kActive,      // suggested or running: the optimizer must not suggest it again
  kCompleted,   // finished with `final_measurement`
  kInfeasible,  // finished without a usable objective (failed, reported nothing)
  kStopped,     // stopped early: counts as completed with its last measurement
};

struct Trial {
  Assignment params;
  TrialState state = TrialState::kActive;
  std::vector<Measurement> measurements;  // intermediate values, in step order
  std::optional<Measurement> final_measurement;
};

}  // namespace mle::tuning
