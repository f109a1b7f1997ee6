// `mlengine ai` flags and --config files -> the CustomJob and
// HyperparameterTuningJob bodies sent to Vertex's API.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/packaging.h"
#include "cli/staging.h"
#include "cli/vertex_flags.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kExecutor[] = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest";

TEST(SplitListFlagTest, CommasOrTheDelimiterGiven) {
  struct Row {
    const char* value;
    std::vector<std::string> items;
  };
  const Row rows[] = {
      {"", {}},
      {"a", {"a"}},
      {"--epochs=3,--lr=0.1", {"--epochs=3", "--lr=0.1"}},
      {"a,,b", {"a", "", "b"}},  // kept as gcloud keeps them
      {" a b ,c", {" a b ", "c"}},
      {"^:^--list=a,b:--x", {"--list=a,b", "--x"}},
      {"^;;^a;;b,c", {"a", "b,c"}},
      {"^^", {"^^"}},  // no delimiter between the carets: not an escape
      {"^:^", {}},
  };
  for (const Row& r : rows) EXPECT_EQ(SplitListFlag(r.value), r.items) << r.value;
}

// One accepted --worker-pool-spec and the pool it makes (with
// --python-package-uris=gs://b/p.tar.gz).
struct PoolRow {
  const char* name;
  std::string value;
  json pool;
};

class WorkerPoolSpecTest : public ::testing::TestWithParam<PoolRow> {};

TEST_P(WorkerPoolSpecTest, MakesThePool) {
  auto chief = ParseWorkerPoolSpec("machine-type=n1-standard-4,container-image-uri=gcr.io/p/chief:1", 0);
  auto parsed = ParseWorkerPoolSpec(GetParam().value, 1);
  ASSERT_TRUE(chief.ok() && parsed.ok()) << parsed.status();
  JobSpecFlags flags;
  flags.worker_pools = {*chief, *parsed};
  flags.python_package_uris = std::vector<std::string>{"gs://b/p.tar.gz"};
  auto spec = BuildJobSpec(json::object(), flags, {}, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ((*spec)["workerPoolSpecs"][1], GetParam().pool);
}

INSTANTIATE_TEST_SUITE_P(
    Table, WorkerPoolSpecTest,
    ::testing::Values(
        PoolRow{"container",
                "machine-type=n1-standard-8,replica-count=3,container-image-uri=gcr.io/p/t:1",
                {{"machineSpec", {{"machineType", "n1-standard-8"}}},
                 {"replicaCount", "3"},
                 {"containerSpec", {{"imageUri", "gcr.io/p/t:1"}}}}},
        PoolRow{
            "replica_count_defaults_to_1",
            "machine-type=m,container-image-uri=i",
            {{"machineSpec", {{"machineType", "m"}}}, {"replicaCount", "1"}, {"containerSpec", {{"imageUri", "i"}}}}},
        PoolRow{
            "python_module",
            std::string("machine-type=m,executor-image-uri=") + kExecutor + ",python-module=t.task",
            {{"machineSpec", {{"machineType", "m"}}},
             {"replicaCount", "1"},
             {"pythonPackageSpec",
              {{"executorImageUri", kExecutor}, {"pythonModule", "t.task"}, {"packageUris", {"gs://b/p.tar.gz"}}}}}},
        PoolRow{
            "accelerator_flag_spelling_count_defaults_to_1",
            "machine-type=m,accelerator-type=nvidia-tesla-t4,container-image-uri=i",
            {{"machineSpec", {{"machineType", "m"}, {"acceleratorType", "NVIDIA_TESLA_T4"}, {"acceleratorCount", 1}}},
             {"replicaCount", "1"},
             {"containerSpec", {{"imageUri", "i"}}}}},
        PoolRow{"accelerator_enum_spelling",
                "accelerator-count=4, accelerator-type=TPU_V3 ,machine-type=m,container-image-uri=i",
                {{"machineSpec", {{"machineType", "m"}, {"acceleratorType", "TPU_V3"}, {"acceleratorCount", 4}}},
                 {"replicaCount", "1"},
                 {"containerSpec", {{"imageUri", "i"}}}}},
        PoolRow{"another_delimiter",
                "^;^machine-type=m;container-image-uri=registry/a,b:1",
                {{"machineSpec", {{"machineType", "m"}}},
                 {"replicaCount", "1"},
                 {"containerSpec", {{"imageUri", "registry/a,b:1"}}}}},
        PoolRow{"empty", "", json::object()}),
    [](const ::testing::TestParamInfo<PoolRow>& info) { return std::string(info.param.name); });

TEST(WorkerPoolSpecRefusalTest, RefusesWhatGcloudRefusesNamingThePool) {
  struct Bad {
    std::string value;
    size_t index;
    const char* message_part;
  };
  const std::string exe = std::string("executor-image-uri=") + kExecutor;
  const Bad cases[] = {
      {"", 0, "(workerPoolSpecs[0]): the first pool (the chief's) cannot be empty"},
      {"machine-type=m,container-image-uri=i,colour=red", 2,
       "(workerPoolSpecs[2]): unknown key \"colour\"; the keys are machine-type, replica-count"},
      {"machine-type", 0, "\"machine-type\" is not KEY=VALUE"},
      {"machine-type=m,machine-type=n,container-image-uri=i", 0, "key machine-type is given twice"},
      {"machine-type=,container-image-uri=i", 0, "key machine-type has no value"},
      {"container-image-uri=i", 0, "machine-type is required"},
      {"machine-type=m,replica-count=0,container-image-uri=i", 0,
       "replica-count must be a positive integer, got \"0\""},
      {"machine-type=m,replica-count=two,container-image-uri=i", 0, "replica-count must be a positive integer"},
      {"machine-type=m,accelerator-type=abacus,container-image-uri=i", 0,
       "--worker-pool-spec (workerPoolSpecs[0]) accelerator-type: invalid choice \"abacus\"; choose one of: "},
      {"machine-type=m,accelerator-count=2,container-image-uri=i", 0, "accelerator-count needs accelerator-type"},
      {"machine-type=m,accelerator-type=tpu-v2,accelerator-count=-1,container-image-uri=i", 0,
       "accelerator-count must be a positive integer"},
      {"machine-type=m", 0, "give container-image-uri=IMAGE (a custom container), or executor-image-uri=IMAGE"},
      {"machine-type=m,container-image-uri=i," + exe, 0, "not both"},
      {"machine-type=m,container-image-uri=i,python-module=t.task", 0, "python-module goes with executor-image-uri"},
      {"machine-type=m,container-image-uri=i,local-package-path=.", 0, "local-package-path goes with"},
      {"machine-type=m," + exe, 0, "executor-image-uri needs python-module=MODULE"},
      {"machine-type=m," + exe + ",python-module=a,script=b.py,local-package-path=.", 0,
       "give one of python-module and script"},
      {"machine-type=m," + exe + ",script=train.py", 0, "script=train.py is a path inside local-package-path=DIR"},
      {"machine-type=m," + exe + ",output-image-uri=gcr.io/p/o", 0, "key output-image-uri is not supported here"},
      {"machine-type=m,container-image-uri=i,requirements=numpy", 0, "key requirements is not supported here"},
      {"machine-type=m,container-image-uri=i,extra-packages=a.tar.gz", 0, "--python-package-uris"},
      {"machine-type=m,container-image-uri=i,extra-dirs=d", 0, "inside local-package-path"},
  };
  for (const Bad& c : cases) {
    auto pool = ParseWorkerPoolSpec(c.value, c.index);
    ASSERT_FALSE(pool.ok()) << c.value;
    const std::string message(pool.status().message());
    EXPECT_EQ(message.rfind("argument --worker-pool-spec (workerPoolSpecs[", 0), 0u) << message;
    EXPECT_NE(message.find(c.message_part), std::string::npos) << c.value << " -> " << message;
  }
}

JobSpecFlags Pools(std::initializer_list<std::string> specs) {
  JobSpecFlags flags;
  size_t i = 0;
  for (const auto& s : specs) flags.worker_pools.push_back(*ParseWorkerPoolSpec(s, i++));
  return flags;
}

TEST(BuildJobSpecTest, ArgsAreAppendedToEveryPoolsArgs) {
  const json config = {{"workerPoolSpecs",
                        {{{"containerSpec", {{"imageUri", "i"}, {"args", {"--from-config"}}}}},
                         json::object(),
                         {{"pythonPackageSpec", {{"pythonModule", "m"}}}}}}};
  JobSpecFlags flags;
  flags.args = {"--lr=0.1", ""};
  auto spec = BuildJobSpec(config, flags, {}, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ((*spec)["workerPoolSpecs"][0]["containerSpec"]["args"], (json{"--from-config", "--lr=0.1", ""}));
  EXPECT_EQ((*spec)["workerPoolSpecs"][1], json::object());
  EXPECT_EQ((*spec)["workerPoolSpecs"][2]["pythonPackageSpec"]["args"], (json{"--lr=0.1", ""}));
}

TEST(BuildJobSpecTest, FlagsOverrideTheConfig) {
  const json config = {
      {"workerPoolSpecs", {{{"pythonPackageSpec", {{"pythonModule", "m"}, {"packageUris", {"gs://b/old.tar.gz"}}}}}}},
      {"serviceAccount", "old@p"},
      {"network", "old"},
      {"scheduling", {{"timeout", "60s"}}}};
  JobSpecFlags flags;
  flags.python_package_uris = std::vector<std::string>{"gs://b/new.tar.gz"};
  flags.service_account = "new@p";
  flags.network = "projects/p/global/networks/n";
  flags.enable_web_access = true;
  auto spec = BuildJobSpec(config, flags, {}, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec, (json{{"workerPoolSpecs",
                          {{{"pythonPackageSpec", {{"pythonModule", "m"}, {"packageUris", {"gs://b/new.tar.gz"}}}}}}},
                         {"serviceAccount", "new@p"},
                         {"network", "projects/p/global/networks/n"},
                         {"scheduling", {{"timeout", "60s"}}},
                         {"enableWebAccess", true}}));

  // --worker-pool-spec replaces the config's pools.
  flags = Pools({"machine-type=m,container-image-uri=i"});
  spec = BuildJobSpec(config, flags, {}, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ((*spec)["workerPoolSpecs"].size(), 1u);
  EXPECT_EQ((*spec)["workerPoolSpecs"][0]["containerSpec"]["imageUri"], "i");
  EXPECT_EQ((*spec)["scheduling"]["timeout"], "60s");
}

TEST(BuildJobSpecTest, ALocalPackageComesFirstAndRunsItsModule) {
  JobSpecFlags flags = Pools(
      {std::string("machine-type=m,executor-image-uri=") + kExecutor + ",local-package-path=src,script=train.py"});
  flags.python_package_uris = std::vector<std::string>{"gs://b/dep.tar.gz"};
  auto spec =
      BuildJobSpec(json::object(), flags, {{0, {{"gs://s/x/sha/mlengine_script-0.0.0.tar.gz"}, kScriptModule}}}, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ((*spec)["workerPoolSpecs"][0]["pythonPackageSpec"],
            (json{{"executorImageUri", kExecutor},
                  {"pythonModule", kScriptModule},
                  {"packageUris", {"gs://s/x/sha/mlengine_script-0.0.0.tar.gz", "gs://b/dep.tar.gz"}}}));
  // Not built yet: an error, never a pool without its package.
  EXPECT_FALSE(BuildJobSpec(json::object(), flags, {}, "").ok());
}

TEST(BuildJobSpecTest, Refusals) {
  JobSpecFlags none;
  auto spec = BuildJobSpec(json::object(), none, {}, "trialJobSpec.");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "the job has no worker pool: give --worker-pool-spec, or trialJobSpec.workerPoolSpecs in --config");

  JobSpecFlags module_only =
      Pools({std::string("machine-type=m,executor-image-uri=") + kExecutor + ",python-module=t"});
  spec = BuildJobSpec(json::object(), module_only, {}, "");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(std::string(spec.status().message()).find("give their gs:// URIs with --python-package-uris"),
            std::string::npos);

  JobSpecFlags command = Pools({std::string("machine-type=m,executor-image-uri=") + kExecutor + ",python-module=t"});
  command.python_package_uris = std::vector<std::string>{"gs://b/p.tar.gz"};
  command.command = std::vector<std::string>{"python3"};
  spec = BuildJobSpec(json::object(), command, {}, "");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(std::string(spec.status().message()).find("argument --command"), std::string::npos);
}

TEST(BuildCustomJobTest, DisplayNameLabelsAndSpec) {
  VertexJobFlags flags;
  flags.display_name = "my job";
  flags.labels = "team=vision, env=dev";
  flags.spec = Pools({"machine-type=m,container-image-uri=i"});
  auto job = BuildCustomJob(json::object(), flags, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["displayName"], "my job");
  EXPECT_EQ((*job)["labels"], (json{{"team", "vision"}, {"env", "dev"}}));
  EXPECT_EQ((*job)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"], "i");

  flags.labels = "novalue";
  job = BuildCustomJob(json::object(), flags, {});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(std::string(job.status().message()).find("argument --labels"), std::string::npos);
}

TEST(BuildTuningJobTest, CountsDefaultAsGcloudsAndFlagsOverride) {
  const json config = {{"studySpec", {{"metrics", {{{"metricId", "acc"}, {"goal", "MAXIMIZE"}}}}}},
                       {"labels", {{"team", "search"}}},
                       {"parallelTrialCount", 3},
                       {"trialJobSpec", {{"workerPoolSpecs", {{{"containerSpec", {{"imageUri", "i"}}}}}}}}};
  VertexJobFlags flags;
  flags.display_name = "search";
  flags.labels = "owner=ann";
  flags.spec.args = {"--epochs=2"};
  TuningFlags tuning;
  auto job = BuildTuningJob(config, flags, tuning, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["maxTrialCount"], 1);
  EXPECT_EQ((*job)["parallelTrialCount"], 3);
  EXPECT_FALSE(job->contains("maxFailedTrialCount"));
  EXPECT_EQ((*job)["labels"], (json{{"team", "search"}, {"owner", "ann"}}));
  EXPECT_EQ((*job)["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"], (json{"--epochs=2"}));
  EXPECT_EQ((*job)["displayName"], "search");

  tuning.max_trial_count = 8;
  tuning.parallel_trial_count = 2;
  tuning.max_failed_trial_count = 0;
  tuning.algorithm = "Grid-Search";
  job = BuildTuningJob(config, flags, tuning, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["maxTrialCount"], 8);
  EXPECT_EQ((*job)["parallelTrialCount"], 2);
  EXPECT_EQ((*job)["maxFailedTrialCount"], 0);
  EXPECT_EQ((*job)["studySpec"]["algorithm"], "GRID_SEARCH");
  EXPECT_EQ((*job)["studySpec"]["metrics"][0]["metricId"], "acc");

  tuning.algorithm = "guess";
  job = BuildTuningJob(config, flags, tuning, {});
  ASSERT_FALSE(job.ok());
  EXPECT_NE(std::string(job.status().message())
                .find("argument --algorithm: invalid choice \"guess\"; choose one of: "
                      "algorithm-unspecified, grid-search, random-search"),
            std::string::npos)
      << job.status();
}

TEST(ParseVertexConfigTest, TypedByTheSchema) {
  auto spec = ParseVertexConfig(R"(
workerPoolSpecs:
- machineSpec: {machineType: n1-standard-4, acceleratorCount: 2}
  replicaCount: 1
  containerSpec:
    imageUri: i
    args: [--lr, 0.1, true]
    env: [{name: WORKERS, value: 4}]
scheduling: {timeout: 7200s}
unknownField: 5
)",
                                "spec.yaml", kCustomJobSpecSchema);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const json& pool = (*spec)["workerPoolSpecs"][0];
  EXPECT_EQ(pool["containerSpec"]["args"], (json{"--lr", "0.1", "true"}));
  EXPECT_EQ(pool["containerSpec"]["env"][0]["value"], "4");
  EXPECT_EQ(pool["replicaCount"], "1");  // int64: a string on the wire
  EXPECT_EQ(pool["machineSpec"]["acceleratorCount"], 2);
  EXPECT_EQ((*spec)["unknownField"], 5);  // the server names it

  auto study = ParseVertexConfig(
      "{\"studySpec\": {\"parameters\": [{\"parameterId\": \"lr\", \"doubleValueSpec\": {\"minValue\": 1, "
      "\"maxValue\": 2}}]}, \"maxTrialCount\": \"4\"}",
      "study.json", kTuningJobSchema);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ((*study)["studySpec"]["parameters"][0]["doubleValueSpec"]["minValue"], 1.0);
  EXPECT_EQ((*study)["maxTrialCount"], 4);
}

TEST(ParseVertexConfigTest, Refusals) {
  struct Bad {
    const char* text;
    const char* schema;
    const char* message_part;
  };
  const Bad cases[] = {
      {"[1, 2]", kCustomJobSpecSchema, "must hold a CustomJobSpec"},
      {"just text", kTuningJobSchema, "must hold a HyperparameterTuningJob"},
      {"a: [", kCustomJobSpecSchema, "not valid YAML or JSON: line 1"},
      {"displayName: x\njobSpec: {workerPoolSpecs: []}\n", kCustomJobSpecSchema, "holds a CustomJob"},
  };
  for (const Bad& c : cases) {
    auto config = ParseVertexConfig(c.text, "f.yaml", c.schema);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_NE(std::string(config.status().message()).find(c.message_part), std::string::npos) << config.status();
  }
  auto empty = ParseVertexConfig("", "f.yaml", kCustomJobSpecSchema);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, json::object());
}

TEST(VertexStagingLocationTest, Table) {
  struct Row {
    std::optional<std::string> bucket;
    json spec;
    std::string display_name;
    std::string uri;  // "" when refused
  };
  const json base = {{"baseOutputDirectory", {{"outputUriPrefix", "gs://out/run1"}}}};
  const Row rows[] = {
      {"gs://stage", json::object(), "my job/1", "gs://stage/my-job-1"},
      {"gs://stage", base, "v1.2_run", "gs://stage/v1.2_run"},
      {"gs://stage", json::object(), "..", "gs://stage/job"},
      {std::nullopt, base, "x", "gs://out/run1/packages"},
      {std::nullopt, json::object(), "x", ""},
      {std::nullopt, {{"baseOutputDirectory", {{"outputUriPrefix", "/local/dir"}}}}, "x", ""},
      {"not-a-bucket", base, "x", ""},
  };
  for (const Row& r : rows) {
    auto where = VertexStagingLocation(r.bucket, r.spec, r.display_name, "");
    if (r.uri.empty()) {
      EXPECT_FALSE(where.ok()) << r.display_name;
    } else {
      ASSERT_TRUE(where.ok()) << where.status();
      EXPECT_EQ(where->Uri(), r.uri);
    }
  }
  auto refused = VertexStagingLocation(std::nullopt, json::object(), "x", "trialJobSpec.");
  EXPECT_EQ(refused.status().message(),
            "local-package-path needs a gs:// place to stage the package it builds: give --staging-bucket "
            "gs://BUCKET, or trialJobSpec.baseOutputDirectory.outputUriPrefix (gs://BUCKET/DIR) in --config");
}

TEST(ParseVertexJobRefTest, AnIdOrAWholeName) {
  auto id = ParseVertexJobRef("123", "customJobs");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->id, "123");
  EXPECT_EQ(id->project, "");
  auto named = ParseVertexJobRef("projects/p/locations/us-central1/customJobs/123", "customJobs");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->project, "p");
  EXPECT_EQ(named->location, "us-central1");
  EXPECT_EQ(named->id, "123");
  for (const char* bad :
       {"", "projects/p/locations/us-central1/hyperparameterTuningJobs/123", "projects/p/locations//customJobs/123",
        "customJobs/123", "projects/p/locations/l/customJobs/123/extra"}) {
    auto ref = ParseVertexJobRef(bad, "customJobs");
    ASSERT_FALSE(ref.ok()) << bad;
    EXPECT_NE(std::string(ref.status().message()).find("projects/PROJECT/locations/REGION/customJobs/ID"),
              std::string::npos);
  }
}

TEST(SortByTest, KeysInTurnAbsentFirst) {
  auto keys = ParseSortBy("~state, display_name");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_TRUE((*keys)[0].descending);
  EXPECT_EQ((*keys)[1].path, (std::vector<std::string>{"displayName"}));
  std::vector<json> jobs = {{{"displayName", "b"}, {"state", "A"}},
                            {{"displayName", "a"}, {"state", "B"}},
                            {{"displayName", "c"}, {"state", "A"}},
                            {{"displayName", "a"}}};
  SortResources(jobs, *keys);
  std::vector<std::string> order;
  for (const auto& j : jobs) order.push_back(j["displayName"]);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "a"}));  // no state: first ascending, last descending

  auto nested = ParseSortBy("jobSpec.workerPoolSpecs,maxTrialCount");
  ASSERT_TRUE(nested.ok());
  std::vector<json> counts = {{{"maxTrialCount", 10}}, {{"maxTrialCount", 9}}};
  SortResources(counts, *nested);
  EXPECT_EQ(counts[0]["maxTrialCount"], 9);  // by value, not by text

  EXPECT_FALSE(ParseSortBy("a,~,b").ok());
  EXPECT_FALSE(ParseSortBy("a..b").ok());
}

TEST(WriteScriptPackageTest, TheScriptItsFilesAndARunner) {
  auto temp = TempDir::Make();
  ASSERT_TRUE(temp.ok());
  const fs::path src = temp->path() / "src";
  fs::create_directories(src / "data");
  std::ofstream(src / "train.py") << "print('hi')\n";
  std::ofstream(src / "data" / "x.csv") << "1,2\n";
  auto package = WriteScriptPackage(src, "train.py", temp->path() / "out");
  ASSERT_TRUE(package.ok()) << package.status();
  EXPECT_EQ(*package, temp->path() / "out" / kScriptPackage);
  auto read = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  EXPECT_TRUE(fs::exists(*package / "train.py"));
  EXPECT_TRUE(fs::exists(*package / "__init__.py"));
  EXPECT_NE(read(*package / "_mlengine_run.py").find("runpy.run_path(script, run_name='__main__')"), std::string::npos);
  const std::string setup = read(temp->path() / "out" / "setup.py");
  EXPECT_NE(setup.find("package_data={'mlengine_script': ['data/x.csv', 'train.py']}"), std::string::npos) << setup;
  EXPECT_EQ(std::string(kScriptModule), std::string(kScriptPackage) + "._mlengine_run");

  for (const char* bad : {"missing.py", "../train.py", "/etc/passwd", ""}) {
    EXPECT_FALSE(WriteScriptPackage(src, bad, temp->path() / "bad").ok()) << bad;
  }
}

}  // namespace
}  // namespace mle::cli
