// Internal to mle_tuning: the one place that says which number a trial
// contributes for a metric. Shared by the optimizers and the stopping rules.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "tuning/space.h"

namespace mle::tuning {

// The value of `metric` in a measurement, if it reports one.
std::optional<double> MetricIn(const Measurement& m, const std::string& metric);

// A finished trial's value for `metric`: kCompleted -> its final measurement;
// kStopped -> its last measurement (the final one when set, else the last
// intermediate one reporting the metric). nullopt for active and infeasible
// trials and for trials that never reported the metric.
std::optional<double> FinalValue(const Trial& trial, const std::string& metric);

// The trial's value for `metric` at `step`: from the last measurement at or
// before `step` (intermediate ones and the final one) that reports it.
std::optional<double> ValueAtStep(const Trial& trial, const std::string& metric, int64_t step);

// True when `a` is strictly better than `b` under `goal`.
inline bool Better(Goal goal, double a, double b) { return goal == Goal::kMaximize ? a > b : a < b; }

}  // namespace mle::tuning
