// Internal to mle_tuning, exposed for the unit tests: a Gaussian process
// regression model over the unit cube, the surrogate of the Bayesian
// optimizer. Matern 5/2 kernel with one length scale per coordinate (ARD), a
// signal variance and Gaussian noise; outputs standardized internally.
// Hyperparameters are fitted by maximising the log marginal likelihood
// (NLopt L-BFGS with analytic gradients, several starts, bounded budget).
// A value type: copy freely; const methods are thread-safe.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "tuning/encoding.h"

namespace mle::tuning {

// In log space; the kernel is signal * Matern52(|(x - x') / length|) and the
// noise variance is added on the diagonal (both relative to standardized y).
struct GpParams {
  Eigen::VectorXd log_length;
  double log_signal = 0;
  double log_noise = -6;
};

struct GpFitOptions {
  int starts = 3;            // the default start, then random ones
  int evals_per_start = 20;  // likelihood evaluations (each O(n^3))
  int max_fit_points = 64;   // above this, hyperparameters are fitted on a subset
};

// Log marginal likelihood of standardized `y` at points `x` (rows), and its
// gradient with respect to (log_length..., log_signal, log_noise) when `grad`
// is not null. -infinity when the kernel matrix is not positive definite.
double LogMarginalLikelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpParams& params,
                             Eigen::VectorXd* grad);

class GaussianProcess {
 public:
  // Fits the hyperparameters to (x, y) and conditions on all of it. x: one
  // point per row, coordinates in [0, 1]; at least one row.
  static GaussianProcess Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, Rng& rng,
                             const GpFitOptions& options = {});
  // Conditions on (x, y) with given hyperparameters.
  GaussianProcess(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const GpParams& params);

  // Adds observations (one per row of x), keeping the hyperparameters and
  // the standardization (the kriging believer's fantasies).
  void Add(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);

  // Posterior mean and variance of the latent function (without noise), in
  // the units of y, at each row of `xs`.
  void Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const;
  void Predict(const Eigen::VectorXd& x, double& mean, double& variance) const;

  const GpParams& params() const { return params_; }
  int size() const { return static_cast<int>(x_.rows()); }

 private:
  void Condition();

  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;  // as given
  double y_mean_ = 0, y_scale_ = 1;
  GpParams params_;
  Eigen::VectorXd inv_length_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;  // K^-1 (y standardized)
};

}  // namespace mle::tuning
