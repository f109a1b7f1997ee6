#include "tuning/study.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace mle::tuning {
namespace {

using common::FieldViolation;

constexpr size_t kMaxDiscreteValues = 1000;

const char* TypeName(ParamType t) {
  switch (t) {
    case ParamType::kDouble:
      return "DOUBLE";
    case ParamType::kInteger:
      return "INTEGER";
    case ParamType::kCategorical:
      return "CATEGORICAL";
    case ParamType::kDiscrete:
      return "DISCRETE";
  }
  return "?";
}

const char* ScaleName(Scale s) {
  switch (s) {
    case Scale::kNone:
      return "SCALE_TYPE_UNSPECIFIED";
    case Scale::kLinear:
      return "UNIT_LINEAR_SCALE";
    case Scale::kLog:
      return "UNIT_LOG_SCALE";
    case Scale::kReverseLog:
      return "UNIT_REVERSE_LOG_SCALE";
  }
  return "?";
}

std::string Num(double d) { return absl::StrFormat("%g", d); }

// The value spec each type takes: its wire field, and whether this
// parameter has it.
struct ValueSpecField {
  ParamType type;
  const char* field;
  bool (*present)(const ParameterConfig&);
};
constexpr ValueSpecField kValueSpecs[] = {
    {ParamType::kDouble, "doubleValueSpec", [](const ParameterConfig& p) { return p.double_value_spec.has_value(); }},
    {ParamType::kInteger, "integerValueSpec",
     [](const ParameterConfig& p) { return p.integer_value_spec.has_value(); }},
    {ParamType::kCategorical, "categoricalValueSpec",
     [](const ParameterConfig& p) { return p.categorical_values.has_value(); }},
    {ParamType::kDiscrete, "discreteValueSpec",
     [](const ParameterConfig& p) { return p.discrete_values.has_value(); }},
};

// The parent-value field a child of a parent of each type must set.
struct ParentValuesField {
  ParamType parent_type;
  const char* field;
  bool (*present)(const ParameterConfig&);
};
constexpr ParentValuesField kParentValues[] = {
    {ParamType::kCategorical, "parentCategoricalValues",
     [](const ParameterConfig& p) { return p.parent_categorical_values.has_value(); }},
    {ParamType::kDiscrete, "parentDiscreteValues",
     [](const ParameterConfig& p) { return p.parent_discrete_values.has_value(); }},
    {ParamType::kInteger, "parentIntValues", [](const ParameterConfig& p) { return p.parent_int_values.has_value(); }},
};

class ConfigChecker {
 public:
  explicit ConfigChecker(const StudyConfig& config) : grid_(config.algorithm == StudyAlgorithm::kGridSearch) {}

  // `parent`: the parameter `p` is a child of (null at the top); its value
  // spec is checked only when `parent_ok`.
  void Parameter(const ParameterConfig& p, const std::string& at, const ParameterConfig* parent, bool parent_ok) {
    const auto field = [&](const std::string& name) { return absl::StrCat(at, ".", name); };
    if (p.parameter.empty()) {
      Add(field("parameter"), "parameter is required: the parameter's name");
    } else if (auto [it, inserted] = names_.emplace(p.parameter, at); !inserted) {
      Add(field("parameter"), absl::StrFormat("parameter %s is already used by %s; names must be unique",
                                              p.parameter, it->second));
    }
    if (parent == nullptr) {
      for (const auto& f : kParentValues) {
        if (f.present(p)) Add(field(f.field), absl::StrCat(f.field, " is only for childParameterSpecs"));
      }
    } else if (parent_ok) {
      ChildOf(p, *parent, at);
    }
    if (!p.type.has_value()) {
      Add(field("type"), "type is required; allowed: DOUBLE, INTEGER, CATEGORICAL, DISCRETE");
      return;
    }
    const ParamType type = *p.type;
    bool spec_ok = true;
    for (const auto& s : kValueSpecs) {
      if (s.type == type && !s.present(p)) {
        Add(field(s.field), absl::StrFormat("%s is required for a %s parameter", s.field, TypeName(type)));
        spec_ok = false;
      } else if (s.type != type && s.present(p)) {
        Add(field(s.field), absl::StrFormat("%s is not allowed for a %s parameter", s.field, TypeName(type)));
      }
    }
    if (grid_ && type == ParamType::kDouble) {
      Add(field("type"),
          "GRID_SEARCH cannot search a DOUBLE parameter; use INTEGER, CATEGORICAL or DISCRETE, or another algorithm");
    }
    if (type == ParamType::kCategorical && p.scale != Scale::kNone) {
      Add(field("scaleType"), "scaleType is not allowed for a CATEGORICAL parameter");
    }
    const bool log = p.scale == Scale::kLog || p.scale == Scale::kReverseLog;
    if (spec_ok) {
      switch (type) {
        case ParamType::kDouble:
          Bounds(p.double_value_spec->min, p.double_value_spec->max, field("doubleValueSpec"), log, p.scale);
          break;
        case ParamType::kInteger: {
          auto d = [](std::optional<int64_t> v) -> std::optional<double> {
            if (!v) return std::nullopt;
            return static_cast<double>(*v);
          };
          Bounds(d(p.integer_value_spec->min), d(p.integer_value_spec->max), field("integerValueSpec"), log, p.scale);
          break;
        }
        case ParamType::kCategorical: {
          const auto& values = *p.categorical_values;
          if (values.empty()) {
            Add(field("categoricalValueSpec.values"), "values is required: list at least one category");
          }
          std::set<std::string> seen;
          for (size_t i = 0; i < values.size(); ++i) {
            if (!seen.insert(values[i]).second) {
              Add(field(absl::StrFormat("categoricalValueSpec.values[%d]", i)),
                  absl::StrFormat("category \"%s\" is listed twice; categories must be unique", values[i]));
            }
          }
          break;
        }
        case ParamType::kDiscrete: {
          const auto& values = *p.discrete_values;
          const std::string vf = field("discreteValueSpec.values");
          if (values.empty()) Add(vf, "values is required: list at least one feasible point");
          if (values.size() > kMaxDiscreteValues) {
            Add(vf, absl::StrFormat("values can hold at most %d points (got %d)", kMaxDiscreteValues, values.size()));
          }
          for (size_t i = 0; i < values.size(); ++i) {
            if (!std::isfinite(values[i])) {
              Add(absl::StrFormat("%s[%d]", vf, i), "values must be finite numbers");
            } else if (i > 0 && !(values[i] > values[i - 1])) {
              Add(absl::StrFormat("%s[%d]", vf, i),
                  absl::StrFormat("values must be strictly increasing (%s follows %s)", Num(values[i]),
                                  Num(values[i - 1])));
            }
          }
          if (log && !values.empty() && !(values[0] > 0)) {
            Add(absl::StrCat(vf, "[0]"),
                absl::StrFormat("%s needs values greater than 0 (got %s)", ScaleName(p.scale), Num(values[0])));
          }
          break;
        }
      }
    }
    if (!p.children.empty() && type == ParamType::kDouble) {
      Add(field("childParameterSpecs"), "a DOUBLE parameter cannot have child parameters; its parent values "
                                        "must be CATEGORICAL, DISCRETE or INTEGER");
      return;
    }
    for (size_t i = 0; i < p.children.size(); ++i) {
      Parameter(p.children[i], field(absl::StrFormat("childParameterSpecs[%d]", i)), &p, spec_ok);
    }
  }

  void Add(std::string field, std::string description) { out_.push_back({std::move(field), std::move(description)}); }
  std::vector<FieldViolation> Take() { return std::move(out_); }

 private:
  void Bounds(std::optional<double> min, std::optional<double> max, const std::string& at, bool log, Scale scale) {
    bool ok = true;
    for (const auto& [name, v] : {std::pair{"minValue", min}, std::pair{"maxValue", max}}) {
      if (!v.has_value()) {
        Add(absl::StrCat(at, ".", name), absl::StrCat(name, " is required"));
        ok = false;
      } else if (!std::isfinite(*v)) {
        Add(absl::StrCat(at, ".", name), absl::StrCat(name, " must be a finite number"));
        ok = false;
      }
    }
    if (!ok) return;
    if (*min >= *max) {
      Add(absl::StrCat(at, ".maxValue"),
          absl::StrFormat("maxValue (%s) must be greater than minValue (%s)", Num(*max), Num(*min)));
    }
    if (log && !(*min > 0)) {
      Add(absl::StrCat(at, ".minValue"),
          absl::StrFormat("%s needs minValue greater than 0 (got %s)", ScaleName(scale), Num(*min)));
    }
  }

  // The child's parent values: exactly the field for its parent's type,
  // each value one the parent takes.
  void ChildOf(const ParameterConfig& c, const ParameterConfig& parent, const std::string& at) {
    if (!parent.type.has_value()) return;
    const ParentValuesField* want = nullptr;
    for (const auto& f : kParentValues) {
      if (f.parent_type == *parent.type) {
        want = &f;
      } else if (f.present(c)) {
        Add(absl::StrCat(at, ".", f.field),
            absl::StrFormat("%s does not fit parent %s, a %s parameter", f.field, parent.parameter,
                            TypeName(*parent.type)));
      }
    }
    if (want == nullptr) return;  // a DOUBLE parent: reported on the parent
    const std::string vf = absl::StrCat(at, ".", want->field, ".values");
    if (!want->present(c)) {
      Add(absl::StrCat(at, ".", want->field),
          absl::StrFormat("%s is required: the values of %s for which this child applies", want->field,
                          parent.parameter));
      return;
    }
    size_t count = 0;
    switch (*parent.type) {
      case ParamType::kCategorical: {
        const auto& cats = parent.categorical_values.value_or(std::vector<std::string>{});
        count = c.parent_categorical_values->size();
        for (size_t i = 0; i < count; ++i) {
          const std::string& v = (*c.parent_categorical_values)[i];
          if (std::find(cats.begin(), cats.end(), v) == cats.end()) {
            Add(absl::StrFormat("%s[%d]", vf, i),
                absl::StrFormat("\"%s\" is not a category of parent %s (%s)", v, parent.parameter,
                                absl::StrJoin(cats, ", ")));
          }
        }
        break;
      }
      case ParamType::kDiscrete: {
        const auto& points = parent.discrete_values.value_or(std::vector<double>{});
        count = c.parent_discrete_values->size();
        for (size_t i = 0; i < count; ++i) {
          const double v = (*c.parent_discrete_values)[i];
          if (std::find(points.begin(), points.end(), v) == points.end()) {
            Add(absl::StrFormat("%s[%d]", vf, i),
                absl::StrFormat("%s is not a feasible point of parent %s", Num(v), parent.parameter));
          }
        }
        break;
      }
      case ParamType::kInteger: {
        const auto range = parent.integer_value_spec.value_or(ParameterConfig::IntRange{});
        count = c.parent_int_values->size();
        for (size_t i = 0; i < count; ++i) {
          const int64_t v = (*c.parent_int_values)[i];
          if (!range.min || !range.max || v < *range.min || v > *range.max) {
            Add(absl::StrFormat("%s[%d]", vf, i),
                absl::StrFormat("%d is outside parent %s's integerValueSpec", v, parent.parameter));
          }
        }
        break;
      }
      case ParamType::kDouble:
        break;
    }
    if (count == 0) Add(vf, "values is required: list at least one value of the parent");
  }

  const bool grid_;
  std::map<std::string, std::string> names_;  // parameter -> where first declared
  std::vector<FieldViolation> out_;
};

ParamSpec ToParamSpec(const ParameterConfig& p) {
  ParamSpec s;
  s.name = p.parameter;
  s.type = p.type.value_or(ParamType::kDouble);
  if (p.double_value_spec) {
    s.min = p.double_value_spec->min.value_or(0);
    s.max = p.double_value_spec->max.value_or(0);
  }
  if (p.integer_value_spec) {
    s.min = static_cast<double>(p.integer_value_spec->min.value_or(0));
    s.max = static_cast<double>(p.integer_value_spec->max.value_or(0));
  }
  s.categories = p.categorical_values.value_or(std::vector<std::string>{});
  s.discrete = p.discrete_values.value_or(std::vector<double>{});
  s.scale = p.scale;
  for (const auto& c : p.children) s.children.push_back(ToParamSpec(c));
  s.parent_categories = p.parent_categorical_values.value_or(std::vector<std::string>{});
  s.parent_discrete = p.parent_discrete_values.value_or(std::vector<double>{});
  s.parent_ints = p.parent_int_values.value_or(std::vector<int64_t>{});
  return s;
}

ParameterConfig FromParamSpec(const ParamSpec& s, const ParamSpec* parent) {
  ParameterConfig p;
  p.parameter = s.name;
  p.type = s.type;
  switch (s.type) {
    case ParamType::kDouble:
      p.double_value_spec = ParameterConfig::DoubleRange{s.min, s.max};
      break;
    case ParamType::kInteger:
      p.integer_value_spec = ParameterConfig::IntRange{std::llround(s.min), std::llround(s.max)};
      break;
    case ParamType::kCategorical:
      p.categorical_values = s.categories;
      break;
    case ParamType::kDiscrete:
      p.discrete_values = s.discrete;
      break;
  }
  p.scale = s.scale;
  for (const auto& c : s.children) p.children.push_back(FromParamSpec(c, &s));
  if (parent != nullptr) {
    switch (parent->type) {
      case ParamType::kCategorical:
        p.parent_categorical_values = s.parent_categories;
        break;
      case ParamType::kDiscrete:
        p.parent_discrete_values = s.parent_discrete;
        break;
      case ParamType::kInteger:
        p.parent_int_values = s.parent_ints;
        break;
      case ParamType::kDouble:
        break;
    }
  }
  return p;
}

// Whether a parent taking `value` activates child `c`.
bool ChildApplies(const ParameterConfig& c, const Value& value) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    return c.parent_categorical_values &&
           std::find(c.parent_categorical_values->begin(), c.parent_categorical_values->end(), *s) !=
               c.parent_categorical_values->end();
  }
  if (const auto* i = std::get_if<int64_t>(&value)) {
    return c.parent_int_values &&
           std::find(c.parent_int_values->begin(), c.parent_int_values->end(), *i) != c.parent_int_values->end();
  }
  const double d = std::get<double>(value);
  return c.parent_discrete_values &&
         std::find(c.parent_discrete_values->begin(), c.parent_discrete_values->end(), d) !=
             c.parent_discrete_values->end();
}

const char* ValueField(ParamType t) {
  switch (t) {
    case ParamType::kDouble:
    case ParamType::kDiscrete:
      return "floatValue";
    case ParamType::kInteger:
      return "intValue";
    case ParamType::kCategorical:
      return "stringValue";
  }
  return "?";
}

// Why `value` is not a value of `p` ("" when it is).
std::string ValueProblem(const ParameterConfig& p, const Value& value) {
  const ParamType type = p.type.value_or(ParamType::kDouble);
  const bool kind_ok = (type == ParamType::kCategorical && std::holds_alternative<std::string>(value)) ||
                       (type == ParamType::kInteger && std::holds_alternative<int64_t>(value)) ||
                       ((type == ParamType::kDouble || type == ParamType::kDiscrete) &&
                        std::holds_alternative<double>(value));
  if (!kind_ok) {
    return absl::StrFormat("parameter %s is %s: give its value as %s", p.parameter, TypeName(type), ValueField(type));
  }
  switch (type) {
    case ParamType::kDouble: {
      const double d = std::get<double>(value);
      const auto& r = *p.double_value_spec;
      if (!std::isfinite(d) || d < *r.min || d > *r.max) {
        return absl::StrFormat("%s is outside %s's range [%s, %s]", Num(d), p.parameter, Num(*r.min), Num(*r.max));
      }
      break;
    }
    case ParamType::kInteger: {
      const int64_t i = std::get<int64_t>(value);
      const auto& r = *p.integer_value_spec;
      if (i < *r.min || i > *r.max) {
        return absl::StrFormat("%d is outside %s's range [%d, %d]", i, p.parameter, *r.min, *r.max);
      }
      break;
    }
    case ParamType::kCategorical: {
      const std::string& s = std::get<std::string>(value);
      if (std::find(p.categorical_values->begin(), p.categorical_values->end(), s) == p.categorical_values->end()) {
        return absl::StrFormat("\"%s\" is not a category of %s (%s)", s, p.parameter,
                               absl::StrJoin(*p.categorical_values, ", "));
      }
      break;
    }
    case ParamType::kDiscrete: {
      const double d = std::get<double>(value);
      if (std::find(p.discrete_values->begin(), p.discrete_values->end(), d) == p.discrete_values->end()) {
        return absl::StrFormat("%s is not a feasible point of %s", Num(d), p.parameter);
      }
      break;
    }
  }
  return "";
}

void CollectNames(const std::vector<ParameterConfig>& params, std::vector<std::string>* names,
                  std::map<std::string, const ParameterConfig*>* by_name) {
  for (const auto& p : params) {
    names->push_back(p.parameter);
    by_name->emplace(p.parameter, &p);
    CollectNames(p.children, names, by_name);
  }
}

Measurement ToOptimizerMeasurement(const TrialMeasurement& m, bool elapsed_as_step) {
  Measurement out;
  out.step = elapsed_as_step ? absl::ToInt64Milliseconds(m.elapsed_time) : m.step_count;
  out.elapsed_seconds = absl::ToDoubleSeconds(m.elapsed_time);
  for (const auto& metric : m.metrics) out.metrics[metric.metric] = metric.value;
  return out;
}

void AppendInOrder(const std::vector<ParameterConfig>& params, const Assignment& assignment,
                   std::vector<TrialParameter>* out) {
  for (const auto& p : params) {
    auto it = assignment.find(p.parameter);
    if (it == assignment.end()) continue;
    out->push_back({p.parameter, it->second});
    AppendInOrder(p.children, assignment, out);
  }
}

}  // namespace

std::vector<common::FieldViolation> ValidateStudyConfig(const StudyConfig& config, const std::string& prefix) {
  ConfigChecker check(config);
  const auto field = [&](const std::string& name) { return absl::StrCat(prefix, ".", name); };
  if (config.metrics.empty()) {
    check.Add(field("metrics"), "metrics is required: list at least one metric to optimize");
  }
  std::map<std::string, size_t> metric_names;
  for (size_t i = 0; i < config.metrics.size(); ++i) {
    const std::string& name = config.metrics[i].metric;
    const std::string at = field(absl::StrFormat("metrics[%d].metric", i));
    if (name.empty()) {
      check.Add(at, "metric is required: the metric's name");
    } else if (auto [it, inserted] = metric_names.emplace(name, i); !inserted) {
      check.Add(at, absl::StrFormat("metric %s is already listed as metrics[%d]; names must be unique", name,
                                    it->second));
    }
  }
  if (config.parameters.empty()) {
    check.Add(field("parameters"), "parameters is required: list at least one parameter to tune");
  }
  for (size_t i = 0; i < config.parameters.size(); ++i) {
    check.Parameter(config.parameters[i], field(absl::StrFormat("parameters[%d]", i)), nullptr, false);
  }
  return check.Take();
}

StudySpec ToSpec(const StudyConfig& config) {
  StudySpec spec;
  for (const auto& p : config.parameters) spec.params.push_back(ToParamSpec(p));
  for (const auto& m : config.metrics) spec.metrics.push_back({m.metric, m.goal.value_or(Goal::kMaximize)});
  switch (config.algorithm) {
    case StudyAlgorithm::kGridSearch:
      spec.algorithm = Algorithm::kGrid;
      break;
    case StudyAlgorithm::kRandomSearch:
      spec.algorithm = Algorithm::kRandom;
      break;
    case StudyAlgorithm::kUnspecified:
    case StudyAlgorithm::kGaussianProcessBandit:
      spec.algorithm = Algorithm::kBayesian;
      break;
  }
  return spec;
}

StudyConfig FromSpec(const StudySpec& spec) {
  StudyConfig config;
  for (const auto& p : spec.params) config.parameters.push_back(FromParamSpec(p, nullptr));
  for (const auto& m : spec.metrics) config.metrics.push_back({m.name, m.goal});
  switch (spec.algorithm) {
    case Algorithm::kGrid:
      config.algorithm = StudyAlgorithm::kGridSearch;
      break;
    case Algorithm::kRandom:
      config.algorithm = StudyAlgorithm::kRandomSearch;
      break;
    case Algorithm::kBayesian:
      config.algorithm = StudyAlgorithm::kUnspecified;
      break;
  }
  return config;
}

std::string Study::Name() const {
  return absl::StrCat("projects/", project, "/locations/", location, "/studies/", study_id);
}

std::string StudyTrial::Name() const { return absl::StrCat(study, "/trials/", id); }

std::string Location::Name() const { return absl::StrCat("projects/", project, "/locations/", location); }

std::string StudyOperation::Name() const {
  return absl::StrCat("projects/", project, "/locations/", location, "/operations/", id);
}

std::vector<common::FieldViolation> CheckTrialParameters(const StudyConfig& config,
                                                         const std::vector<TrialParameter>& parameters,
                                                         const std::string& prefix) {
  std::vector<FieldViolation> out;
  std::vector<std::string> names;
  std::map<std::string, const ParameterConfig*> by_name;
  CollectNames(config.parameters, &names, &by_name);
  Assignment given;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const TrialParameter& tp = parameters[i];
    const std::string at = absl::StrFormat("%s[%d]", prefix, i);
    auto spec = by_name.find(tp.parameter);
    if (spec == by_name.end()) {
      out.push_back({at + ".parameter", absl::StrFormat("unknown parameter \"%s\"; the study's parameters are: %s",
                                                        tp.parameter, absl::StrJoin(names, ", "))});
      continue;
    }
    if (!given.emplace(tp.parameter, tp.value).second) {
      out.push_back({at + ".parameter", absl::StrFormat("parameter %s is given twice", tp.parameter)});
      continue;
    }
    if (std::string problem = ValueProblem(*spec->second, tp.value); !problem.empty()) {
      out.push_back({at, std::move(problem)});
    }
  }
  // Every top-level parameter, and every child its parent's value activates;
  // no child its parent does not.
  struct Walk {
    const Assignment& given;
    const std::string& prefix;
    std::vector<FieldViolation>& out;
    void Level(const std::vector<ParameterConfig>& params, const ParameterConfig* parent, const Value* parent_value) {
      for (const auto& p : params) {
        const bool active = parent == nullptr || ChildApplies(p, *parent_value);
        auto it = given.find(p.parameter);
        if (active && it == given.end()) {
          out.push_back({prefix, parent == nullptr
                                     ? absl::StrFormat("parameter %s is missing: a trial sets every parameter",
                                                       p.parameter)
                                     : absl::StrFormat("parameter %s is missing: it applies when %s has this value",
                                                       p.parameter, parent->parameter)});
        } else if (!active && it != given.end()) {
          out.push_back({prefix, absl::StrFormat("parameter %s does not apply: its parent %s does not take one of "
                                                 "its parent values",
                                                 p.parameter, parent->parameter)});
        }
        if (it != given.end()) Level(p.children, &p, &it->second);
      }
    }
  };
  Walk{given, prefix, out}.Level(config.parameters, nullptr, nullptr);
  return out;
}

Trial ToOptimizerTrial(const StudyTrial& trial, bool elapsed_as_step) {
  Trial t;
  for (const auto& p : trial.parameters) t.params[p.parameter] = p.value;
  if (trial.state != TrialStatus::kCompleted) {
    t.state = TrialState::kActive;
  } else if (trial.infeasible || !trial.final_measurement.has_value()) {
    t.state = TrialState::kInfeasible;
  } else {
    t.state = TrialState::kCompleted;
  }
  for (const auto& m : trial.measurements) t.measurements.push_back(ToOptimizerMeasurement(m, elapsed_as_step));
  if (t.state == TrialState::kCompleted) {
    t.final_measurement = ToOptimizerMeasurement(*trial.final_measurement, elapsed_as_step);
  }
  return t;
}

std::vector<TrialParameter> ToTrialParameters(const StudyConfig& config, const Assignment& assignment) {
  std::vector<TrialParameter> out;
  AppendInOrder(config.parameters, assignment, &out);
  return out;
}

}  // namespace mle::tuning
