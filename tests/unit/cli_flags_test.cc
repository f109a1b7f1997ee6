// Flags and --config files -> the Job sent to jobs.create.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/job_flags.h"

namespace mle::cli {
namespace {

using nlohmann::json;

SubmitFlags Base() {
  SubmitFlags f;
  f.job_id = "my_job";
  return f;
}

// One row: a change to the flags and the trainingInput fields it must set.
struct FlagCase {
  const char* name;
  void (*apply)(SubmitFlags&);
  json expected_training_input;  // subset that must be present
};

class FlagMappingTest : public ::testing::TestWithParam<FlagCase> {};

TEST_P(FlagMappingTest, SetsTrainingInput) {
  SubmitFlags f = Base();
  GetParam().apply(f);
  auto job = BuildJob(json::object(), f);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["jobId"], "my_job");
  const json& ti = (*job)["trainingInput"];
  for (const auto& [key, value] : GetParam().expected_training_input.items()) {
    ASSERT_TRUE(ti.contains(key)) << key << " missing from " << ti.dump();
    EXPECT_EQ(ti[key], value) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, FlagMappingTest,
    ::testing::Values(
        FlagCase{"module", [](SubmitFlags& f) { f.module_name = "trainer.task"; }, {{"pythonModule", "trainer.task"}}},
        FlagCase{"region", [](SubmitFlags& f) { f.region = "us-central1"; }, {{"region", "us-central1"}}},
        FlagCase{"job_dir", [](SubmitFlags& f) { f.job_dir = "gs://b/out"; }, {{"jobDir", "gs://b/out"}}},
        FlagCase{"runtime", [](SubmitFlags& f) { f.runtime_version = "2.11"; }, {{"runtimeVersion", "2.11"}}},
        FlagCase{"python", [](SubmitFlags& f) { f.python_version = "3.7"; }, {{"pythonVersion", "3.7"}}},
        FlagCase{"scale_tier_basic_tpu", [](SubmitFlags& f) { f.scale_tier = "basic-tpu"; }, {{"scaleTier", "BASIC_TPU"}}},
        FlagCase{"scale_tier_standard_1", [](SubmitFlags& f) { f.scale_tier = "standard-1"; },
                 {{"scaleTier", "STANDARD_1"}}},
        FlagCase{"scale_tier_upper", [](SubmitFlags& f) { f.scale_tier = "CUSTOM"; }, {{"scaleTier", "CUSTOM"}}},
        FlagCase{"master_type", [](SubmitFlags& f) { f.master_machine_type = "n1-highcpu-16"; },
                 {{"masterType", "n1-highcpu-16"}}},
        FlagCase{"workers",
                 [](SubmitFlags& f) {
                   f.worker_machine_type = "n1-standard-4";
                   f.worker_count = 4;
                 },
                 {{"workerType", "n1-standard-4"}, {"workerCount", "4"}}},
        FlagCase{"parameter_servers",
                 [](SubmitFlags& f) {
                   f.parameter_server_machine_type = "n1-highmem-8";
                   f.parameter_server_count = 2;
                 },
                 {{"parameterServerType", "n1-highmem-8"}, {"parameterServerCount", "2"}}},
        FlagCase{"master_accelerator", [](SubmitFlags& f) { f.master_accelerator = "type=nvidia-tesla-t4,count=1"; },
                 {{"masterConfig", {{"acceleratorConfig", {{"type", "NVIDIA_TESLA_T4"}, {"count", "1"}}}}}}},
        FlagCase{"worker_accelerator_and_image",
                 [](SubmitFlags& f) {
                   f.worker_accelerator = "count=8,type=tpu-v2";
                   f.worker_image_uri = "gcr.io/p/w:1";
                 },
                 {{"workerConfig",
                   {{"acceleratorConfig", {{"type", "TPU_V2"}, {"count", "8"}}}, {"imageUri", "gcr.io/p/w:1"}}}}},
        FlagCase{"ps_accelerator", [](SubmitFlags& f) { f.parameter_server_accelerator = "type=nvidia-tesla-v100,count=2"; },
                 {{"parameterServerConfig", {{"acceleratorConfig", {{"type", "NVIDIA_TESLA_V100"}, {"count", "2"}}}}}}},
        FlagCase{"master_image", [](SubmitFlags& f) { f.master_image_uri = "gcr.io/p/m:1"; },
                 {{"masterConfig", {{"imageUri", "gcr.io/p/m:1"}}}}},
        FlagCase{"ps_image", [](SubmitFlags& f) { f.parameter_server_image_uri = "gcr.io/p/ps:1"; },
                 {{"parameterServerConfig", {{"imageUri", "gcr.io/p/ps:1"}}}}},
        FlagCase{"tpu_tf_version", [](SubmitFlags& f) { f.tpu_tf_version = "2.11"; },
                 {{"workerConfig", {{"tpuTfVersion", "2.11"}}}}},
        FlagCase{"chief_true", [](SubmitFlags& f) { f.use_chief_in_tf_config = "true"; }, {{"useChiefInTfConfig", true}}},
        FlagCase{"chief_false", [](SubmitFlags& f) { f.use_chief_in_tf_config = "False"; },
                 {{"useChiefInTfConfig", false}}},
        FlagCase{"service_account", [](SubmitFlags& f) { f.service_account = "sa@p.iam.gserviceaccount.com"; },
                 {{"serviceAccount", "sa@p.iam.gserviceaccount.com"}}},
        FlagCase{"user_args", [](SubmitFlags& f) { f.user_args = {"--epochs", "3", "--lr=0.1"}; },
                 {{"args", {"--epochs", "3", "--lr=0.1"}}}}),
    [](const ::testing::TestParamInfo<FlagCase>& info) { return std::string(info.param.name); });

TEST(BuildJobTest, NoFlagsGivesOnlyTheJobId) {
  auto job = BuildJob(json::object(), Base());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(*job, (json{{"jobId", "my_job"}, {"trainingInput", json::object()}}));
}

TEST(BuildJobTest, LabelsFlag) {
  SubmitFlags f = Base();
  f.labels = "team=vision,env=dev";
  auto job = BuildJob(json::object(), f);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["labels"], (json{{"team", "vision"}, {"env", "dev"}}));
}

TEST(BuildJobTest, RefusesWhatGcloudRefuses) {
  struct Bad {
    void (*apply)(SubmitFlags&);
    const char* message_part;
  };
  const Bad cases[] = {
      {[](SubmitFlags& f) { f.worker_count = 2; }, "--worker-machine-type and --worker-count"},
      {[](SubmitFlags& f) { f.worker_machine_type = "n1-standard-4"; }, "--worker-machine-type and --worker-count"},
      {[](SubmitFlags& f) { f.parameter_server_count = 1; }, "--parameter-server-machine-type"},
      {[](SubmitFlags& f) {
         f.worker_machine_type = "n1-standard-4";
         f.worker_count = 0;
       },
       "at least 1"},
      {[](SubmitFlags& f) {
         f.runtime_version = "2.11";
         f.master_image_uri = "gcr.io/p/m";
       },
       "cannot be used together"},
      {[](SubmitFlags& f) { f.scale_tier = "huge"; }, "invalid choice"},
      {[](SubmitFlags& f) { f.master_accelerator = "type=nvidia-tesla-t4"; }, "both type and count"},
      {[](SubmitFlags& f) { f.use_chief_in_tf_config = "maybe"; }, "expected true or false"},
      {[](SubmitFlags& f) { f.labels = "novalue"; }, "KEY=VALUE"},
  };
  for (const auto& c : cases) {
    SubmitFlags f = Base();
    c.apply(f);
    auto job = BuildJob(json::object(), f);
    ASSERT_FALSE(job.ok()) << c.message_part;
    EXPECT_NE(std::string(job.status().message()).find(c.message_part), std::string::npos) << job.status();
  }
}

TEST(AcceleratorTest, ParsesEveryEnumSpelling) {
  struct Case {
    const char* flag;
    const char* type;
  };
  const Case cases[] = {{"nvidia-tesla-k80", "NVIDIA_TESLA_K80"},   {"nvidia-tesla-p100", "NVIDIA_TESLA_P100"},
                        {"nvidia-tesla-v100", "NVIDIA_TESLA_V100"}, {"nvidia-tesla-p4", "NVIDIA_TESLA_P4"},
                        {"nvidia-tesla-t4", "NVIDIA_TESLA_T4"},     {"nvidia-tesla-a100", "NVIDIA_TESLA_A100"},
                        {"tpu-v2", "TPU_V2"},                       {"tpu-v3", "TPU_V3"},
                        {"tpu-v2-pod", "TPU_V2_POD"},               {"tpu-v3-pod", "TPU_V3_POD"}};
  for (const auto& c : cases) {
    auto a = ParseAccelerator("--master-accelerator", std::string("type=") + c.flag + ",count=2");
    ASSERT_TRUE(a.ok()) << c.flag << ": " << a.status();
    EXPECT_EQ(*a, (json{{"type", c.type}, {"count", "2"}}));
  }
  EXPECT_EQ(AcceleratorChoices().size(), std::size(cases));
}

TEST(AcceleratorTest, AcceptsSpacesAndEnumSpelling) {
  auto a = ParseAccelerator("--worker-accelerator", " type = NVIDIA_TESLA_T4 , count = 1 ");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (json{{"type", "NVIDIA_TESLA_T4"}, {"count", "1"}}));
}

TEST(AcceleratorTest, RefusesBadValues) {
  for (const char* bad : {"", "type=nvidia-tesla-t4", "count=1", "type=nvidia-tesla-t4,count=0",
                          "type=nvidia-tesla-t4,count=-1", "type=nvidia-tesla-t4,count=two",
                          "type=accelerator-type-unspecified,count=1", "type=nvidia-h100,count=1",
                          "type=nvidia-tesla-t4,count=1,size=2", "nvidia-tesla-t4"}) {
    auto a = ParseAccelerator("--master-accelerator", bad);
    EXPECT_FALSE(a.ok()) << "accepted \"" << bad << "\"";
    if (!a.ok()) {
      EXPECT_NE(std::string(a.status().message()).find("--master-accelerator"), std::string::npos) << a.status();
    }
  }
}

TEST(LabelsTest, Parses) {
  auto l = ParseLabels("--labels", "a=1, b=two,c=");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::map<std::string, std::string>{{"a", "1"}, {"b", "two"}, {"c", ""}}));
  auto empty = ParseLabels("--labels", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(ParseLabels("--labels", "a=1,b").ok());
  EXPECT_FALSE(ParseLabels("--labels", "=x").ok());
  EXPECT_EQ(ParseKeyList("a, b,,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ScaleTierTest, AllChoices) {
  EXPECT_EQ(ScaleTierChoices(),
            (std::vector<std::string>{"basic", "standard-1", "premium-1", "basic-gpu", "basic-tpu", "custom"}));
  EXPECT_EQ(*ScaleTierEnum("premium-1"), "PREMIUM_1");
  EXPECT_EQ(*ScaleTierEnum("basic-gpu"), "BASIC_GPU");
  EXPECT_FALSE(ScaleTierEnum("gpu").ok());
}

constexpr char kConfigYaml[] = R"(
jobId: from_config
labels:
  team: vision
  owner: ann
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highcpu-16
  workerType: n1-highcpu-16
  parameterServerType: n1-highmem-8
  evaluatorType: n1-highcpu-16
  workerCount: 9
  parameterServerCount: 3
  evaluatorCount: 1
  runtimeVersion: 2.10
  pythonVersion: 3.7
  region: europe-west4
  useChiefInTfConfig: yes
  masterConfig:
    acceleratorConfig:
      count: 2
      type: NVIDIA_TESLA_T4
  scheduling: {maxRunningTime: 7200s, priority: 5}
  args: [--steps, 100]
  hyperparameters:
    goal: MAXIMIZE
    maxTrials: 4
    params:
      - parameterName: lr
        type: DOUBLE
        minValue: 0.001
        maxValue: 1
      - parameterName: layers
        type: DISCRETE
        discreteValues: [1, 2, 4]
  network:
)";

TEST(ConfigTest, YamlIsShapedBySchema) {
  auto job = ParseJobConfig(kConfigYaml, "config.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  const json& ti = (*job)["trainingInput"];
  EXPECT_EQ((*job)["jobId"], "from_config");
  EXPECT_EQ(ti["workerCount"], "9");  // int64 -> string
  EXPECT_EQ(ti["parameterServerCount"], "3");
  EXPECT_EQ(ti["evaluatorCount"], "1");
  EXPECT_EQ(ti["runtimeVersion"], "2.10");  // the text, not the float 2.1
  EXPECT_EQ(ti["pythonVersion"], "3.7");
  EXPECT_EQ(ti["useChiefInTfConfig"], true);
  EXPECT_EQ(ti["masterConfig"]["acceleratorConfig"], (json{{"count", "2"}, {"type", "NVIDIA_TESLA_T4"}}));
  EXPECT_EQ(ti["scheduling"], (json{{"maxRunningTime", "7200s"}, {"priority", 5}}));
  EXPECT_EQ(ti["args"], (json{"--steps", "100"}));
  EXPECT_EQ(ti["hyperparameters"]["maxTrials"], 4);
  EXPECT_EQ(ti["hyperparameters"]["params"][0]["minValue"], 0.001);
  EXPECT_EQ(ti["hyperparameters"]["params"][0]["maxValue"], 1.0);
  EXPECT_EQ(ti["hyperparameters"]["params"][1]["discreteValues"], (json{1.0, 2.0, 4.0}));
  EXPECT_FALSE(ti.contains("network"));  // null dropped
}

TEST(ConfigTest, JsonWorksToo) {
  auto job = ParseJobConfig(R"({"trainingInput": {"workerCount": 2, "region": "us-central1"}, "labels": {"a": 1}})",
                            "config.json");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["trainingInput"]["workerCount"], "2");
  EXPECT_EQ((*job)["labels"]["a"], "1");
}

TEST(ConfigTest, UnknownFieldsPassThroughForTheServerToRefuse) {
  auto job = ParseJobConfig("trainingInput:\n  workerCont: 3\n  fancy: {a: true}\n", "c.yaml");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["trainingInput"]["workerCont"], 3);
  EXPECT_EQ((*job)["trainingInput"]["fancy"]["a"], true);
}

TEST(ConfigTest, BadFiles) {
  auto bad = ParseJobConfig("trainingInput: [unclosed", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("c.yaml"), std::string::npos);
  EXPECT_NE(std::string(bad.status().message()).find("line"), std::string::npos);
  EXPECT_FALSE(ParseJobConfig("- a\n- b\n", "c.yaml").ok());
  auto empty = ParseJobConfig("", "c.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, json::object());
}

TEST(ConfigTest, FlagsOverrideTheConfigFile) {
  auto config = ParseJobConfig(kConfigYaml, "config.yaml");
  ASSERT_TRUE(config.ok());
  SubmitFlags f = Base();
  f.region = "us-central1";
  f.worker_machine_type = "n1-standard-8";
  f.worker_count = 2;
  f.scale_tier = "custom";
  f.master_accelerator = "type=nvidia-tesla-v100,count=1";
  f.labels = "owner=bob,env=dev";
  f.user_args = {"--steps", "5"};
  auto job = BuildJob(*config, f);
  ASSERT_TRUE(job.ok()) << job.status();
  const json& ti = (*job)["trainingInput"];
  EXPECT_EQ((*job)["jobId"], "my_job");  // the positional JOB wins
  EXPECT_EQ(ti["region"], "us-central1");
  EXPECT_EQ(ti["workerType"], "n1-standard-8");
  EXPECT_EQ(ti["workerCount"], "2");
  EXPECT_EQ(ti["masterConfig"]["acceleratorConfig"], (json{{"type", "NVIDIA_TESLA_V100"}, {"count", "1"}}));
  EXPECT_EQ(ti["args"], (json{"--steps", "5"}));
  // Untouched fields of the file survive.
  EXPECT_EQ(ti["masterType"], "n1-highcpu-16");
  EXPECT_EQ(ti["parameterServerCount"], "3");
  EXPECT_EQ(ti["evaluatorType"], "n1-highcpu-16");
  EXPECT_EQ(ti["hyperparameters"]["goal"], "MAXIMIZE");
  // Labels merge key by key, flags winning.
  EXPECT_EQ((*job)["labels"], (json{{"team", "vision"}, {"owner", "bob"}, {"env", "dev"}}));
}

TEST(PackageUrisTest, StagedPackagesReplaceTheConfigs) {
  json job = {{"jobId", "j"}, {"trainingInput", {{"packageUris", {"gs://old/a.tar.gz"}}}}};
  ASSERT_TRUE(SetPackageUris(job, {}).ok());
  EXPECT_EQ(job["trainingInput"]["packageUris"], (json{"gs://old/a.tar.gz"}));
  ASSERT_TRUE(SetPackageUris(job, {"gs://b/j/h/t-0.0.0.tar.gz", "gs://b/x.whl"}).ok());
  EXPECT_EQ(job["trainingInput"]["packageUris"], (json{"gs://b/j/h/t-0.0.0.tar.gz", "gs://b/x.whl"}));
}

TEST(PackageUrisTest, NonCustomJobsNeedPackages) {
  json job = {{"jobId", "j"}, {"trainingInput", json::object()}};
  auto s = SetPackageUris(job, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("Non-custom jobs must have packages"), std::string::npos);
  json container = {{"jobId", "j"}, {"trainingInput", {{"masterConfig", {{"imageUri", "gcr.io/p/i"}}}}}};
  EXPECT_TRUE(SetPackageUris(container, {}).ok());
}

}  // namespace
}  // namespace mle::cli
