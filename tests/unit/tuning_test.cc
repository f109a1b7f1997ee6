// Tests of the tuning optimizers (suggest.h), the stopping rules
// (stopping.h), FormatValue (space.h), and the internal search-space
// encoding and Gaussian process the Bayesian optimizer is built on.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <Eigen/Core>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuning/encoding.h"
#include "tuning/gp.h"
#include "tuning/space.h"
#include "tuning/stopping.h"
#include "tuning/suggest.h"

namespace mle::tuning {
namespace {

using ::testing::ElementsAre;

// ---------------------------------------------------------------------------
// Builders.

ParamSpec Double(std::string name, double min, double max, Scale scale = Scale::kLinear) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kDouble;
  p.min = min;
  p.max = max;
  p.scale = scale;
  return p;
}

ParamSpec Integer(std::string name, int64_t min, int64_t max, Scale scale = Scale::kLinear) {
  ParamSpec p = Double(std::move(name), static_cast<double>(min), static_cast<double>(max), scale);
  p.type = ParamType::kInteger;
  return p;
}

ParamSpec Categorical(std::string name, std::vector<std::string> categories) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

ParamSpec Discrete(std::string name, std::vector<double> values, Scale scale = Scale::kLinear) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kDiscrete;
  p.discrete = std::move(values);
  p.scale = scale;
  return p;
}

StudySpec Study(std::vector<ParamSpec> params, Algorithm algorithm, Goal goal = Goal::kMaximize) {
  StudySpec s;
  s.params = std::move(params);
  s.metrics = {MetricSpec{"objective", goal}};
  s.algorithm = algorithm;
  return s;
}

Measurement At(int64_t step, double value, const std::string& metric = "objective") {
  Measurement m;
  m.step = step;
  m.metrics[metric] = value;
  return m;
}

Trial Completed(Assignment params, double value) {
  Trial t;
  t.params = std::move(params);
  t.state = TrialState::kCompleted;
  t.final_measurement = At(100, value);
  return t;
}

double Num(const Value& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<int64_t>(v));
}

std::vector<Assignment> MustSuggest(const StudySpec& spec, const std::vector<Trial>& trials, int count,
                                    uint64_t seed) {
  absl::StatusOr<std::vector<Assignment>> s = Suggest(spec, trials, count, seed);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<Assignment>{};
}

// Runs a sequential study of `n` trials on `f`, one suggestion at a time.
std::vector<Trial> RunStudy(const StudySpec& spec, const std::function<double(const Assignment&)>& f, int n,
                            uint64_t seed) {
  std::vector<Trial> trials;
  for (int i = 0; i < n; ++i) {
    std::vector<Assignment> next = MustSuggest(spec, trials, 1, seed + static_cast<uint64_t>(i));
    if (next.empty()) break;
    trials.push_back(Completed(next.front(), f(next.front())));
  }
  return trials;
}

const Trial& BestTrial(const std::vector<Trial>& trials, Goal goal) {
  return trials[BestFirst(MetricSpec{"objective", goal}, trials).front()];
}

// ---------------------------------------------------------------------------
// FormatValue.

TEST(FormatValueTest, Cases) {
  struct Case {
    Value value;
    std::string text;
  };
  const Case cases[] = {
      {int64_t{42}, "42"},
      {int64_t{-7}, "-7"},
      {int64_t{0}, "0"},
      {0.001, "0.001"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {2.5, "2.5"},
      {1.0, "1"},
      {-3.75, "-3.75"},
      {1e-05, "1e-05"},
      {123456.789, "123456.789"},
      {1e21, "1e+21"},
      {std::string("relu"), "relu"},
      {std::string(""), ""},
  };
  for (const Case& c : cases) EXPECT_EQ(FormatValue(c.value), c.text);
}

TEST(FormatValueTest, DoublesReadBackExactly) {
  Rng rng(7);
  for (int i = 0; i < 2000; ++i) {
    const double d = std::ldexp(rng.Uniform(), static_cast<int>(rng.Below(80)) - 40) * (i % 2 ? 1 : -1);
    const std::string text = FormatValue(d);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), d) << text;
  }
}

// ---------------------------------------------------------------------------
// Spec validation.

TEST(SuggestTest, InvalidSpecs) {
  struct Case {
    std::string what;
    StudySpec spec;
  };
  StudySpec no_metric = Study({Double("x", 0, 1)}, Algorithm::kRandom);
  no_metric.metrics.clear();
  ParamSpec orphan = Integer("child", 1, 2);  // a child with no parent values
  ParamSpec parent = Categorical("parent", {"a", "b"});
  parent.children = {orphan};
  const Case cases[] = {
      {"min == max", Study({Double("x", 1, 1)}, Algorithm::kRandom)},
      {"min > max", Study({Integer("n", 5, 1)}, Algorithm::kRandom)},
      {"log with min 0", Study({Double("x", 0, 1, Scale::kLog)}, Algorithm::kRandom)},
      {"reverse log with min < 0", Study({Double("x", -1, 1, Scale::kReverseLog)}, Algorithm::kRandom)},
      {"fractional integer bound", Study({Double("x", 0, 1)}, Algorithm::kRandom)},
      {"integer beyond 2^53", Study({Integer("n", 0, int64_t{1} << 60)}, Algorithm::kRandom)},
      {"no categories", Study({Categorical("c", {})}, Algorithm::kRandom)},
      {"repeated category", Study({Categorical("c", {"a", "a"})}, Algorithm::kRandom)},
      {"discrete not increasing", Study({Discrete("d", {1, 1})}, Algorithm::kRandom)},
      {"duplicate names", Study({Double("x", 0, 1), Integer("x", 0, 1)}, Algorithm::kRandom)},
      {"no parameters", Study({}, Algorithm::kRandom)},
      {"no metric", no_metric},
      {"child without parent values", Study({parent}, Algorithm::kRandom)},
      {"grid over a double", Study({Double("x", 0, 1), Integer("n", 1, 3)}, Algorithm::kGrid)},
  };
  for (const Case& c : cases) {
    StudySpec spec = c.spec;
    if (c.what == "fractional integer bound") {
      spec.params[0].type = ParamType::kInteger;
      spec.params[0].max = 1.5;
    }
    absl::StatusOr<std::vector<Assignment>> s = Suggest(spec, {}, 1, 1);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
  }
}

// ---------------------------------------------------------------------------
// Random search.

StudySpec MixedSpace(Algorithm algorithm) {
  return Study({Double("lr", 1e-4, 1e-1, Scale::kLog), Integer("layers", 1, 8), Categorical("act", {"relu", "tanh"}),
                Discrete("batch", {16, 32, 64, 128})},
               algorithm);
}

TEST(RandomSearchTest, ReproducibleFromSeed) {
  const StudySpec spec = MixedSpace(Algorithm::kRandom);
  const std::vector<Assignment> a = MustSuggest(spec, {}, 20, 42);
  const std::vector<Assignment> b = MustSuggest(spec, {}, 20, 42);
  const std::vector<Assignment> c = MustSuggest(spec, {}, 20, 43);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(RandomSearchTest, EveryValueInBoundsOrMember) {
  struct Case {
    ParamSpec param;
    std::set<double> members;  // for integers and discrete: every value expected to appear
  };
  const Case cases[] = {
      {Double("d_none", -2, 3, Scale::kNone), {}},
      {Double("d_linear", -2, 3), {}},
      {Double("d_log", 1e-6, 10, Scale::kLog), {}},
      {Double("d_rlog", 0.5, 0.999, Scale::kReverseLog), {}},
      {Integer("i_linear", -3, 3), {-3, -2, -1, 0, 1, 2, 3}},
      {Integer("i_log", 1, 5, Scale::kLog), {1, 2, 3, 4, 5}},
      {Integer("i_rlog", 1, 5, Scale::kReverseLog), {1, 2, 3, 4, 5}},
      {Discrete("q_linear", {0.5, 1, 8}), {0.5, 1, 8}},
      {Discrete("q_log", {1e-3, 1e-2, 1e-1}, Scale::kLog), {1e-3, 1e-2, 1e-1}},
      {Categorical("c", {"a", "b", "c"}), {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param.name);
    const std::vector<Assignment> points = MustSuggest(Study({c.param}, Algorithm::kRandom), {}, 3000, 5);
    ASSERT_EQ(points.size(), c.param.type == ParamType::kDouble ? 3000u : points.size());
    std::set<double> seen;
    std::set<std::string> seen_categories;
    for (const Assignment& a : points) {
      ASSERT_EQ(a.size(), 1u);
      const Value& v = a.at(c.param.name);
      switch (c.param.type) {
        case ParamType::kDouble:
          ASSERT_TRUE(std::holds_alternative<double>(v));
          EXPECT_GE(std::get<double>(v), c.param.min);
          EXPECT_LE(std::get<double>(v), c.param.max);
          break;
        case ParamType::kInteger:
          ASSERT_TRUE(std::holds_alternative<int64_t>(v));
          seen.insert(Num(v));
          break;
        case ParamType::kDiscrete:
          ASSERT_TRUE(std::holds_alternative<double>(v));
          seen.insert(std::get<double>(v));
          break;
        case ParamType::kCategorical:
          ASSERT_TRUE(std::holds_alternative<std::string>(v));
          seen_categories.insert(std::get<std::string>(v));
          break;
      }
    }
    if (!c.members.empty()) {
      EXPECT_EQ(seen, c.members);
    }
    if (c.param.type == ParamType::kCategorical) {
      EXPECT_EQ(seen_categories, std::set<std::string>(c.param.categories.begin(), c.param.categories.end()));
    }
  }
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(RandomSearchTest, ScaleDistributions) {
  struct Case {
    ParamSpec param;
    double median_lo, median_hi;
  };
  const Case cases[] = {
      // Uniform: median near the middle.
      {Double("linear", 0, 10), 4.7, 5.3},
      // Uniform in log: median near the geometric mean sqrt(1e-4 * 1) = 0.01.
      {Double("log", 1e-4, 1, Scale::kLog), 0.01 / 1.25, 0.01 * 1.25},
      // Reverse log: dense near max; median max + min - 0.01 = 0.9901.
      {Double("rlog", 1e-4, 1, Scale::kReverseLog), 1.0001 - 0.01 * 1.25, 1.0001 - 0.01 / 1.25},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.param.name);
    std::vector<double> values;
    for (const Assignment& a : MustSuggest(Study({c.param}, Algorithm::kRandom), {}, 4001, 11)) {
      values.push_back(std::get<double>(a.at(c.param.name)));
    }
    const double median = MedianOf(values);
    EXPECT_GT(median, c.median_lo);
    EXPECT_LT(median, c.median_hi);
  }
}

TEST(RandomSearchTest, ScaleMappingsRoundTrip) {
  for (Scale scale : {Scale::kLinear, Scale::kLog, Scale::kReverseLog}) {
    SCOPED_TRACE(static_cast<int>(scale));
    for (double u : {0.0, 0.1, 0.5, 0.9, 1.0}) {
      const double x = FromUnit(u, 0.01, 100, scale);
      EXPECT_NEAR(ToUnit(x, 0.01, 100, scale), u, 1e-12);
    }

    EXPECT_DOUBLE_EQ(FromUnit(0, 0.01, 100, scale), 0.01);
    EXPECT_DOUBLE_EQ(FromUnit(1, 0.01, 100, scale), 100);
  }
}

TEST(RandomSearchTest, SkipsTriedPointsOfSmallSpace) {
  const StudySpec spec = Study({Integer("n", 1, 3)}, Algorithm::kRandom);
  std::vector<Trial> trials = {Completed({{"n", int64_t{1}}}, 0), Completed({{"n", int64_t{3}}}, 0)};
  EXPECT_THAT(MustSuggest(spec, trials, 5, 1), ElementsAre(Assignment{{"n", int64_t{2}}}));
}

// ---------------------------------------------------------------------------
// Grid search.

StudySpec Grid2x3() { return Study({Integer("a", 1, 2), Categorical("b", {"x", "y", "z"})}, Algorithm::kGrid); }

Assignment P(int64_t a, std::string b) { return {{"a", a}, {"b", std::move(b)}}; }

TEST(GridSearchTest, ExactOrderFirstParameterSlowest) {
  EXPECT_THAT(MustSuggest(Grid2x3(), {}, 6, 0),
              ElementsAre(P(1, "x"), P(1, "y"), P(1, "z"), P(2, "x"), P(2, "y"), P(2, "z")));
}

TEST(GridSearchTest, SkipsTriedPointsAndExhausts) {
  struct Case {
    std::string what;
    std::vector<Assignment> tried;
    int count;
    std::vector<Assignment> want;
  };
  const Case cases[] = {
      {"first two", {P(1, "x"), P(1, "y")}, 2, {P(1, "z"), P(2, "x")}},
      {"holes", {P(1, "y"), P(2, "x")}, 3, {P(1, "x"), P(1, "z"), P(2, "y")}},
      {"more than left", {P(1, "x"), P(1, "y"), P(1, "z"), P(2, "x")}, 5, {P(2, "y"), P(2, "z")}},
      {"exhausted", {P(1, "x"), P(1, "y"), P(1, "z"), P(2, "x"), P(2, "y"), P(2, "z")}, 3, {}},
      {"more than the grid", {}, 10, {P(1, "x"), P(1, "y"), P(1, "z"), P(2, "x"), P(2, "y"), P(2, "z")}},
  };
  for (const Case& c : cases) {
    std::vector<Trial> trials;
    TrialState state = TrialState::kActive;
    for (const Assignment& a : c.tried) {
      Trial t;
      t.params = a;
      t.state = state;  // any state counts as tried
      state = state == TrialState::kActive ? TrialState::kInfeasible : TrialState::kActive;
      trials.push_back(t);
    }
    EXPECT_EQ(MustSuggest(Grid2x3(), trials, c.count, 0), c.want) << c.what;
  }
}

TEST(GridSearchTest, GridSize) {
  ParamSpec opt = Categorical("opt", {"adam", "sgd"});
  ParamSpec momentum = Discrete("momentum", {0.5, 0.9, 0.99});
  momentum.parent_categories = {"sgd"};
  opt.children = {momentum};
  struct Case {
    std::string what;
    StudySpec spec;
    std::optional<int64_t> size;
  };
  const Case cases[] = {
      {"2x3", Grid2x3(), 6},
      {"integers and discrete", Study({Integer("n", -5, 5), Discrete("d", {1, 2, 4, 8})}, Algorithm::kGrid), 44},
      {"conditional: adam, sgd x 3", Study({opt}, Algorithm::kGrid), 4},
      {"a double", Study({Integer("n", 1, 3), Double("x", 0, 1)}, Algorithm::kGrid), std::nullopt},
  };
  for (const Case& c : cases) EXPECT_EQ(GridSize(c.spec), c.size) << c.what;
}

TEST(GridSearchTest, ConditionalChildrenOnlyUnderTheirParentValue) {
  ParamSpec opt = Categorical("opt", {"adam", "sgd"});
  ParamSpec momentum = Discrete("momentum", {0.5, 0.9});
  momentum.parent_categories = {"sgd"};
  opt.children = {momentum};
  EXPECT_THAT(MustSuggest(Study({opt, Integer("n", 1, 2)}, Algorithm::kGrid), {}, 10, 0),
              ElementsAre(Assignment{{"opt", "adam"}, {"n", int64_t{1}}}, Assignment{{"opt", "adam"}, {"n", int64_t{2}}},
                          Assignment{{"opt", "sgd"}, {"momentum", 0.5}, {"n", int64_t{1}}},
                          Assignment{{"opt", "sgd"}, {"momentum", 0.5}, {"n", int64_t{2}}},
                          Assignment{{"opt", "sgd"}, {"momentum", 0.9}, {"n", int64_t{1}}},
                          Assignment{{"opt", "sgd"}, {"momentum", 0.9}, {"n", int64_t{2}}}));
}

// ---------------------------------------------------------------------------
// Encoding.

TEST(EncodingTest, EncodeDecodeRoundTrip) {
  const StudySpec spec = MixedSpace(Algorithm::kBayesian);
  const SearchSpace space(spec.params);
  EXPECT_EQ(space.dims(), 5);  // lr, layers, act (2 one-hot), batch
  Rng rng(3);
  for (int i = 0; i < 200; ++i) {
    const Assignment a = space.Sample(rng);
    const Eigen::VectorXd u = space.Encode(a);
    EXPECT_TRUE((u.array() >= 0).all() && (u.array() <= 1).all());
    const Assignment back = space.Decode(u);
    EXPECT_EQ(back.at("layers"), a.at("layers"));
    EXPECT_EQ(back.at("act"), a.at("act"));
    EXPECT_EQ(back.at("batch"), a.at("batch"));
    EXPECT_NEAR(std::get<double>(back.at("lr")), std::get<double>(a.at("lr")), 1e-12);
  }
}

// ---------------------------------------------------------------------------
// Gaussian process.

TEST(GaussianProcessTest, FitsASmoothFunction) {
  auto f = [](double x) { return std::sin(6 * x) + 0.5 * x; };  // maximum at x = acos(-1/12)/6 = 0.2757
  Eigen::MatrixXd x(10, 1);
  Eigen::VectorXd y(10);
  for (int i = 0; i < 10; ++i) {
    x(i, 0) = (i + 0.5) / 10;
    y[i] = f(x(i, 0));
  }
  Rng rng(1);
  const GaussianProcess gp = GaussianProcess::Fit(x, y, rng);
  Eigen::VectorXd mean, variance;
  gp.Predict(x, mean, variance);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(mean[i], y[i], 0.02) << "at " << x(i, 0);
    EXPECT_LT(variance[i], 1e-3);
  }
  // Between the points, the mean follows the function; the maximum is found.
  Eigen::MatrixXd grid(201, 1);
  for (int i = 0; i <= 200; ++i) grid(i, 0) = i / 200.0;
  gp.Predict(grid, mean, variance);
  for (int i = 10; i <= 190; ++i) EXPECT_NEAR(mean[i], f(grid(i, 0)), 0.05) << "at " << grid(i, 0);
  Eigen::Index best;
  mean.maxCoeff(&best);
  EXPECT_NEAR(grid(best, 0), std::acos(-1.0 / 12) / 6, 0.03);
  // Far from the data (outside [0.05, 0.95]) the model is less sure.
  EXPECT_GT(variance[0], variance[20]);
}

TEST(GaussianProcessTest, LikelihoodGradientMatchesFiniteDifferences) {
  Rng rng(9);
  Eigen::MatrixXd x(15, 3);
  Eigen::VectorXd y(15);
  for (int i = 0; i < 15; ++i) {
    for (int d = 0; d < 3; ++d) x(i, d) = rng.Uniform();
    y[i] = std::sin(3 * x(i, 0)) + x(i, 1) * x(i, 2) + 0.1 * rng.Normal();
  }
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  GpParams p;
  p.log_length = Eigen::Vector3d(std::log(0.3), std::log(0.8), std::log(2.0));
  p.log_signal = 0.2;
  p.log_noise = std::log(0.05);
  Eigen::VectorXd grad;
  LogMarginalLikelihood(x, y, p, &grad);
  ASSERT_EQ(grad.size(), 5);
  const double h = 1e-6;
  for (int k = 0; k < 5; ++k) {
    GpParams plus = p, minus = p;
    auto bump = [k, h](GpParams& q, double s) {
      if (k < 3) q.log_length[k] += s * h;
      if (k == 3) q.log_signal += s * h;
      if (k == 4) q.log_noise += s * h;
    };
    bump(plus, 1);
    bump(minus, -1);
    const double numeric =
        (LogMarginalLikelihood(x, y, plus, nullptr) - LogMarginalLikelihood(x, y, minus, nullptr)) / (2 * h);
    EXPECT_NEAR(grad[k], numeric, 1e-4 * std::max(1.0, std::abs(numeric))) << "parameter " << k;
  }
}

// ---------------------------------------------------------------------------
// Bayesian optimization.

TEST(BayesianTest, FindsTheOptimumOfAQuadratic) {
  struct Case {
    Goal goal;
    double optimum;
  };
  for (const Case& c : {Case{Goal::kMaximize, 0.3}, Case{Goal::kMinimize, 7.2}}) {
    const StudySpec spec = Study({Double("x", -5, 10)}, Algorithm::kBayesian, c.goal);
    const double sign = c.goal == Goal::kMaximize ? -1 : 1;
    auto f = [&](const Assignment& a) {
      const double x = std::get<double>(a.at("x"));
      return sign * (x - c.optimum) * (x - c.optimum) + 3;
    };
    for (uint64_t seed : {1, 2, 3}) {
      const std::vector<Trial> trials = RunStudy(spec, f, 15, seed * 100);
      const double best = std::get<double>(BestTrial(trials, c.goal).params.at("x"));
      // Within 5% of the range of the optimum.
      EXPECT_NEAR(best, c.optimum, 0.05 * 15) << "seed " << seed;
    }
  }
}

TEST(BayesianTest, ReproducibleFromSeed) {
  const StudySpec spec = MixedSpace(Algorithm::kBayesian);
  auto f = [](const Assignment& a) {
    return -std::abs(std::log10(std::get<double>(a.at("lr"))) + 2) - 0.1 * Num(a.at("layers")) +
           (std::get<std::string>(a.at("act")) == "relu" ? 1 : 0);
  };
  const std::vector<Trial> trials = RunStudy(spec, f, 8, 1);
  EXPECT_EQ(MustSuggest(spec, trials, 3, 77), MustSuggest(spec, trials, 3, 77));
}

TEST(BayesianTest, BatchSuggestionsAreDistinctAndUntried) {
  const StudySpec spec = Study({Double("x", 0, 1), Double("y", 0, 1)}, Algorithm::kBayesian);
  auto f = [](const Assignment& a) {
    const double x = std::get<double>(a.at("x")), y = std::get<double>(a.at("y"));
    return -(x - 0.6) * (x - 0.6) - (y - 0.2) * (y - 0.2);
  };
  std::vector<Trial> trials = RunStudy(spec, f, 10, 5);
  Trial active;  // a running trial: never suggested again, nothing next to it either
  active.params = {{"x", 0.6}, {"y", 0.2}};
  trials.push_back(active);
  const std::vector<Assignment> batch = MustSuggest(spec, trials, 5, 9);
  ASSERT_EQ(batch.size(), 5u);
  std::set<Assignment> seen;
  for (const Trial& t : trials) seen.insert(t.params);
  for (const Assignment& a : batch) EXPECT_TRUE(seen.insert(a).second) << FormatValue(a.at("x"));
  // The kriging believer spreads the batch out rather than stacking it.
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t j = i + 1; j < batch.size(); ++j) {
      const double dx = std::get<double>(batch[i].at("x")) - std::get<double>(batch[j].at("x"));
      const double dy = std::get<double>(batch[i].at("y")) - std::get<double>(batch[j].at("y"));
      EXPECT_GT(std::hypot(dx, dy), 1e-3) << i << " " << j;
    }
  }
}

TEST(BayesianTest, SmallDiscreteSpaceIsNotRepeated) {
  const StudySpec spec = Study({Categorical("c", {"a", "b", "c"}), Integer("n", 1, 2)}, Algorithm::kBayesian);
  auto f = [](const Assignment& a) { return Num(a.at("n")) + (std::get<std::string>(a.at("c")) == "b" ? 1 : 0); };
  const std::vector<Trial> trials = RunStudy(spec, f, 10, 3);
  EXPECT_EQ(trials.size(), 6u);  // every point once, then no more
  std::set<Assignment> seen;
  for (const Trial& t : trials) EXPECT_TRUE(seen.insert(t.params).second);
}

TEST(BayesianTest, ConditionalChildrenOnlyWhenParentMatches) {
  ParamSpec opt = Categorical("opt", {"adam", "sgd"});
  ParamSpec momentum = Double("momentum", 0, 0.99);
  momentum.parent_categories = {"sgd"};
  ParamSpec beta = Double("beta", 0.8, 0.999, Scale::kReverseLog);
  beta.parent_categories = {"adam"};
  ParamSpec layers = Integer("layers", 1, 4);
  ParamSpec width = Discrete("width", {64, 128});
  width.parent_ints = {3, 4};
  layers.children = {width};
  opt.children = {momentum, beta};
  auto check = [](const Assignment& a) {
    const bool sgd = std::get<std::string>(a.at("opt")) == "sgd";
    EXPECT_EQ(a.count("momentum"), sgd ? 1u : 0u);
    EXPECT_EQ(a.count("beta"), sgd ? 0u : 1u);
    EXPECT_EQ(a.count("width"), std::get<int64_t>(a.at("layers")) >= 3 ? 1u : 0u);
  };
  for (Algorithm algorithm : {Algorithm::kRandom, Algorithm::kBayesian}) {
    const StudySpec spec = Study({opt, layers}, algorithm);
    auto f = [](const Assignment& a) {
      double v = a.count("momentum") ? std::get<double>(a.at("momentum")) : std::get<double>(a.at("beta"));
      return v + (a.count("width") ? Num(a.at("width")) / 128 : 0);
    };
    const std::vector<Trial> trials = RunStudy(spec, f, 12, 1);
    ASSERT_EQ(trials.size(), 12u);
    for (const Trial& t : trials) check(t.params);
    for (const Assignment& a : MustSuggest(spec, trials, 4, 2)) check(a);
  }
}

TEST(BayesianTest, InfeasibleAndStoppedTrials) {
  // f grows with x, but every trial above 0.6 fails: imputed as the worst
  // value, they steer the search below 0.6.
  const StudySpec spec = Study({Double("x", 0, 1)}, Algorithm::kBayesian);
  std::vector<Trial> trials;
  for (int i = 0; i < 20; ++i) {
    std::vector<Assignment> next = MustSuggest(spec, trials, 1, static_cast<uint64_t>(i));
    ASSERT_EQ(next.size(), 1u);
    const double x = std::get<double>(next[0].at("x"));
    Trial t;
    t.params = next[0];
    if (x > 0.6) {
      t.state = TrialState::kInfeasible;
    } else if (i % 3 == 0) {
      t.state = TrialState::kStopped;  // its last measurement is its value
      t.measurements = {At(1, x / 2), At(2, x)};
    } else {
      t = Completed(next[0], x);
    }
    trials.push_back(t);
  }
  const double best = std::get<double>(BestTrial(trials, Goal::kMaximize).params.at("x"));
  EXPECT_GT(best, 0.5);
  EXPECT_LE(best, 0.6);

  // Only infeasible trials so far: random suggestions, still reproducible.
  std::vector<Trial> failed(3);
  for (size_t i = 0; i < failed.size(); ++i) {
    failed[i].params = {{"x", 0.1 * static_cast<double>(i)}};
    failed[i].state = TrialState::kInfeasible;
  }
  EXPECT_EQ(MustSuggest(spec, failed, 2, 4).size(), 2u);
  EXPECT_EQ(MustSuggest(spec, failed, 2, 4), MustSuggest(spec, failed, 2, 4));
  // One completed observation is still too few for a model: random again.
  failed.push_back(Completed({{"x", 0.5}}, 1.0));
  const StudySpec random = Study({Double("x", 0, 1)}, Algorithm::kRandom);
  EXPECT_EQ(MustSuggest(spec, failed, 2, 4), MustSuggest(random, failed, 2, 4));
}

// ---------------------------------------------------------------------------
// Stopping rules.

Trial Curve(TrialState state, std::vector<std::pair<int64_t, double>> points) {
  Trial t;
  t.state = state;
  for (auto [step, value] : points) t.measurements.push_back(At(step, value));
  if (state == TrialState::kCompleted && !t.measurements.empty()) t.final_measurement = t.measurements.back();
  return t;
}

TEST(StoppingTest, MedianRule) {
  const Trial c1 = Curve(TrialState::kCompleted, {{10, 0.5}, {20, 0.6}, {30, 0.7}});
  const Trial c2 = Curve(TrialState::kCompleted, {{10, 0.4}, {20, 0.5}, {30, 0.6}});
  const Trial c3 = Curve(TrialState::kCompleted, {{10, 0.3}, {20, 0.4}, {30, 0.5}});
  const Trial s4 = Curve(TrialState::kStopped, {{10, 0.1}});  // at step 20 still counts 0.1
  const Trial late = Curve(TrialState::kCompleted, {{25, 0.9}});  // nothing at or before step 20
  const Trial failed = Curve(TrialState::kInfeasible, {{10, 0.0}});
  struct Case {
    std::string what;
    Goal goal;
    Trial trial;
    std::vector<Trial> others;
    bool stop;
  };
  const Case cases[] = {
      {"fewer than 3 completed", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.0}}), {c1, c2, failed}, false},
      {"late trials do not count", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.0}}), {c1, c2, late}, false},
      {"no measurement yet", Goal::kMaximize, Curve(TrialState::kActive, {}), {c1, c2, c3}, false},
      {"worse than the median (0.5)", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.45}}), {c1, c2, c3}, true},
      {"equal to the median", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.5}}), {c1, c2, c3}, false},
      {"better than the median", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.55}}), {c1, c2, c3}, false},
      {"between steps: last at or before", Goal::kMaximize, Curve(TrialState::kActive, {{15, 0.45}}),
       {c1, c2, c3},
       false},
      {"median of four with a stopped trial (0.45)", Goal::kMaximize, Curve(TrialState::kActive, {{20, 0.44}}),
       {c1, c2, c3, s4},
       true},
      {"minimize: above the median stops", Goal::kMinimize, Curve(TrialState::kActive, {{20, 0.55}}),
       {c1, c2, c3},
       true},
      {"minimize: below the median goes on", Goal::kMinimize, Curve(TrialState::kActive, {{20, 0.45}}),
       {c1, c2, c3},
       false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ShouldStopMedian(MetricSpec{"objective", c.goal}, c.trial, c.others), c.stop) << c.what;
  }
}

TEST(StoppingTest, JudgedTrialAmongTheOthers) {
  // The judged trial is in the list; it is not its own reference.
  std::vector<Trial> trials = {Curve(TrialState::kCompleted, {{10, 0.5}}),
                               Curve(TrialState::kCompleted, {{10, 0.6}}),
                               Curve(TrialState::kCompleted, {{10, 0.1}})};
  EXPECT_FALSE(ShouldStopMedian(MetricSpec{"objective", Goal::kMaximize}, trials[2], trials));
  trials.push_back(Curve(TrialState::kCompleted, {{10, 0.7}}));
  EXPECT_TRUE(ShouldStopMedian(MetricSpec{"objective", Goal::kMaximize}, trials[2], trials));
}

Trial TwoMetrics(TrialState state, double accuracy, double latency) {
  Trial t;
  t.state = state;
  Measurement m;
  m.metrics = {{"accuracy", accuracy}, {"latency", latency}};
  if (state == TrialState::kStopped) {
    t.measurements = {m};
  } else {
    t.final_measurement = m;
  }
  return t;
}

TEST(StoppingTest, ParetoOptimal) {
  const std::vector<MetricSpec> metrics = {{"accuracy", Goal::kMaximize}, {"latency", Goal::kMinimize}};
  const std::vector<Trial> trials = {
      TwoMetrics(TrialState::kCompleted, 0.90, 10),   // 0 front
      TwoMetrics(TrialState::kCompleted, 0.80, 12),   // 1 dominated by 0
      TwoMetrics(TrialState::kCompleted, 0.95, 20),   // 2 front
      TwoMetrics(TrialState::kCompleted, 0.70, 5),    // 3 front
      TwoMetrics(TrialState::kActive, 0.99, 1),       // 4 not finished
      TwoMetrics(TrialState::kCompleted, 0.90, 10),   // 5 ties 0: both on the front
      TwoMetrics(TrialState::kStopped, 0.96, 30),     // 6 front (stopped counts with its last measurement)
      TwoMetrics(TrialState::kInfeasible, 1.0, 0),    // 7 not finished
      TwoMetrics(TrialState::kCompleted, 0.94, 25),   // 8 dominated by 2
  };
  EXPECT_THAT(ParetoOptimal(metrics, trials), ElementsAre(0, 2, 3, 5, 6));
  // One metric: the best ones, ties included.
  EXPECT_THAT(ParetoOptimal({metrics[1]}, trials), ElementsAre(3));
  EXPECT_THAT(ParetoOptimal({metrics[0]}, {trials[0], trials[5], trials[1]}), ElementsAre(0, 1));
}

TEST(StoppingTest, BestFirst) {
  auto with_state = [](Trial t, TrialState s) {
    t.state = s;
    return t;
  };
  const std::vector<Trial> trials = {
      with_state(Completed({}, 0.5), TrialState::kInfeasible),  // 0
      Completed({}, 0.2),                                        // 1
      Curve(TrialState::kActive, {{1, 0.9}}),                    // 2
      Completed({}, 0.8),                                        // 3
      Curve(TrialState::kStopped, {{1, 0.95}}),                  // 4
      Completed({}, 0.2),                                        // 5 ties 1
      Curve(TrialState::kStopped, {{1, 0.1}}),                   // 6
  };
  EXPECT_THAT(BestFirst({"objective", Goal::kMaximize}, trials), ElementsAre(3, 1, 5, 4, 6, 2, 0));
  EXPECT_THAT(BestFirst({"objective", Goal::kMinimize}, trials), ElementsAre(1, 5, 3, 4, 6, 2, 0));
}

}  // namespace
}  // namespace mle::tuning
