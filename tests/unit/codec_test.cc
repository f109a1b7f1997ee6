// The codec against the discovery document: every field the server emits
// exists in the schema with the right type, and strict decoding refuses what
// the contract does not have.
#include <gtest/gtest.h>

#include "codec/discovery.h"
#include "codec/job_codec.h"
#include "common/status.h"

namespace mle::codec {
namespace {

using nlohmann::json;

model::Job FullyPopulatedJob() {
  model::Job job;
  job.project = "p";
  job.job_id = "everything_1";
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = "n1-highcpu-16";
  model::ReplicaConfig master;
  master.image_uri = "gcr.io/p/img:tag";
  master.container_command = {"python3"};
  master.container_args = {"-m", "trainer"};
  master.disk_config = model::DiskConfig{"pd-ssd", 100};
  master.accelerator_config = model::AcceleratorConfig{1, "NVIDIA_TESLA_T4"};
  t.master_config = master;
  t.worker_type = "cloud_tpu";
  t.worker_count = 1;
  model::ReplicaConfig worker;
  worker.tpu_tf_version = "2.11";
  worker.accelerator_config = model::AcceleratorConfig{8, "TPU_V3"};
  t.worker_config = worker;
  t.parameter_server_type = "n1-highmem-8";
  t.parameter_server_count = 2;
  t.parameter_server_config = model::ReplicaConfig{};
  t.evaluator_type = "n1-highcpu-16";
  t.evaluator_count = 1;
  t.evaluator_config = model::ReplicaConfig{};
  t.package_uris = {"gs://b/p.tar.gz"};
  t.python_module = "trainer.task";
  t.args = {"--epochs=1"};
  model::HyperparameterSpec h;
  h.goal = "MAXIMIZE";
  h.params = {{"lr", "DOUBLE", 0.001, 0.1, {}, {}, "UNIT_LOG_SCALE"},
              {"opt", "CATEGORICAL", std::nullopt, std::nullopt, {"sgd", "adam"}, {}, ""},
              {"layers", "DISCRETE", std::nullopt, std::nullopt, {}, {1, 2, 4}, ""}};
  h.max_trials = 4;
  h.max_parallel_trials = 2;
  h.max_failed_trials = 1;
  h.hyperparameter_metric_tag = "accuracy";
  h.algorithm = "RANDOM_SEARCH";
  h.enable_trial_early_stopping = true;
  h.resume_previous_job_id = "old_job";
  t.hyperparameters = h;
  t.region = "us-central1";
  t.job_dir = "gs://b/out";
  t.runtime_version = "2.11";
  t.python_version = "3.7";
  t.scheduling = model::Scheduling{"7200s", "3600s", 10};
  t.network = "projects/1/global/networks/n";
  t.service_account = "sa@p.iam";
  t.use_chief_in_tf_config = true;
  t.enable_web_access = false;
  t.has_encryption_config = true;
  t.kms_key_name = "projects/p/locations/l/keyRings/r/cryptoKeys/k";
  job.training_input = t;
  job.labels = {{"team", "vision"}};
  job.state = model::JobState::kSucceeded;
  job.create_time = absl::FromUnixSeconds(1700000000);
  job.start_time = absl::FromUnixSeconds(1700000010);
  job.end_time = absl::FromUnixSeconds(1700000100);
  job.error_message = "none";
  job.job_position = 0;
  model::TrainingOutput out;
  out.completed_trial_count = 2;
  out.consumed_ml_units = 1.5;
  out.hyperparameter_metric_tag = "accuracy";
  out.is_hyperparameter_tuning_job = true;
  out.web_access_uris = {{"master-replica-0", "http://x"}};
  model::HyperparameterOutput trial;
  trial.trial_id = "1";
  trial.hyperparameters = {{"lr", "0.01"}};
  trial.final_metric = model::HyperparameterMetric{100, 0.97};
  trial.state = model::JobState::kSucceeded;
  trial.start_time = absl::FromUnixSeconds(1700000010);
  trial.end_time = absl::FromUnixSeconds(1700000050);
  trial.is_trial_stopped_early = true;
  out.trials = {trial};
  job.training_output = out;
  job.version = 7;
  return job;
}

TEST(CodecTest, EveryEmittedFieldIsInTheDiscoveryDocument) {
  json wire = EncodeJob(FullyPopulatedJob());
  auto violations = DiscoverySchema::Embedded().Check(wire, "GoogleCloudMlV1__Job");
  for (const auto& v : violations) ADD_FAILURE() << v.field << ": " << v.description;
  // int64 fields go out as strings.
  EXPECT_TRUE(wire["trainingInput"]["workerCount"].is_string());
  EXPECT_TRUE(wire["trainingInput"]["workerConfig"]["acceleratorConfig"]["count"].is_string());
  EXPECT_TRUE(wire["trainingOutput"]["completedTrialCount"].is_string());
  EXPECT_TRUE(wire["trainingOutput"]["trials"][0]["finalMetric"]["trainingStep"].is_string());
  EXPECT_TRUE(wire["jobPosition"].is_string());
  EXPECT_EQ(wire["createTime"], "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(wire["state"], "SUCCEEDED");
}

TEST(CodecTest, ListAndConfigResponsesMatchTheSchema) {
  json list = EncodeListJobsResponse({FullyPopulatedJob()}, "token");
  EXPECT_TRUE(DiscoverySchema::Embedded().Check(list, "GoogleCloudMlV1__ListJobsResponse").empty());
  EXPECT_EQ(EncodeListJobsResponse({}, ""), json::object());
  model::Project p{"p", 123456789012, "sa@x", "tpu@x", absl::UnixEpoch()};
  json config = EncodeGetConfigResponse(p);
  EXPECT_TRUE(DiscoverySchema::Embedded().Check(config, "GoogleCloudMlV1__GetConfigResponse").empty());
  EXPECT_EQ(config["serviceAccountProject"], "123456789012");
}

TEST(CodecTest, DecodeRoundTripsEverySpecField) {
  model::Job job = FullyPopulatedJob();
  auto decoded = DecodeJobRequest(EncodeJob(job));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  // Output-only fields are dropped on input; the spec survives unchanged.
  EXPECT_EQ(EncodeJob(*decoded)["trainingInput"], EncodeJob(job)["trainingInput"]);
  EXPECT_EQ(decoded->labels, job.labels);
  EXPECT_EQ(decoded->state, model::JobState::kUnspecified);
}

TEST(CodecTest, StorageRoundTripKeepsEverything) {
  model::Job job = FullyPopulatedJob();
  job.sequence = 42;
  auto back = ParseStoredJob(SerializeJobForStorage(job));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(EncodeJob(*back), EncodeJob(job));
  EXPECT_EQ(back->project, "p");
  EXPECT_EQ(back->sequence, 42);
  EXPECT_EQ(back->version, 7);
}

// Strict decoding: one row per kind of wire error, each naming its field.
TEST(CodecTest, RefusesWhatTheContractDoesNotHave) {
  struct Case { const char* body; const char* field; const char* description_part; };
  const Case cases[] = {
      {R"({"jobId":"a","colour":"red"})", "colour", "Unknown field"},
      {R"({"jobId":5})", "jobId", "must be a string"},
      {R"({"jobId":"a","trainingInput":"x"})", "trainingInput", "must be an object"},
      {R"({"jobId":"a","trainingInput":{"workerCount":"three"}})", "trainingInput.workerCount", "64-bit integer"},
      {R"({"jobId":"a","trainingInput":{"workerCount":1.5}})", "trainingInput.workerCount", "64-bit integer"},
      {R"({"jobId":"a","trainingInput":{"scaleTier":"HUGE"}})", "trainingInput.scaleTier", "not one of"},
      {R"({"jobId":"a","trainingInput":{"args":"--x"}})", "trainingInput.args", "must be a list"},
      {R"({"jobId":"a","trainingInput":{"args":[1]}})", "trainingInput.args[0]", "must be a string"},
      {R"({"jobId":"a","trainingInput":{"scheduling":{"maxRunningTime":"2h"}}})",
       "trainingInput.scheduling.maxRunningTime", "duration"},
      {R"({"jobId":"a","trainingInput":{"scheduling":{"priority":"high"}}})",
       "trainingInput.scheduling.priority", "integer"},
      {R"({"jobId":"a","trainingInput":{"scheduling":{"priority":99999999999}}})",
       "trainingInput.scheduling.priority", "out of range"},
      // Found by fuzzing: a float beyond int64 was cast to int64 (undefined behaviour).
      {R"({"jobId":"a","trainingInput":{"scheduling":{"priority":1e75}}})",
       "trainingInput.scheduling.priority", "out of range"},
      {R"({"jobId":"a","trainingInput":{"scheduling":{"priority":-9.3e18}}})",
       "trainingInput.scheduling.priority", "out of range"},
      {R"({"jobId":"a","trainingInput":{"useChiefInTfConfig":"yes"}})", "trainingInput.useChiefInTfConfig", "true or false"},
      {R"({"jobId":"a","labels":[]})", "labels", "must be an object"},
      {R"({"jobId":"a","labels":{"k":1}})", "labels.k", "must be a string"},
      {R"({"jobId":"a","etag":"***"})", "etag", "base64"},
      {R"({"jobId":"a","trainingInput":{"masterConfig":{"acceleratorConfig":{"type":"TPU_V9"}}}})",
       "trainingInput.masterConfig.acceleratorConfig.type", "not one of"},
      {R"({"jobId":"a","trainingInput":{"hyperparameters":{"params":[{"minValue":"low"}]}}})",
       "trainingInput.hyperparameters.params[0].minValue", "must be a number"},
  };
  for (const auto& c : cases) {
    auto result = DecodeJobRequest(json::parse(c.body));
    ASSERT_FALSE(result.ok()) << c.body;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    auto v = common::GetFieldViolations(result.status());
    ASSERT_EQ(v.size(), 1u) << c.body;
    EXPECT_EQ(v[0].field, c.field) << c.body;
    EXPECT_NE(v[0].description.find(c.description_part), std::string::npos) << c.body << " -> " << v[0].description;
  }
}

TEST(CodecTest, AcceptsInt64AsStringOrNumberAndIgnoresOutputFields) {
  auto a = DecodeJobRequest(json::parse(R"({"jobId":"a","trainingInput":{"workerCount":"3"}})"));
  auto b = DecodeJobRequest(json::parse(R"({"jobId":"a","trainingInput":{"workerCount":3}})"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->training_input->worker_count, 3);
  EXPECT_EQ(b->training_input->worker_count, 3);
  auto c = DecodeJobRequest(json::parse(R"({"jobId":"a","state":"SUCCEEDED","createTime":"whenever"})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, model::JobState::kUnspecified);
}

TEST(CodecTest, ReportsEveryViolationAtOnce) {
  auto r = DecodeJobRequest(json::parse(R"({"jobId":1,"x":1,"trainingInput":{"y":2,"workerCount":"z"}})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(common::GetFieldViolations(r.status()).size(), 4u);
}

TEST(CodecTest, ErrorBodyHasGoogleShape) {
  json e = EncodeError(common::InvalidArgumentWithViolations("bad", {{"jobId", "is bad"}}));
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_EQ(e["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(e["error"]["details"][0]["@type"], "type.googleapis.com/google.rpc.BadRequest");
  EXPECT_EQ(e["error"]["details"][0]["fieldViolations"][0]["field"], "jobId");
  json nf = EncodeError(absl::NotFoundError("gone"));
  EXPECT_EQ(nf["error"]["code"], 404);
  EXPECT_FALSE(nf["error"].contains("details"));
}

}  // namespace
}  // namespace mle::codec
