// Suggest: the optimizers. Pure functions of (spec, trials so far, count,
// seed): the same inputs give the same suggestions, so a restart that asks
// again gets the same points, and tests and benchmarks are reproducible.
//
// - kRandom: uniform in each parameter's scaled space (log scales uniform in
//   log), integers and discrete values exact members of their sets.
// - kGrid: the cartesian product of every parameter's values (INTEGER: every
//   integer from min to max; DISCRETE; CATEGORICAL), in order, first
//   parameter slowest; points already tried (any state) are skipped; fewer
//   than `count` (maybe none) come back once the grid is exhausted. kDouble
//   parameters make a spec not grid-searchable (INVALID_ARGUMENT).
// - kBayesian: a Gaussian process (Matern 5/2, ARD length scales fitted by
//   marginal likelihood) over the unit cube of the scaled parameters
//   (categories one-hot, integers and discrete values snapped), expected
//   improvement maximised over candidates; a batch of several suggestions
//   uses the kriging believer so parallel trials do not coincide. The first
//   few trials (and any trial when fewer than 2 completed observations exist)
//   are random. Infeasible trials count as the worst value seen.
//   Single objective: the first metric of `spec.metrics`.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "tuning/space.h"

namespace mle::tuning {

// INVALID_ARGUMENT when the spec cannot be searched (e.g. grid over a DOUBLE).
absl::StatusOr<std::vector<Assignment>> Suggest(const StudySpec& spec, const std::vector<Trial>& trials, int count,
                                                uint64_t seed);

// The number of points a grid search visits, or nullopt when the spec has a
// kDouble parameter.
std::optional<int64_t> GridSize(const StudySpec& spec);

}  // namespace mle::tuning
