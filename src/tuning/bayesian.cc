#include "tuning/bayesian.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <numbers>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include <Eigen/Core>
#include <nlopt.hpp>

#include "tuning/gp.h"
#include "tuning/trial_value.h"

namespace mle::tuning {
namespace {

// The initial design: this many trials (of any state) are random, between 2
// and 5 depending on the number of parameters.
int InitialDesign(const SearchSpace& space) {
  return std::clamp(static_cast<int>(space.slots().size()) + 1, 2, 5);
}

// Candidate budget: predicting m candidates costs O(m n^2) with n
// observations, so the random candidates shrink as the study grows.
constexpr int kMaxRandomCandidates = 2000;
constexpr int kMinRandomCandidates = 300;
constexpr double kCandidateWork = 2e7;
// Local candidates: perturbations of the best observed points.
constexpr int kLocalCenters = 5;
constexpr int kPerturbationsPerCenter = 60;
constexpr double kPerturbationScales[] = {0.01, 0.04, 0.15};
// Local refinement of the best candidates by a derivative-free optimizer.
constexpr int kRefinedCandidates = 3;
constexpr int kRefineEvals = 60;
// Expected improvement's exploration margin, in standard deviations of y.
constexpr double kXi = 0.01;

// The observations the surrogate is fitted on, in "larger is better" units.
struct Observations {
  std::vector<Eigen::VectorXd> x;
  std::vector<double> y;
  std::vector<Eigen::VectorXd> pending;  // active trials: fantasised
  size_t feasible = 0;                    // the first values of y; the rest are imputed
};

Observations Collect(const SearchSpace& space, const MetricSpec& objective, const std::vector<Trial>& trials) {
  const double sign = objective.goal == Goal::kMaximize ? 1.0 : -1.0;
  Observations obs;
  std::vector<Eigen::VectorXd> infeasible;
  for (const Trial& t : trials) {
    Eigen::VectorXd x = space.Encode(t.params);
    if (t.state == TrialState::kActive) {
      obs.pending.push_back(std::move(x));
      continue;
    }
    std::optional<double> v = FinalValue(t, objective.name);
    if (v && std::isfinite(*v)) {
      obs.x.push_back(std::move(x));
      obs.y.push_back(sign * *v);
    } else {
      infeasible.push_back(std::move(x));  // failed, or finished without the objective
    }
  }
  obs.feasible = obs.y.size();
  if (!obs.y.empty()) {
    const double worst = *std::min_element(obs.y.begin(), obs.y.end());
    for (Eigen::VectorXd& x : infeasible) {
      obs.x.push_back(std::move(x));
      obs.y.push_back(worst);
    }
  }
  return obs;
}

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

double ExpectedImprovement(double mean, double variance, double target) {
  const double sd = std::sqrt(variance);
  const double gain = mean - target;
  if (sd < 1e-12) return std::max(gain, 0.0);
  const double z = gain / sd;
  return gain * NormalCdf(z) + sd * NormalPdf(z);
}

// One step of the acquisition: candidates, their expected improvement, and
// the best one no trial has tried yet.
class Acquisition {
 public:
  Acquisition(const SearchSpace& space, const GaussianProcess& gp, double target, Rng& rng)
      : space_(space), gp_(gp), target_(target), rng_(rng) {}

  std::optional<Assignment> Best(const std::vector<Eigen::VectorXd>& centers, const std::set<Assignment>& tried) {
    AddRandom();
    for (const Eigen::VectorXd& c : centers) AddPerturbations(c);
    Score(0);
    Refine();
    std::vector<size_t> order(points_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) { return ei_[a] > ei_[b]; });
    for (size_t i : order) {
      if (!tried.count(points_[i])) return points_[i];
    }
    return std::nullopt;
  }

 private:
  void AddPoint(Assignment a) {
    encoded_.push_back(space_.Encode(a));
    points_.push_back(std::move(a));
  }

  void AddRandom() {
    const double n = static_cast<double>(gp_.size());
    const int m = static_cast<int>(
        std::clamp(kCandidateWork / (n * n), double{kMinRandomCandidates}, double{kMaxRandomCandidates}));
    for (int i = 0; i < m; ++i) AddPoint(space_.Sample(rng_));
  }

  void AddPerturbations(const Eigen::VectorXd& center) {
    const int categorical_slots = static_cast<int>(std::count_if(
        space_.slots().begin(), space_.slots().end(),
        [](const SearchSpace::Slot& s) { return s.spec->type == ParamType::kCategorical; }));
    for (int i = 0; i < kPerturbationsPerCenter; ++i) {
      const double scale = kPerturbationScales[i % std::size(kPerturbationScales)];
      Eigen::VectorXd u = center;
      for (const SearchSpace::Slot& s : space_.slots()) {
        if (s.spec->type == ParamType::kCategorical) {
          // Change about one category per perturbation.
          if (rng_.Uniform() * categorical_slots < 1.0) {
            u.segment(s.offset, s.width).setZero();
            u[s.offset + static_cast<int>(rng_.Below(static_cast<uint64_t>(s.width)))] = 1.0;
          }
        } else {
          u[s.offset] = std::clamp(u[s.offset] + scale * rng_.Normal(), 0.0, 1.0);
        }
      }
      AddPoint(space_.Decode(u));
    }
  }

  // Expected improvement of the points from `first` on.
  void Score(size_t first) {
    const Eigen::Index m = static_cast<Eigen::Index>(points_.size() - first);
    Eigen::MatrixXd xs(m, space_.dims());
    for (Eigen::Index i = 0; i < m; ++i) xs.row(i) = encoded_[first + i].transpose();
    Eigen::VectorXd mean, variance;
    gp_.Predict(xs, mean, variance);
    for (Eigen::Index i = 0; i < m; ++i) ei_.push_back(ExpectedImprovement(mean[i], variance[i], target_));
  }

  // The best few candidates, their active numeric coordinates moved by
  // BOBYQA to a local maximum of the expected improvement (relaxed: integers
  // and discrete values are snapped afterwards).
  void Refine() {
    std::vector<size_t> order(points_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const size_t k = std::min<size_t>(kRefinedCandidates, order.size());
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [this](size_t a, size_t b) { return ei_[a] > ei_[b]; });
    const size_t before = points_.size();
    for (size_t j = 0; j < k; ++j) {
      std::optional<Eigen::VectorXd> u = Maximize(encoded_[order[j]], space_.ActiveNumericDims(points_[order[j]]));
      if (u) AddPoint(space_.Decode(*u));
    }
    Score(before);
  }

  struct LocalProblem {
    const Acquisition* self;
    Eigen::VectorXd base;
    const std::vector<int>* dims;
  };

  static double LocalObjective(const std::vector<double>& v, std::vector<double>& /*grad*/, void* data) {
    auto* p = static_cast<LocalProblem*>(data);
    Eigen::VectorXd u = p->base;
    for (size_t i = 0; i < v.size(); ++i) u[(*p->dims)[i]] = v[i];
    double mean, variance;
    p->self->gp_.Predict(u, mean, variance);
    return ExpectedImprovement(mean, variance, p->self->target_);
  }

  std::optional<Eigen::VectorXd> Maximize(const Eigen::VectorXd& start, const std::vector<int>& dims) const {
    if (dims.empty()) return std::nullopt;
    LocalProblem problem{this, start, &dims};
    // BOBYQA needs two or more variables; COBYLA takes one.
    nlopt::opt opt(dims.size() >= 2 ? nlopt::LN_BOBYQA : nlopt::LN_COBYLA, static_cast<unsigned>(dims.size()));
    opt.set_lower_bounds(0.0);
    opt.set_upper_bounds(1.0);
    opt.set_max_objective(LocalObjective, &problem);
    opt.set_maxeval(kRefineEvals);
    opt.set_initial_step(0.02);
    std::vector<double> v;
    for (int d : dims) v.push_back(start[d]);
    double value;
    try {
      opt.optimize(v, value);
    } catch (const std::exception&) {
      return std::nullopt;  // a candidate less; the others stand
    }
    Eigen::VectorXd u = start;
    for (size_t i = 0; i < v.size(); ++i) u[dims[i]] = v[i];
    return u;
  }

  const SearchSpace& space_;
  const GaussianProcess& gp_;
  const double target_;
  Rng& rng_;
  std::vector<Assignment> points_;
  std::vector<Eigen::VectorXd> encoded_;
  std::vector<double> ei_;
};

Eigen::MatrixXd Rows(const std::vector<Eigen::VectorXd>& v, int dims) {
  Eigen::MatrixXd m(static_cast<Eigen::Index>(v.size()), dims);
  for (size_t i = 0; i < v.size(); ++i) m.row(static_cast<Eigen::Index>(i)) = v[i].transpose();
  return m;
}

// The kriging believer: points being tried count as observed at the mean
// the model predicts there. (Such an observation leaves the mean elsewhere
// unchanged, so adding several at once equals adding them one by one.)
void Believe(GaussianProcess& gp, const std::vector<Eigen::VectorXd>& points) {
  if (points.empty()) return;
  const Eigen::MatrixXd x = Rows(points, static_cast<int>(points.front().size()));
  Eigen::VectorXd mean, variance;
  gp.Predict(x, mean, variance);
  gp.Add(x, mean);
}

}  // namespace

std::vector<Assignment> SuggestBayesian(const StudySpec& spec, const std::vector<Trial>& trials, int count,
                                        uint64_t seed) {
  const SearchSpace space(spec.params);
  Rng rng(seed);
  std::set<Assignment> tried = TriedPoints(trials);
  const Observations obs = Collect(space, spec.metrics.front(), trials);

  const int design_left = InitialDesign(space) - static_cast<int>(trials.size());
  const int random = obs.feasible < 2 ? count : std::clamp(design_left, 0, count);
  std::vector<Assignment> out = SampleUntried(space, random, rng, tried);
  if (random == count) return out;

  const Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(obs.y.data(), static_cast<Eigen::Index>(obs.y.size()));
  GaussianProcess gp = GaussianProcess::Fit(Rows(obs.x, space.dims()), y, rng);
  const double y_sd = std::sqrt((y.array() - y.mean()).square().mean());
  const double target = y.maxCoeff() + kXi * (y_sd > 0 ? y_sd : 1.0);

  // Perturbations start from the best observed points.
  std::vector<size_t> order(obs.y.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&obs](size_t a, size_t b) { return obs.y[a] > obs.y[b]; });
  std::vector<Eigen::VectorXd> centers;
  for (size_t i = 0; i < order.size() && centers.size() < kLocalCenters; ++i) centers.push_back(obs.x[order[i]]);

  std::vector<Eigen::VectorXd> believed = obs.pending;
  for (const Assignment& a : out) believed.push_back(space.Encode(a));
  Believe(gp, believed);
  while (static_cast<int>(out.size()) < count) {
    Acquisition acquisition(space, gp, target, rng);
    std::optional<Assignment> next = acquisition.Best(centers, tried);
    if (!next) {
      // Every candidate was tried: fall back to a random untried point.
      std::vector<Assignment> any = SampleUntried(space, 1, rng, tried);
      if (any.empty()) break;  // the space is (nearly) exhausted
      next = std::move(any.front());
    }
    tried.insert(*next);
    Believe(gp, {space.Encode(*next)});
    out.push_back(std::move(*next));
  }
  return out;
}

}  // namespace mle::tuning
