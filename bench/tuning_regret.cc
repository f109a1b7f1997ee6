// The Bayesian optimizer against random search, side by side in one run:
// median simple regret after a fixed number of trials on standard test
// functions, over many seeds, and the time of one suggestion with 200
// completed trials in 6-D. Goals: random/Bayesian regret ratio >= 3 on
// Branin and Hartmann-6; a suggestion under 50 ms.
//
// Simple regret: the noiseless value of the trial the study reports best (by
// its observed value) minus the known minimum. bench/run.sh runs it.
#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numbers>
#include <string>
#include <variant>
#include <vector>

#include "tuning/encoding.h"
#include "tuning/space.h"
#include "tuning/stopping.h"
#include "tuning/suggest.h"

namespace mle::tuning {
namespace {

constexpr int kTrials = 30;
constexpr int kSeeds = 30;
constexpr int kTimingTrials = 200;
constexpr int kTimingRuns = 7;
constexpr double kGoalRatio = 3;
constexpr double kGoalMillis = 50;

double D(const Assignment& a, const std::string& name) {
  const Value& v = a.at(name);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<int64_t>(v));
}

ParamSpec Double(std::string name, double min, double max) {
  ParamSpec p;
  p.name = std::move(name);
  p.min = min;
  p.max = max;
  return p;
}

double Branin(const Assignment& a) {
  const double x1 = D(a, "x1"), x2 = D(a, "x2");
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

double Hartmann6(const Assignment& a) {
  static constexpr std::array<double, 4> kAlpha = {1.0, 1.2, 3.0, 3.2};
  static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                      {0.05, 10, 17, 0.1, 8, 14},
                                      {3, 3.5, 1.7, 10, 17, 8},
                                      {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double kP[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                      {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                      {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                      {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) {
      const double x = D(a, "x" + std::to_string(j + 1));
      inner += kA[i][j] * (x - kP[i][j]) * (x - kP[i][j]);
    }
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

// x in [0, 1], n in 1..20, c in {a, b, c}: minimum 0 at x = 0.3, n = 13, c = b;
// each category moves the best x.
double Mixed(const Assignment& a) {
  const double x = D(a, "x"), n = D(a, "n");
  const std::string& c = std::get<std::string>(a.at("c"));
  const double shift = c == "a" ? 0.2 : c == "b" ? 0.0 : -0.2;
  const double offset = c == "a" ? 0.3 : c == "b" ? 0.0 : 0.15;
  return 4 * std::pow(x - 0.3 - shift, 2) + std::pow((n - 13) / 6.0, 2) + offset;
}

struct Problem {
  std::string name;
  std::vector<ParamSpec> params;
  std::function<double(const Assignment&)> f;  // noiseless
  double minimum;
  double noise_sd;  // of the observations
  bool goal;        // has the ratio goal
};

std::vector<Problem> Problems() {
  std::vector<ParamSpec> h6;
  for (int j = 1; j <= 6; ++j) h6.push_back(Double("x" + std::to_string(j), 0, 1));
  ParamSpec n;
  n.name = "n";
  n.type = ParamType::kInteger;
  n.min = 1;
  n.max = 20;
  ParamSpec c;
  c.name = "c";
  c.type = ParamType::kCategorical;
  c.categories = {"a", "b", "c"};
  const std::vector<ParamSpec> branin = {Double("x1", -5, 10), Double("x2", 0, 15)};
  return {
      {"Branin (2-D)", branin, Branin, 0.397887, 0, true},
      {"Hartmann-6 (6-D)", h6, Hartmann6, -3.32237, 0, true},
      {"Branin + noise sd 0.5", branin, Branin, 0.397887, 0.5, false},
      {"mixed double/int/cat", {Double("x", 0, 1), n, c}, Mixed, 0, 0, false},
  };
}

double Regret(const Problem& p, Algorithm algorithm, uint64_t seed) {
  StudySpec spec;
  spec.params = p.params;
  spec.metrics = {MetricSpec{"y", Goal::kMinimize}};
  spec.algorithm = algorithm;
  Rng noise(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<Trial> trials;
  for (int i = 0; i < kTrials; ++i) {
    absl::StatusOr<std::vector<Assignment>> next = Suggest(spec, trials, 1, seed * 1000 + static_cast<uint64_t>(i));
    if (!next.ok() || next->empty()) break;
    Trial t;
    t.params = next->front();
    t.state = TrialState::kCompleted;
    Measurement m;
    m.metrics["y"] = p.f(t.params) + p.noise_sd * noise.Normal();
    t.final_measurement = m;
    trials.push_back(std::move(t));
  }
  const size_t best = BestFirst(spec.metrics.front(), trials).front();
  return p.f(trials[best].params) - p.minimum;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// One Suggest(count = 1) of the Bayesian optimizer with 200 completed
// trials of Hartmann-6 at random points: the median of several, in ms of
// wall time (the goal) and of CPU time (what a loaded machine does not change).
struct Millis {
  double wall, cpu;
};

Millis SuggestMillis() {
  const Problem h6 = Problems()[1];
  StudySpec spec;
  spec.params = h6.params;
  spec.metrics = {MetricSpec{"y", Goal::kMinimize}};
  spec.algorithm = Algorithm::kRandom;
  absl::StatusOr<std::vector<Assignment>> points = Suggest(spec, {}, kTimingTrials, 1);
  std::vector<Trial> trials;
  for (const Assignment& a : *points) {
    Trial t;
    t.params = a;
    t.state = TrialState::kCompleted;
    Measurement m;
    m.metrics["y"] = h6.f(a);
    t.final_measurement = m;
    trials.push_back(std::move(t));
  }
  spec.algorithm = Algorithm::kBayesian;
  std::vector<double> wall, cpu;
  for (int run = 0; run < kTimingRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    absl::StatusOr<std::vector<Assignment>> s = Suggest(spec, trials, 1, static_cast<uint64_t>(run));
    const std::clock_t cpu_end = std::clock();
    const auto end = std::chrono::steady_clock::now();
    if (!s.ok() || s->size() != 1) std::printf("suggestion failed\n");
    wall.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    cpu.push_back(1000.0 * static_cast<double>(cpu_end - cpu_start) / CLOCKS_PER_SEC);
  }
  return {Median(wall), Median(cpu)};
}

int Main() {
  std::printf("median simple regret after %d trials over %d seeds (lower is better)\n\n", kTrials, kSeeds);
  std::printf("%-24s %14s %14s %10s %8s %s\n", "problem", "bayesian", "random", "ratio", "bayes s", "goal");
  bool ok = true;
  for (const Problem& p : Problems()) {
    std::vector<double> bayes, random;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) bayes.push_back(Regret(p, Algorithm::kBayesian, seed));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) random.push_back(Regret(p, Algorithm::kRandom, seed));
    const double b = Median(bayes), r = Median(random);
    const double ratio = r / std::max(b, 1e-12);
    std::string goal = "-";
    if (p.goal) {
      goal = ratio >= kGoalRatio ? "ok (>= 3)" : "MISSED (>= 3)";
      ok = ok && ratio >= kGoalRatio;
    }
    std::printf("%-24s %14.6f %14.6f %10.1f %8.1f %s\n", p.name.c_str(), b, r, ratio, seconds, goal.c_str());
  }
  const Millis ms = SuggestMillis();
  const bool fast = ms.wall < kGoalMillis;
  std::printf("\none suggestion, %d completed trials, 6-D: %.1f ms wall, %.1f ms CPU (median of %d; goal < %.0f ms: %s)\n",
              kTimingTrials, ms.wall, ms.cpu, kTimingRuns, kGoalMillis, fast ? "ok" : "MISSED");
  return ok && fast ? 0 : 1;
}

}  // namespace
}  // namespace mle::tuning

int main() { return mle::tuning::Main(); }
