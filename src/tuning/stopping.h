// Automated early stopping and the Pareto front: pure functions over a
// study's trials.
//
// Median stopping (Vizier's MedianAutomatedStoppingConfig): an active trial
// should stop when its objective at its latest step is worse than the median,
// over completed (or stopped) trials, of their value at that step (each
// completed trial's last measurement at or before that step). Needs at least
// kMinCompletedForStopping such trials with a measurement at or before the
// step; otherwise the trial goes on.
#pragma once

#include <cstddef>
#include <vector>

#include "tuning/space.h"

namespace mle::tuning {

inline constexpr size_t kMinCompletedForStopping = 3;

// `trial` is judged against the other trials in `trials` (it may be among them).
bool ShouldStopMedian(const MetricSpec& objective, const Trial& trial, const std::vector<Trial>& trials);

// Indices into `trials` of the completed trials no other completed trial
// dominates on `metrics` (each maximised or minimised by its goal). With one
// metric: the best trials (ties all returned). In index order.
std::vector<size_t> ParetoOptimal(const std::vector<MetricSpec>& metrics, const std::vector<Trial>& trials);

// Orders trials best first for output: completed by objective (goal-aware),
// then stopped, then active, then infeasible; ties by index. Returns indices.
std::vector<size_t> BestFirst(const MetricSpec& objective, const std::vector<Trial>& trials);

}  // namespace mle::tuning
