#include "tuning/suggest.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuning/bayesian.h"
#include "tuning/encoding.h"

namespace mle::tuning {
namespace {

// Retries of a random draw that hit a tried point before giving up on it.
constexpr int kSampleAttempts = 100;

// ---------------------------------------------------------------------------
// Grid: point k of the grid is decoded from k in mixed radix (first parameter
// slowest). A parameter with children contributes, per value, that value
// times the product of its active children's grids.

constexpr int64_t kMaxSize = std::numeric_limits<int64_t>::max();

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kMaxSize : r;
}
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kMaxSize : r;
}

int64_t ValueCount(const ParamSpec& p) {
  switch (p.type) {
    case ParamType::kInteger:
      return static_cast<int64_t>(p.max - p.min) + 1;
    case ParamType::kCategorical:
      return static_cast<int64_t>(p.categories.size());
    case ParamType::kDiscrete:
      return static_cast<int64_t>(p.discrete.size());
    case ParamType::kDouble:
      break;
  }
  return 0;
}

Value ValueAt(const ParamSpec& p, int64_t i) {
  switch (p.type) {
    case ParamType::kInteger:
      return static_cast<int64_t>(p.min) + i;
    case ParamType::kCategorical:
      return p.categories[static_cast<size_t>(i)];
    case ParamType::kDiscrete:
      return p.discrete[static_cast<size_t>(i)];
    case ParamType::kDouble:
      break;
  }
  return 0.0;
}

bool HasDouble(const std::vector<ParamSpec>& params) {
  for (const ParamSpec& p : params) {
    if (p.type == ParamType::kDouble || HasDouble(p.children)) return true;
  }
  return false;
}

std::vector<const ParamSpec*> ActiveChildren(const ParamSpec& p, const Value& v) {
  std::vector<const ParamSpec*> out;
  for (const ParamSpec& c : p.children) {
    if (ChildActive(p, c, v)) out.push_back(&c);
  }
  return out;
}

int64_t SubtreeSize(const ParamSpec& p);

int64_t ProductSize(const std::vector<const ParamSpec*>& params) {
  int64_t n = 1;
  for (const ParamSpec* p : params) n = SaturatingMul(n, SubtreeSize(*p));
  return n;
}

int64_t SubtreeSize(const ParamSpec& p) {
  const int64_t values = ValueCount(p);
  if (p.children.empty()) return values;
  int64_t n = 0;
  for (int64_t i = 0; i < values; ++i) n = SaturatingAdd(n, ProductSize(ActiveChildren(p, ValueAt(p, i))));
  return n;
}

void DecodeProduct(const std::vector<const ParamSpec*>& params, int64_t index, Assignment& a);

void DecodeSubtree(const ParamSpec& p, int64_t index, Assignment& a) {
  if (p.children.empty()) {
    a[p.name] = ValueAt(p, index);
    return;
  }
  const int64_t values = ValueCount(p);
  for (int64_t i = 0; i < values; ++i) {
    const Value v = ValueAt(p, i);
    const std::vector<const ParamSpec*> children = ActiveChildren(p, v);
    const int64_t size = ProductSize(children);
    if (index < size) {
      a[p.name] = v;
      DecodeProduct(children, index, a);
      return;
    }
    index -= size;
  }
}

void DecodeProduct(const std::vector<const ParamSpec*>& params, int64_t index, Assignment& a) {
  std::vector<int64_t> digits(params.size());
  for (size_t j = params.size(); j-- > 0;) {
    const int64_t size = SubtreeSize(*params[j]);
    digits[j] = index % size;
    index /= size;
  }
  for (size_t j = 0; j < params.size(); ++j) DecodeSubtree(*params[j], digits[j], a);
}

std::vector<const ParamSpec*> TopLevel(const StudySpec& spec) {
  std::vector<const ParamSpec*> top;
  for (const ParamSpec& p : spec.params) top.push_back(&p);
  return top;
}

std::vector<Assignment> SuggestGrid(const StudySpec& spec, const std::vector<Trial>& trials, int count) {
  const std::vector<const ParamSpec*> top = TopLevel(spec);
  const int64_t size = ProductSize(top);
  const std::set<Assignment> tried = TriedPoints(trials);
  std::vector<Assignment> out;
  for (int64_t k = 0; k < size && static_cast<int>(out.size()) < count; ++k) {
    Assignment a;
    DecodeProduct(top, k, a);
    if (!tried.count(a)) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

std::set<Assignment> TriedPoints(const std::vector<Trial>& trials) {
  std::set<Assignment> tried;
  for (const Trial& t : trials) tried.insert(t.params);
  return tried;
}

std::vector<Assignment> SampleUntried(const SearchSpace& space, int count, Rng& rng, std::set<Assignment>& tried) {
  std::vector<Assignment> out;
  for (int i = 0; i < count; ++i) {
    for (int attempt = 0; attempt < kSampleAttempts; ++attempt) {
      Assignment a = space.Sample(rng);
      if (tried.insert(a).second) {
        out.push_back(std::move(a));
        break;
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<Assignment>> Suggest(const StudySpec& spec, const std::vector<Trial>& trials, int count,
                                                uint64_t seed) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;
  if (count < 0) return absl::InvalidArgumentError("count must not be negative");
  if (count == 0) return std::vector<Assignment>{};
  switch (spec.algorithm) {
    case Algorithm::kGrid:
      if (HasDouble(spec.params)) return absl::InvalidArgumentError("grid search needs no DOUBLE parameter");
      return SuggestGrid(spec, trials, count);
    case Algorithm::kRandom: {
      const SearchSpace space(spec.params);
      Rng rng(seed);
      std::set<Assignment> tried = TriedPoints(trials);
      return SampleUntried(space, count, rng, tried);
    }
    case Algorithm::kBayesian:
      return SuggestBayesian(spec, trials, count, seed);
  }
  return absl::InvalidArgumentError("unknown algorithm");
}

std::optional<int64_t> GridSize(const StudySpec& spec) {
  if (HasDouble(spec.params)) return std::nullopt;
  return ProductSize(TopLevel(spec));
}

}  // namespace mle::tuning
