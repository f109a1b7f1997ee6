#include "tuning/gp.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numbers>
#include <numeric>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <nlopt.hpp>

namespace mle::tuning {
namespace {

const double kSqrt5 = std::sqrt(5.0);

// Hyperparameter bounds, in log space. Length scales are relative to the unit
// cube; signal and noise to standardized outputs.
constexpr double kMinLength = 0.03, kMaxLength = 30;
constexpr double kMinSignal = 0.05, kMaxSignal = 20;
constexpr double kMinNoise = 1e-6, kMaxNoise = 1;
// The box random starts are drawn from: plausible values, inside the bounds.
constexpr double kStartMinLength = 0.1, kStartMaxLength = 2;
constexpr double kStartMinNoise = 1e-5, kStartMaxNoise = 0.1;

// Squared scaled distances between the rows of a and b (both already divided
// by the length scales).
Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd r2 = (-2.0 * a * b.transpose()).eval();
  r2.colwise() += a.rowwise().squaredNorm();
  r2.rowwise() += b.rowwise().squaredNorm().transpose();
  return r2.cwiseMax(0.0);
}

// signal * (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r), elementwise on r^2.
Eigen::MatrixXd Matern52(const Eigen::MatrixXd& r2, double signal) {
  Eigen::ArrayXXd r = r2.array().sqrt();
  return (signal * (1.0 + kSqrt5 * r + (5.0 / 3.0) * r2.array()) * (-kSqrt5 * r).exp()).matrix();
}

int NumParams(int dims) { return dims + 2; }

std::vector<double> Pack(const GpParams& p) {
  std::vector<double> v(p.log_length.data(), p.log_length.data() + p.log_length.size());
  v.push_back(p.log_signal);
  v.push_back(p.log_noise);
  return v;
}

GpParams Unpack(const std::vector<double>& v) {
  GpParams p;
  const int dims = static_cast<int>(v.size()) - 2;
  p.log_length = Eigen::Map<const Eigen::VectorXd>(v.data(), dims);
  p.log_signal = v[dims];
  p.log_noise = v[dims + 1];
  return p;
}

struct FitProblem {
  const Eigen::MatrixXd* x;
  const Eigen::VectorXd* y;
  double best_value = -std::numeric_limits<double>::infinity();
  std::vector<double> best;
};

double Objective(const std::vector<double>& v, std::vector<double>& grad, void* data) {
  auto* problem = static_cast<FitProblem*>(data);
  Eigen::VectorXd g;
  const double lml = LogMarginalLikelihood(*problem->x, *problem->y, Unpack(v), grad.empty() ? nullptr : &g);
  if (!std::isfinite(lml)) {
    std::fill(grad.begin(), grad.end(), 0.0);
    return -1e100;
  }
  if (!grad.empty()) std::copy(g.data(), g.data() + g.size(), grad.begin());
  if (lml > problem->best_value) {
    problem->best_value = lml;
    problem->best = v;
  }
  return lml;
}

double Between(Rng& rng, double lo, double hi) { return lo + rng.Uniform() * (hi - lo); }

// The rows hyperparameters are fitted on: all when few; otherwise the best
// quarter (where the optimizer looks) and a random sample of the rest.
std::vector<int> FitRows(const Eigen::VectorXd& y, int max_rows, Rng& rng) {
  const int n = static_cast<int>(y.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n <= max_rows) return order;
  std::stable_sort(order.begin(), order.end(), [&y](int a, int b) { return y[a] > y[b]; });
  const int best = max_rows / 4;
  std::vector<int> rest(order.begin() + best, order.end());
  for (int i = static_cast<int>(rest.size()) - 1; i > 0; --i) {
    std::swap(rest[i], rest[rng.Below(static_cast<uint64_t>(i) + 1)]);
  }
  std::vector<int> rows(order.begin(), order.begin() + best);
  rows.insert(rows.end(), rest.begin(), rest.begin() + (max_rows - best));
  std::sort(rows.begin(), rows.end());
  return rows;
}

void Standardize(const Eigen::VectorXd& y, double& mean, double& scale) {
  mean = y.mean();
  const double var = y.size() > 1 ? (y.array() - mean).square().sum() / static_cast<double>(y.size() - 1) : 0.0;
  scale = var > 1e-24 ? std::sqrt(var) : 1.0;
}

}  // namespace

double LogMarginalLikelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpParams& params,
                             Eigen::VectorXd* grad) {
  const Eigen::Index n = x.rows();
  const double signal = std::exp(params.log_signal);
  const double noise = std::exp(params.log_noise);
  const Eigen::MatrixXd xs = x * (-params.log_length.array()).exp().matrix().asDiagonal();
  const Eigen::ArrayXXd r2 = SquaredDistances(xs, xs).array();
  const Eigen::ArrayXXd r = r2.sqrt();
  const Eigen::ArrayXXd e = (-kSqrt5 * r).exp();
  const Eigen::MatrixXd kf = (signal * (1.0 + kSqrt5 * r + (5.0 / 3.0) * r2) * e).matrix();
  Eigen::MatrixXd k = kf;
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd alpha = llt.solve(y);
  const double log_det = 2.0 * llt.matrixLLT().diagonal().array().log().sum();
  const double lml = -0.5 * y.dot(alpha) - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2 * std::numbers::pi);
  if (!std::isfinite(lml)) return -std::numeric_limits<double>::infinity();
  if (grad) {
    // d lml / d theta = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta).
    Eigen::MatrixXd w = Eigen::MatrixXd::Identity(n, n);
    llt.solveInPlace(w);
    w = alpha * alpha.transpose() - w;
    // dK/dlog(length_d) = signal 5/3 (1 + sqrt5 r) exp(-sqrt5 r) (dx_d / length_d)^2.
    const Eigen::MatrixXd wg = (w.array() * (signal * (5.0 / 3.0) * (1.0 + kSqrt5 * r) * e)).matrix();
    // sum_ij wg_ij (x_i - x_j)^2 = 2 sum_i x_i^2 rowsum_i - 2 x^T wg x, wg symmetric.
    const Eigen::VectorXd row_sums = wg.rowwise().sum();
    const Eigen::MatrixXd wgx = wg * xs;
    const Eigen::Index dims = x.cols();
    grad->resize(NumParams(static_cast<int>(dims)));
    for (Eigen::Index d = 0; d < dims; ++d) {
      (*grad)[d] = xs.col(d).array().square().matrix().dot(row_sums) - xs.col(d).dot(wgx.col(d));
    }
    (*grad)[dims] = 0.5 * (w.array() * kf.array()).sum();
    (*grad)[dims + 1] = 0.5 * noise * w.trace();
  }
  return lml;
}

GaussianProcess GaussianProcess::Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, Rng& rng,
                                     const GpFitOptions& options) {
  const int dims = static_cast<int>(x.cols());
  double mean, scale;
  Standardize(y, mean, scale);
  const std::vector<int> rows = FitRows(y, options.max_fit_points, rng);
  const Eigen::MatrixXd fx = x(rows, Eigen::all);
  const Eigen::VectorXd fy = (y(rows).array() - mean) / scale;

  std::vector<double> lo(dims, std::log(kMinLength)), hi(dims, std::log(kMaxLength));
  lo.push_back(std::log(kMinSignal));
  hi.push_back(std::log(kMaxSignal));
  lo.push_back(std::log(kMinNoise));
  hi.push_back(std::log(kMaxNoise));

  GpParams initial;
  initial.log_length = Eigen::VectorXd::Constant(dims, std::log(0.5));
  initial.log_signal = 0;
  initial.log_noise = std::log(1e-3);

  FitProblem problem{&fx, &fy, -std::numeric_limits<double>::infinity(), Pack(initial)};
  for (int start = 0; start < options.starts; ++start) {
    std::vector<double> v = Pack(initial);
    if (start > 0) {
      for (int d = 0; d < dims; ++d) v[d] = Between(rng, std::log(kStartMinLength), std::log(kStartMaxLength));
      v[dims] = Between(rng, std::log(0.5), std::log(2.0));
      v[dims + 1] = Between(rng, std::log(kStartMinNoise), std::log(kStartMaxNoise));
    }
    nlopt::opt opt(nlopt::LD_LBFGS, NumParams(dims));
    opt.set_lower_bounds(lo);
    opt.set_upper_bounds(hi);
    opt.set_max_objective(Objective, &problem);
    opt.set_maxeval(options.evals_per_start);
    opt.set_ftol_rel(1e-7);
    double value;
    try {
      opt.optimize(v, value);
    } catch (const std::exception&) {
      // Round-off and similar stops: the best point seen is kept in `problem`.
    }
  }
  return GaussianProcess(x, y, Unpack(problem.best));
}

GaussianProcess::GaussianProcess(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpParams& params)
    : x_(x), y_(y), params_(params) {
  Standardize(y_, y_mean_, y_scale_);
  inv_length_ = (-params_.log_length.array()).exp();
  Condition();
}

void GaussianProcess::Add(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  if (x.rows() == 0) return;
  const Eigen::Index n = x_.rows();
  x_.conservativeResize(n + x.rows(), Eigen::NoChange);
  x_.bottomRows(x.rows()) = x;
  y_.conservativeResize(n + y.size());
  y_.tail(y.size()) = y;
  Condition();
}

void GaussianProcess::Condition() {
  const Eigen::MatrixXd xs = x_ * inv_length_.asDiagonal();
  Eigen::MatrixXd k = Matern52(SquaredDistances(xs, xs), std::exp(params_.log_signal));
  // The noise keeps K positive definite; the jitter covers its lowest bound.
  double jitter = std::exp(params_.log_noise);
  for (int attempt = 0; attempt < 6; ++attempt, jitter *= 10) {
    Eigen::MatrixXd kn = k;
    kn.diagonal().array() += jitter;
    llt_.compute(kn);
    if (llt_.info() == Eigen::Success) break;
  }
  alpha_ = llt_.solve(((y_.array() - y_mean_) / y_scale_).matrix());
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const {
  const Eigen::MatrixXd ks =
      Matern52(SquaredDistances(xs * inv_length_.asDiagonal(), x_ * inv_length_.asDiagonal()),
               std::exp(params_.log_signal));  // m x n
  mean = ((ks * alpha_).array() * y_scale_ + y_mean_).matrix();
  const Eigen::MatrixXd v = llt_.matrixL().solve(ks.transpose());  // n x m
  variance = ((std::exp(params_.log_signal) - v.colwise().squaredNorm().transpose().array()).max(1e-12) *
              (y_scale_ * y_scale_))
                 .matrix();
}

void GaussianProcess::Predict(const Eigen::VectorXd& x, double& mean, double& variance) const {
  // One point: a triangular solve with a vector, no matrix temporaries.
  const double signal = std::exp(params_.log_signal);
  const Eigen::VectorXd xs = x.cwiseProduct(inv_length_);
  Eigen::VectorXd k(x_.rows());
  for (Eigen::Index i = 0; i < x_.rows(); ++i) {
    const double r2 = (x_.row(i).transpose().cwiseProduct(inv_length_) - xs).squaredNorm();
    const double r = std::sqrt(r2);
    k[i] = signal * (1.0 + kSqrt5 * r + (5.0 / 3.0) * r2) * std::exp(-kSqrt5 * r);
  }
  mean = k.dot(alpha_) * y_scale_ + y_mean_;
  llt_.matrixL().solveInPlace(k);
  variance = std::max(signal - k.squaredNorm(), 1e-12) * (y_scale_ * y_scale_);
}

}  // namespace mle::tuning
