// Table-driven tests of validate::ValidateJob and ValidateLabels.
//
// kAccepted: every configuration of the TPU training guide plus ordinary
// jobs; each must validate clean. kRefused: one row per rule, each a small
// mutation of a valid base job, with the exact field paths expected and a
// substring of each description.
#include "validate/validate.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mle::validate {
namespace {

using model::AcceleratorConfig;
using model::HyperparameterSpec;
using model::Job;
using model::ParameterSpec;
using model::ReplicaConfig;
using model::TrainingInput;

// ---------------------------------------------------------------------------
// Builders.

constexpr char kPackage[] = "gs://my-bucket/tpu_mnist_1/3f2a/official-0.0.0.tar.gz";
constexpr char kPytorch111[] = "gcr.io/cloud-ml-public/training/pytorch-xla.1-11";
constexpr char kMasterImage[] = "gcr.io/my-project/your-master-image-name:your-master-tag-name";
constexpr char kWorkerImage[] = "gcr.io/my-project/your-worker-image-name:your-worker-tag-name";

TrainingInput& T(Job& job) { return *job.training_input; }

// BASIC (scaleTier unset), runtime 2.11 / Python 3.7, us-central1, a package.
Job RuntimeJob(std::string tier = "") {
  Job job;
  job.project = "my-project";
  job.job_id = "my_job_1";
  TrainingInput& t = job.training_input.emplace();
  t.scale_tier = std::move(tier);
  t.region = "us-central1";
  t.runtime_version = "2.11";
  t.python_version = "3.7";
  t.package_uris = {kPackage};
  t.python_module = "trainer.task";
  return job;
}

// CUSTOM with only a master.
Job CustomJob(std::string master) {
  Job job = RuntimeJob("CUSTOM");
  T(job).master_type = std::move(master);
  return job;
}

// CUSTOM with master, workers of one type.
Job CustomJob(std::string master, std::string worker, int64_t workers) {
  Job job = CustomJob(std::move(master));
  T(job).worker_type = std::move(worker);
  T(job).worker_count = workers;
  return job;
}

ReplicaConfig Accel(std::string type, int64_t count) {
  ReplicaConfig c;
  c.accelerator_config = AcceleratorConfig{count, std::move(type)};
  return c;
}

ReplicaConfig Image(std::string uri) {
  ReplicaConfig c;
  c.image_uri = std::move(uri);
  return c;
}

// CUSTOM master + one cloud_tpu worker, optionally with an acceleratorConfig.
Job TpuJob(std::string master, std::string accel_type = "", int64_t accel_count = 8) {
  Job job = CustomJob(std::move(master), "cloud_tpu", 1);
  if (!accel_type.empty()) T(job).worker_config = Accel(std::move(accel_type), accel_count);
  return job;
}

// A custom-container job: masterConfig.imageUri, no runtime, no package.
Job ContainerJob(std::string tier = "", std::string image = kMasterImage) {
  Job job = RuntimeJob(std::move(tier));
  TrainingInput& t = T(job);
  t.runtime_version.clear();
  t.python_version.clear();
  t.package_uris.clear();
  t.python_module.clear();
  t.master_config = Image(std::move(image));
  return job;
}

// The guide's container-on-TPU configuration: n1-highcpu-16 master with an
// image, cloud_tpu worker with an image, tpuTfVersion and an accelerator.
Job ContainerTpuJob(std::string master_image, std::string worker_image, std::string tpu_tf_version,
                    std::string accel_type = "TPU_V2") {
  Job job = ContainerJob("CUSTOM", std::move(master_image));
  TrainingInput& t = T(job);
  t.master_type = "n1-highcpu-16";
  t.worker_type = "cloud_tpu";
  t.worker_count = 1;
  t.worker_config = Accel(std::move(accel_type), 8);
  t.worker_config->image_uri = std::move(worker_image);
  t.worker_config->tpu_tf_version = std::move(tpu_tf_version);
  return job;
}

ParameterSpec Double(std::string name, double min, double max, std::string scale = "") {
  ParameterSpec p;
  p.parameter_name = std::move(name);
  p.type = "DOUBLE";
  p.min_value = min;
  p.max_value = max;
  p.scale_type = std::move(scale);
  return p;
}

ParameterSpec Integer(std::string name, double min, double max, std::string scale = "") {
  ParameterSpec p = Double(std::move(name), min, max, std::move(scale));
  p.type = "INTEGER";
  return p;
}

ParameterSpec Categorical(std::string name, std::vector<std::string> values) {
  ParameterSpec p;
  p.parameter_name = std::move(name);
  p.type = "CATEGORICAL";
  p.categorical_values = std::move(values);
  return p;
}

ParameterSpec Discrete(std::string name, std::vector<double> values, std::string scale = "") {
  ParameterSpec p;
  p.parameter_name = std::move(name);
  p.type = "DISCRETE";
  p.discrete_values = std::move(values);
  p.scale_type = std::move(scale);
  return p;
}

// A runtime job with a tuning spec (goal MAXIMIZE).
Job HpJob(std::vector<ParameterSpec> params, std::string algorithm = "",
          std::string goal = "MAXIMIZE") {
  Job job = RuntimeJob();
  HyperparameterSpec& h = T(job).hyperparameters.emplace();
  h.goal = std::move(goal);
  h.params = std::move(params);
  h.algorithm = std::move(algorithm);
  h.max_trials = 10;
  h.max_parallel_trials = 2;
  return job;
}

Job HpJob() { return HpJob({Double("learning_rate", 0.0001, 0.1)}); }

ParameterSpec& Param(Job& job, size_t i) { return T(job).hyperparameters->params[i]; }

model::Scheduling& Sched(Job& job) { return T(job).scheduling.emplace(); }

Job With(Job job, const std::function<void(Job&)>& mutate) {
  mutate(job);
  return job;
}

std::string Repeat(char c, size_t n) { return std::string(n, c); }

std::string Describe(const std::vector<FieldViolation>& violations) {
  std::string out;
  for (const auto& v : violations) out += "\n  " + v.field + ": " + v.description;
  return out.empty() ? " (none)" : out;
}

// ---------------------------------------------------------------------------
// Accepted configurations.

struct AcceptedCase {
  std::string name;
  Job job;
};

void PrintTo(const AcceptedCase& c, std::ostream* os) { *os << c.name; }

std::vector<AcceptedCase> AcceptedCases() {
  return {
      // --- The TPU guide, configuration by configuration. ---
      {"GuideBasicTpuWalkthrough",
       With(RuntimeJob("BASIC_TPU"),
            [](Job& j) {
              j.job_id = "tpu_mnist_1";
              T(j).python_module = "official.vision.image_classification.mnist_main";
              T(j).args = {"--distribution_strategy=tpu", "--data_dir=gs://tfds-data/datasets",
                           "--model_dir=gs://my-bucket/tpu_mnist_1_output"};
            })},
      {"GuideLegacyMasterCloudTpu", TpuJob("complex_model_m")},
      {"GuideComputeEngineMasterTpuV2", TpuJob("n1-highcpu-16", "TPU_V2", 8)},
      {"GuideComputeEngineMasterTpuV3", TpuJob("n1-highcpu-16", "TPU_V3", 8)},
      {"GuideTpuV2Pod128", TpuJob("n1-highcpu-16", "TPU_V2_POD", 128)},
      {"GuideTpuV3Pod32", TpuJob("n1-highcpu-16", "TPU_V3_POD", 32)},
      {"GuidePytorchXla111", ContainerTpuJob(kPytorch111, kPytorch111, "pytorch-1.11")},
      {"GuideCustomContainersTpuV2", ContainerTpuJob(kMasterImage, kWorkerImage, "2.11")},
      {"GuideCustomContainersTpuV3", ContainerTpuJob(kMasterImage, kWorkerImage, "2.11", "TPU_V3")},
      // --- Other TPU shapes. ---
      {"TpuV2Pod512", TpuJob("n1-highcpu-16", "TPU_V2_POD", 512)},
      {"TpuV3Pod256", TpuJob("n1-highcpu-16", "TPU_V3_POD", 256)},
      {"LegacyMasterCloudTpuWithTpuV2", TpuJob("complex_model_m", "TPU_V2", 8)},
      {"BasicTpuEuropeWest4Runtime115Python27", With(RuntimeJob("BASIC_TPU"),
                                                     [](Job& j) {
                                                       T(j).region = "europe-west4";
                                                       T(j).runtime_version = "1.15";
                                                       T(j).python_version = "2.7";
                                                     })},
      {"TpuWithEvaluator", With(TpuJob("n1-highcpu-16", "TPU_V2", 8),
                                [](Job& j) {
                                  T(j).evaluator_type = "n1-standard-8";
                                  T(j).evaluator_count = 1;
                                })},
      {"PytorchXla16TaggedImageInheritedByWorker",
       ContainerTpuJob("gcr.io/cloud-ml-public/training/pytorch-xla.1-6:latest", "",
                       "pytorch-1.6")},
      {"CustomContainerTpuRuntime115", ContainerTpuJob(kMasterImage, kWorkerImage, "1.15")},
      {"RuntimeMasterWithCustomTpuWorkerImage", With(TpuJob("n1-highcpu-16", "TPU_V2", 8),
                                                     [](Job& j) {
                                                       T(j).worker_config->image_uri = kWorkerImage;
                                                       T(j).worker_config->tpu_tf_version = "2.9";
                                                     })},
      // --- Ordinary jobs. ---
      {"BasicDefaultTier", RuntimeJob()},
      {"BasicExplicit", RuntimeJob("BASIC")},
      {"Standard1", RuntimeJob("STANDARD_1")},
      {"Premium1", RuntimeJob("PREMIUM_1")},
      {"BasicGpu", RuntimeJob("BASIC_GPU")},
      {"Runtime114Python35", With(RuntimeJob(),
                                  [](Job& j) {
                                    T(j).runtime_version = "1.14";
                                    T(j).python_version = "3.5";
                                  })},
      {"PythonVersionUnsetDefaults",
       With(RuntimeJob(), [](Job& j) { T(j).python_version.clear(); })},
      {"CustomComputeEngineWithGpus", With(CustomJob("n1-standard-8", "n1-standard-8", 4),
                                           [](Job& j) {
                                             T(j).master_config = Accel("NVIDIA_TESLA_T4", 1);
                                             T(j).worker_config = Accel("NVIDIA_TESLA_V100", 2);
                                             T(j).parameter_server_type = "n1-highmem-8";
                                             T(j).parameter_server_count = 2;
                                             T(j).evaluator_type = "n1-standard-4";
                                             T(j).evaluator_count = 1;
                                             T(j).evaluator_config = Accel("NVIDIA_TESLA_P4", 4);
                                           })},
      {"CustomLegacyGpuTypes", With(CustomJob("complex_model_m_gpu", "standard_gpu", 3),
                                    [](Job& j) {
                                      T(j).parameter_server_type = "large_model";
                                      T(j).parameter_server_count = 1;
                                    })},
      {"CustomA100", With(CustomJob("a2-highgpu-4g", "a2-highgpu-1g", 2),
                          [](Job& j) {
                            T(j).master_config = Accel("NVIDIA_TESLA_A100", 4);
                            T(j).worker_config = Accel("NVIDIA_TESLA_A100", 1);
                          })},
      {"CustomWorkerCountAtCap", CustomJob("n1-standard-4", "n1-standard-4", 1000)},
      {"CustomPsCountZeroWithoutType",
       With(CustomJob("n1-standard-4"), [](Job& j) { T(j).parameter_server_count = 0; })},
      {"ContainerBasic", ContainerJob()},
      {"ContainerCustomWithCommandAndArgs",
       With(ContainerJob("CUSTOM"),
            [](Job& j) {
              T(j).master_type = "n1-standard-8";
              T(j).master_config->container_command = {"python", "-m", "trainer.task"};
              T(j).master_config->container_args = {"--epochs=3"};
              T(j).worker_type = "n1-standard-8";
              T(j).worker_count = 2;
              T(j).worker_config = ReplicaConfig{};
              T(j).worker_config->container_args = {"--epochs=3"};
              T(j).use_chief_in_tf_config = true;
            })},
      {"ContainerWithTrainingArgs",
       With(ContainerJob(), [](Job& j) { T(j).args = {"--epochs=3"}; })},
      {"HyperparametersEachType",
       HpJob({Double("learning_rate", 0.0001, 0.1, "UNIT_LOG_SCALE"),
              Integer("num_layers", 1, 8, "UNIT_LINEAR_SCALE"),
              Categorical("optimizer", {"adam", "sgd", "rmsprop"}),
              Discrete("batch_size", {16, 32, 64, 128}, "UNIT_LOG_SCALE")})},
      {"HyperparametersGridSearch",
       HpJob({Integer("num_layers", 1, 4), Categorical("optimizer", {"adam", "sgd"}),
              Discrete("dropout", {0.1, 0.2, 0.5})},
             "GRID_SEARCH", "MINIMIZE")},
      {"HyperparametersGoalUnspecifiedRandom",
       With(HpJob({Double("momentum", 0.1, 0.99, "UNIT_REVERSE_LOG_SCALE"),
                   Double("hidden-units", 1, 2, "NONE")},
                  "RANDOM_SEARCH", "GOAL_TYPE_UNSPECIFIED"),
            [](Job& j) {
              auto& h = *T(j).hyperparameters;
              h.max_failed_trials = 0;
              h.max_trials.reset();
              h.max_parallel_trials.reset();
              h.hyperparameter_metric_tag = "accuracy";
              h.enable_trial_early_stopping = true;
              h.resume_previous_job_id = "previous_job";
            })},
      // ai-platform-samples' sklearn hp_tuning sample: AI Platform took any
      // string as the tag, and the trainer reports that very string.
      {"HyperparametersMetricTagFreeText",
       With(HpJob(), [](Job& j) { T(j).hyperparameters->hyperparameter_metric_tag = "Taxi Model Accuracy"; })},
      {"HyperparametersAlgorithmUnspecifiedParallelEqualsTrials",
       With(HpJob({Integer("steps", -10, 10)}, "ALGORITHM_UNSPECIFIED"),
            [](Job& j) { T(j).hyperparameters->max_parallel_trials = 10; })},
      {"SchedulingOk", With(RuntimeJob(),
                            [](Job& j) {
                              auto& s = Sched(j);
                              s.max_running_time = "7200s";
                              s.max_wait_time = "1800s";
                              s.priority = 1000;
                            })},
      {"SchedulingFractionalAndPriorityZero", With(RuntimeJob(),
                                                   [](Job& j) {
                                                     auto& s = Sched(j);
                                                     s.max_running_time = "3600.5s";
                                                     s.priority = 0;
                                                   })},
      {"LabelsAtLimits", With(RuntimeJob(),
                              [](Job& j) {
                                for (int i = 0; i < 63; ++i)
                                  j.labels["key_" + std::to_string(i)] = "v-" + std::to_string(i);
                                j.labels["k" + Repeat('x', 62)] = "";
                              })},
      {"JobIdAtLimit", With(RuntimeJob(), [](Job& j) { j.job_id = "J" + Repeat('_', 127); })},
      {"JobDirArgsAndOtherFields",
       With(RuntimeJob(),
            [](Job& j) {
              auto& t = T(j);
              t.job_dir = "gs://my-bucket/output";
              t.args = {"--epochs=3"};
              t.package_uris.push_back("gs://my-bucket/deps/dep-1.0.tar.gz");
              t.network = "projects/12345/global/networks/my-vpc";
              t.service_account = "trainer@my-project.iam.gserviceaccount.com";
              t.enable_web_access = false;
            })},
      {"CustomDiskConfig",
       With(CustomJob("n1-standard-4"),
            [](Job& j) {
              T(j).master_config.emplace().disk_config = model::DiskConfig{"pd-standard", 200};
            })},
      {"OutputOnlyFieldsIgnored", With(RuntimeJob(),
                                       [](Job& j) {
                                         j.state = model::JobState::kFailed;
                                         j.error_message = "whatever";
                                         j.job_position = -3;
                                       })},
  };
}

class AcceptedTest : public testing::TestWithParam<AcceptedCase> {};

TEST_P(AcceptedTest, HasNoViolations) {
  const auto violations = ValidateJob(GetParam().job, Config::Defaults());
  EXPECT_TRUE(violations.empty()) << "violations:" << Describe(violations);
}

INSTANTIATE_TEST_SUITE_P(Table, AcceptedTest, testing::ValuesIn(AcceptedCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Refused configurations.

struct Expect {
  std::string field;
  std::string substring;  // of the description
};

struct RefusedCase {
  std::string name;
  Job base;  // valid on its own
  std::function<void(Job&)> mutate;
  std::vector<Expect> expect;
};

void PrintTo(const RefusedCase& c, std::ostream* os) { *os << c.name; }

std::vector<RefusedCase> RefusedCases() {
  const Job rt = RuntimeJob();
  const Job hp = HpJob();
  const Job tpu_v2 = TpuJob("n1-highcpu-16", "TPU_V2", 8);
  const Job tpu_legacy = TpuJob("complex_model_m");
  const Job n1 = CustomJob("n1-standard-8");
  const Job legacy = CustomJob("complex_model_m");
  const Job container = ContainerJob();
  const Job custom_tpu = ContainerTpuJob(kMasterImage, kWorkerImage, "2.11");
  const Job pytorch = ContainerTpuJob(kPytorch111, kPytorch111, "pytorch-1.11");
  const Job container_custom =
      With(ContainerJob("CUSTOM"), [](Job& j) { T(j).master_type = "n1-standard-8"; });
  const Job a2 = With(CustomJob("a2-highgpu-1g"),
                      [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_A100", 1); });
  const std::string wa = "trainingInput.workerConfig.acceleratorConfig";
  const std::string ma = "trainingInput.masterConfig.acceleratorConfig";
  const std::string hps = "trainingInput.hyperparameters";
  const std::string p0 = "trainingInput.hyperparameters.params[0]";
  return {
      // --- jobId ---
      {"JobIdMissing", rt, [](Job& j) { j.job_id.clear(); }, {{"jobId", "jobId is required"}}},
      {"JobIdStartsWithDigit",
       rt,
       [](Job& j) { j.job_id = "1job"; },
       {{"jobId", "must start with a letter"}}},
      {"JobIdBadCharacter",
       rt,
       [](Job& j) { j.job_id = "my-job"; },
       {{"jobId", "only letters, digits and underscores"}}},
      {"JobIdTooLong",
       rt,
       [](Job& j) { j.job_id = "j" + Repeat('a', 128); },
       {{"jobId", "at most 128 characters (got 129)"}}},
      // --- labels ---
      {"LabelsTooMany",
       rt,
       [](Job& j) {
         for (int i = 0; i < 65; ++i) j.labels["k" + std::to_string(i)] = "v";
       },
       {{"labels", "at most 64 labels (got 65)"}}},
      {"LabelKeyUppercase",
       rt,
       [](Job& j) { j.labels["Env"] = "prod"; },
       {{"labels.Env", "label key \"Env\" is invalid"}}},
      {"LabelKeyStartsWithDigit",
       rt,
       [](Job& j) { j.labels["1env"] = "prod"; },
       {{"labels.1env", "starting with a lowercase letter"}}},
      {"LabelKeyEmpty",
       rt,
       [](Job& j) { j.labels[""] = "prod"; },
       {{"labels.", "1 to 63 characters"}}},
      {"LabelKeyTooLong",
       rt,
       [](Job& j) { j.labels["k" + Repeat('x', 63)] = "v"; },
       {{"labels.k" + Repeat('x', 63), "1 to 63 characters"}}},
      {"LabelValueUppercase",
       rt,
       [](Job& j) { j.labels["env"] = "Prod"; },
       {{"labels.env", "label value \"Prod\" of key \"env\" is invalid"}}},
      {"LabelValueTooLong",
       rt,
       [](Job& j) { j.labels["env"] = Repeat('v', 64); },
       {{"labels.env", "0 to 63 characters"}}},
      {"RetriesLabelOutOfRange",
       rt,
       [](Job& j) { j.labels["mlengine-retries"] = "11"; },
       {{"labels.mlengine-retries", "\"11\" is not a number of retries from 0 to 10"}}},
      {"RetriesLabelNotANumber",
       rt,
       [](Job& j) { j.labels["mlengine-retries"] = "many"; },
       {{"labels.mlengine-retries", "is not a number of retries"}}},
      {"StallAfterLabelNotSeconds",
       rt,
       [](Job& j) { j.labels["mlengine-stall-after"] = "1h"; },
       {{"labels.mlengine-stall-after", "\"1h\" is not a number of seconds from 0 (never) to 604800"}}},
      {"StallActionLabelUnknown",
       rt,
       [](Job& j) { j.labels["mlengine-stall-action"] = "kill"; },
       {{"labels.mlengine-stall-action", "\"kill\" is neither flag"}}},
      {"RetryFailuresLabelNotABoolean",
       rt,
       [](Job& j) { j.labels["mlengine-retry-failures"] = "yes"; },
       {{"labels.mlengine-retry-failures", "\"yes\" is neither true nor false"}}},
      // --- trainingInput / predictionInput ---
      {"TrainingInputMissing",
       rt,
       [](Job& j) { j.training_input.reset(); },
       {{"trainingInput", "trainingInput is required"}}},
      {"PredictionInput",
       rt,
       [](Job& j) { j.has_prediction_input = true; },
       {{"predictionInput", "batch prediction is not supported by mlengine"}}},
      // --- region ---
      {"RegionMissing",
       rt,
       [](Job& j) { T(j).region.clear(); },
       {{"trainingInput.region", "region is required"}}},
      {"RegionUnknown",
       rt,
       [](Job& j) { T(j).region = "mars-central1"; },
       {{"trainingInput.region", "region mars-central1 is not supported"}}},
      {"TpuRegionUsEast1",
       tpu_v2,
       [](Job& j) { T(j).region = "us-east1"; },
       {{"trainingInput.region", "region us-east1 has no TPUs"}}},
      {"BasicTpuRegionEuropeWest1",
       RuntimeJob("BASIC_TPU"),
       [](Job& j) { T(j).region = "europe-west1"; },
       {{"trainingInput.region", "us-central1, europe-west4"}}},
      // --- scaleTier ---
      {"ScaleTierUnknown",
       rt,
       [](Job& j) { T(j).scale_tier = "HUGE"; },
       {{"trainingInput.scaleTier", "scaleTier HUGE is not supported"}}},
      {"CustomWithoutMasterType",
       rt,
       [](Job& j) { T(j).scale_tier = "CUSTOM"; },
       {{"trainingInput.masterType", "masterType is required when scaleTier is CUSTOM"}}},
      {"MasterTypeWithBasic",
       rt,
       [](Job& j) { T(j).master_type = "n1-standard-4"; },
       {{"trainingInput.masterType", "only allowed when scaleTier is CUSTOM (scaleTier is BASIC"}}},
      {"WorkerFieldsWithStandard1",
       RuntimeJob("STANDARD_1"),
       [](Job& j) {
         T(j).worker_type = "n1-standard-4";
         T(j).worker_count = 2;
         T(j).worker_config = Accel("NVIDIA_TESLA_T4", 1);
       },
       {{"trainingInput.workerType", "scaleTier is STANDARD_1"},
        {"trainingInput.workerCount", "only allowed when scaleTier is CUSTOM"},
        {"trainingInput.workerConfig", "only allowed when scaleTier is CUSTOM"}}},
      {"ParameterServerFieldsWithBasicGpu",
       RuntimeJob("BASIC_GPU"),
       [](Job& j) {
         T(j).parameter_server_type = "large_model";
         T(j).parameter_server_count = 1;
       },
       {{"trainingInput.parameterServerType", "only allowed when scaleTier is CUSTOM"},
        {"trainingInput.parameterServerCount", "only allowed when scaleTier is CUSTOM"}}},
      {"EvaluatorFieldsWithPremium1",
       RuntimeJob("PREMIUM_1"),
       [](Job& j) {
         T(j).evaluator_type = "complex_model_m";
         T(j).evaluator_count = 1;
         T(j).evaluator_config = Image(kWorkerImage);
       },
       {{"trainingInput.evaluatorType", "only allowed when scaleTier is CUSTOM"},
        {"trainingInput.evaluatorCount", "only allowed when scaleTier is CUSTOM"},
        {"trainingInput.evaluatorConfig", "only allowed when scaleTier is CUSTOM"}}},
      {"MasterAcceleratorWithBasic",
       rt,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_T4", 1); },
       {{ma, "only allowed when scaleTier is CUSTOM"}}},
      {"WorkerConfigWithBasicTpu",
       RuntimeJob("BASIC_TPU"),
       [](Job& j) { T(j).worker_config = Accel("TPU_V3", 8); },
       {{"trainingInput.workerConfig", "only allowed when scaleTier is CUSTOM"}}},
      {"CloudTpuWorkerWithBasic",
       rt,
       [](Job& j) {
         T(j).worker_type = "cloud_tpu";
         T(j).worker_count = 1;
       },
       {{"trainingInput.workerType", "only allowed when scaleTier is CUSTOM"},
        {"trainingInput.workerCount", "only allowed when scaleTier is CUSTOM"}}},
      // --- replica counts (CUSTOM) ---
      {"WorkerCountWithoutType",
       n1,
       [](Job& j) { T(j).worker_count = 3; },
       {{"trainingInput.workerType", "workerType is required when workerCount is 3"}}},
      {"WorkerTypeWithoutCount",
       n1,
       [](Job& j) { T(j).worker_type = "n1-standard-8"; },
       {{"trainingInput.workerCount", "must be at least 1 when workerType is set (got unset)"}}},
      {"WorkerTypeWithCountZero",
       n1,
       [](Job& j) {
         T(j).worker_type = "n1-standard-8";
         T(j).worker_count = 0;
       },
       {{"trainingInput.workerCount", "(got 0)"}}},
      {"ParameterServerCountNegative",
       n1,
       [](Job& j) {
         T(j).parameter_server_type = "n1-highmem-8";
         T(j).parameter_server_count = -1;
       },
       {{"trainingInput.parameterServerCount", "must be 0 or more (got -1)"}}},
      {"EvaluatorCountOverCap",
       n1,
       [](Job& j) {
         T(j).evaluator_type = "n1-standard-8";
         T(j).evaluator_count = 1001;
       },
       {{"trainingInput.evaluatorCount", "must be at most 1000 (got 1001)"}}},
      {"EvaluatorConfigWithoutType",
       n1,
       [](Job& j) { T(j).evaluator_config = Accel("NVIDIA_TESLA_T4", 1); },
       {{"trainingInput.evaluatorConfig", "evaluatorConfig is set but evaluatorType is not"}}},
      // --- machine types ---
      {"MasterTypeUnknown",
       rt,
       [](Job& j) {
         T(j).scale_tier = "CUSTOM";
         T(j).master_type = "n9-mega-1";
       },
       {{"trainingInput.masterType", "n9-mega-1 is not a known machine type"}}},
      {"WorkerTypeUnknown",
       n1,
       [](Job& j) {
         T(j).worker_type = "n1-standard-3";
         T(j).worker_count = 2;
       },
       {{"trainingInput.workerType", "workerType n1-standard-3 is not a known machine type"}}},
      {"CloudTpuAsMaster",
       n1,
       [](Job& j) { T(j).master_type = "cloud_tpu"; },
       {{"trainingInput.masterType", "masterType cannot be cloud_tpu"}}},
      {"CloudTpuAsParameterServer",
       n1,
       [](Job& j) {
         T(j).parameter_server_type = "cloud_tpu";
         T(j).parameter_server_count = 1;
       },
       {{"trainingInput.parameterServerType", "only allowed as workerType"}}},
      {"CloudTpuAsEvaluator",
       n1,
       [](Job& j) {
         T(j).evaluator_type = "cloud_tpu";
         T(j).evaluator_count = 1;
       },
       {{"trainingInput.evaluatorType", "evaluatorType cannot be cloud_tpu"}}},
      {"MixedFamiliesLegacyMasterComputeEngineWorker",
       legacy,
       [](Job& j) {
         T(j).worker_type = "n1-standard-8";
         T(j).worker_count = 2;
       },
       {{"trainingInput.workerType",
         "n1-standard-8 is a Compute Engine machine type but masterType complex_model_m is a "
         "legacy type"}}},
      {"MixedFamiliesComputeEngineMasterLegacyParameterServer",
       n1,
       [](Job& j) {
         T(j).parameter_server_type = "large_model";
         T(j).parameter_server_count = 1;
       },
       {{"trainingInput.parameterServerType", "large_model is a legacy machine type"}}},
      // --- the TPU guide's configurations, broken ---
      {"TpuWorkerCount2",
       tpu_v2,
       [](Job& j) { T(j).worker_count = 2; },
       {{"trainingInput.workerCount",
         "workerCount must be 1 when workerType is cloud_tpu (got 2)"}}},
      {"TpuWorkerCountUnset",
       tpu_legacy,
       [](Job& j) { T(j).worker_count.reset(); },
       {{"trainingInput.workerCount", "must be 1 when workerType is cloud_tpu (got unset)"}}},
      {"TpuWithParameterServers",
       tpu_legacy,
       [](Job& j) {
         T(j).parameter_server_type = "large_model";
         T(j).parameter_server_count = 2;
       },
       {{"trainingInput.parameterServerCount",
         "parameterServerCount must be 0 when workerType is cloud_tpu (got 2)"}}},
      {"TpuV2Count4",
       tpu_v2,
       [](Job& j) { T(j).worker_config = Accel("TPU_V2", 4); },
       {{wa + ".count", "count for TPU_V2 must be 8 (got 4)"}}},
      {"TpuV3Count16",
       tpu_v2,
       [](Job& j) { T(j).worker_config = Accel("TPU_V3", 16); },
       {{wa + ".count", "count for TPU_V3 must be 8 (got 16)"}}},
      {"TpuV2Pod64",
       tpu_v2,
       [](Job& j) { T(j).worker_config = Accel("TPU_V2_POD", 64); },
       {{wa + ".count", "must be one of 32, 128, 256, 512 (got 64)"}}},
      {"TpuV3Pod512",
       tpu_v2,
       [](Job& j) { T(j).worker_config = Accel("TPU_V3_POD", 512); },
       {{wa + ".count", "TPU_V3_POD must be one of 32, 128, 256 (got 512)"}}},
      {"TpuRuntime210",
       tpu_v2,
       [](Job& j) { T(j).runtime_version = "2.10"; },
       {{"trainingInput.runtimeVersion",
         "runtimeVersion 2.10 is not offered; a TPU job needs one of"}}},
      {"BasicTpuRuntime114",
       RuntimeJob("BASIC_TPU"),
       [](Job& j) {
         T(j).runtime_version = "1.14";
         T(j).python_version = "3.5";
       },
       {{"trainingInput.runtimeVersion", "runtimeVersion 1.14 does not support TPUs"}}},
      {"TpuCustomWorkerMissingTpuTfVersion",
       custom_tpu,
       [](Job& j) { T(j).worker_config->tpu_tf_version.clear(); },
       {{"trainingInput.workerConfig.tpuTfVersion",
         "tpuTfVersion is required when the cloud_tpu worker runs a custom container"}}},
      {"TpuInheritedImageMissingTpuTfVersion",
       tpu_legacy,
       [](Job& j) {
         T(j).runtime_version.clear();
         T(j).python_version.clear();
         T(j).master_config = Image(kMasterImage);
       },
       {{"trainingInput.workerConfig.tpuTfVersion", "tpuTfVersion is required"}}},
      {"TpuPytorchImageMissingTpuTfVersion",
       pytorch,
       [](Job& j) { T(j).worker_config->tpu_tf_version.clear(); },
       {{"trainingInput.workerConfig.tpuTfVersion", "needs tpuTfVersion pytorch-1.11"}}},
      {"TpuPytorchImageWrongTpuTfVersion",
       pytorch,
       [](Job& j) { T(j).worker_config->tpu_tf_version = "pytorch-1.10"; },
       {{"trainingInput.workerConfig.tpuTfVersion",
         "tpuTfVersion must be pytorch-1.11 for image gcr.io/cloud-ml-public/training/"
         "pytorch-xla.1-11 (got pytorch-1.10)"}}},
      {"TpuPytorchImageRuntimeTpuTfVersion",
       pytorch,
       [](Job& j) { T(j).worker_config->tpu_tf_version = "2.11"; },
       {{"trainingInput.workerConfig.tpuTfVersion", "must be pytorch-1.11"}}},
      {"TpuTfVersionNotTpuRuntime",
       custom_tpu,
       [](Job& j) { T(j).worker_config->tpu_tf_version = "2.10"; },
       {{"trainingInput.workerConfig.tpuTfVersion",
         "tpuTfVersion 2.10 is not a TPU runtime version"}}},
      {"TpuTfVersionPatchLevel",
       custom_tpu,
       [](Job& j) { T(j).worker_config->tpu_tf_version = "2.11.0"; },
       {{"trainingInput.workerConfig.tpuTfVersion", "not a TPU runtime version"}}},
      {"TpuTfVersionWithoutContainer",
       tpu_v2,
       [](Job& j) { T(j).worker_config->tpu_tf_version = "2.11"; },
       {{"trainingInput.workerConfig.tpuTfVersion",
         "only for a cloud_tpu worker that runs a custom container"}}},
      {"TpuTfVersionOnMaster",
       custom_tpu,
       [](Job& j) { T(j).master_config->tpu_tf_version = "2.11"; },
       {{"trainingInput.masterConfig.tpuTfVersion",
         "only allowed in workerConfig when workerType is cloud_tpu"}}},
      {"TpuTfVersionOnNonTpuWorker",
       container_custom,
       [](Job& j) {
         T(j).worker_type = "n1-standard-8";
         T(j).worker_count = 1;
         T(j).worker_config = ReplicaConfig{};
         T(j).worker_config->tpu_tf_version = "2.11";
       },
       {{"trainingInput.workerConfig.tpuTfVersion", "only allowed in workerConfig when"}}},
      {"BasicTpuWithCustomContainer",
       container,
       [](Job& j) { T(j).scale_tier = "BASIC_TPU"; },
       {{"trainingInput.masterConfig.imageUri", "BASIC_TPU cannot run a custom container"}}},
      // --- runtimeVersion / imageUri / pythonVersion ---
      {"RuntimeAndImageBoth",
       rt,
       [](Job& j) { T(j).master_config = Image(kMasterImage); },
       {{"trainingInput.runtimeVersion", "not both"}}},
      {"RuntimeAndImageBothOnTpu",
       custom_tpu,
       [](Job& j) { T(j).runtime_version = "2.11"; },
       {{"trainingInput.runtimeVersion", "not both"}}},
      {"RuntimeAndImageNeither",
       rt,
       [](Job& j) {
         T(j).runtime_version.clear();
         T(j).python_version.clear();
       },
       {{"trainingInput.runtimeVersion",
         "runtimeVersion is required unless masterConfig.imageUri"}}},
      {"RuntimeUnknown",
       rt,
       [](Job& j) {
         T(j).runtime_version = "3.0";
         T(j).python_version.clear();
       },
       {{"trainingInput.runtimeVersion", "runtimeVersion 3.0 is not offered; allowed: 1.0"}}},
      {"PythonVersionWrongForRuntime",
       rt,
       [](Job& j) { T(j).python_version = "3.5"; },
       {{"trainingInput.pythonVersion",
         "pythonVersion 3.5 is not available with runtimeVersion 2.11; allowed: 3.7"}}},
      {"PythonVersionWithoutRuntimeOnContainer",
       container,
       [](Job& j) { T(j).python_version = "3.7"; },
       {{"trainingInput.pythonVersion", "pythonVersion applies only with runtimeVersion"}}},
      // --- acceleratorConfig ---
      {"AcceleratorTypeMissing",
       n1,
       [](Job& j) { T(j).master_config = Accel("", 1); },
       {{ma + ".type", "acceleratorConfig.type is required"}}},
      {"AcceleratorTypeUnspecified",
       n1,
       [](Job& j) { T(j).master_config = Accel("ACCELERATOR_TYPE_UNSPECIFIED", 1); },
       {{ma + ".type", "acceleratorConfig.type is required"}}},
      {"AcceleratorTypeUnknown",
       n1,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_H100", 1); },
       {{ma + ".type", "NVIDIA_H100 is not a known accelerator"}}},
      {"AcceleratorCountMissing",
       n1,
       [](Job& j) {
         T(j).master_config = Accel("NVIDIA_TESLA_T4", 1);
         T(j).master_config->accelerator_config->count.reset();
       },
       {{ma + ".count", "acceleratorConfig.count is required"}}},
      {"AcceleratorCountZero",
       n1,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_T4", 0); },
       {{ma + ".count", "must be greater than 0 (got 0)"}}},
      {"GpuCountNotAllowed",
       n1,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_T4", 8); },
       {{ma + ".count", "NVIDIA_TESLA_T4 must be one of 1, 2, 4 (got 8)"}}},
      {"AcceleratorOnLegacyMaster",
       legacy,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_K80", 1); },
       {{ma, "acceleratorConfig is not allowed with masterType complex_model_m"}}},
      {"AcceleratorOnLegacyGpuWorker",
       legacy,
       [](Job& j) {
         T(j).worker_type = "standard_gpu";
         T(j).worker_count = 2;
         T(j).worker_config = Accel("NVIDIA_TESLA_K80", 2);
       },
       {{wa, "legacy GPU types such as standard_gpu carry their GPUs implicitly"}}},
      {"GpuOnCloudTpuWorker",
       tpu_v2,
       [](Job& j) { T(j).worker_config = Accel("NVIDIA_TESLA_T4", 1); },
       {{wa + ".type", "NVIDIA_TESLA_T4 cannot be attached to workerType cloud_tpu"}}},
      {"GpuOnCloudTpuWorkerWithLegacyMaster",
       tpu_legacy,
       [](Job& j) { T(j).worker_config = Accel("NVIDIA_TESLA_V100", 1); },
       {{wa + ".type", "a cloud_tpu worker takes TPU_V2"}}},
      {"TpuOnComputeEngineMaster",
       n1,
       [](Job& j) { T(j).master_config = Accel("TPU_V2", 8); },
       {{ma + ".type", "TPU_V2 cannot be attached to masterType n1-standard-8"}}},
      {"TpuPodOnComputeEngineEvaluator",
       n1,
       [](Job& j) {
         T(j).evaluator_type = "n1-standard-8";
         T(j).evaluator_count = 1;
         T(j).evaluator_config = Accel("TPU_V3_POD", 32);
       },
       {{"trainingInput.evaluatorConfig.acceleratorConfig.type",
         "TPU accelerators go on a cloud_tpu worker"}}},
      {"A100OnN1",
       n1,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_A100", 1); },
       {{ma + ".type", "NVIDIA_TESLA_A100 is only available on the machine types a2-highgpu-1g"}}},
      {"T4OnA2",
       a2,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_T4", 1); },
       {{ma + ".type",
         "masterType a2-highgpu-1g takes only NVIDIA_TESLA_A100 (got NVIDIA_TESLA_T4)"}}},
      {"A100CountMismatch",
       a2,
       [](Job& j) { T(j).master_config = Accel("NVIDIA_TESLA_A100", 2); },
       {{ma + ".count", "carries exactly 1 NVIDIA_TESLA_A100 (got 2)"}}},
      {"A2WithoutAccelerator",
       a2,
       [](Job& j) { T(j).master_config.reset(); },
       {{ma, "needs acceleratorConfig {type: NVIDIA_TESLA_A100, count: 1}"}}},
      // --- packages, module, jobDir ---
      {"PackageUrisMissing",
       rt,
       [](Job& j) { T(j).package_uris.clear(); },
       {{"trainingInput.packageUris", "packageUris is required unless masterConfig.imageUri"}}},
      {"PackageUrisTooMany",
       rt,
       [](Job& j) { T(j).package_uris.assign(101, kPackage); },
       {{"trainingInput.packageUris", "at most 100 packages (got 101)"}}},
      {"PackageUriNotGcs",
       rt,
       [](Job& j) { T(j).package_uris.push_back("/home/me/trainer.tar.gz"); },
       {{"trainingInput.packageUris[1]", "must be a Cloud Storage URI"}}},
      {"PackageUriNotGcsOnContainer",
       container,
       [](Job& j) { T(j).package_uris = {"https://example.com/p.tar.gz"}; },
       {{"trainingInput.packageUris[0]", "gs://bucket/path"}}},
      {"PythonModuleMissing",
       rt,
       [](Job& j) { T(j).python_module.clear(); },
       {{"trainingInput.pythonModule", "pythonModule is required"}}},
      {"PythonModuleNotModule",
       rt,
       [](Job& j) { T(j).python_module = "trainer/task.py"; },
       {{"trainingInput.pythonModule", "must be a dotted Python module name"}}},
      {"JobDirNotGcs",
       rt,
       [](Job& j) { T(j).job_dir = "/tmp/out"; },
       {{"trainingInput.jobDir", "jobDir \"/tmp/out\" must be a Cloud Storage URI"}}},
      {"JobDirBucketMissing",
       rt,
       [](Job& j) { T(j).job_dir = "gs://"; },
       {{"trainingInput.jobDir", "must be a Cloud Storage URI"}}},
      // --- container command / args ---
      {"ArgsWithContainerCommand",
       container,
       [](Job& j) {
         T(j).args = {"--epochs=3"};
         T(j).master_config->container_command = {"python", "train.py"};
       },
       {{"trainingInput.args",
         "args cannot be combined with containerCommand or containerArgs (set: "
         "masterConfig.containerCommand)"}}},
      {"ContainerArgsWithoutImage",
       rt,
       [](Job& j) { T(j).master_config.emplace().container_args = {"--epochs=3"}; },
       {{"trainingInput.masterConfig.containerArgs", "only valid with a custom container image"}}},
      {"WorkerContainerCommandWithoutImage",
       n1,
       [](Job& j) {
         T(j).worker_type = "n1-standard-8";
         T(j).worker_count = 1;
         T(j).worker_config.emplace().container_command = {"run.sh"};
       },
       {{"trainingInput.workerConfig.containerCommand",
         "workerConfig.imageUri or masterConfig.imageUri"}}},
      // --- scheduling ---
      {"MaxRunningTimeNotDuration",
       rt,
       [](Job& j) { Sched(j).max_running_time = "2h"; },
       {{"trainingInput.scheduling.maxRunningTime", "maxRunningTime \"2h\" is not a duration"}}},
      {"MaxRunningTimeZero",
       rt,
       [](Job& j) { Sched(j).max_running_time = "0s"; },
       {{"trainingInput.scheduling.maxRunningTime", "must be greater than 0s"}}},
      {"MaxWaitTimeTooShort",
       rt,
       [](Job& j) { Sched(j).max_wait_time = "60s"; },
       {{"trainingInput.scheduling.maxWaitTime", "maxWaitTime must be at least 1800s (got 60s)"}}},
      {"MaxWaitTimeNegative",
       rt,
       [](Job& j) { Sched(j).max_wait_time = "-1800s"; },
       {{"trainingInput.scheduling.maxWaitTime", "is not a duration"}}},
      {"PriorityNegative",
       rt,
       [](Job& j) { Sched(j).priority = -1; },
       {{"trainingInput.scheduling.priority", "between 0 and 1000 (got -1)"}}},
      {"PriorityTooHigh",
       rt,
       [](Job& j) { Sched(j).priority = 1001; },
       {{"trainingInput.scheduling.priority", "between 0 and 1000 (got 1001)"}}},
      // --- hyperparameters ---
      {"HpGoalMissing",
       hp,
       [](Job& j) { T(j).hyperparameters->goal.clear(); },
       {{hps + ".goal", "goal is required"}}},
      {"HpGoalUnknown",
       hp,
       [](Job& j) { T(j).hyperparameters->goal = "BIGGER"; },
       {{hps + ".goal", "goal BIGGER is not supported"}}},
      {"HpParamsEmpty",
       hp,
       [](Job& j) { T(j).hyperparameters->params.clear(); },
       {{hps + ".params", "params is required"}}},
      {"HpParameterNameMissing",
       hp,
       [](Job& j) { Param(j, 0).parameter_name.clear(); },
       {{p0 + ".parameterName", "parameterName is required"}}},
      {"HpParameterNameInvalid",
       hp,
       [](Job& j) { Param(j, 0).parameter_name = "learning rate"; },
       {{p0 + ".parameterName", "may contain only letters, digits, underscores and hyphens"}}},
      {"HpParameterNameDuplicate",
       hp,
       [](Job& j) { T(j).hyperparameters->params.push_back(Integer("learning_rate", 1, 3)); },
       {{hps + ".params[1].parameterName", "learning_rate is already used by params[0]"}}},
      {"HpTypeMissing",
       hp,
       [](Job& j) { Param(j, 0).type.clear(); },
       {{p0 + ".type", "type is required"}}},
      {"HpTypeUnspecified",
       hp,
       [](Job& j) { Param(j, 0).type = "PARAMETER_TYPE_UNSPECIFIED"; },
       {{p0 + ".type", "type is required; allowed: DOUBLE, INTEGER, CATEGORICAL, DISCRETE"}}},
      {"HpTypeUnknown",
       hp,
       [](Job& j) { Param(j, 0).type = "FLOAT"; },
       {{p0 + ".type", "type FLOAT is not a parameter type"}}},
      {"HpDoubleMinMissing",
       hp,
       [](Job& j) { Param(j, 0).min_value.reset(); },
       {{p0 + ".minValue", "minValue is required for a DOUBLE parameter"}}},
      {"HpDoubleMaxMissing",
       hp,
       [](Job& j) { Param(j, 0).max_value.reset(); },
       {{p0 + ".maxValue", "maxValue is required for a DOUBLE parameter"}}},
      {"HpDoubleMinNotBelowMax",
       hp,
       [](Job& j) { Param(j, 0).min_value = 0.1; },
       {{p0 + ".maxValue", "maxValue (0.1) must be greater than minValue (0.1)"}}},
      {"HpIntegerNotIntegral",
       HpJob({Integer("layers", 1, 8)}),
       [](Job& j) { Param(j, 0).min_value = 1.5; },
       {{p0 + ".minValue", "must be a whole number for an INTEGER parameter (got 1.5)"}}},
      {"HpDoubleWithDiscreteValues",
       hp,
       [](Job& j) {
         Param(j, 0).discrete_values = {1, 2};
       },
       {{p0 + ".discreteValues", "discreteValues is not allowed for a DOUBLE parameter"}}},
      {"HpCategoricalEmpty",
       HpJob({Categorical("opt", {"a"})}),
       [](Job& j) { Param(j, 0).categorical_values.clear(); },
       {{p0 + ".categoricalValues", "categoricalValues is required for a CATEGORICAL parameter"}}},
      {"HpCategoricalDuplicate",
       HpJob({Categorical("opt", {"a", "b"})}),
       [](Job& j) { Param(j, 0).categorical_values.push_back("a"); },
       {{p0 + ".categoricalValues[2]", "\"a\" is listed twice"}}},
      {"HpCategoricalWithMinValue",
       HpJob({Categorical("opt", {"a"})}),
       [](Job& j) { Param(j, 0).min_value = 1; },
       {{p0 + ".minValue", "minValue is not allowed for a CATEGORICAL parameter"}}},
      {"HpCategoricalWithScaleType",
       HpJob({Categorical("opt", {"a"})}),
       [](Job& j) { Param(j, 0).scale_type = "UNIT_LINEAR_SCALE"; },
       {{p0 + ".scaleType", "scaleType is not allowed for a CATEGORICAL parameter"}}},
      {"HpDiscreteEmpty",
       HpJob({Discrete("bs", {1})}),
       [](Job& j) { Param(j, 0).discrete_values.clear(); },
       {{p0 + ".discreteValues", "discreteValues is required for a DISCRETE parameter"}}},
      {"HpDiscreteNotIncreasing",
       HpJob({Discrete("bs", {1, 2, 3})}),
       [](Job& j) {
         Param(j, 0).discrete_values = {1, 4, 4};
       },
       {{p0 + ".discreteValues[2]", "strictly increasing (4 follows 4)"}}},
      {"HpDiscreteTooMany",
       HpJob({Discrete("bs", {1})}),
       [](Job& j) {
         auto& values = Param(j, 0).discrete_values;
         values.clear();
         for (int i = 0; i < 1001; ++i) values.push_back(i);
       },
       {{p0 + ".discreteValues", "at most 1000 values (got 1001)"}}},
      {"HpLogScaleMinZero",
       hp,
       [](Job& j) {
         Param(j, 0).scale_type = "UNIT_LOG_SCALE";
         Param(j, 0).min_value = 0;
       },
       {{p0 + ".minValue", "UNIT_LOG_SCALE needs minValue greater than 0 (got 0)"}}},
      {"HpReverseLogScaleDiscreteFirstZero",
       HpJob({Discrete("bs", {1, 2})}),
       [](Job& j) {
         Param(j, 0).scale_type = "UNIT_REVERSE_LOG_SCALE";
         Param(j, 0).discrete_values = {0, 2};
       },
       {{p0 + ".discreteValues[0]", "UNIT_REVERSE_LOG_SCALE needs values greater than 0"}}},
      {"HpScaleTypeUnknown",
       hp,
       [](Job& j) { Param(j, 0).scale_type = "UNIT_SQUARE_SCALE"; },
       {{p0 + ".scaleType", "scaleType UNIT_SQUARE_SCALE is not supported"}}},
      {"HpMaxTrialsZero",
       hp,
       [](Job& j) {
         T(j).hyperparameters->max_trials = 0;
         T(j).hyperparameters->max_parallel_trials.reset();
       },
       {{hps + ".maxTrials", "maxTrials must be at least 1 (got 0)"}}},
      {"HpMaxParallelTrialsZero",
       hp,
       [](Job& j) { T(j).hyperparameters->max_parallel_trials = 0; },
       {{hps + ".maxParallelTrials", "at least 1 (got 0)"}}},
      {"HpMaxParallelTrialsAboveMaxTrials",
       hp,
       [](Job& j) { T(j).hyperparameters->max_parallel_trials = 11; },
       {{hps + ".maxParallelTrials", "maxParallelTrials (11) must not exceed maxTrials (10)"}}},
      {"HpMaxFailedTrialsNegative",
       hp,
       [](Job& j) { T(j).hyperparameters->max_failed_trials = -1; },
       {{hps + ".maxFailedTrials", "0 or more (got -1)"}}},
      {"HpAlgorithmUnknown",
       hp,
       [](Job& j) { T(j).hyperparameters->algorithm = "BAYES"; },
       {{hps + ".algorithm", "algorithm BAYES is not supported"}}},
      {"HpGridSearchDouble",
       hp,
       [](Job& j) { T(j).hyperparameters->algorithm = "GRID_SEARCH"; },
       {{p0 + ".type", "GRID_SEARCH cannot search a DOUBLE parameter"}}},
      {"KmsKeyNoKmsHere",
       rt,
       [](Job& j) {
         T(j).has_encryption_config = true;
         T(j).kms_key_name = "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k";
       },
       {{"trainingInput.encryptionConfig.kmsKeyName", "this server has no Cloud KMS"}}},
      {"WebAccessNotServed",
       rt,
       [](Job& j) { T(j).enable_web_access = true; },
       {{"trainingInput.enableWebAccess", "interactive shells into a job's replicas are not served"}}},
      {"HpMetricTagWithANewline",
       hp,
       [](Job& j) { T(j).hyperparameters->hyperparameter_metric_tag = "accuracy\nloss"; },
       {{hps + ".hyperparameterMetricTag", "holds a control character"}}},
      {"HpResumeJobIdInvalid",
       hp,
       [](Job& j) { T(j).hyperparameters->resume_previous_job_id = "old-job"; },
       {{hps + ".resumePreviousJobId", "is not a job id"}}},
      // --- other fields ---
      {"NetworkMalformed",
       rt,
       [](Job& j) { T(j).network = "my-vpc"; },
       {{"trainingInput.network", "projects/*/global/networks/*"}}},
      {"KmsKeyMalformed",
       rt,
       [](Job& j) {
         T(j).has_encryption_config = true;
         T(j).kms_key_name = "my-key";
       },
       {{"trainingInput.encryptionConfig.kmsKeyName", "must have the form"}}},
      {"KmsKeyMissing",
       rt,
       [](Job& j) { T(j).has_encryption_config = true; },
       {{"trainingInput.encryptionConfig.kmsKeyName", "kmsKeyName is required"}}},
      {"ServiceAccountNotEmail",
       rt,
       [](Job& j) { T(j).service_account = "trainer"; },
       {{"trainingInput.serviceAccount", "must be a service account email address"}}},
      {"BootDiskTypeUnknown",
       n1,
       [](Job& j) {
         T(j).master_config.emplace().disk_config = model::DiskConfig{"pd-balanced", {}};
       },
       {{"trainingInput.masterConfig.diskConfig.bootDiskType",
         "bootDiskType pd-balanced is not supported"}}},
      {"BootDiskSizeZero",
       n1,
       [](Job& j) {
         T(j).master_config.emplace().disk_config = model::DiskConfig{"", 0};
       },
       {{"trainingInput.masterConfig.diskConfig.bootDiskSizeGb", "between 1 and 65536 (got 0)"}}},
  };
}

class RefusedTest : public testing::TestWithParam<RefusedCase> {};

TEST_P(RefusedTest, ReportsExactlyTheExpectedViolations) {
  const RefusedCase& c = GetParam();
  const Config config = Config::Defaults();
  ASSERT_TRUE(ValidateJob(c.base, config).empty())
      << "the base job must be valid:" << Describe(ValidateJob(c.base, config));
  Job job = c.base;
  c.mutate(job);
  const std::vector<FieldViolation> got = ValidateJob(job, config);
  // Each expectation takes one distinct violation with its field and text.
  std::vector<bool> used(got.size(), false);
  for (const Expect& e : c.expect) {
    bool found = false;
    for (size_t i = 0; i < got.size() && !found; ++i) {
      if (!used[i] && got[i].field == e.field &&
          got[i].description.find(e.substring) != std::string::npos) {
        used[i] = found = true;
      }
    }
    EXPECT_TRUE(found) << "missing " << e.field << " ~ \"" << e.substring
                       << "\"; got:" << Describe(got);
  }
  EXPECT_EQ(got.size(), c.expect.size()) << "got:" << Describe(got);
}

INSTANTIATE_TEST_SUITE_P(Table, RefusedTest, testing::ValuesIn(RefusedCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Other behaviour.

std::vector<std::string> Fields(const std::vector<FieldViolation>& violations) {
  std::vector<std::string> out;
  for (const auto& v : violations) out.push_back(v.field);
  return out;
}

// A region is a place: a job for an AI Platform region this cluster does
// not serve is refused naming those it serves (it would run on the same
// machines under another region's quota).
// A refusal of the runtime lists what this cluster runs, not every name
// AI Platform had (2.11 is one; a cluster without it would offer it).
TEST(ValidateJobTest, ARuntimeRefusalListsTheInstalledOnes) {
  Config config = Config::Defaults();
  config.runtime_versions.push_back({"pytorch-1.13-cpu", {"3.11"}, true});
  config.installed_runtimes = {"pytorch-1.13-cpu"};
  Job job = RuntimeJob();
  T(job).runtime_version = "9.9";
  T(job).python_version.clear();
  const auto got = ValidateJob(job, config);
  ASSERT_EQ(Fields(got), std::vector<std::string>{"trainingInput.runtimeVersion"});
  EXPECT_EQ(got[0].description, "runtimeVersion 9.9 is not offered; allowed: pytorch-1.13-cpu");
}

TEST(ValidateJobTest, ARegionThisClusterDoesNotServeIsRefused) {
  Config config = Config::Defaults();
  config.served_regions = {"us-central1"};
  Job job = RuntimeJob();
  T(job).region = "europe-west4";
  const auto got = ValidateJob(job, config);
  ASSERT_EQ(Fields(got), std::vector<std::string>{"trainingInput.region"});
  EXPECT_THAT(got[0].description, testing::HasSubstr("region europe-west4 is not served by this cluster; it serves: "
                                                     "us-central1"));
  T(job).region = "us-central1";
  EXPECT_TRUE(ValidateJob(job, config).empty());
  T(job).region = "mars-1";  // not a region at all: AI Platform's list
  EXPECT_THAT(ValidateJob(job, config)[0].description, testing::HasSubstr("is not supported; allowed:"));
}

TEST(ValidateJobTest, ReportsEveryIndependentProblemAtOnce) {
  Job job = TpuJob("n1-highcpu-16", "TPU_V2", 4);
  job.job_id = "9lives";
  job.labels["Team"] = "ml";
  T(job).region = "us-east1";
  T(job).worker_count = 2;
  T(job).parameter_server_type = "n1-highmem-8";
  T(job).parameter_server_count = 1;
  T(job).package_uris = {"s3://bucket/p.tar.gz"};
  Sched(job).priority = 5000;
  T(job).hyperparameters =
      HpJob({Double("lr", 0.1, 0.01), Integer("lr", 1, 2)}).training_input->hyperparameters;
  const auto got = ValidateJob(job, Config::Defaults());
  EXPECT_THAT(Fields(got), testing::UnorderedElementsAre(
                               "jobId", "labels.Team", "trainingInput.region",
                               "trainingInput.workerCount", "trainingInput.parameterServerCount",
                               "trainingInput.workerConfig.acceleratorConfig.count",
                               "trainingInput.packageUris[0]", "trainingInput.scheduling.priority",
                               "trainingInput.hyperparameters.params[0].maxValue",
                               "trainingInput.hyperparameters.params[1].parameterName"))
      << Describe(got);
}

TEST(ValidateJobTest, EveryViolationHasASentence) {
  Job job = RuntimeJob("CUSTOM");
  job.job_id.clear();
  T(job).worker_count = 3;
  T(job).runtime_version.clear();
  for (const auto& v : ValidateJob(job, Config::Defaults())) {
    EXPECT_FALSE(v.field.empty());
    EXPECT_GT(v.description.size(), 20u) << v.field;
  }
}

TEST(ValidateJobTest, ConfigAddsRuntimesAndRegions) {
  Config config = Config::Defaults();
  config.runtime_versions.push_back({"2.12", {"3.10"}, true});
  config.regions.push_back("local");
  config.tpu_regions.push_back("local");
  Job job = TpuJob("n1-highcpu-16", "TPU_V3", 8);
  T(job).region = "local";
  T(job).runtime_version = "2.12";
  T(job).python_version = "3.10";
  EXPECT_THAT(ValidateJob(job, config), testing::IsEmpty());
  // Defaults know neither.
  EXPECT_THAT(
      Fields(ValidateJob(job, Config::Defaults())),
      testing::UnorderedElementsAre("trainingInput.region", "trainingInput.runtimeVersion"));
}

TEST(ValidateJobTest, ConfiguredTpuRuntimeIsAcceptedAsTpuTfVersion) {
  Config config = Config::Defaults();
  config.runtime_versions.push_back({"2.12", {"3.10"}, true});
  Job job = ContainerTpuJob(kMasterImage, kWorkerImage, "2.12");
  EXPECT_THAT(ValidateJob(job, config), testing::IsEmpty());
  EXPECT_THAT(Fields(ValidateJob(job, Config::Defaults())),
              testing::ElementsAre("trainingInput.workerConfig.tpuTfVersion"));
}

TEST(ConfigTest, DefaultsComeFromTheCatalog) {
  const Config config = Config::Defaults();
  EXPECT_THAT(config.regions, testing::Contains("us-central1"));
  EXPECT_THAT(config.regions, testing::Contains("us-east1"));
  EXPECT_THAT(config.tpu_regions, testing::UnorderedElementsAre("us-central1", "europe-west4"));
  EXPECT_EQ(config.runtime_versions.size(), model::AiPlatformRuntimeVersions().size());
}

TEST(ValidateLabelsTest, UsesTheGivenPath) {
  const auto got = ValidateLabels({{"ok", "fine"}, {"Bad", "x"}, {"env", "Prod"}}, "job.labels");
  EXPECT_THAT(Fields(got), testing::UnorderedElementsAre("job.labels.Bad", "job.labels.env"));
}

TEST(ValidateLabelsTest, AcceptsEmptyAndLimits) {
  EXPECT_THAT(ValidateLabels({}, "labels"), testing::IsEmpty());
  std::map<std::string, std::string> labels;
  for (int i = 0; i < 64; ++i) labels["l" + std::to_string(i)] = Repeat('a', 63);
  EXPECT_THAT(ValidateLabels(labels, "labels"), testing::IsEmpty());
}

}  // namespace
}  // namespace mle::validate
