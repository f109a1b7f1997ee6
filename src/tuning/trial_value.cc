#include "tuning/trial_value.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mle::tuning {

std::optional<double> MetricIn(const Measurement& m, const std::string& metric) {
  auto it = m.metrics.find(metric);
  if (it == m.metrics.end()) return std::nullopt;
  return it->second;
}

std::optional<double> FinalValue(const Trial& trial, const std::string& metric) {
  switch (trial.state) {
    case TrialState::kCompleted:
      if (!trial.final_measurement) return std::nullopt;
      return MetricIn(*trial.final_measurement, metric);
    case TrialState::kStopped: {
      if (trial.final_measurement) {
        if (std::optional<double> v = MetricIn(*trial.final_measurement, metric)) return v;
      }
      for (auto it = trial.measurements.rbegin(); it != trial.measurements.rend(); ++it) {
        if (std::optional<double> v = MetricIn(*it, metric)) return v;
      }
      return std::nullopt;
    }
    case TrialState::kActive:
    case TrialState::kInfeasible:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> ValueAtStep(const Trial& trial, const std::string& metric, int64_t step) {
  std::optional<double> best;
  int64_t best_step = 0;
  auto consider = [&](const Measurement& m) {
    if (m.step > step) return;
    std::optional<double> v = MetricIn(m, metric);
    if (!v) return;
    // Later in the list wins a tie of steps: the final measurement comes last.
    if (!best || m.step >= best_step) {
      best = v;
      best_step = m.step;
    }
  };
  for (const Measurement& m : trial.measurements) consider(m);
  if (trial.final_measurement) consider(*trial.final_measurement);
  return best;
}

}  // namespace mle::tuning
