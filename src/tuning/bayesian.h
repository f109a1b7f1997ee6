// Internal to mle_tuning: the Bayesian optimizer behind Suggest(kBayesian)
// (contract in suggest.h). Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "tuning/encoding.h"
#include "tuning/space.h"

namespace mle::tuning {

// `spec` must pass ValidateSpec. Returns up to `count` points, none in `tried`.
std::vector<Assignment> SuggestBayesian(const StudySpec& spec, const std::vector<Trial>& trials, int count,
                                        uint64_t seed);

// Up to `count` random points of `space`, none in `tried`; they are added to
// `tried`. Fewer only when sampling keeps hitting tried points (a nearly
// exhausted finite space).
std::vector<Assignment> SampleUntried(const SearchSpace& space, int count, Rng& rng, std::set<Assignment>& tried);

// Every trial's parameters, whatever its state.
std::set<Assignment> TriedPoints(const std::vector<Trial>& trials);

}  // namespace mle::tuning
