// StudyService over a real SqliteStore and a fake clock: the StudyConfig
// rules as a table of refused configurations (each with the field it names),
// trials checked against the config, the trial state machine (measurements,
// complete, stop), suggestions (a client's pending trials first, grid
// exhaustion), median early stopping, the Pareto front, tuning jobs' studies
// read-only through JobStudies, and everything surviving a reopen with no
// trial id reused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <future>

#include "codec/discovery.h"
#include "codec/study_codec.h"
#include "common/clock.h"
#include "common/status.h"
#include "db/store.h"
#include "service/study_service.h"

namespace mle::service {
namespace {

namespace fs = std::filesystem;
using tuning::Goal;
using tuning::ParamType;
using tuning::ParameterConfig;
using tuning::Scale;
using tuning::StudyConfig;
using tuning::StudyTrial;
using tuning::TrialMeasurement;
using tuning::TrialStatus;
using ::testing::HasSubstr;

template <class T>
T Wait(const std::function<void(std::function<void(T)>)>& call) {
  std::promise<T> p;
  call([&p](T v) { p.set_value(std::move(v)); });
  return p.get_future().get();
}

ParameterConfig Double(const std::string& name, double min, double max) {
  ParameterConfig p;
  p.parameter = name;
  p.type = ParamType::kDouble;
  p.double_value_spec = ParameterConfig::DoubleRange{min, max};
  return p;
}
ParameterConfig Integer(const std::string& name, int64_t min, int64_t max) {
  ParameterConfig p;
  p.parameter = name;
  p.type = ParamType::kInteger;
  p.integer_value_spec = ParameterConfig::IntRange{min, max};
  return p;
}
ParameterConfig Categorical(const std::string& name, std::vector<std::string> values) {
  ParameterConfig p;
  p.parameter = name;
  p.type = ParamType::kCategorical;
  p.categorical_values = std::move(values);
  return p;
}
ParameterConfig Discrete(const std::string& name, std::vector<double> values) {
  ParameterConfig p;
  p.parameter = name;
  p.type = ParamType::kDiscrete;
  p.discrete_values = std::move(values);
  return p;
}

StudyConfig BaseConfig() {
  StudyConfig c;
  c.metrics = {{"accuracy", Goal::kMaximize}};
  c.parameters = {Double("learning_rate", 0.001, 0.1), Integer("layers", 1, 4)};
  return c;
}

TrialMeasurement Point(int64_t step, std::vector<tuning::TrialMetric> metrics) {
  TrialMeasurement m;
  m.step_count = step;
  m.metrics = std::move(metrics);
  return m;
}

// ---- StudyConfig's rules, as data ----

struct ConfigCase {
  const char* name;
  std::function<void(StudyConfig&)> change;
  const char* field;  // the violation's field ("" when the config is valid)
  const char* says;   // part of its description
};

const ConfigCase kConfigCases[] = {
    {"valid", [](StudyConfig&) {}, "", ""},
    {"no metrics", [](StudyConfig& c) { c.metrics.clear(); }, "studyConfig.metrics", "at least one metric"},
    {"metric without a name", [](StudyConfig& c) { c.metrics[0].metric = ""; }, "studyConfig.metrics[0].metric",
     "required"},
    {"repeated metric", [](StudyConfig& c) { c.metrics.push_back({"accuracy", Goal::kMinimize}); },
     "studyConfig.metrics[1].metric", "unique"},
    {"no parameters", [](StudyConfig& c) { c.parameters.clear(); }, "studyConfig.parameters",
     "at least one parameter"},
    {"parameter without a name", [](StudyConfig& c) { c.parameters[0].parameter = ""; },
     "studyConfig.parameters[0].parameter", "required"},
    {"repeated parameter", [](StudyConfig& c) { c.parameters[1].parameter = "learning_rate"; },
     "studyConfig.parameters[1].parameter", "unique"},
    {"type unspecified", [](StudyConfig& c) { c.parameters[0].type.reset(); }, "studyConfig.parameters[0].type",
     "type is required"},
    {"double min > max", [](StudyConfig& c) { c.parameters[0] = Double("learning_rate", 0.5, 0.1); },
     "studyConfig.parameters[0].doubleValueSpec.maxValue", "greater than minValue"},
    {"double min == max", [](StudyConfig& c) { c.parameters[0] = Double("learning_rate", 0.5, 0.5); },
     "studyConfig.parameters[0].doubleValueSpec.maxValue", "greater than minValue"},
    {"double without max", [](StudyConfig& c) { c.parameters[0].double_value_spec->max.reset(); },
     "studyConfig.parameters[0].doubleValueSpec.maxValue", "required"},
    {"double without its spec", [](StudyConfig& c) { c.parameters[0].double_value_spec.reset(); },
     "studyConfig.parameters[0].doubleValueSpec", "required for a DOUBLE"},
    {"double with an integer spec",
     [](StudyConfig& c) { c.parameters[0].integer_value_spec = ParameterConfig::IntRange{1, 2}; },
     "studyConfig.parameters[0].integerValueSpec", "not allowed for a DOUBLE"},
    {"integer min > max", [](StudyConfig& c) { c.parameters[1] = Integer("layers", 5, 2); },
     "studyConfig.parameters[1].integerValueSpec.maxValue", "greater than minValue"},
    {"log scale over zero",
     [](StudyConfig& c) {
       c.parameters[0] = Double("learning_rate", 0, 1);
       c.parameters[0].scale = Scale::kLog;
     },
     "studyConfig.parameters[0].doubleValueSpec.minValue", "greater than 0"},
    {"reverse log over negative integers",
     [](StudyConfig& c) {
       c.parameters[1] = Integer("layers", -2, 3);
       c.parameters[1].scale = Scale::kReverseLog;
     },
     "studyConfig.parameters[1].integerValueSpec.minValue", "greater than 0"},
    {"unsorted discrete", [](StudyConfig& c) { c.parameters.push_back(Discrete("batch", {32, 16, 64})); },
     "studyConfig.parameters[2].discreteValueSpec.values[1]", "strictly increasing"},
    {"repeated discrete", [](StudyConfig& c) { c.parameters.push_back(Discrete("batch", {16, 16})); },
     "studyConfig.parameters[2].discreteValueSpec.values[1]", "strictly increasing"},
    {"empty discrete", [](StudyConfig& c) { c.parameters.push_back(Discrete("batch", {})); },
     "studyConfig.parameters[2].discreteValueSpec.values", "at least one"},
    {"log discrete over zero",
     [](StudyConfig& c) {
       c.parameters.push_back(Discrete("batch", {0, 16}));
       c.parameters[2].scale = Scale::kLog;
     },
     "studyConfig.parameters[2].discreteValueSpec.values[0]", "greater than 0"},
    {"repeated category", [](StudyConfig& c) { c.parameters.push_back(Categorical("opt", {"sgd", "adam", "sgd"})); },
     "studyConfig.parameters[2].categoricalValueSpec.values[2]", "unique"},
    {"empty categories", [](StudyConfig& c) { c.parameters.push_back(Categorical("opt", {})); },
     "studyConfig.parameters[2].categoricalValueSpec.values", "at least one"},
    {"scaled category",
     [](StudyConfig& c) {
       c.parameters.push_back(Categorical("opt", {"sgd"}));
       c.parameters[2].scale = Scale::kLinear;
     },
     "studyConfig.parameters[2].scaleType", "not allowed"},
    {"grid over a double", [](StudyConfig& c) { c.algorithm = tuning::StudyAlgorithm::kGridSearch; },
     "studyConfig.parameters[0].type", "GRID_SEARCH"},
    {"grid over integers, categories and points",
     [](StudyConfig& c) {
       c.algorithm = tuning::StudyAlgorithm::kGridSearch;
       c.parameters = {Integer("layers", 1, 3), Categorical("opt", {"a", "b"}), Discrete("batch", {1, 2})};
     },
     "", ""},
    {"child of a category, valid",
     [](StudyConfig& c) {
       ParameterConfig opt = Categorical("opt", {"sgd", "adam"});
       ParameterConfig momentum = Double("momentum", 0, 1);
       momentum.parent_categorical_values = std::vector<std::string>{"sgd"};
       opt.children.push_back(momentum);
       c.parameters.push_back(opt);
     },
     "", ""},
    {"child's parent value not a category",
     [](StudyConfig& c) {
       ParameterConfig opt = Categorical("opt", {"sgd", "adam"});
       ParameterConfig momentum = Double("momentum", 0, 1);
       momentum.parent_categorical_values = std::vector<std::string>{"rmsprop"};
       opt.children.push_back(momentum);
       c.parameters.push_back(opt);
     },
     "studyConfig.parameters[2].childParameterSpecs[0].parentCategoricalValues.values[0]", "not a category"},
    {"child's parent values of the wrong kind",
     [](StudyConfig& c) {
       ParameterConfig opt = Categorical("opt", {"sgd"});
       ParameterConfig momentum = Double("momentum", 0, 1);
       momentum.parent_int_values = std::vector<int64_t>{1};
       opt.children.push_back(momentum);
       c.parameters.push_back(opt);
     },
     "studyConfig.parameters[2].childParameterSpecs[0].parentIntValues", "does not fit"},
    {"child of an integer outside its range",
     [](StudyConfig& c) {
       ParameterConfig width = Integer("width", 8, 64);
       width.parent_int_values = std::vector<int64_t>{9};
       c.parameters[1].children.push_back(width);
     },
     "studyConfig.parameters[1].childParameterSpecs[0].parentIntValues.values[0]", "outside"},
    {"child of a discrete parameter at a missing point",
     [](StudyConfig& c) {
       ParameterConfig batch = Discrete("batch", {16, 32});
       ParameterConfig lr = Double("warmup", 0, 1);
       lr.parent_discrete_values = std::vector<double>{64};
       batch.children.push_back(lr);
       c.parameters.push_back(batch);
     },
     "studyConfig.parameters[2].childParameterSpecs[0].parentDiscreteValues.values[0]", "not a feasible point"},
    {"children of a double",
     [](StudyConfig& c) { c.parameters[0].children.push_back(Double("x", 0, 1)); },
     "studyConfig.parameters[0].childParameterSpecs", "cannot have child parameters"},
    {"parent values at the top level",
     [](StudyConfig& c) { c.parameters[0].parent_categorical_values = std::vector<std::string>{"a"}; },
     "studyConfig.parameters[0].parentCategoricalValues", "only for childParameterSpecs"},
};

class StudyConfigRules : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(StudyConfigRules, NamesTheField) {
  const ConfigCase& c = GetParam();
  StudyConfig config = BaseConfig();
  c.change(config);
  auto v = tuning::ValidateStudyConfig(config);
  if (std::string(c.field).empty()) {
    EXPECT_TRUE(v.empty()) << v.front().field << ": " << v.front().description;
    return;
  }
  ASSERT_FALSE(v.empty()) << c.name;
  bool found = false;
  for (const auto& x : v) found |= x.field == c.field && x.description.find(c.says) != std::string::npos;
  EXPECT_TRUE(found) << c.name << ": got " << v.front().field << ": " << v.front().description;
}

INSTANTIATE_TEST_SUITE_P(Table, StudyConfigRules, ::testing::ValuesIn(kConfigCases),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(StudySpecConversion, RoundTripsWhatTheOptimizersUse) {
  StudyConfig config = BaseConfig();
  config.algorithm = tuning::StudyAlgorithm::kRandomSearch;
  ParameterConfig opt = Categorical("opt", {"sgd", "adam"});
  ParameterConfig momentum = Double("momentum", 0, 1);
  momentum.parent_categorical_values = std::vector<std::string>{"sgd"};
  opt.children.push_back(momentum);
  config.parameters.push_back(opt);
  const tuning::StudySpec spec = tuning::ToSpec(config);
  ASSERT_EQ(spec.params.size(), 3u);
  EXPECT_EQ(spec.algorithm, tuning::Algorithm::kRandom);
  EXPECT_EQ(spec.params[1].type, ParamType::kInteger);
  EXPECT_EQ(spec.params[1].max, 4);
  ASSERT_EQ(spec.params[2].children.size(), 1u);
  EXPECT_EQ(spec.params[2].children[0].parent_categories, std::vector<std::string>{"sgd"});
  const StudyConfig back = tuning::FromSpec(spec);
  EXPECT_TRUE(tuning::ValidateStudyConfig(back).empty());
  EXPECT_EQ(back.parameters[1].integer_value_spec->max, 4);
  EXPECT_EQ(*back.parameters[2].children[0].parent_categorical_values, std::vector<std::string>{"sgd"});
}

// ---- a tuning job's study, as the job side would report it ----

class FakeJobStudies final : public JobStudies {
 public:
  std::optional<tuning::Study> Find(const std::string& project, const std::string& id) const override {
    for (const auto& s : studies) {
      if (s.project == project && s.study_id == id) return s;
    }
    return std::nullopt;
  }
  std::vector<tuning::Study> List(const std::string& project, const std::string& location) const override {
    std::vector<tuning::Study> out;
    for (const auto& s : studies) {
      if (s.project == project && s.location == location) out.push_back(s);
    }
    return out;
  }
  std::vector<StudyTrial> Trials(const std::string& project, const std::string& id) const override {
    auto s = Find(project, id);
    return s ? trials : std::vector<StudyTrial>{};
  }
  std::vector<tuning::Study> studies;
  std::vector<StudyTrial> trials;
};

class StudyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_study_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Open();
  }
  void TearDown() override {
    studies_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void Open() {
    studies_.reset();
    store_.reset();
    auto store = db::OpenSqliteStore({(dir_ / "mlengine.db").string(), true});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    studies_ = std::make_unique<StudyService>(
        *store_, clock_, std::vector<std::string>{"us-central1", "europe-west4", "us-east1"},
        std::vector<std::string>{"us-central1", "europe-west4"});
    studies_->AttachJobStudies(&jobs_);
    ASSERT_TRUE(studies_->Recover().ok());
  }

  absl::StatusOr<tuning::Study> Create(const std::string& id, StudyConfig config = BaseConfig(),
                                       const std::string& location = "us-central1") {
    return Wait<absl::StatusOr<tuning::Study>>(
        [&](auto done) { studies_->CreateStudy("p", location, id, config, done); });
  }
  StudyService::StudyRef Ref(const std::string& id) { return {"p", "us-central1", id}; }
  absl::StatusOr<StudyTrial> AddTrial(const std::string& study, std::vector<tuning::TrialParameter> params,
                                      std::optional<TrialStatus> state = std::nullopt,
                                      std::optional<TrialMeasurement> final_measurement = std::nullopt) {
    StudyService::NewTrial t{std::move(params), state, {}, std::move(final_measurement)};
    return Wait<absl::StatusOr<StudyTrial>>([&](auto done) { studies_->CreateTrial(Ref(study), t, done); });
  }
  absl::StatusOr<StudyTrial> Measure(const std::string& study, int64_t trial, TrialMeasurement m) {
    return Wait<absl::StatusOr<StudyTrial>>([&](auto done) {
      studies_->AddMeasurement(Ref(study), std::to_string(trial), m, false, done);
    });
  }
  absl::StatusOr<StudyTrial> Complete(const std::string& study, int64_t trial, StudyService::Completion c) {
    return Wait<absl::StatusOr<StudyTrial>>(
        [&](auto done) { studies_->CompleteTrial(Ref(study), std::to_string(trial), c, done); });
  }
  absl::StatusOr<tuning::StudyOperation> Suggest(const std::string& study, int count, const std::string& client) {
    return Wait<absl::StatusOr<tuning::StudyOperation>>(
        [&](auto done) { studies_->SuggestTrials(Ref(study), count, client, done); });
  }
  absl::Status DeleteTrial(const std::string& study, int64_t trial) {
    return Wait<absl::Status>(
        [&](auto done) { studies_->DeleteTrial(Ref(study), std::to_string(trial), done); });
  }
  static std::vector<tuning::TrialParameter> Params(double lr, int64_t layers) {
    return {{"learning_rate", lr}, {"layers", layers}};
  }
  static std::vector<int64_t> Ids(const std::vector<StudyTrial>& trials) {
    std::vector<int64_t> ids;
    for (const auto& t : trials) ids.push_back(t.id);
    return ids;
  }

  fs::path dir_;
  common::FakeClock clock_;
  FakeJobStudies jobs_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<StudyService> studies_;
};

TEST_F(StudyServiceTest, CreateGetListDelete) {
  auto s = Create("s1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->Name(), "projects/p/locations/us-central1/studies/s1");
  EXPECT_EQ(s->state, tuning::StudyState::kActive);
  EXPECT_EQ(s->create_time, clock_.Now());
  EXPECT_EQ(Create("s1").status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(Create("s2").ok());
  ASSERT_TRUE(Create("s3", BaseConfig(), "us-east1").ok());
  auto listed = studies_->ListStudies("p", "us-central1");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].study_id, "s1");
  EXPECT_EQ(studies_->GetStudy("p", "us-east1", "s1").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(AddTrial("s1", Params(0.01, 2)).ok());
  ASSERT_TRUE(Wait<absl::Status>([&](auto done) { studies_->DeleteStudy("p", "us-central1", "s1", done); }).ok());
  EXPECT_EQ(studies_->GetStudy("p", "us-central1", "s1").status().code(), absl::StatusCode::kNotFound);
  Open();  // its trials went with it
  EXPECT_EQ(studies_->GetStudy("p", "us-central1", "s1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(studies_->GetStudy("p", "us-central1", "s2").ok());
}

TEST_F(StudyServiceTest, CreateRefusesBadIdsLocationsAndConfigsWithTheirFields) {
  auto bad_id = Create("9lives");
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(common::GetFieldViolations(bad_id.status()).front().field, "studyId");
  EXPECT_EQ(common::GetFieldViolations(Create("").status()).front().field, "studyId");
  auto bad_location = Create("s", BaseConfig(), "mars-north1");
  EXPECT_EQ(common::GetFieldViolations(bad_location.status()).front().field, "parent");
  StudyConfig empty = BaseConfig();
  empty.parameters.clear();
  EXPECT_EQ(common::GetFieldViolations(Create("s", empty).status()).front().field, "studyConfig.parameters");
}

TEST_F(StudyServiceTest, TrialsAreCheckedAgainstTheConfig) {
  ASSERT_TRUE(Create("s").ok());
  struct Row {
    std::vector<tuning::TrialParameter> params;
    const char* field;
    const char* says;
  };
  const Row rows[] = {
      {{{"learning_rate", 0.01}, {"layers", int64_t{2}}, {"dropout", 0.5}}, "parameters[2].parameter",
       "unknown parameter \"dropout\""},
      {{{"learning_rate", 0.5}, {"layers", int64_t{2}}}, "parameters[0]", "outside"},
      {{{"learning_rate", 0.01}, {"layers", 2.0}}, "parameters[1]", "intValue"},
      {{{"learning_rate", 0.01}}, "parameters", "layers is missing"},
      {{{"learning_rate", 0.01}, {"layers", int64_t{2}}, {"layers", int64_t{3}}}, "parameters[2].parameter",
       "twice"},
  };
  for (const Row& r : rows) {
    auto t = AddTrial("s", r.params);
    ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << r.field;
    auto v = common::GetFieldViolations(t.status());
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v.front().field, r.field);
    EXPECT_THAT(v.front().description, HasSubstr(r.says));
  }
  auto ok = AddTrial("s", Params(0.01, 2));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->id, 1);
  EXPECT_EQ(ok->state, TrialStatus::kActive);
  EXPECT_EQ(ok->Name(), "projects/p/locations/us-central1/studies/s/trials/1");
}

TEST_F(StudyServiceTest, ConditionalParametersFollowTheirParent) {
  StudyConfig config = BaseConfig();
  ParameterConfig opt = Categorical("opt", {"sgd", "adam"});
  ParameterConfig momentum = Double("momentum", 0, 1);
  momentum.parent_categorical_values = std::vector<std::string>{"sgd"};
  opt.children.push_back(momentum);
  config.parameters.push_back(opt);
  ASSERT_TRUE(Create("c", config).ok());
  auto params = Params(0.01, 2);
  params.push_back({"opt", std::string("sgd")});
  EXPECT_THAT(common::GetFieldViolations(AddTrial("c", params).status()).front().description,
              HasSubstr("momentum is missing"));
  params.push_back({"momentum", 0.9});
  EXPECT_TRUE(AddTrial("c", params).ok());
  params[2].value = std::string("adam");
  EXPECT_THAT(common::GetFieldViolations(AddTrial("c", params).status()).front().description,
              HasSubstr("does not apply"));
}

TEST_F(StudyServiceTest, TrialLifecycle) {
  ASSERT_TRUE(Create("s").ok());
  ASSERT_TRUE(AddTrial("s", Params(0.01, 2)).ok());
  clock_.Advance(absl::Seconds(5));
  auto m = Measure("s", 1, Point(10, {{"accuracy", 0.5}}));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->measurements.size(), 1u);
  EXPECT_EQ(m->measurements[0].elapsed_time, absl::Seconds(5));  // since the trial started
  m = Measure("s", 1, Point(5, {{"accuracy", 0.4}}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->measurements[0].step_count, 5);  // kept in step order

  // Completing without a final measurement takes the latest reported.
  auto done = Complete("s", 1, {});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, TrialStatus::kCompleted);
  ASSERT_TRUE(done->final_measurement.has_value());
  EXPECT_EQ(done->final_measurement->step_count, 10);
  EXPECT_EQ(done->end_time, clock_.Now());
  EXPECT_EQ(Complete("s", 1, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Measure("s", 1, Point(11, {{"accuracy", 0.6}})).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Infeasible: the reason is kept, no final measurement.
  ASSERT_TRUE(AddTrial("s", Params(0.02, 3)).ok());
  auto infeasible = Complete("s", 2, {std::nullopt, true, "diverged"});
  ASSERT_TRUE(infeasible.ok());
  EXPECT_TRUE(infeasible->infeasible);
  EXPECT_EQ(infeasible->infeasible_reason, "diverged");
  EXPECT_FALSE(infeasible->final_measurement.has_value());

  // Nothing to complete with.
  ASSERT_TRUE(AddTrial("s", Params(0.03, 3)).ok());
  EXPECT_EQ(common::GetFieldViolations(Complete("s", 3, {}).status()).front().field, "finalMeasurement");
  EXPECT_EQ(
      common::GetFieldViolations(Complete("s", 3, {Point(1, {{"loss", 1}}), false, ""}).status())
          .front()
          .field,
      "finalMeasurement.metrics");
  EXPECT_EQ(common::GetFieldViolations(Complete("s", 3, {std::nullopt, false, "why"}).status()).front().field,
            "infeasibleReason");

  // Stop: STOPPING (again: unchanged); a completed trial cannot stop.
  auto stop = [&](int64_t id) {
    return Wait<absl::StatusOr<StudyTrial>>(
        [&](auto d) { studies_->StopTrial(Ref("s"), std::to_string(id), d); });
  };
  EXPECT_EQ(stop(3)->state, TrialStatus::kStopping);
  EXPECT_EQ(stop(3)->state, TrialStatus::kStopping);
  EXPECT_EQ(stop(1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Measure("s", 3, Point(1, {{"accuracy", 1}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(studies_->GetTrial(Ref("s"), "99").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(studies_->GetTrial(Ref("s"), "x").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StudyServiceTest, TrialIdsAreNeverReusedAcrossDeletesAndRestarts) {
  ASSERT_TRUE(Create("s").ok());
  ASSERT_TRUE(AddTrial("s", Params(0.01, 1)).ok());
  ASSERT_TRUE(AddTrial("s", Params(0.01, 2)).ok());
  ASSERT_TRUE(DeleteTrial("s", 2).ok());
  EXPECT_EQ(DeleteTrial("s", 2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(AddTrial("s", Params(0.01, 3))->id, 3);
  ASSERT_TRUE(DeleteTrial("s", 3).ok());
  Open();
  EXPECT_EQ(Ids(*studies_->ListTrials(Ref("s"))), (std::vector<int64_t>{1}));
  EXPECT_EQ(AddTrial("s", Params(0.01, 4))->id, 4);
  auto op = Suggest("s", 2, "c");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(Ids(op->trials), (std::vector<int64_t>{5, 6}));
  Open();
  EXPECT_EQ(Ids(*studies_->ListTrials(Ref("s"))), (std::vector<int64_t>{1, 4, 5, 6}));
  auto again = studies_->GetOperation("p", "us-central1", op->id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Ids(again->trials), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(AddTrial("s", Params(0.01, 4))->id, 7);
}

TEST_F(StudyServiceTest, SuggestGivesAClientItsPendingTrialsFirst) {
  ASSERT_TRUE(Create("s").ok());
  auto a = Suggest("s", 2, "worker-a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->done);
  EXPECT_EQ(a->Name(), "projects/p/locations/us-central1/operations/" + a->id);
  ASSERT_EQ(a->trials.size(), 2u);
  for (const auto& t : a->trials) {
    EXPECT_EQ(t.client_id, "worker-a");
    EXPECT_EQ(t.state, TrialStatus::kActive);
    EXPECT_TRUE(tuning::CheckTrialParameters(BaseConfig(), t.parameters).empty());
  }
  auto again = Suggest("s", 2, "worker-a");
  EXPECT_EQ(Ids(again->trials), Ids(a->trials));
  auto b = Suggest("s", 1, "worker-b");
  EXPECT_EQ(Ids(b->trials), (std::vector<int64_t>{3}));
  // One of a's is done: a gets the other back and one new.
  ASSERT_TRUE(Complete("s", 1, {Point(1, {{"accuracy", 0.7}}), false, ""}).ok());
  EXPECT_EQ(Ids(Suggest("s", 2, "worker-a")->trials), (std::vector<int64_t>{2, 4}));
  // A REQUESTED trial is handed out before new ones.
  ASSERT_TRUE(AddTrial("s", Params(0.05, 1), TrialStatus::kRequested).ok());
  auto c = Suggest("s", 1, "worker-c");
  ASSERT_EQ(Ids(c->trials), (std::vector<int64_t>{5}));
  EXPECT_EQ(c->trials[0].state, TrialStatus::kActive);
  EXPECT_EQ(studies_->GetTrial(Ref("s"), "5")->client_id, "worker-c");
  EXPECT_EQ(Suggest("s", 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StudyServiceTest, GridSearchCompletesTheStudyWhenExhausted) {
  StudyConfig config = BaseConfig();
  config.algorithm = tuning::StudyAlgorithm::kGridSearch;
  config.parameters = {Integer("layers", 1, 2), Categorical("opt", {"sgd", "adam"})};
  ASSERT_TRUE(Create("g", config).ok());
  auto first = Suggest("g", 3, "c1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->trials.size(), 3u);
  EXPECT_EQ(first->study_state, tuning::StudyState::kActive);
  auto second = Suggest("g", 3, "c2");
  EXPECT_EQ(second->trials.size(), 1u);
  EXPECT_EQ(second->study_state, tuning::StudyState::kCompleted);
  EXPECT_EQ(studies_->GetStudy("p", "us-central1", "g")->state, tuning::StudyState::kCompleted);
  EXPECT_TRUE(Suggest("g", 1, "c3")->trials.empty());
}

TEST_F(StudyServiceTest, MedianEarlyStopping) {
  StudyConfig config = BaseConfig();
  config.automated_stopping = tuning::AutomatedStoppingConfig{tuning::StoppingRule::kMedian, false};
  ASSERT_TRUE(Create("m", config).ok());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(AddTrial("m", Params(0.01 * i, 2)).ok());
    ASSERT_TRUE(Measure("m", i, Point(10, {{"accuracy", 0.8 + 0.01 * i}})).ok());
    ASSERT_TRUE(Complete("m", i, {}).ok());
  }
  ASSERT_TRUE(AddTrial("m", Params(0.05, 3)).ok());
  ASSERT_TRUE(Measure("m", 4, Point(10, {{"accuracy", 0.1}})).ok());
  ASSERT_TRUE(AddTrial("m", Params(0.06, 3)).ok());
  ASSERT_TRUE(Measure("m", 5, Point(10, {{"accuracy", 0.99}})).ok());
  auto check = [&](const std::string& study, int64_t id) {
    return Wait<absl::StatusOr<tuning::StudyOperation>>(
        [&](auto d) { studies_->CheckEarlyStoppingState(Ref(study), std::to_string(id), d); });
  };
  auto bad = check("m", 4);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_TRUE(bad->should_stop);
  EXPECT_EQ(bad->trial, "projects/p/locations/us-central1/studies/m/trials/4");
  EXPECT_EQ(studies_->GetTrial(Ref("m"), "4")->state, TrialStatus::kStopping);
  EXPECT_FALSE(check("m", 5)->should_stop);
  EXPECT_EQ(studies_->GetTrial(Ref("m"), "5")->state, TrialStatus::kActive);

  // Without automatedStoppingConfig nothing is ever stopped.
  ASSERT_TRUE(Create("n").ok());
  ASSERT_TRUE(AddTrial("n", Params(0.05, 3)).ok());
  EXPECT_FALSE(check("n", 1)->should_stop);
}

TEST_F(StudyServiceTest, OptimalTrialsAreTheParetoFront) {
  StudyConfig config = BaseConfig();
  config.metrics = {{"accuracy", Goal::kMaximize}, {"latency", Goal::kMinimize}};
  ASSERT_TRUE(Create("o", config).ok());
  const double points[][2] = {{0.9, 30}, {0.8, 10}, {0.7, 20}, {0.95, 50}, {0.5, 5}};
  for (int i = 0; i < 5; ++i) {
    TrialMeasurement m = Point(1, {{"accuracy", points[i][0]}, {"latency", points[i][1]}});
    ASSERT_TRUE(AddTrial("o", Params(0.01, 1), TrialStatus::kCompleted, m).ok());
  }
  ASSERT_TRUE(AddTrial("o", Params(0.01, 1)).ok());  // active: never optimal
  auto optimal = studies_->ListOptimalTrials(Ref("o"));
  ASSERT_TRUE(optimal.ok()) << optimal.status();
  EXPECT_EQ(Ids(*optimal), (std::vector<int64_t>{1, 2, 4, 5}));  // 3 is dominated by 2
}

TEST_F(StudyServiceTest, TuningJobStudiesAreReadOnly) {
  tuning::Study job;
  job.project = "p";
  job.location = "us-central1";
  job.study_id = "tune_1";
  job.config = BaseConfig();
  jobs_.studies.push_back(job);
  StudyTrial t;
  t.study = job.Name();
  t.id = 1;
  t.state = TrialStatus::kCompleted;
  t.parameters = Params(0.01, 2);
  t.final_measurement = Point(5, {{"accuracy", 0.9}});
  jobs_.trials.push_back(t);

  EXPECT_EQ(studies_->GetStudy("p", "us-central1", "tune_1")->study_id, "tune_1");
  EXPECT_EQ(studies_->GetStudy("p", "us-east1", "tune_1").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Create("mine").ok());
  auto listed = studies_->ListStudies("p", "us-central1");
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].study_id, "tune_1");
  EXPECT_EQ(Ids(*studies_->ListTrials(Ref("tune_1"))), (std::vector<int64_t>{1}));
  EXPECT_TRUE(studies_->GetTrial(Ref("tune_1"), "1").ok());
  EXPECT_EQ(Ids(*studies_->ListOptimalTrials(Ref("tune_1"))), (std::vector<int64_t>{1}));

  auto refused = AddTrial("tune_1", Params(0.01, 2));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("belongs to tuning job tune_1"));
  EXPECT_EQ(Suggest("tune_1", 1, "c").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Complete("tune_1", 1, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DeleteTrial("tune_1", 1).code(), absl::StatusCode::kFailedPrecondition);
  // A user study may not take a tuning job's id, in any location.
  EXPECT_EQ(Create("tune_1", BaseConfig(), "us-east1").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(studies_->HasUserStudy("p", "mine"));
  EXPECT_FALSE(studies_->HasUserStudy("p", "tune_1"));
}

TEST_F(StudyServiceTest, OperationsAndLocations) {
  ASSERT_TRUE(Create("s").ok());
  auto op = Suggest("s", 1, "c");
  ASSERT_TRUE(op.ok());
  EXPECT_TRUE(studies_->GetOperation("p", "us-central1", op->id).ok());
  EXPECT_EQ(studies_->GetOperation("p", "us-east1", op->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(studies_->CancelOperation("p", "us-central1", op->id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(studies_->CancelOperation("p", "us-central1", "123").code(), absl::StatusCode::kNotFound);

  auto central = studies_->GetLocation("p", "us-central1");
  ASSERT_TRUE(central.ok());
  EXPECT_THAT(central->accelerators, ::testing::Contains("TPU_V2"));
  EXPECT_THAT(central->accelerators, ::testing::Contains("TPU_V3"));
  EXPECT_THAT(central->accelerators, ::testing::Contains("NVIDIA_TESLA_T4"));
  auto east = studies_->GetLocation("p", "us-east1");
  EXPECT_THAT(east->accelerators, ::testing::Not(::testing::Contains("TPU_V2")));
  EXPECT_THAT(east->accelerators, ::testing::Contains("NVIDIA_TESLA_V100"));
  EXPECT_EQ(studies_->GetLocation("p", "mars").status().code(), absl::StatusCode::kNotFound);
  auto page = studies_->ListLocations("p", 2, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->locations.size(), 2u);
  auto rest = studies_->ListLocations("p", 2, page->next_page_token);
  EXPECT_EQ(rest->locations.size(), 1u);
  EXPECT_TRUE(rest->next_page_token.empty());
}

// What the server emits has only what the contract has, and the stored forms
// read back to the same values.
TEST_F(StudyServiceTest, WireFormsFitTheDiscoveryDocumentAndStoredFormsRoundTrip) {
  StudyConfig config = BaseConfig();
  config.automated_stopping = tuning::AutomatedStoppingConfig{tuning::StoppingRule::kDecayCurve, true};
  ParameterConfig opt = Categorical("opt", {"sgd", "adam"});
  ParameterConfig momentum = Discrete("momentum", {0.5, 0.9});
  momentum.parent_categorical_values = std::vector<std::string>{"sgd"};
  opt.children.push_back(momentum);
  config.parameters.push_back(opt);
  auto study = Create("w", config);
  ASSERT_TRUE(study.ok());
  auto params = Params(0.01, 2);
  params.push_back({"opt", std::string("adam")});
  ASSERT_TRUE(AddTrial("w", params).ok());
  ASSERT_TRUE(Measure("w", 1, Point(3, {{"accuracy", 0.25}})).ok());
  auto trial = Complete("w", 1, {Point(4, {{"accuracy", 0.5}}), false, ""});
  ASSERT_TRUE(trial.ok());
  auto op = Suggest("w", 2, "c");
  ASSERT_TRUE(op.ok());
  auto stop = Wait<absl::StatusOr<tuning::StudyOperation>>(
      [&](auto d) { studies_->CheckEarlyStoppingState(Ref("w"), "2", d); });
  ASSERT_TRUE(stop.ok());

  const auto& schema = codec::DiscoverySchema::Embedded();
  auto fits = [&](const nlohmann::json& value, const char* name) {
    auto v = schema.Check(value, name);
    EXPECT_TRUE(v.empty()) << name << ": " << v.front().field << ": " << v.front().description << "\n" << value;
  };
  fits(codec::EncodeStudy(*study), "GoogleCloudMlV1__Study");
  fits(codec::EncodeTrial(*trial), "GoogleCloudMlV1__Trial");
  fits(codec::EncodeListTrialsResponse(*studies_->ListTrials(Ref("w"))), "GoogleCloudMlV1__ListTrialsResponse");
  fits(codec::EncodeLocation(*studies_->GetLocation("p", "us-central1")), "GoogleCloudMlV1__Location");
  for (const auto* o : {&*op, &*stop}) {
    nlohmann::json encoded = codec::EncodeOperation(*o);
    fits(encoded, "GoogleLongrunning__Operation");
    const bool suggest = o->kind == tuning::OperationKind::kSuggestTrials;
    nlohmann::json metadata = encoded["metadata"], response = encoded["response"];
    metadata.erase("@type");
    response.erase("@type");
    fits(metadata, suggest ? "GoogleCloudMlV1__SuggestTrialsMetadata"
                           : "GoogleCloudMlV1__CheckTrialEarlyStoppingStateMetatdata");
    fits(response, suggest ? "GoogleCloudMlV1__SuggestTrialsResponse"
                           : "GoogleCloudMlV1__CheckTrialEarlyStoppingStateResponse");
    auto back = codec::ParseStoredOperation(codec::SerializeOperationForStorage(*o));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(codec::EncodeOperation(*back), encoded);
  }
  auto stored = codec::ParseStoredStudy(codec::SerializeStudyForStorage(*study, 7));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->next_trial_id, 7);
  EXPECT_EQ(codec::EncodeStudy(stored->study), codec::EncodeStudy(*study));
  auto trial_back = codec::ParseStoredTrial(codec::SerializeTrialForStorage(*trial));
  ASSERT_TRUE(trial_back.ok()) << trial_back.status();
  EXPECT_EQ(codec::EncodeTrial(*trial_back), codec::EncodeTrial(*trial));
  EXPECT_EQ(codec::ParseStoredStudy("{\"v\": 2, \"study\": {}}").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mle::service
