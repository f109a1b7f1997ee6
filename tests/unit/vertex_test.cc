// Vertex AI's custom jobs and tuning jobs on the ml v1 engine: the spec as
// an ml v1 trainingInput (model/vertex.h), violations with Vertex's paths,
// the wire codec against api/aiplatform.v1.json (codec/vertex_codec.h), the
// stored and Slurm launch forms, and the Vertex rules of validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "codec/discovery.h"
#include "codec/job_codec.h"
#include "codec/json_text.h"
#include "codec/launch_codec.h"
#include "codec/vertex_codec.h"
#include "model/job.h"
#include "model/vertex.h"
#include "service/operation_log.h"
#include "service/tuning_job.h"
#include "validate/validate.h"

namespace mle {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kExecutor[] = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest";

json Pool(const std::string& machine, int count, json extra = json::object()) {
  json p = {{"machineSpec", {{"machineType", machine}}}, {"replicaCount", std::to_string(count)}};
  p.update(extra);
  return p;
}

// `a` with `b` merged into it (objects merged, the rest replaced).
json Merge(json a, const json& b) {
  a.update(b, /*merge_objects=*/true);
  return a;
}

json Package(const std::string& module = "trainer.task") {
  return {{"pythonPackageSpec",
           {{"executorImageUri", kExecutor},
            {"packageUris", json::array({"gs://b/trainer-0.1.tar.gz"})},
            {"pythonModule", module},
            {"args", {"--epochs", "2"}}}}};
}

json Container(const std::string& image = "gcr.io/p/trainer:1") {
  return {{"containerSpec", {{"imageUri", image}, {"command", {"python", "-m", "t"}}, {"args", json::array({"--x"})}}}};
}

// The pools as a list (a braced single element would be copied, not listed,
// by some compilers: nlohmann's single-element initializer rule).
json CustomJob(const std::vector<json>& pools, json spec_extra = json::object()) {
  json list = json::array();
  for (const json& p : pools) list.push_back(p);
  json spec = {{"workerPoolSpecs", std::move(list)}};
  spec.update(spec_extra);
  return {{"displayName", "job"}, {"jobSpec", std::move(spec)}};
}

model::Job Decoded(const json& body, const std::string& location = "us-central1") {
  codec::DecodedVertexJob d = codec::DecodeCustomJob(body, location);
  EXPECT_THAT(d.violations, IsEmpty()) << body.dump();
  d.job.project = "p";
  d.job.job_id = "1234567890123456789";
  return d.job;
}

TEST(VertexTrainingInput, PoolsAreTheMlRoles) {
  const model::Job job = Decoded(CustomJob(
      {Pool("n1-standard-8", 1, Container()), Pool("n1-highmem-8", 3, Container("gcr.io/p/w:1")), json::object(),
       Pool("n1-standard-4", 1, Container("gcr.io/p/e:1"))},
      {{"baseOutputDirectory", {{"outputUriPrefix", "gs://b/out"}}},
       {"scheduling", {{"timeout", "3600s"}, {"maxWaitDuration", "600s"}}},
       {"serviceAccount", "sa@p.iam.gserviceaccount.com"}}));
  const model::TrainingInput& t = *job.training_input;
  EXPECT_EQ(t.scale_tier, "CUSTOM");
  EXPECT_EQ(t.master_type, "n1-standard-8");
  EXPECT_EQ(t.master_config->image_uri, "gcr.io/p/trainer:1");
  EXPECT_EQ(t.master_config->container_command, (std::vector<std::string>{"python", "-m", "t"}));
  EXPECT_EQ(t.master_config->container_args, (std::vector<std::string>{"--x"}));
  EXPECT_EQ(t.worker_type, "n1-highmem-8");
  EXPECT_EQ(t.worker_count, 3);
  EXPECT_EQ(t.worker_config->image_uri, "gcr.io/p/w:1");
  EXPECT_TRUE(t.parameter_server_type.empty());  // an empty pool: none
  EXPECT_FALSE(t.parameter_server_count.has_value());
  EXPECT_EQ(t.evaluator_type, "n1-standard-4");
  EXPECT_EQ(t.evaluator_count, 1);
  EXPECT_EQ(t.job_dir, "gs://b/out");
  EXPECT_EQ(t.region, "us-central1");
  EXPECT_EQ(t.scheduling->max_running_time, "3600s");
  EXPECT_EQ(t.scheduling->max_wait_time, "600s");
  EXPECT_EQ(t.service_account, "sa@p.iam.gserviceaccount.com");
}

TEST(VertexTrainingInput, APackageSpecIsTheJobsPackageAndATpuIsCloudTpu) {
  const model::Job job = Decoded(CustomJob(
      {Merge(Pool("cloud-tpu", 1, Package()),
             json{{"machineSpec", {{"acceleratorType", "TPU_V2"}, {"acceleratorCount", 8}}}}),
       Pool("n1-standard-4", 2, Package())}));
  const model::TrainingInput& t = *job.training_input;
  EXPECT_EQ(t.master_type, "cloud_tpu");
  EXPECT_EQ(t.master_config->accelerator_config->type, "TPU_V2");
  EXPECT_EQ(t.master_config->accelerator_config->count, 8);
  EXPECT_EQ(t.package_uris, (std::vector<std::string>{"gs://b/trainer-0.1.tar.gz"}));
  EXPECT_EQ(t.python_module, "trainer.task");
  EXPECT_EQ(t.args, (std::vector<std::string>{"--epochs", "2"}));
  EXPECT_TRUE(t.master_config->image_uri.empty());
}

TEST(VertexFieldOf, MlPathsBecomeTheSpecs) {
  const std::pair<std::string, std::string> rows[] = {
      {"trainingInput.masterType", "jobSpec.workerPoolSpecs[0].machineSpec.machineType"},
      {"trainingInput.workerCount", "jobSpec.workerPoolSpecs[1].replicaCount"},
      {"trainingInput.parameterServerConfig.acceleratorConfig.count",
       "jobSpec.workerPoolSpecs[2].machineSpec.acceleratorCount"},
      {"trainingInput.evaluatorConfig.imageUri", "jobSpec.workerPoolSpecs[3].containerSpec.imageUri"},
      {"trainingInput.workerConfig.containerArgs[2]", "jobSpec.workerPoolSpecs[1].containerSpec.args[2]"},
      {"trainingInput.masterConfig.diskConfig.bootDiskSizeGb", "jobSpec.workerPoolSpecs[0].diskSpec.bootDiskSizeGb"},
      {"trainingInput.packageUris[0]", "jobSpec.workerPoolSpecs[0].pythonPackageSpec.packageUris[0]"},
      {"trainingInput.scheduling.maxRunningTime", "jobSpec.scheduling.timeout"},
      {"trainingInput.jobDir", "jobSpec.baseOutputDirectory.outputUriPrefix"},
      {"trainingInput.region", "parent"},
      {"trainingInput.masterTypeX", "jobSpec.masterTypeX"},  // no counterpart: below jobSpec
      {"labels.team", "labels.team"},
  };
  for (const auto& [ml, vertex] : rows) EXPECT_EQ(model::VertexFieldOf(ml, model::VertexJob{}), vertex) << ml;
}

TEST(VertexCodec, RoundTripsTheSpecAndIgnoresOutputOnlyFields) {
  json body = CustomJob({Pool("n1-standard-4", 1, Package()), Pool("n1-standard-4", 2, Package())},
                        {{"baseOutputDirectory", {{"outputUriPrefix", "gs://b/out"}}},
                         {"scheduling", {{"timeout", "60s"}, {"disableRetries", true}}}});
  body["labels"] = {{"team", "vision"}};
  body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"] = {{{"name", "A"}, {"value", "1"}}};
  body["state"] = "JOB_STATE_RUNNING";  // a body copied from a get
  body["webAccessUris"] = json::object();
  model::Job job = Decoded(body);
  job.state = model::JobState::kQueued;
  json out = codec::EncodeVertexJob(job);
  EXPECT_EQ(out["name"], "projects/p/locations/us-central1/customJobs/1234567890123456789");
  EXPECT_EQ(out["state"], "JOB_STATE_QUEUED");
  EXPECT_EQ(out["labels"], body["labels"]);
  EXPECT_EQ(out["jobSpec"], body["jobSpec"]);
  // What mlengined answers is what the contract has.
  EXPECT_THAT(codec::DiscoverySchema::Aiplatform().Check(out, "GoogleCloudAiplatformV1CustomJob"), IsEmpty());

  // Stored and read back, and through a Slurm launch document, the same.
  job.training_input->runtime_version = "pytorch-1.13-cpu";  // what admission chose
  const std::string row = codec::SerializeJobForStorage(job);
  EXPECT_FALSE(json::parse(row).contains("trainingInput"));  // made from the spec again as it is read
  absl::StatusOr<model::Job> stored = codec::ParseStoredJob(row);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->vertex, job.vertex);
  ASSERT_TRUE(stored->training_input.has_value());
  EXPECT_EQ(codec::EncodeJob(*stored)["trainingInput"], codec::EncodeJob(job)["trainingInput"]);
  EXPECT_EQ(stored->labels, job.labels);
  codec::LaunchJob launch;
  launch.project = "p";
  launch.job_id = job.job_id;
  launch.training_input = *job.training_input;
  launch.components = {{"master", {"master-replica-0"}, ""}};
  launch.vertex = job.vertex.Copy();
  absl::StatusOr<codec::LaunchJob> read = codec::DecodeLaunchJob(codec::EncodeLaunchJob(launch));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->vertex, job.vertex.Copy());
}

TEST(VertexCodec, StatesAndErrorsAsVertexWritesThem) {
  model::Job job = Decoded(CustomJob({Pool("n1-standard-4", 1, Package())}));
  const std::pair<model::JobState, std::string> states[] = {
      {model::JobState::kQueued, "JOB_STATE_QUEUED"},       {model::JobState::kPreparing, "JOB_STATE_PENDING"},
      {model::JobState::kRunning, "JOB_STATE_RUNNING"},     {model::JobState::kSucceeded, "JOB_STATE_SUCCEEDED"},
      {model::JobState::kFailed, "JOB_STATE_FAILED"},       {model::JobState::kCancelling, "JOB_STATE_CANCELLING"},
      {model::JobState::kCancelled, "JOB_STATE_CANCELLED"},
  };
  for (const auto& [state, name] : states) EXPECT_EQ(model::VertexStateName(state), name);
  job.state = model::JobState::kFailed;
  job.error_message = "The replica master-replica-0 exited with a non-zero status of 3.";
  json out = codec::EncodeVertexJob(job);
  EXPECT_EQ(out["error"], (json{{"code", 3}, {"message", job.error_message}}));
  job.state = model::JobState::kCancelled;
  job.error_message.clear();
  EXPECT_EQ(codec::EncodeVertexJob(job)["error"]["code"], 1);
}

// An answer's text (VertexJobText, written without the tree where it can
// be) is the tree's text, byte for byte, for every kind of field a custom
// job has, and for what the text path hands to the tree (a non-ASCII or
// control byte, a tuning job).
TEST(VertexCodec, AnAnswersTextIsItsTreesText) {
  json every_spec = CustomJob(
      {Pool("n1-standard-4", 1, Package()),
       Merge(Pool("n1-highmem-8", 2, Container()),
             {{"machineSpec", {{"acceleratorType", "NVIDIA_TESLA_T4"}, {"acceleratorCount", 2}}},
              {"diskSpec", {{"bootDiskType", "pd-ssd"}, {"bootDiskSizeGb", 200}}},
              {"containerSpec", {{"env", {{{"name", "A"}, {"value", "1"}}, {{"name", "B"}, {"value", ""}}}}}}}),
       Merge(Pool("cloud-tpu", 1, Package("t.tpu")), {{"machineSpec", {{"tpuTopology", "2x2"}}}}),
       json::object()},
      {{"baseOutputDirectory", {{"outputUriPrefix", "gs://b/out"}}},
       {"serviceAccount", "sa@p.iam.gserviceaccount.com"},
       {"network", "projects/1/global/networks/n"},
       {"enableWebAccess", true},
       {"enableDashboardAccess", true},
       {"scheduling",
        {{"timeout", "60s"}, {"disableRetries", true}, {"restartJobOnWorkerRestart", true}, {"strategy", "STANDARD"},
         {"maxWaitDuration", "30s"}}}});
  every_spec["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"] = {{{"name", "E"}, {"value", "x y"}}};
  every_spec["labels"] = {{"team", "vision"}, {"a-b_c", "1"}};

  std::vector<model::Job> jobs;
  jobs.push_back(Decoded(CustomJob({Pool("n1-standard-4", 1, Package())})));
  jobs.push_back(Decoded(every_spec));
  const absl::Time t0 = absl::FromUnixMicros(1780000000123456);
  for (const auto& [state, message] : std::vector<std::pair<model::JobState, std::string>>{
           {model::JobState::kQueued, ""},
           {model::JobState::kRunning, ""},
           {model::JobState::kSucceeded, ""},
           {model::JobState::kFailed, "The replica \"master\" exited with status 3."},
           {model::JobState::kFailed, ""},
           {model::JobState::kCancelled, ""}}) {
    model::Job job = Decoded(every_spec);
    job.state = state;
    job.error_message = message;
    job.create_time = t0;
    if (state != model::JobState::kQueued) job.start_time = t0 + absl::Seconds(2);
    if (model::IsTerminal(state)) job.end_time = t0 + absl::Seconds(90);
    jobs.push_back(job);
  }
  // A tuning job: its study and counts among the members, written as text.
  {
    model::Job tuning = jobs[1];
    model::VertexJob spec = *tuning.vertex;
    model::VertexStudy study;
    study.metrics.push_back({"accuracy", "MAXIMIZE"});
    study.max_trial_count = 4;
    study.parallel_trial_count = 2;
    study.max_failed_trial_count = 1;
    spec.study = study;
    tuning.vertex = spec;
    tuning.state = model::JobState::kFailed;
    jobs.push_back(tuning);
  }
  // Handed to the tree: bytes nlohmann escapes or replaces its own way.
  json odd = every_spec;
  odd["displayName"] = "caf\xc3\xa9 \x01 \xff";
  odd["labels"]["k\xc3\xa9y"] = "v";
  jobs.push_back(Decoded(odd));
  model::Job tuning = jobs.back();
  model::VertexJob spec = *tuning.vertex;
  spec.study = model::VertexStudy{};
  tuning.vertex = spec;
  jobs.push_back(tuning);

  for (size_t i = 0; i < jobs.size(); ++i) {
    const model::Job& job = jobs[i];
    const json tree = codec::EncodeVertexJob(job);
    for (int indent : {-1, 2}) {
      EXPECT_EQ(codec::VertexJobText(job, indent), tree.dump(indent, ' ', false, json::error_handler_t::replace))
          << tree.dump();
      // Written without the tree, but for the last two.
      EXPECT_EQ(codec::VertexJobTextWithoutTree(job, indent).has_value(), i + 2 < jobs.size()) << i;
    }
    // The stored form likewise, and a row with it reads back (the odd one
    // with nlohmann's replacement character for its invalid byte; the
    // made-up tuning job has no study a real one would).
    EXPECT_EQ(codec::VertexStorageText(*job.vertex), codec::DumpJson(codec::EncodeVertexForStorage(*job.vertex)));
    absl::StatusOr<model::Job> stored = codec::ParseStoredJob(codec::SerializeJobForStorage(job));
    ASSERT_TRUE(stored.ok()) << stored.status();
    if (i + 2 < jobs.size()) {
      EXPECT_EQ(stored->vertex, job.vertex) << i;
    }
    if (!job.vertex->study) {
      EXPECT_THAT(codec::DiscoverySchema::Aiplatform().Check(tree, "GoogleCloudAiplatformV1CustomJob"), IsEmpty());
    }
  }
  // The tree has every member the spec was given.
  EXPECT_EQ(codec::EncodeVertexJob(jobs[1])["jobSpec"], every_spec["jobSpec"]);
}

TEST(VertexCodec, WireViolationsHaveTheirPathsAndUnservedFieldsAreNamed) {
  json body = CustomJob({Merge(Pool("n1-standard-4", 1, Package()),
                              json{{"nfsMounts", json::array({json::object()})}, {"bogus", 1}})},
                        {{"persistentResourceId", "pool"}, {"scheduling", {{"timeout", "soon"}}}});
  body["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "one";
  codec::DecodedVertexJob d = codec::DecodeCustomJob(body, "us-central1");
  std::vector<std::string> fields;
  for (const auto& v : d.violations) fields.push_back(v.field);
  EXPECT_THAT(fields, Contains("jobSpec.workerPoolSpecs[0].bogus"));
  EXPECT_THAT(fields, Contains("jobSpec.workerPoolSpecs[0].replicaCount"));
  EXPECT_THAT(fields, Contains("jobSpec.scheduling.timeout"));
  EXPECT_THAT(d.job.vertex->unserved, Contains("jobSpec.persistentResourceId"));
  EXPECT_THAT(d.job.vertex->unserved, Contains("jobSpec.workerPoolSpecs[0].nfsMounts"));
}

struct RuleRow {
  std::string name;
  json body;
  std::vector<std::string> fields;  // each must be among the violations
  std::string message_has;
};

TEST(VertexValidation, Rules) {
  const RuleRow rows[] = {
      {"valid: a package", CustomJob({Pool("n1-standard-4", 1, Package())}), {}, ""},
      {"valid: a container chief and workers",
       CustomJob({Pool("n1-standard-4", 1, Container()), Pool("n1-standard-4", 2, Container())}),
       {},
       ""},
      {"no pools", CustomJob({}), {"jobSpec.workerPoolSpecs"}, "at least the first pool"},
      {"an empty chief", CustomJob({json::object(), Pool("n1-standard-4", 1, Container())}),
       {"jobSpec.workerPoolSpecs[0]"}, "chief"},
      {"two chiefs", CustomJob({Pool("n1-standard-4", 2, Container())}), {"jobSpec.workerPoolSpecs[0].replicaCount"},
       "exactly 1"},
      {"no workers in pool 1", CustomJob({Pool("n1-standard-4", 1, Container()), Pool("n1-standard-4", 0, Container())}),
       {"jobSpec.workerPoolSpecs[1].replicaCount"}, "at least 1"},
      {"both specs", CustomJob({Merge(Pool("n1-standard-4", 1, Container()), Package())}),
       {"jobSpec.workerPoolSpecs[0]"}, "exactly one of"},
      {"neither spec", CustomJob({Pool("n1-standard-4", 1)}), {"jobSpec.workerPoolSpecs[0]"}, "exactly one of"},
      {"no machine type", CustomJob({Pool("", 1, Container())}), {"jobSpec.workerPoolSpecs[0].machineSpec.machineType"},
       ""},
      {"an unknown machine type", CustomJob({Pool("n9-giant", 1, Container())}),
       {"jobSpec.workerPoolSpecs[0].machineSpec.machineType"}, ""},
      {"two packages", CustomJob({Pool("n1-standard-4", 1, Package()), Pool("n1-standard-4", 1, Package("other.task"))}),
       {"jobSpec.workerPoolSpecs[1].pythonPackageSpec"}, "one package"},
      {"an executor image not served",
       CustomJob({Pool("n1-standard-4", 1, json{{"pythonPackageSpec",
                                                 {{"executorImageUri", "docker.io/me/mine:1"},
                                                  {"packageUris", json::array({"gs://b/p.tar.gz"})},
                                                  {"pythonModule", "t.task"}}}})}),
       {"jobSpec.workerPoolSpecs[0].pythonPackageSpec.executorImageUri"}, "not a training image"},
      {"env the loader acts on, or mlengine's own",
       CustomJob({Merge(Pool("n1-standard-4", 1, Container()),
                        json{{"containerSpec", {{"env", json::array({{{"name", "OK_VAR"}, {"value", "1"}},
                                                                      {{"name", "LD_PRELOAD"}, {"value", "/x.so"}},
                                                                      {{"name", "MLENGINE_RUN_DIR"}, {"value", "/"}},
                                                                      {{"name", "GLIBC_TUNABLES"}, {"value", "x"}}})}}}})}),
       {"jobSpec.workerPoolSpecs[0].containerSpec.env[1].name", "jobSpec.workerPoolSpecs[0].containerSpec.env[2].name",
        "jobSpec.workerPoolSpecs[0].containerSpec.env[3].name"},
       "cannot be set"},
      {"web access", CustomJob({Pool("n1-standard-4", 1, Container())}, {{"enableWebAccess", true}}),
       {"jobSpec.enableWebAccess"}, "cannot be served"},
      {"more than four pools",
       CustomJob({Pool("n1-standard-4", 1, Container()), Pool("n1-standard-4", 1, Container()),
                  Pool("n1-standard-4", 1, Container()), Pool("n1-standard-4", 1, Container()),
                  Pool("n1-standard-4", 1, Container())}),
       {"jobSpec.workerPoolSpecs"}, "at most 4"},
  };
  validate::Config config = validate::Config::Defaults();
  for (const RuleRow& row : rows) {
    SCOPED_TRACE(row.name);
    codec::DecodedVertexJob d = codec::DecodeCustomJob(row.body, "us-central1");
    ASSERT_THAT(d.violations, IsEmpty());
    for (const auto& pool : d.job.vertex->pools) {
      if (pool.has_python_package && !pool.executor_image_uri.empty()) {
        d.job.training_input->runtime_version = validate::RuntimeForExecutorImage(config, pool.executor_image_uri);
        break;
      }
    }
    const std::vector<common::FieldViolation> got = validate::ValidateJob(d.job, config);
    if (row.fields.empty()) {
      EXPECT_THAT(got, IsEmpty());
      continue;
    }
    std::vector<std::string> fields;
    std::string text;
    for (const auto& v : got) {
      fields.push_back(v.field);
      text += v.field + ": " + v.description + "\n";
    }
    for (const std::string& f : row.fields) EXPECT_THAT(fields, Contains(f)) << text;
    EXPECT_THAT(text, HasSubstr(row.message_has));
    // Never a jobId complaint: the server names a custom job.
    EXPECT_THAT(text, ::testing::Not(HasSubstr("jobId")));
  }
}

TEST(VertexValidation, ACloudTpuContainerGoesWithItsImagesTpuRuntimeAndKeepsIt) {
  validate::Config config = validate::Config::Defaults();
  config.runtime_versions.push_back({"pytorch-1.13-cpu", {"3.11"}, /*tpu_capable=*/true});
  config.installed_runtimes = {"pytorch-1.13-cpu"};
  EXPECT_EQ(validate::TpuRuntimeForImage(config, "gcr.io/cloud-ml-public/training/pytorch-xla.1-11:latest"),
            "pytorch-1.11");
  EXPECT_EQ(validate::TpuRuntimeForImage(config, "gcr.io/p/mine:1"), "pytorch-1.13-cpu");
  config.runtime_versions.back().tpu_capable = false;
  EXPECT_EQ(validate::TpuRuntimeForImage(config, "gcr.io/p/mine:1"), "");
  EXPECT_EQ(model::VertexFieldOf("trainingInput.workerConfig.tpuTfVersion", model::VertexJob{}),
            "jobSpec.workerPoolSpecs[1].containerSpec.imageUri");

  model::Job job = Decoded(CustomJob(
      {Pool("n1-highcpu-16", 1, Container()),
       Merge(Pool("cloud-tpu", 1, Container()),
             json{{"machineSpec", {{"acceleratorType", "TPU_V2"}, {"acceleratorCount", 8}}}})}));
  job.training_input->worker_config->tpu_tf_version = "pytorch-1.13-cpu";  // what admission chose
  absl::StatusOr<model::Job> stored = codec::ParseStoredJob(codec::SerializeJobForStorage(job));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->training_input->worker_config->tpu_tf_version, "pytorch-1.13-cpu");
}

TEST(VertexValidation, ExecutorImagesMapToRuntimes) {
  validate::Config config = validate::Config::Defaults();
  config.runtime_versions.push_back({"pytorch-1.13-cpu", {"3.11"}, false});
  config.installed_runtimes = {"pytorch-1.13-cpu"};
  config.executor_images = {{"registry.example/torch-gpu:*", "pytorch-2.1-gpu"}};
  EXPECT_EQ(validate::RuntimeForExecutorImage(config, "registry.example/torch-gpu:2.1"), "pytorch-2.1-gpu");
  EXPECT_EQ(validate::RuntimeForExecutorImage(config, kExecutor), "pytorch-1.13-cpu");
  EXPECT_EQ(validate::RuntimeForExecutorImage(config, "europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-12:latest"),
            "pytorch-1.13-cpu");
  EXPECT_EQ(validate::RuntimeForExecutorImage(config, "docker.io/vertex-ai/training/x"), "");
  EXPECT_EQ(validate::RuntimeForExecutorImage(config, "us-docker.pkg.dev/other/training/x"), "");
}

// ---- hyperparameterTuningJobs ----

json StudySpec() {
  json lr = {{"parameterId", "lr"},
             {"doubleValueSpec", {{"minValue", 0.001}, {"maxValue", 0.1}}},
             {"scaleType", "UNIT_LOG_SCALE"}};
  json layers = {{"parameterId", "layers"}, {"integerValueSpec", {{"minValue", "1"}, {"maxValue", "4"}}}};
  json opt = {{"parameterId", "opt"}, {"categoricalValueSpec", {{"values", {"adam", "sgd"}}}}};
  json batch = {{"parameterId", "batch"}, {"discreteValueSpec", {{"values", {16, 32, 64}}}}};
  json params = json::array();
  for (json* p : {&lr, &layers, &opt, &batch}) params.push_back(*p);
  json metrics = json::array();
  metrics.push_back({{"metricId", "accuracy"}, {"goal", "MAXIMIZE"}});
  return {{"metrics", std::move(metrics)},
          {"parameters", std::move(params)},
          {"algorithm", "RANDOM_SEARCH"},
          {"decayCurveStoppingSpec", json::object()}};
}

json TuningJob(json study = StudySpec(), int max_trials = 6, int parallel = 2) {
  json job = CustomJob({Pool("n1-standard-4", 1, Package())},
                       {{"baseOutputDirectory", {{"outputUriPrefix", "gs://b/out"}}}});
  return {{"displayName", "tune"},
          {"studySpec", std::move(study)},
          {"maxTrialCount", max_trials},
          {"parallelTrialCount", parallel},
          {"trialJobSpec", job["jobSpec"]}};
}

model::Job DecodedTuning(const json& body) {
  codec::DecodedVertexJob d = codec::DecodeHyperparameterTuningJob(body, "us-central1");
  EXPECT_THAT(d.violations, IsEmpty()) << body.dump();
  d.job.project = "p";
  d.job.job_id = "9876543210987654321";
  return d.job;
}

TEST(VertexTuning, TheStudyIsTheJobsHyperparameters) {
  const model::Job job = DecodedTuning(TuningJob());
  ASSERT_TRUE(job.vertex->IsTuningJob());
  const model::TrainingInput& t = *job.training_input;
  ASSERT_TRUE(t.hyperparameters.has_value());
  const model::HyperparameterSpec& h = *t.hyperparameters;
  EXPECT_EQ(h.goal, "MAXIMIZE");
  EXPECT_EQ(h.hyperparameter_metric_tag, "accuracy");
  EXPECT_EQ(h.max_trials, 6);
  EXPECT_EQ(h.max_parallel_trials, 2);
  EXPECT_FALSE(h.max_failed_trials.has_value());
  EXPECT_EQ(h.algorithm, "RANDOM_SEARCH");
  EXPECT_EQ(h.enable_trial_early_stopping, true);
  ASSERT_EQ(h.params.size(), 4u);
  EXPECT_EQ(h.params[0].parameter_name, "lr");
  EXPECT_EQ(h.params[0].type, "DOUBLE");
  EXPECT_EQ(h.params[0].min_value, 0.001);
  EXPECT_EQ(h.params[0].scale_type, "UNIT_LOG_SCALE");
  EXPECT_EQ(h.params[1].type, "INTEGER");
  EXPECT_EQ(h.params[1].max_value, 4);
  EXPECT_EQ(h.params[2].categorical_values, (std::vector<std::string>{"adam", "sgd"}));
  EXPECT_EQ(h.params[3].discrete_values, (std::vector<double>{16, 32, 64}));
  // The trial spec is the job's, as for a custom job.
  EXPECT_EQ(t.python_module, "trainer.task");
  EXPECT_EQ(t.job_dir, "gs://b/out");
  // And the rules of ml v1 hold: a valid study is a valid job.
  validate::Config config = validate::Config::Defaults();
  model::Job admitted = job;
  admitted.training_input->runtime_version = validate::RuntimeForExecutorImage(config, kExecutor);
  EXPECT_THAT(validate::ValidateJob(admitted, config), IsEmpty());
}

TEST(VertexTuning, RoundTripsWithItsTrialsAsVertexWritesThem) {
  json body = TuningJob();
  body["trials"] = json::array();  // output only: a body copied from a get
  model::Job job = DecodedTuning(body);
  job.state = model::JobState::kRunning;
  model::TrainingOutput out;
  out.is_hyperparameter_tuning_job = true;
  model::HyperparameterOutput done;
  done.trial_id = "1";
  done.state = model::JobState::kSucceeded;
  done.hyperparameters = {{"lr", "0.01"}, {"layers", "3"}, {"opt", "adam"}, {"batch", "32"}};
  done.all_metrics = {{10, 0.5}, {20, 0.75}};
  done.final_metric = model::HyperparameterMetric{20, 0.75};
  model::HyperparameterOutput failed;
  failed.trial_id = "2";
  failed.state = model::JobState::kFailed;
  failed.hyperparameters = {{"lr", "0.1"}};
  model::HyperparameterOutput running;
  running.trial_id = "3";
  running.state = model::JobState::kRunning;
  out.trials = {done, failed, running};
  job.training_output = out;

  json wire = codec::EncodeVertexJob(job);
  EXPECT_EQ(wire["name"], "projects/p/locations/us-central1/hyperparameterTuningJobs/9876543210987654321");
  EXPECT_EQ(wire["studySpec"], body["studySpec"]);
  EXPECT_EQ(wire["trialJobSpec"], body["trialJobSpec"]);
  EXPECT_EQ(wire["maxTrialCount"], 6);
  EXPECT_EQ(wire["parallelTrialCount"], 2);
  EXPECT_FALSE(wire.contains("jobSpec"));
  ASSERT_EQ(wire["trials"].size(), 3u);
  const json& t1 = wire["trials"][0];
  EXPECT_EQ(t1["id"], "1");
  EXPECT_EQ(t1["state"], "SUCCEEDED");
  EXPECT_EQ(t1["finalMeasurement"], (json{{"stepCount", "20"}, {"metrics", {{{"metricId", "accuracy"}, {"value", 0.75}}}}}));
  EXPECT_EQ(t1["measurements"].size(), 2u);
  // Numbers for numeric parameters, strings for categorical ones.
  std::map<std::string, json> values;
  for (const auto& p : t1["parameters"]) values[p["parameterId"]] = p["value"];
  EXPECT_EQ(values["lr"], 0.01);
  EXPECT_EQ(values["layers"], 3);
  EXPECT_TRUE(values["layers"].is_number_integer());
  EXPECT_EQ(values["opt"], "adam");
  EXPECT_EQ(values["batch"], 32.0);
  EXPECT_EQ(wire["trials"][1]["state"], "INFEASIBLE");
  EXPECT_TRUE(wire["trials"][1].contains("infeasibleReason"));
  EXPECT_EQ(wire["trials"][2]["state"], "ACTIVE");
  EXPECT_THAT(codec::DiscoverySchema::Aiplatform().Check(wire, "GoogleCloudAiplatformV1HyperparameterTuningJob"),
              IsEmpty());

  // Stored and read back: the same study and spec.
  job.training_input->runtime_version = "pytorch-1.13-cpu";
  absl::StatusOr<model::Job> stored = codec::ParseStoredJob(codec::SerializeJobForStorage(job));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->vertex, job.vertex);
  EXPECT_EQ(codec::EncodeJob(*stored)["trainingInput"], codec::EncodeJob(job)["trainingInput"]);
}

TEST(VertexTuning, ATrialRunsTheTrialSpecWithItsParametersUnderTheBaseDirectory) {
  model::Job job = DecodedTuning(TuningJob());
  job.training_input->runtime_version = "pytorch-1.13-cpu";
  const model::Job trial = service::TrialJobOf(job, "4", {{"lr", "0.05"}, {"layers", "2"}});
  ASSERT_TRUE(trial.vertex.has_value());  // Vertex's replica contract
  EXPECT_EQ(trial.training_input->job_dir, "gs://b/out");  // AIP_MODEL_DIR adds the trial's number
  EXPECT_FALSE(trial.training_input->hyperparameters.has_value());
  EXPECT_THAT(trial.training_input->args, Contains("--lr=0.05"));
  EXPECT_THAT(trial.training_input->args, Contains("--layers=2"));
  // Stored and read back with its own trainingInput (its parameters are in it).
  absl::StatusOr<model::Job> stored = codec::ParseStoredJob(codec::SerializeJobForStorage(trial));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->training_input->args, trial.training_input->args);
  EXPECT_FALSE(stored->training_input->hyperparameters.has_value());
}

TEST(VertexTuning, Rules) {
  json two_metrics = StudySpec();
  two_metrics["metrics"].push_back({{"metricId", "loss"}, {"goal", "MINIMIZE"}});
  json two_specs = StudySpec();
  two_specs["parameters"][0]["integerValueSpec"] = {{"minValue", "1"}, {"maxValue", "2"}};
  json no_spec = StudySpec();
  no_spec["parameters"][0].erase("doubleValueSpec");
  json bad_range = StudySpec();
  bad_range["parameters"][0]["doubleValueSpec"] = {{"minValue", 1.0}, {"maxValue", 0.5}};
  json best = StudySpec();
  best["measurementSelectionType"] = "BEST_MEASUREMENT";
  json no_goal = StudySpec();
  no_goal["metrics"][0].erase("goal");
  json conditional = StudySpec();
  conditional["parameters"][2]["conditionalParameterSpecs"] = json::array({json::object()});
  json convex = StudySpec();
  convex["convexAutomatedStoppingSpec"] = json::object();
  json bad_pool = TuningJob();
  bad_pool["trialJobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "2";
  const RuleRow rows[] = {
      {"valid", TuningJob(), {}, ""},
      {"two metrics", TuningJob(two_metrics), {"studySpec.metrics"}, "one metric"},
      {"two value specs", TuningJob(two_specs), {"studySpec.parameters[0]"}, "exactly one of"},
      {"no value spec", TuningJob(no_spec), {"studySpec.parameters[0]"}, "exactly one of"},
      {"min above max", TuningJob(bad_range), {"studySpec.parameters[0].doubleValueSpec.maxValue"}, "greater than"},
      {"best measurement", TuningJob(best), {"studySpec.measurementSelectionType"}, "last measurement"},
      {"no goal", TuningJob(no_goal), {"studySpec.metrics[0].goal"}, "MAXIMIZE or MINIMIZE"},
      {"conditional parameters", TuningJob(conditional), {"studySpec.parameters[2].conditionalParameterSpecs"},
       "does not serve"},
      {"convex stopping", TuningJob(convex), {"studySpec.convexAutomatedStoppingSpec"}, "does not serve"},
      {"no trials", TuningJob(StudySpec(), 0, 1), {"maxTrialCount"}, "at least 1"},
      {"no parallel trials", TuningJob(StudySpec(), 3, 0), {"parallelTrialCount"}, "at least 1"},
      {"a trial spec's pool", bad_pool, {"trialJobSpec.workerPoolSpecs[0].replicaCount"}, "exactly 1"},
  };
  validate::Config config = validate::Config::Defaults();
  for (const RuleRow& row : rows) {
    SCOPED_TRACE(row.name);
    codec::DecodedVertexJob d = codec::DecodeHyperparameterTuningJob(row.body, "us-central1");
    ASSERT_THAT(d.violations, IsEmpty());
    d.job.training_input->runtime_version = validate::RuntimeForExecutorImage(config, kExecutor);
    const std::vector<common::FieldViolation> got = validate::ValidateJob(d.job, config);
    std::string text;
    std::vector<std::string> fields;
    for (const auto& v : got) {
      fields.push_back(v.field);
      text += v.field + ": " + v.description + "\n";
    }
    if (row.fields.empty()) {
      EXPECT_THAT(got, IsEmpty()) << text;
      continue;
    }
    for (const std::string& f : row.fields) EXPECT_THAT(fields, Contains(f)) << text;
    EXPECT_THAT(text, HasSubstr(row.message_has));
    // Every path is Vertex's, none ml v1's.
    EXPECT_THAT(text, ::testing::Not(HasSubstr("trainingInput")));
  }
}

TEST(VertexFieldOf, ATuningJobsPathsAreItsStudyAndTrialSpec) {
  const model::Job job = DecodedTuning(TuningJob());
  const std::pair<std::string, std::string> rows[] = {
      {"trainingInput.hyperparameters.maxTrials", "maxTrialCount"},
      {"trainingInput.hyperparameters.maxParallelTrials", "parallelTrialCount"},
      {"trainingInput.hyperparameters.goal", "studySpec.metrics[0].goal"},
      {"trainingInput.hyperparameters.hyperparameterMetricTag", "studySpec.metrics[0].metricId"},
      {"trainingInput.hyperparameters.params[0].minValue", "studySpec.parameters[0].doubleValueSpec.minValue"},
      {"trainingInput.hyperparameters.params[1].maxValue", "studySpec.parameters[1].integerValueSpec.maxValue"},
      {"trainingInput.hyperparameters.params[2].categoricalValues[1]",
       "studySpec.parameters[2].categoricalValueSpec.values[1]"},
      {"trainingInput.hyperparameters.params[3].parameterName", "studySpec.parameters[3].parameterId"},
      {"trainingInput.hyperparameters.params[3].type", "studySpec.parameters[3]"},
      {"trainingInput.hyperparameters.params", "studySpec.parameters"},
      {"trainingInput.masterType", "trialJobSpec.workerPoolSpecs[0].machineSpec.machineType"},
      {"trainingInput.jobDir", "trialJobSpec.baseOutputDirectory.outputUriPrefix"},
  };
  for (const auto& [ml, vertex] : rows) EXPECT_EQ(model::VertexFieldOf(ml, *job.vertex), vertex) << ml;
}

TEST(VertexEnums, TravelAsTheirProtoNumbersBothWays) {
  using Encoding = codec::DiscoverySchema::EnumEncoding;
  const codec::DiscoverySchema& schema = codec::DiscoverySchema::Aiplatform();
  json job = TuningJob();
  job["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_A100";
  job["state"] = "JOB_STATE_RUNNING";
  job["trials"] = json::array({json{{"id", "1"}, {"state", "ACTIVE"}}});
  json list = {{"hyperparameterTuningJobs", json::array({job})}};
  const json names = list;
  schema.RecodeEnums(list, "GoogleCloudAiplatformV1ListHyperparameterTuningJobsResponse", Encoding::kNumbers);
  const json& numbered = list["hyperparameterTuningJobs"][0];
  // The protos' numbers, not the discovery list's positions (A100 is 8).
  EXPECT_EQ(numbered["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"], 8);
  EXPECT_EQ(numbered["state"], 3);
  EXPECT_EQ(numbered["trials"][0]["state"], 2);
  EXPECT_EQ(numbered["studySpec"]["metrics"][0]["goal"], 1);
  EXPECT_EQ(numbered["studySpec"]["algorithm"], 3);
  EXPECT_EQ(numbered["studySpec"]["parameters"][0]["scaleType"], 2);
  EXPECT_EQ(numbered["displayName"], "tune");  // not an enum
  schema.RecodeEnums(list, "GoogleCloudAiplatformV1ListHyperparameterTuningJobsResponse", Encoding::kNames);
  EXPECT_EQ(list, names);
  // A number as a JSON string is a number; one no enum has is left for Check to refuse.
  json pool = {{"machineSpec", {{"machineType", "n1-standard-4"}, {"acceleratorType", "5"}}}};
  schema.RecodeEnums(pool, "GoogleCloudAiplatformV1WorkerPoolSpec", Encoding::kNames);
  EXPECT_EQ(pool["machineSpec"]["acceleratorType"], "NVIDIA_TESLA_T4");
  pool["machineSpec"]["acceleratorType"] = 999;
  schema.RecodeEnums(pool, "GoogleCloudAiplatformV1WorkerPoolSpec", Encoding::kNames);
  EXPECT_EQ(pool["machineSpec"]["acceleratorType"], 999);
  EXPECT_THAT(schema.Check(pool, "GoogleCloudAiplatformV1WorkerPoolSpec"), ::testing::SizeIs(1));
  // ml v1's document has no numbers: nothing changes.
  json ml = {{"state", "RUNNING"}};
  codec::DiscoverySchema::Embedded().RecodeEnums(ml, "GoogleCloudMlV1__Job", Encoding::kNumbers);
  EXPECT_EQ(ml["state"], "RUNNING");
}

TEST(OperationLog, KeepsDoneOperationsNewestFirstBoundedAndForgetsOnDelete) {
  service::OperationLog log;
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  std::vector<service::OperationRecord> added;
  for (int i = 0; i < 5; ++i) {
    added.push_back(log.Add("p", "us-central1", "projects/p/locations/us-central1/customJobs/" + std::to_string(i),
                            "meta", "resp", now));
  }
  log.Add("other", "us-central1", "x", "meta", "resp", now);
  EXPECT_EQ(added[0].Name(), "projects/p/locations/us-central1/operations/" + added[0].id);
  EXPECT_EQ(added[0].id.size(), 19u);
  ASSERT_TRUE(log.Get("p", "us-central1", added[2].id).has_value());
  EXPECT_EQ(log.Get("p", "us-central1", added[2].id)->target, "projects/p/locations/us-central1/customJobs/2");
  EXPECT_FALSE(log.Get("p", "europe-west4", added[2].id).has_value());
  EXPECT_FALSE(log.Get("other", "us-central1", added[2].id).has_value());
  bool more = false;
  auto page = log.List("p", "us-central1", std::nullopt, 3, &more);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_TRUE(more);
  EXPECT_EQ(page[0].id, added[4].id);
  auto rest = log.List("p", "us-central1", page.back().sequence, 3, &more);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_FALSE(more);
  EXPECT_EQ(rest[1].id, added[0].id);
  EXPECT_TRUE(log.Delete("p", "us-central1", added[0].id));
  EXPECT_FALSE(log.Delete("p", "us-central1", added[0].id));
  EXPECT_FALSE(log.Get("p", "us-central1", added[0].id).has_value());
  for (size_t i = 0; i < service::OperationLog::kMaxPerLocation; ++i) log.Add("p", "us-central1", "t", "m", "r", now);
  EXPECT_FALSE(log.Get("p", "us-central1", added[4].id).has_value());  // the oldest go first
}

// A job's copies share its Vertex spec (model/shared_value.h): a copy is a
// pointer, equality is by value, and a new value never reaches the copies.
TEST(SharedValue, CopiesShareOneValueAndCompareByValue) {
  model::VertexJob spec;
  spec.location = "us-central1";
  spec.display_name = "a";
  model::Job job;
  EXPECT_FALSE(job.vertex.has_value());
  EXPECT_TRUE(job.vertex == std::optional<model::VertexJob>());
  job.vertex = spec;
  const model::Job copy = job;
  ASSERT_TRUE(copy.vertex.has_value());
  EXPECT_EQ(&*copy.vertex, &*job.vertex);  // one value, not two
  EXPECT_EQ(copy.vertex->display_name, "a");

  model::Job other;
  other.vertex = spec;  // an equal value of its own
  EXPECT_NE(&*other.vertex, &*job.vertex);
  EXPECT_TRUE(other.vertex == job.vertex);

  spec.display_name = "b";
  job.vertex = spec;  // a new value: the copy keeps the old one
  EXPECT_EQ(copy.vertex->display_name, "a");
  EXPECT_FALSE(copy.vertex == job.vertex);
  EXPECT_TRUE(job.vertex == std::optional<model::VertexJob>(spec));
  EXPECT_EQ(job.vertex.Copy()->display_name, "b");

  job.vertex.reset();
  EXPECT_FALSE(job.vertex == copy.vertex);
  EXPECT_FALSE(job.vertex.Copy().has_value());
}

}  // namespace
}  // namespace mle
