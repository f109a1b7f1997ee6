#include "tuning/encoding.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mle::tuning {
namespace {

constexpr double kInactive = 0.5;  // where an inactive numeric child sits in the encoding

double AsDouble(const Value& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nan("");
}

// The interval an integer parameter spreads over in scaled space: each
// integer owns the unit around it, so the end values are as likely as others.
double IntLo(const ParamSpec& p) { return p.min - 0.5; }
double IntHi(const ParamSpec& p) { return p.max + 0.5; }

double DiscreteUnit(const ParamSpec& p, double x) {
  if (p.discrete.size() == 1) return kInactive;
  return ToUnit(x, p.discrete.front(), p.discrete.back(), p.scale);
}

absl::Status Invalid(const ParamSpec& p, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("parameter \"", p.name, "\": ", why));
}

absl::Status ValidateParam(const ParamSpec& p, const ParamSpec* parent, std::set<std::string>& names) {
  if (p.name.empty()) return absl::InvalidArgumentError("a parameter has no name");
  if (!names.insert(p.name).second) return Invalid(p, "name used twice");
  const bool log = p.scale == Scale::kLog || p.scale == Scale::kReverseLog;
  switch (p.type) {
    case ParamType::kDouble:
    case ParamType::kInteger:
      if (!std::isfinite(p.min) || !std::isfinite(p.max) || !(p.min < p.max)) return Invalid(p, "needs min < max");
      if (p.type == ParamType::kInteger) {
        if (std::trunc(p.min) != p.min || std::trunc(p.max) != p.max) return Invalid(p, "integer bounds must be integral");
        // Doubles hold every integer up to 2^53 exactly; the grid counts in int64.
        if (std::abs(p.min) > 0x1p53 || std::abs(p.max) > 0x1p53) return Invalid(p, "integer bounds beyond 2^53");
      }
      if (log && p.min <= 0) return Invalid(p, "a log scale needs min > 0");
      break;
    case ParamType::kCategorical: {
      if (p.categories.empty()) return Invalid(p, "no categories");
      std::set<std::string> seen(p.categories.begin(), p.categories.end());
      if (seen.size() != p.categories.size()) return Invalid(p, "categories repeat");
      break;
    }
    case ParamType::kDiscrete:
      if (p.discrete.empty()) return Invalid(p, "no discrete values");
      for (size_t i = 0; i < p.discrete.size(); ++i) {
        if (!std::isfinite(p.discrete[i])) return Invalid(p, "discrete values must be finite");
        if (i > 0 && !(p.discrete[i - 1] < p.discrete[i])) return Invalid(p, "discrete values must increase");
      }
      if (log && p.discrete.front() <= 0) return Invalid(p, "a log scale needs values > 0");
      break;
  }
  if (parent) {
    bool has_condition = false;
    switch (parent->type) {
      case ParamType::kCategorical:
        has_condition = !p.parent_categories.empty();
        break;
      case ParamType::kDiscrete:
        has_condition = !p.parent_discrete.empty();
        break;
      case ParamType::kInteger:
        has_condition = !p.parent_ints.empty();
        break;
      case ParamType::kDouble:
        return Invalid(p, "a DOUBLE parameter cannot have children");
    }
    if (!has_condition) return Invalid(p, "a child needs parent values matching its parent's type");
  }
  for (const ParamSpec& c : p.children) {
    if (absl::Status s = ValidateParam(c, &p, names); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

Rng::Rng(uint64_t seed) : gen_(seed) {}

double Rng::Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

uint64_t Rng::Below(uint64_t n) {
  // Rejection keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = gen_();
  } while (x >= limit);
  return x % n;
}

double Rng::Normal() {
  const double u1 = 1.0 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

absl::Status ValidateSpec(const StudySpec& spec) {
  if (spec.metrics.empty()) return absl::InvalidArgumentError("the study has no metric");
  if (spec.params.empty()) return absl::InvalidArgumentError("the study has no parameter");
  std::set<std::string> names;
  for (const ParamSpec& p : spec.params) {
    if (absl::Status s = ValidateParam(p, nullptr, names); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool ChildActive(const ParamSpec& parent, const ParamSpec& child, const Value& value) {
  switch (parent.type) {
    case ParamType::kCategorical: {
      const auto* c = std::get_if<std::string>(&value);
      return c && std::find(child.parent_categories.begin(), child.parent_categories.end(), *c) !=
                      child.parent_categories.end();
    }
    case ParamType::kDiscrete: {
      const double v = AsDouble(value);
      return std::find(child.parent_discrete.begin(), child.parent_discrete.end(), v) != child.parent_discrete.end();
    }
    case ParamType::kInteger: {
      const double v = AsDouble(value);
      return std::any_of(child.parent_ints.begin(), child.parent_ints.end(),
                         [v](int64_t p) { return static_cast<double>(p) == v; });
    }
    case ParamType::kDouble:
      return false;
  }
  return false;
}

// Vizier's scalings: log is uniform in log(x); reverse log mirrors it so
// points are dense near max: u = 1 - log-scaled(max + min - x).
double ToUnit(double x, double lo, double hi, Scale scale) {
  double u = 0;
  switch (scale) {
    case Scale::kNone:
    case Scale::kLinear:
      u = (x - lo) / (hi - lo);
      break;
    case Scale::kLog:
      u = (std::log(x) - std::log(lo)) / (std::log(hi) - std::log(lo));
      break;
    case Scale::kReverseLog:
      u = 1.0 - (std::log(hi + lo - x) - std::log(lo)) / (std::log(hi) - std::log(lo));
      break;
  }
  return std::clamp(u, 0.0, 1.0);
}

double FromUnit(double u, double lo, double hi, Scale scale) {
  u = std::clamp(u, 0.0, 1.0);
  double x = 0;
  switch (scale) {
    case Scale::kNone:
    case Scale::kLinear:
      x = lo + u * (hi - lo);
      break;
    case Scale::kLog:
      x = std::exp(std::log(lo) + u * (std::log(hi) - std::log(lo)));
      break;
    case Scale::kReverseLog:
      x = hi + lo - std::exp(std::log(lo) + (1.0 - u) * (std::log(hi) - std::log(lo)));
      break;
  }
  return std::clamp(x, lo, hi);
}

SearchSpace::SearchSpace(const std::vector<ParamSpec>& params) {
  for (const ParamSpec& p : params) Add(p, -1);
}

void SearchSpace::Add(const ParamSpec& p, int parent) {
  const int width = p.type == ParamType::kCategorical ? static_cast<int>(p.categories.size()) : 1;
  slots_.push_back(Slot{&p, parent, dims_, width});
  dims_ += width;
  const int self = static_cast<int>(slots_.size()) - 1;
  for (const ParamSpec& c : p.children) Add(c, self);
}

bool SearchSpace::Active(size_t i, const Assignment& a) const {
  const Slot& s = slots_[i];
  if (s.parent < 0) return true;
  const ParamSpec& parent = *slots_[s.parent].spec;
  auto it = a.find(parent.name);
  return it != a.end() && ChildActive(parent, *s.spec, it->second);
}

Assignment SearchSpace::Sample(Rng& rng) const {
  Assignment a;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!Active(i, a)) continue;
    const ParamSpec& p = *slots_[i].spec;
    switch (p.type) {
      case ParamType::kDouble:
        a[p.name] = FromUnit(rng.Uniform(), p.min, p.max, p.scale);
        break;
      case ParamType::kInteger: {
        const double x = std::round(FromUnit(rng.Uniform(), IntLo(p), IntHi(p), p.scale));
        a[p.name] = static_cast<int64_t>(std::clamp(x, p.min, p.max));
        break;
      }
      case ParamType::kCategorical:
        a[p.name] = p.categories[rng.Below(p.categories.size())];
        break;
      case ParamType::kDiscrete:
        a[p.name] = p.discrete[rng.Below(p.discrete.size())];
        break;
    }
  }
  return a;
}

Eigen::VectorXd SearchSpace::Encode(const Assignment& a) const {
  Eigen::VectorXd u = Eigen::VectorXd::Zero(dims_);
  for (const Slot& s : slots_) {
    const ParamSpec& p = *s.spec;
    auto it = a.find(p.name);
    if (p.type == ParamType::kCategorical) {
      if (it == a.end()) continue;  // inactive: every one-hot coordinate 0
      const auto* c = std::get_if<std::string>(&it->second);
      if (!c) continue;
      auto pos = std::find(p.categories.begin(), p.categories.end(), *c);
      if (pos != p.categories.end()) u[s.offset + (pos - p.categories.begin())] = 1.0;
      continue;
    }
    double x = it == a.end() ? std::nan("") : AsDouble(it->second);
    if (std::isnan(x)) {
      u[s.offset] = kInactive;
      continue;
    }
    switch (p.type) {
      case ParamType::kDouble:
        u[s.offset] = ToUnit(std::clamp(x, p.min, p.max), p.min, p.max, p.scale);
        break;
      case ParamType::kInteger:
        u[s.offset] = ToUnit(std::clamp(x, p.min, p.max), IntLo(p), IntHi(p), p.scale);
        break;
      case ParamType::kDiscrete:
        u[s.offset] = DiscreteUnit(p, std::clamp(x, p.discrete.front(), p.discrete.back()));
        break;
      case ParamType::kCategorical:
        break;
    }
  }
  return u;
}

Assignment SearchSpace::Decode(const Eigen::VectorXd& u) const {
  Assignment a;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!Active(i, a)) continue;
    const Slot& s = slots_[i];
    const ParamSpec& p = *s.spec;
    const double x = u[s.offset];
    switch (p.type) {
      case ParamType::kDouble:
        a[p.name] = FromUnit(x, p.min, p.max, p.scale);
        break;
      case ParamType::kInteger: {
        const double v = std::round(FromUnit(x, IntLo(p), IntHi(p), p.scale));
        a[p.name] = static_cast<int64_t>(std::clamp(v, p.min, p.max));
        break;
      }
      case ParamType::kDiscrete: {
        size_t best = 0;
        for (size_t k = 1; k < p.discrete.size(); ++k) {
          if (std::abs(DiscreteUnit(p, p.discrete[k]) - x) < std::abs(DiscreteUnit(p, p.discrete[best]) - x)) best = k;
        }
        a[p.name] = p.discrete[best];
        break;
      }
      case ParamType::kCategorical: {
        Eigen::Index best = 0;
        u.segment(s.offset, s.width).maxCoeff(&best);
        a[p.name] = p.categories[static_cast<size_t>(best)];
        break;
      }
    }
  }
  return a;
}

std::vector<int> SearchSpace::ActiveNumericDims(const Assignment& a) const {
  std::vector<int> dims;
  for (const Slot& s : slots_) {
    if (s.spec->type != ParamType::kCategorical && a.count(s.spec->name)) dims.push_back(s.offset);
  }
  return dims;
}

}  // namespace mle::tuning
