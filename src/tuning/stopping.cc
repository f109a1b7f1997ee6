#include "tuning/stopping.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "tuning/trial_value.h"

namespace mle::tuning {
namespace {

bool Finished(const Trial& t) { return t.state == TrialState::kCompleted || t.state == TrialState::kStopped; }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// a dominates b: at least as good on every metric and better on one.
bool Dominates(const std::vector<MetricSpec>& metrics, const std::vector<double>& a, const std::vector<double>& b) {
  bool strictly = false;
  for (size_t m = 0; m < metrics.size(); ++m) {
    if (Better(metrics[m].goal, b[m], a[m])) return false;
    if (Better(metrics[m].goal, a[m], b[m])) strictly = true;
  }
  return strictly;
}

}  // namespace

bool ShouldStopMedian(const MetricSpec& objective, const Trial& trial, const std::vector<Trial>& trials) {
  // The trial's latest measurement reporting the objective.
  const Measurement* latest = nullptr;
  for (auto it = trial.measurements.rbegin(); it != trial.measurements.rend() && !latest; ++it) {
    if (MetricIn(*it, objective.name)) latest = &*it;
  }
  if (!latest) return false;
  const int64_t step = latest->step;
  const double value = *MetricIn(*latest, objective.name);

  std::vector<double> others;
  for (const Trial& t : trials) {
    if (&t == &trial || !Finished(t)) continue;
    if (std::optional<double> v = ValueAtStep(t, objective.name, step)) others.push_back(*v);
  }
  if (others.size() < kMinCompletedForStopping) return false;
  return Better(objective.goal, Median(std::move(others)), value);
}

std::vector<size_t> ParetoOptimal(const std::vector<MetricSpec>& metrics, const std::vector<Trial>& trials) {
  // Finished trials reporting every metric, with their values.
  std::vector<size_t> index;
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (!Finished(trials[i])) continue;
    std::vector<double> v;
    for (const MetricSpec& m : metrics) {
      std::optional<double> x = FinalValue(trials[i], m.name);
      if (!x) break;
      v.push_back(*x);
    }
    if (v.size() != metrics.size()) continue;
    index.push_back(i);
    values.push_back(std::move(v));
  }
  std::vector<size_t> front;
  for (size_t a = 0; a < index.size(); ++a) {
    bool dominated = false;
    for (size_t b = 0; b < index.size() && !dominated; ++b) dominated = b != a && Dominates(metrics, values[b], values[a]);
    if (!dominated) front.push_back(index[a]);
  }
  return front;
}

std::vector<size_t> BestFirst(const MetricSpec& objective, const std::vector<Trial>& trials) {
  // Sort key: (group, goal-oriented value, index); smaller first.
  struct Key {
    int group;
    double value;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < trials.size(); ++i) {
    const Trial& t = trials[i];
    Key k{0, 0, i};
    switch (t.state) {
      case TrialState::kCompleted:
        if (std::optional<double> v = FinalValue(t, objective.name); v && !std::isnan(*v)) {
          k.value = objective.goal == Goal::kMaximize ? -*v : *v;
        } else {
          k.group = 1;  // completed without the objective: after those with it
        }
        break;
      case TrialState::kStopped:
        k.group = 2;
        break;
      case TrialState::kActive:
        k.group = 3;
        break;
      case TrialState::kInfeasible:
        k.group = 4;
        break;
    }
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.group, a.value, a.index) < std::tie(b.group, b.value, b.index);
  });
  std::vector<size_t> order;
  order.reserve(keys.size());
  for (const Key& k : keys) order.push_back(k.index);
  return order;
}

}  // namespace mle::tuning
