// Vertex AI's custom jobs on the ml v1 engine: the spec as an ml v1
// trainingInput (model/vertex.h), violations with Vertex's paths, the wire
// codec against api/aiplatform.v1.json (codec/vertex_codec.h), the stored
// and Slurm launch forms, and the Vertex rules of validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "codec/discovery.h"
#include "codec/job_codec.h"
#include "codec/launch_codec.h"
#include "codec/vertex_codec.h"
#include "model/job.h"
#include "model/vertex.h"
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
  for (const auto& [ml, vertex] : rows) EXPECT_EQ(model::VertexFieldOf(ml), vertex) << ml;
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
  json out = codec::EncodeCustomJob(job);
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
  launch.vertex = job.vertex;
  absl::StatusOr<codec::LaunchJob> read = codec::DecodeLaunchJob(codec::EncodeLaunchJob(launch));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->vertex, job.vertex);
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
  json out = codec::EncodeCustomJob(job);
  EXPECT_EQ(out["error"], (json{{"code", 3}, {"message", job.error_message}}));
  job.state = model::JobState::kCancelled;
  job.error_message.clear();
  EXPECT_EQ(codec::EncodeCustomJob(job)["error"]["code"], 1);
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

}  // namespace
}  // namespace mle
