#include "codec/study_codec.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codec/discovery.h"
#include "codec/json_fields.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::codec {
namespace {

using nlohmann::json;
using namespace mle::tuning;  // NOLINT: the study model, named throughout

constexpr char kTypePrefix[] = "type.googleapis.com/google.cloud.ml.v1.";
constexpr char kSuggestMetadata[] = "SuggestTrialsMetadata";
constexpr char kSuggestResponse[] = "SuggestTrialsResponse";
// (sic) the discovery document spells the schema so.
constexpr char kStoppingMetadata[] = "CheckTrialEarlyStoppingStateMetatdata";
constexpr char kStoppingResponse[] = "CheckTrialEarlyStoppingStateResponse";
constexpr int kStorageVersion = 1;

// ---- enum names, both ways, from one table each ----

template <class E>
struct EnumName {
  E value;
  const char* name;
};

constexpr EnumName<StudyAlgorithm> kAlgorithms[] = {
    {StudyAlgorithm::kUnspecified, "ALGORITHM_UNSPECIFIED"},
    {StudyAlgorithm::kGaussianProcessBandit, "GAUSSIAN_PROCESS_BANDIT"},
    {StudyAlgorithm::kGridSearch, "GRID_SEARCH"},
    {StudyAlgorithm::kRandomSearch, "RANDOM_SEARCH"},
};
constexpr EnumName<ParamType> kParamTypes[] = {
    {ParamType::kDouble, "DOUBLE"},
    {ParamType::kInteger, "INTEGER"},
    {ParamType::kCategorical, "CATEGORICAL"},
    {ParamType::kDiscrete, "DISCRETE"},
};
constexpr EnumName<Scale> kScales[] = {
    {Scale::kNone, "SCALE_TYPE_UNSPECIFIED"},
    {Scale::kLinear, "UNIT_LINEAR_SCALE"},
    {Scale::kLog, "UNIT_LOG_SCALE"},
    {Scale::kReverseLog, "UNIT_REVERSE_LOG_SCALE"},
};
constexpr EnumName<Goal> kGoals[] = {{Goal::kMaximize, "MAXIMIZE"}, {Goal::kMinimize, "MINIMIZE"}};
constexpr EnumName<StudyState> kStudyStates[] = {
    {StudyState::kActive, "ACTIVE"}, {StudyState::kInactive, "INACTIVE"}, {StudyState::kCompleted, "COMPLETED"}};
constexpr EnumName<TrialStatus> kTrialStates[] = {
    {TrialStatus::kRequested, "REQUESTED"},
    {TrialStatus::kActive, "ACTIVE"},
    {TrialStatus::kStopping, "STOPPING"},
    {TrialStatus::kCompleted, "COMPLETED"},
};

template <class E, size_t N>
const char* NameOf(const EnumName<E> (&table)[N], E value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return "";
}
template <class E, size_t N>
std::optional<E> ValueOf(const EnumName<E> (&table)[N], const std::string& name) {
  for (const auto& e : table) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

// ---- reading fields of a body already checked against the schema ----



int64_t ToInt64(const json& v) {
  if (v.is_string()) {
    int64_t n = 0;
    return absl::SimpleAtoi(v.get<std::string>(), &n) ? n : 0;
  }
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  return v.get<int64_t>();
}

double ToDouble(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    double d = 0;
    return absl::SimpleAtod(s, &d) ? d : 0;
  }
  return v.get<double>();
}


// `values` of a {values: [...]} object.
template <class T>
std::optional<std::vector<T>> Values(const json& o, const char* key, T (*convert)(const json&)) {
  const json* spec = Obj(o, key);
  if (spec == nullptr) return std::nullopt;
  std::vector<T> out;
  if (const json* values = Obj(*spec, "values")) {
    for (const auto& v : *values) out.push_back(convert(v));
  }
  return out;
}
std::string ToString(const json& v) { return v.is_null() ? "" : v.get<std::string>(); }

ParameterConfig DecodeParameter(const json& o) {
  ParameterConfig p;
  p.parameter = Str(o, "parameter");
  p.type = ValueOf(kParamTypes, Str(o, "type"));
  if (const json* d = Obj(o, "doubleValueSpec")) {
    p.double_value_spec = ParameterConfig::DoubleRange{Double(*d, "minValue"), Double(*d, "maxValue")};
  }
  if (const json* i = Obj(o, "integerValueSpec")) {
    p.integer_value_spec = ParameterConfig::IntRange{Int64(*i, "minValue"), Int64(*i, "maxValue")};
  }
  p.categorical_values = Values<std::string>(o, "categoricalValueSpec", ToString);
  p.discrete_values = Values<double>(o, "discreteValueSpec", ToDouble);
  p.scale = ValueOf(kScales, Str(o, "scaleType")).value_or(Scale::kNone);
  if (const json* children = Obj(o, "childParameterSpecs")) {
    for (const auto& c : *children) p.children.push_back(DecodeParameter(c));
  }
  p.parent_categorical_values = Values<std::string>(o, "parentCategoricalValues", ToString);
  p.parent_discrete_values = Values<double>(o, "parentDiscreteValues", ToDouble);
  p.parent_int_values = Values<int64_t>(o, "parentIntValues", ToInt64);
  return p;
}

StudyConfig DecodeStudyConfig(const json& o) {
  StudyConfig c;
  c.algorithm = ValueOf(kAlgorithms, Str(o, "algorithm")).value_or(StudyAlgorithm::kUnspecified);
  if (const json* a = Obj(o, "automatedStoppingConfig")) {
    AutomatedStoppingConfig stop;
    if (const json* m = Obj(*a, "medianAutomatedStoppingConfig")) {
      stop.rule = StoppingRule::kMedian;
      stop.use_elapsed_time = m->value("useElapsedTime", false);
    } else if (const json* d = Obj(*a, "decayCurveStoppingConfig")) {
      stop.rule = StoppingRule::kDecayCurve;
      stop.use_elapsed_time = d->value("useElapsedTime", false);
    }
    c.automated_stopping = stop;
  }
  if (const json* metrics = Obj(o, "metrics")) {
    for (const auto& m : *metrics) {
      if (m.is_null()) continue;
      c.metrics.push_back({Str(m, "metric"), ValueOf(kGoals, Str(m, "goal"))});
    }
  }
  if (const json* params = Obj(o, "parameters")) {
    for (const auto& p : *params) {
      if (!p.is_null()) c.parameters.push_back(DecodeParameter(p));
    }
  }
  return c;
}

TrialMeasurement DecodeMeasurement(const json& o) {
  TrialMeasurement m;
  m.step_count = Int64(o, "stepCount").value_or(0);
  if (const json* e = Obj(o, "elapsedTime")) {
    m.elapsed_time = common::ParseDuration(e->get<std::string>()).value_or(absl::ZeroDuration());
  }
  if (const json* metrics = Obj(o, "metrics")) {
    for (const auto& x : *metrics) {
      if (!x.is_null()) m.metrics.push_back({Str(x, "metric"), Double(x, "value").value_or(0)});
    }
  }
  return m;
}

// A measurement's semantic rules the wire cannot say: named metrics, each
// once, with a finite value; stepCount not negative.
void CheckMeasurement(const json& o, const std::string& at, std::vector<common::FieldViolation>* out) {
  if (auto step = Int64(o, "stepCount"); step && *step < 0) {
    out->push_back({at + ".stepCount", absl::StrCat("stepCount must not be negative (got ", *step, ")")});
  }
  const json* metrics = Obj(o, "metrics");
  if (metrics == nullptr) return;
  std::vector<std::string> seen;
  for (size_t i = 0; i < metrics->size(); ++i) {
    const json& m = (*metrics)[i];
    const std::string mat = absl::StrCat(at, ".metrics[", i, "]");
    if (m.is_null()) continue;
    const std::string name = Str(m, "metric");
    if (name.empty()) {
      out->push_back({mat + ".metric", "metric is required: the metric's name"});
    } else if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      out->push_back({mat + ".metric", absl::StrCat("metric ", name, " is reported twice in one measurement")});
    } else {
      seen.push_back(name);
    }
    auto value = Double(m, "value");
    if (!value) {
      out->push_back({mat + ".value", "value is required"});
    } else if (!std::isfinite(*value)) {
      out->push_back({mat + ".value", "value must be a finite number"});
    }
  }
}

// A trial parameter's value: exactly one of floatValue, intValue, stringValue.
std::optional<Value> DecodeValue(const json& o) {
  int set = 0;
  Value v;
  if (auto d = Double(o, "floatValue")) v = *d, ++set;
  if (auto i = Int64(o, "intValue")) v = *i, ++set;
  if (const json* s = Obj(o, "stringValue")) v = s->get<std::string>(), ++set;
  if (set != 1) return std::nullopt;
  return v;
}

StudyTrial DecodeTrialFields(const json& o) {
  StudyTrial t;
  if (const json* params = Obj(o, "parameters")) {
    for (const auto& p : *params) {
      if (p.is_null()) continue;
      t.parameters.push_back({Str(p, "parameter"), DecodeValue(p).value_or(Value{0.0})});
    }
  }
  t.state = ValueOf(kTrialStates, Str(o, "state")).value_or(TrialStatus::kActive);
  if (const json* ms = Obj(o, "measurements")) {
    for (const auto& m : *ms) {
      if (!m.is_null()) t.measurements.push_back(DecodeMeasurement(m));
    }
  }
  if (const json* f = Obj(o, "finalMeasurement")) t.final_measurement = DecodeMeasurement(*f);
  t.client_id = Str(o, "clientId");
  t.infeasible = o.value("trialInfeasible", false);
  t.infeasible_reason = Str(o, "infeasibleReason");
  t.start_time = Time(o, "startTime");
  t.end_time = Time(o, "endTime");
  return t;
}

absl::Status Invalid(const std::vector<common::FieldViolation>& violations) {
  return common::InvalidArgumentWithViolations("Invalid JSON payload received.", violations);
}

// The body checked against `schema`, output-only `ignore` fields skipped.
std::vector<common::FieldViolation> CheckBody(const json& body, absl::string_view schema,
                                              const std::vector<std::string>& ignore = {}) {
  if (!body.is_object()) {
    return {{"(body)", absl::StrCat("the request body must be a JSON object (", schema, ")")}};
  }
  return DiscoverySchema::Embedded().Check(body, schema, ignore);
}

// ---- encoding ----


json ValuesOf(const std::vector<double>& values) {
  json list = json::array();
  for (double d : values) list.push_back(EncodeDouble(d));
  return {{"values", list}};
}
json ValuesOf(const std::vector<std::string>& values) { return {{"values", values}}; }
json ValuesOf(const std::vector<int64_t>& values) {
  json list = json::array();
  for (int64_t i : values) list.push_back(std::to_string(i));
  return {{"values", list}};
}

json EncodeParameter(const ParameterConfig& p) {
  json o = json::object();
  o["parameter"] = p.parameter;
  o["type"] = p.type ? NameOf(kParamTypes, *p.type) : "PARAMETER_TYPE_UNSPECIFIED";
  if (p.double_value_spec) {
    json d = json::object();
    if (p.double_value_spec->min) d["minValue"] = EncodeDouble(*p.double_value_spec->min);
    if (p.double_value_spec->max) d["maxValue"] = EncodeDouble(*p.double_value_spec->max);
    o["doubleValueSpec"] = d;
  }
  if (p.integer_value_spec) {
    json i = json::object();
    if (p.integer_value_spec->min) i["minValue"] = std::to_string(*p.integer_value_spec->min);
    if (p.integer_value_spec->max) i["maxValue"] = std::to_string(*p.integer_value_spec->max);
    o["integerValueSpec"] = i;
  }
  if (p.categorical_values) o["categoricalValueSpec"] = ValuesOf(*p.categorical_values);
  if (p.discrete_values) o["discreteValueSpec"] = ValuesOf(*p.discrete_values);
  if (p.scale != Scale::kNone) o["scaleType"] = NameOf(kScales, p.scale);
  if (!p.children.empty()) {
    json children = json::array();
    for (const auto& c : p.children) children.push_back(EncodeParameter(c));
    o["childParameterSpecs"] = children;
  }
  if (p.parent_categorical_values) o["parentCategoricalValues"] = ValuesOf(*p.parent_categorical_values);
  if (p.parent_discrete_values) o["parentDiscreteValues"] = ValuesOf(*p.parent_discrete_values);
  if (p.parent_int_values) o["parentIntValues"] = ValuesOf(*p.parent_int_values);
  return o;
}

json EncodeStudyConfig(const StudyConfig& c) {
  json o = json::object();
  o["algorithm"] = NameOf(kAlgorithms, c.algorithm);
  if (c.automated_stopping) {
    json a = json::object();
    json rule = {{"useElapsedTime", c.automated_stopping->use_elapsed_time}};
    if (c.automated_stopping->rule == StoppingRule::kMedian) a["medianAutomatedStoppingConfig"] = rule;
    if (c.automated_stopping->rule == StoppingRule::kDecayCurve) a["decayCurveStoppingConfig"] = rule;
    o["automatedStoppingConfig"] = a;
  }
  json metrics = json::array();
  for (const auto& m : c.metrics) {
    metrics.push_back({{"metric", m.metric}, {"goal", m.goal ? NameOf(kGoals, *m.goal) : "GOAL_TYPE_UNSPECIFIED"}});
  }
  o["metrics"] = metrics;
  json params = json::array();
  for (const auto& p : c.parameters) params.push_back(EncodeParameter(p));
  o["parameters"] = params;
  return o;
}

json EncodeMeasurement(const TrialMeasurement& m) {
  json metrics = json::array();
  for (const auto& x : m.metrics) metrics.push_back({{"metric", x.metric}, {"value", EncodeDouble(x.value)}});
  return {{"stepCount", std::to_string(m.step_count)},
          {"elapsedTime", common::FormatDuration(m.elapsed_time)},
          {"metrics", metrics}};
}

json EncodeTrialParameter(const TrialParameter& p) {
  json o = {{"parameter", p.parameter}};
  if (const auto* d = std::get_if<double>(&p.value)) o["floatValue"] = EncodeDouble(*d);
  if (const auto* i = std::get_if<int64_t>(&p.value)) o["intValue"] = std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&p.value)) o["stringValue"] = *s;
  return o;
}

json TrialList(const char* key, const std::vector<StudyTrial>& trials) {
  json o = json::object();
  if (trials.empty()) return o;
  json list = json::array();
  for (const auto& t : trials) list.push_back(EncodeTrial(t));
  o[key] = list;
  return o;
}

// "projects/P/locations/L/<collection>/ID" split; nullopt when it is not one.
struct ParsedName {
  std::string project, location, id;
};
std::optional<ParsedName> ParseName(const std::string& name, absl::string_view collection) {
  std::vector<std::string> parts = absl::StrSplit(name, '/');
  if (parts.size() != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != collection) {
    return std::nullopt;
  }
  return ParsedName{parts[1], parts[3], parts[5]};
}

json Envelope(const char* key, json value) { return {{"v", kStorageVersion}, {key, std::move(value)}}; }

absl::StatusOr<json> OpenEnvelope(absl::string_view text, const char* key) {
  json o = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) {
    return absl::DataLossError(absl::StrCat("a stored ", key, " is not valid JSON"));
  }
  if (o.value("v", 0) != kStorageVersion || !o.contains(key) || !o[key].is_object()) {
    return absl::DataLossError(absl::StrCat("a stored ", key, " has an unknown format (version ", o.value("v", 0),
                                            "); this mlengined reads version ", kStorageVersion));
  }
  return o[key];
}

template <class F>
auto Guarded(absl::string_view what, F parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("a stored ", what, " is unreadable: ", e.what()));
  }
}

}  // namespace

// ---- requests ----

absl::StatusOr<StudyConfig> DecodeCreateStudyRequest(const json& body) {
  auto violations = CheckBody(body, "GoogleCloudMlV1__Study", {"name", "state", "createTime", "inactiveReason"});
  const json* config = violations.empty() ? Obj(body, "studyConfig") : nullptr;
  if (violations.empty() && config == nullptr) {
    violations.push_back({"studyConfig", "studyConfig is required: the metrics and parameters of the study"});
  }
  if (!violations.empty()) return Invalid(violations);
  return DecodeStudyConfig(*config);
}

absl::StatusOr<CreateTrialRequest> DecodeCreateTrialRequest(const json& body) {
  auto violations = CheckBody(body, "GoogleCloudMlV1__Trial",
                              {"name", "clientId", "startTime", "endTime", "trialInfeasible", "infeasibleReason"});
  if (!violations.empty()) return Invalid(violations);
  if (const json* params = Obj(body, "parameters")) {
    for (size_t i = 0; i < params->size(); ++i) {
      const json& p = (*params)[i];
      const std::string at = absl::StrCat("parameters[", i, "]");
      if (p.is_null()) {
        violations.push_back({at, "a parameter is required here"});
        continue;
      }
      if (Str(p, "parameter").empty()) violations.push_back({at + ".parameter", "parameter is required: its name"});
      if (!DecodeValue(p)) {
        violations.push_back({at, "set exactly one of floatValue (DOUBLE, DISCRETE), intValue (INTEGER) and "
                                  "stringValue (CATEGORICAL)"});
      }
    }
  }
  if (const json* ms = Obj(body, "measurements")) {
    for (size_t i = 0; i < ms->size(); ++i) {
      if (!(*ms)[i].is_null()) CheckMeasurement((*ms)[i], absl::StrCat("measurements[", i, "]"), &violations);
    }
  }
  if (const json* f = Obj(body, "finalMeasurement")) CheckMeasurement(*f, "finalMeasurement", &violations);
  const std::string state = Str(body, "state");
  if (state == "STOPPING") {
    violations.push_back({"state", "a trial cannot be created STOPPING; use REQUESTED, ACTIVE or COMPLETED"});
  }
  if (!violations.empty()) return Invalid(violations);
  StudyTrial t = DecodeTrialFields(body);
  CreateTrialRequest request;
  request.parameters = std::move(t.parameters);
  request.state = ValueOf(kTrialStates, state);
  request.measurements = std::move(t.measurements);
  request.final_measurement = std::move(t.final_measurement);
  return request;
}

absl::StatusOr<MeasurementRequest> DecodeAddTrialMeasurementRequest(const json& body) {
  auto violations = CheckBody(body, "GoogleCloudMlV1__AddTrialMeasurementRequest");
  const json* m = violations.empty() ? Obj(body, "measurement") : nullptr;
  if (violations.empty() && m == nullptr) {
    violations.push_back({"measurement", "measurement is required: the step and the metrics measured"});
  }
  if (m != nullptr) CheckMeasurement(*m, "measurement", &violations);
  if (!violations.empty()) return Invalid(violations);
  return MeasurementRequest{DecodeMeasurement(*m), Obj(*m, "elapsedTime") != nullptr};
}

absl::StatusOr<CompleteTrialRequest> DecodeCompleteTrialRequest(const json& body) {
  auto violations = CheckBody(body, "GoogleCloudMlV1__CompleteTrialRequest");
  if (violations.empty()) {
    if (const json* f = Obj(body, "finalMeasurement")) CheckMeasurement(*f, "finalMeasurement", &violations);
  }
  if (!violations.empty()) return Invalid(violations);
  CompleteTrialRequest request;
  if (const json* f = Obj(body, "finalMeasurement")) request.final_measurement = DecodeMeasurement(*f);
  request.trial_infeasible = body.value("trialInfeasible", false);
  request.infeasible_reason = Str(body, "infeasibleReason");
  return request;
}

absl::StatusOr<SuggestTrialsRequest> DecodeSuggestTrialsRequest(const json& body) {
  auto violations = CheckBody(body, "GoogleCloudMlV1__SuggestTrialsRequest");
  if (!violations.empty()) return Invalid(violations);
  SuggestTrialsRequest request;
  request.suggestion_count = static_cast<int32_t>(Int64(body, "suggestionCount").value_or(0));
  request.client_id = Str(body, "clientId");
  return request;
}

// ---- responses ----

json EncodeStudy(const Study& study) {
  json o = {{"name", study.Name()},
            {"studyConfig", EncodeStudyConfig(study.config)},
            {"state", NameOf(kStudyStates, study.state)},
            {"createTime", common::FormatRfc3339(study.create_time)}};
  if (!study.inactive_reason.empty()) o["inactiveReason"] = study.inactive_reason;
  return o;
}

json EncodeListStudiesResponse(const std::vector<Study>& studies) {
  json o = json::object();
  if (studies.empty()) return o;
  json list = json::array();
  for (const auto& s : studies) list.push_back(EncodeStudy(s));
  o["studies"] = list;
  return o;
}

json EncodeTrial(const StudyTrial& t) {
  json o = {{"name", t.Name()}, {"state", NameOf(kTrialStates, t.state)}};
  json params = json::array();
  for (const auto& p : t.parameters) params.push_back(EncodeTrialParameter(p));
  o["parameters"] = params;
  if (!t.measurements.empty()) {
    json ms = json::array();
    for (const auto& m : t.measurements) ms.push_back(EncodeMeasurement(m));
    o["measurements"] = ms;
  }
  if (t.final_measurement) o["finalMeasurement"] = EncodeMeasurement(*t.final_measurement);
  if (!t.client_id.empty()) o["clientId"] = t.client_id;
  if (t.infeasible) o["trialInfeasible"] = true;
  if (!t.infeasible_reason.empty()) o["infeasibleReason"] = t.infeasible_reason;
  if (t.start_time) o["startTime"] = common::FormatRfc3339(*t.start_time);
  if (t.end_time) o["endTime"] = common::FormatRfc3339(*t.end_time);
  return o;
}

json EncodeListTrialsResponse(const std::vector<StudyTrial>& trials) { return TrialList("trials", trials); }
json EncodeListOptimalTrialsResponse(const std::vector<StudyTrial>& trials) { return TrialList("trials", trials); }

json EncodeOperation(const StudyOperation& op) {
  json o = {{"name", op.Name()}, {"done", op.done}};
  json metadata = json::object();
  json response = json::object();
  if (op.kind == OperationKind::kSuggestTrials) {
    metadata = {{"@type", absl::StrCat(kTypePrefix, kSuggestMetadata)},
                {"study", op.study},
                {"createTime", common::FormatRfc3339(op.create_time)},
                {"suggestionCount", op.suggestion_count}};
    if (!op.client_id.empty()) metadata["clientId"] = op.client_id;
    json trials = json::array();
    for (const auto& t : op.trials) trials.push_back(EncodeTrial(t));
    response = {{"@type", absl::StrCat(kTypePrefix, kSuggestResponse)},
                {"trials", trials},
                {"studyState", NameOf(kStudyStates, op.study_state)},
                {"startTime", common::FormatRfc3339(op.start_time)},
                {"endTime", common::FormatRfc3339(op.end_time)}};
  } else {
    metadata = {{"@type", absl::StrCat(kTypePrefix, kStoppingMetadata)},
                {"study", op.study},
                {"trial", op.trial},
                {"createTime", common::FormatRfc3339(op.create_time)}};
    response = {{"@type", absl::StrCat(kTypePrefix, kStoppingResponse)},
                {"shouldStop", op.should_stop},
                {"startTime", common::FormatRfc3339(op.start_time)},
                {"endTime", common::FormatRfc3339(op.end_time)}};
  }
  o["metadata"] = metadata;
  if (op.done) o["response"] = response;
  return o;
}

json EncodeLocation(const Location& location) {
  json capability = {{"type", "TRAINING"}};
  if (!location.accelerators.empty()) capability["availableAccelerators"] = location.accelerators;
  return {{"name", location.Name()}, {"capabilities", json::array({capability})}};
}

json EncodeListLocationsResponse(const std::vector<Location>& locations, const std::string& next_page_token) {
  json o = json::object();
  if (!locations.empty()) {
    json list = json::array();
    for (const auto& l : locations) list.push_back(EncodeLocation(l));
    o["locations"] = list;
  }
  if (!next_page_token.empty()) o["nextPageToken"] = next_page_token;
  return o;
}

// ---- storage ----

std::string SerializeStudyForStorage(const Study& study, int64_t next_trial_id) {
  json o = Envelope("study", EncodeStudy(study));
  o["nextTrialId"] = std::to_string(next_trial_id);
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<StoredStudy> ParseStoredStudy(absl::string_view text) {
  return Guarded("study", [&]() -> absl::StatusOr<StoredStudy> {
    auto o = OpenEnvelope(text, "study");
    if (!o.ok()) return o.status();
    auto name = ParseName(Str(*o, "name"), "studies");
    if (!name) return absl::DataLossError(absl::StrCat("a stored study has a bad name: ", Str(*o, "name")));
    StoredStudy stored;
    Study& s = stored.study;
    s.project = name->project;
    s.location = name->location;
    s.study_id = name->id;
    if (const json* c = Obj(*o, "studyConfig")) s.config = DecodeStudyConfig(*c);
    s.state = ValueOf(kStudyStates, Str(*o, "state")).value_or(StudyState::kActive);
    s.inactive_reason = Str(*o, "inactiveReason");
    s.create_time = Time(*o, "createTime").value_or(absl::UnixEpoch());
    json whole = json::parse(text);
    stored.next_trial_id = Int64(whole, "nextTrialId").value_or(1);
    return stored;
  });
}

std::string SerializeTrialForStorage(const StudyTrial& trial) {
  return Envelope("trial", EncodeTrial(trial)).dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<StudyTrial> ParseStoredTrial(absl::string_view text) {
  return Guarded("trial", [&]() -> absl::StatusOr<StudyTrial> {
    auto o = OpenEnvelope(text, "trial");
    if (!o.ok()) return o.status();
    const std::string name = Str(*o, "name");
    const size_t cut = name.rfind("/trials/");
    int64_t id = 0;
    if (cut == std::string::npos || !absl::SimpleAtoi(name.substr(cut + 8), &id)) {
      return absl::DataLossError(absl::StrCat("a stored trial has a bad name: ", name));
    }
    StudyTrial t = DecodeTrialFields(*o);
    t.study = name.substr(0, cut);
    t.id = id;
    return t;
  });
}

std::string SerializeOperationForStorage(const StudyOperation& operation) {
  return Envelope("operation", EncodeOperation(operation)).dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<StudyOperation> ParseStoredOperation(absl::string_view text) {
  return Guarded("operation", [&]() -> absl::StatusOr<StudyOperation> {
    auto o = OpenEnvelope(text, "operation");
    if (!o.ok()) return o.status();
    auto name = ParseName(Str(*o, "name"), "operations");
    if (!name) return absl::DataLossError(absl::StrCat("a stored operation has a bad name: ", Str(*o, "name")));
    StudyOperation op;
    op.project = name->project;
    op.location = name->location;
    op.id = name->id;
    op.done = o->value("done", false);
    const json empty = json::object();
    const json& metadata = Obj(*o, "metadata") ? (*o)["metadata"] : empty;
    const json& response = Obj(*o, "response") ? (*o)["response"] : empty;
    op.kind = Str(metadata, "@type") == absl::StrCat(kTypePrefix, kStoppingMetadata)
                  ? OperationKind::kCheckEarlyStoppingState
                  : OperationKind::kSuggestTrials;
    op.study = Str(metadata, "study");
    op.create_time = Time(metadata, "createTime").value_or(absl::UnixEpoch());
    op.start_time = Time(response, "startTime").value_or(op.create_time);
    op.end_time = Time(response, "endTime").value_or(op.create_time);
    op.client_id = Str(metadata, "clientId");
    op.suggestion_count = static_cast<int32_t>(Int64(metadata, "suggestionCount").value_or(0));
    if (const json* trials = Obj(response, "trials")) {
      for (const auto& t : *trials) {
        StudyTrial trial = DecodeTrialFields(t);
        const std::string tname = Str(t, "name");
        const size_t cut = tname.rfind("/trials/");
        if (cut != std::string::npos) {
          trial.study = tname.substr(0, cut);
          if (!absl::SimpleAtoi(tname.substr(cut + 8), &trial.id)) trial.id = 0;
        }
        op.trials.push_back(std::move(trial));
      }
    }
    op.study_state = ValueOf(kStudyStates, Str(response, "studyState")).value_or(StudyState::kActive);
    op.trial = Str(metadata, "trial");
    op.should_stop = response.value("shouldStop", false);
    return op;
  });
}

}  // namespace mle::codec
