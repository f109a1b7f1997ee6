// Internal to mle_tuning: the search space as the optimizers walk it.
//  - Rng: a deterministic random stream (same seed, same numbers, on every
//    platform: no std distributions, whose output is implementation-defined).
//  - SearchSpace: the parameter tree flattened parents-first; which
//    parameters a point activates; uniform sampling in scaled space; the
//    encoding onto the unit cube the Gaussian process sees (one coordinate per
//    numeric parameter, one-hot per category; inactive children at a fixed
//    place) and its inverse, which snaps to valid members.
// Exposed for the unit tests. SearchSpace keeps pointers into the spec it was
// built from, which must outlive it. Const methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "tuning/space.h"

namespace mle::tuning {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next() { return gen_(); }
  double Uniform();           // [0, 1), 53 random bits
  uint64_t Below(uint64_t n);  // uniform in [0, n), n > 0
  double Normal();            // standard normal (Box-Muller)

 private:
  std::mt19937_64 gen_;
};

// Every structural rule the optimizers rely on: names unique, min < max,
// integral integer bounds, positive bounds for log scales, non-empty
// categories and discrete values (the latter strictly increasing), at least
// one metric. INVALID_ARGUMENT naming the parameter otherwise.
absl::Status ValidateSpec(const StudySpec& spec);

// Whether `child` of `parent` is part of a point where `parent` has `value`.
bool ChildActive(const ParamSpec& parent, const ParamSpec& child, const Value& value);

// Scaled position in [0, 1] of x in [lo, hi], and back (clamped).
double ToUnit(double x, double lo, double hi, Scale scale);
double FromUnit(double u, double lo, double hi, Scale scale);

class SearchSpace {
 public:
  struct Slot {
    const ParamSpec* spec;
    int parent;  // index of the parent slot, -1 at top level
    int offset;  // first coordinate in the encoding
    int width;   // 1, or the number of categories
  };

  // `params` must pass ValidateSpec.
  explicit SearchSpace(const std::vector<ParamSpec>& params);

  const std::vector<Slot>& slots() const { return slots_; }
  int dims() const { return dims_; }

  // Whether slot `i` belongs in a point whose ancestors have `a`'s values.
  bool Active(size_t i, const Assignment& a) const;
  // A point uniform in each active parameter's scaled space.
  Assignment Sample(Rng& rng) const;
  Eigen::VectorXd Encode(const Assignment& a) const;
  // The valid point nearest to `u` (numbers rounded to members, the largest
  // one-hot coordinate wins).
  Assignment Decode(const Eigen::VectorXd& u) const;
  // Coordinates of the numeric parameters active in `a`.
  std::vector<int> ActiveNumericDims(const Assignment& a) const;

 private:
  void Add(const ParamSpec& p, int parent);

  std::vector<Slot> slots_;
  int dims_ = 0;
};

}  // namespace mle::tuning
