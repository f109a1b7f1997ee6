// The Slurm run files (rundir/slurm_files.h) and the launcher's wire formats
// (codec/launch_codec.h): every file round-trips, and a malformed file, or
// one in another format version, is refused with a message that names the
// file and says what is wrong.
#include "rundir/slurm_files.h"

#include <filesystem>
#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "codec/job_codec.h"
#include "common/run_layout.h"
#include "rundir/file_io.h"

namespace mle::rundir {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SlurmFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / absl::StrCat("slurm-files-test-", ::getpid(), "-",
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    ASSERT_TRUE(CreateDirectories(dir_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Put(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  std::string dir_;
};

codec::LaunchJob SampleLaunchJob() {
  codec::LaunchJob j;
  j.project = "proj";
  j.job_id = "mnist_1";
  model::TrainingInput& t = j.training_input;
  t.scale_tier = "CUSTOM";
  t.master_type = "n1-highcpu-16";
  t.worker_type = "cloud_tpu";
  t.worker_count = 1;
  model::ReplicaConfig rc;
  rc.accelerator_config = model::AcceleratorConfig{32, "TPU_V3_POD"};
  t.worker_config = rc;
  t.python_module = "trainer.task";
  t.args = {"--epochs", "3", "it's \"quoted\""};
  t.job_dir = "gs://b/out";
  t.runtime_version = "2.11";
  t.region = "us-central1";
  t.use_chief_in_tf_config = true;
  t.scheduling = model::Scheduling{"3600s", "", 10};
  j.components = {{"tpu", {"tpu-replica-0", "tpu-replica-1", "tpu-replica-2", "tpu-replica-3"}, "master-replica-0"}};
  return j;
}

std::string TrainingInputJson(const model::TrainingInput& t) {
  model::Job j;
  j.training_input = t;
  return codec::EncodeJob(j)["trainingInput"].dump();
}

TEST_F(SlurmFilesTest, LaunchJobRoundTrips) {
  codec::LaunchJob in = SampleLaunchJob();
  in.components.push_back({"evaluator", {"evaluator-replica-0"}, ""});
  ASSERT_TRUE(WriteLaunchJob(dir_, in).ok());
  auto out = ReadLaunchJob(dir_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->project, "proj");
  EXPECT_EQ(out->job_id, "mnist_1");
  EXPECT_EQ(TrainingInputJson(out->training_input), TrainingInputJson(in.training_input));
  ASSERT_EQ(out->components.size(), 2u);
  EXPECT_EQ(out->components[0].role, "tpu");
  EXPECT_EQ(out->components[0].tasks, in.components[0].tasks);
  EXPECT_EQ(out->components[0].first_node_task, "master-replica-0");
  EXPECT_EQ(out->components[1].tasks, std::vector<std::string>{"evaluator-replica-0"});
  EXPECT_EQ(out->components[1].first_node_task, "");
  // The file says what it is.
  EXPECT_THAT(*ReadFile(LaunchJobPath(dir_)), HasSubstr("\"format\": \"mlengine.launch/v1\""));
  EXPECT_EQ(out->access_token, "");  // no credential given: none written
  EXPECT_EQ(out->attempt, 1);

  EXPECT_EQ(out->progress_every_ms, 0);

  in.attempt = 3;  // run again after a preemption or a retried failure
  in.progress_every_ms = 2500;  // the stall watch's shims record CPU time
  ASSERT_TRUE(WriteLaunchJob(dir_, in).ok());
  out = ReadLaunchJob(dir_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->attempt, 3);
  EXPECT_EQ(out->progress_every_ms, 2500);

  in.service_account = "trainer@proj.iam.mlengine.local";
  in.access_token = "mle1.token";
  in.api_endpoint = "http://head:8080";
  ASSERT_TRUE(WriteLaunchJob(dir_, in).ok());
  out = ReadLaunchJob(dir_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->service_account, in.service_account);
  EXPECT_EQ(out->access_token, in.access_token);
  EXPECT_EQ(out->api_endpoint, in.api_endpoint);
  EXPECT_FALSE(out->containers.has_value());

  // A custom container job: its pinned images and how nodes run podman.
  in.containers = codec::LaunchContainers{{{"gcr.io/p/t:1", "r:5000/p/t@sha256:" + std::string(64, 'c')}},
                                          "podman", "/usr/bin/catatonit", "/usr/sbin/runc", "cdi", true,
                                          "/data/runs/p/j/containers.conf",
                                          {{"gcr.io/p/t:1", "gcr.io/p/t:1 (simulated here by t)"}}};
  ASSERT_TRUE(WriteLaunchJob(dir_, in).ok());
  out = ReadLaunchJob(dir_);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->containers.has_value());
  EXPECT_EQ(*out->containers, *in.containers);
}

TEST_F(SlurmFilesTest, LaunchJobRefusesOtherFormatsAndMalformedDocuments) {
  const nlohmann::json v1 = nlohmann::json::parse(codec::EncodeLaunchJob(SampleLaunchJob()));
  auto changed = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json doc = v1;
    change(doc);
    return doc.dump();
  };
  model::Job stored;
  stored.project = "proj";
  stored.job_id = "mnist_1";
  stored.training_input = SampleLaunchJob().training_input;
  struct Case {
    std::string name;
    std::string text;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"the database's storage encoding (an older mlengined)", codec::SerializeJobForStorage(stored),
       absl::StatusCode::kFailedPrecondition,
       "has no \"format\" field: an older mlengine wrote it, and this one reads \"mlengine.launch/v1\" only"},
      {"a later version", changed([](auto& d) { d["format"] = "mlengine.launch/v2"; }),
       absl::StatusCode::kFailedPrecondition,
       "is in format \"mlengine.launch/v2\", but this program reads \"mlengine.launch/v1\" only: mlengined and "
       "mlengine-slurm-launch must come from the same installation"},
      {"another document", changed([](auto& d) { d["format"] = "mlengine.task-launch/v1"; }),
       absl::StatusCode::kFailedPrecondition, "is in format \"mlengine.task-launch/v1\""},
      {"not JSON", "SUCCEEDED\n", absl::StatusCode::kDataLoss, "is not JSON"},
      {"truncated", v1.dump().substr(0, v1.dump().size() / 2), absl::StatusCode::kDataLoss, "is not JSON"},
      {"an array", "[1]", absl::StatusCode::kDataLoss, "is not a JSON object"},
      {"an unknown field", changed([](auto& d) { d["shape"] = 1; }), absl::StatusCode::kDataLoss,
       "has an unknown field \"shape\""},
      {"an empty project", changed([](auto& d) { d["project"] = ""; }), absl::StatusCode::kDataLoss,
       "has an empty \"project\""},
      {"no job id", changed([](auto& d) { d.erase("jobId"); }), absl::StatusCode::kDataLoss, "has no \"jobId\""},
      {"a trainingInput field of the wrong type", changed([](auto& d) { d["trainingInput"]["scaleTier"] = 7; }),
       absl::StatusCode::kDataLoss, "has an invalid trainingInput (the trainingInput has a field of the wrong type"},
      {"a trainingInput that is a list", changed([](auto& d) { d["trainingInput"] = nlohmann::json::array(); }),
       absl::StatusCode::kDataLoss, "has no \"trainingInput\" object"},
      {"no components", changed([](auto& d) { d["components"] = nlohmann::json::array(); }),
       absl::StatusCode::kDataLoss, "has no \"components\" (a non-empty list)"},
      {"a component without tasks", changed([](auto& d) { d["components"][0]["tasks"] = nlohmann::json::array(); }),
       absl::StatusCode::kDataLoss, "has no tasks in component 0"},
      {"a task that is not a string", changed([](auto& d) { d["components"][0]["tasks"][1] = 7; }),
       absl::StatusCode::kDataLoss, "has a \"tasks\" entry that is not a string: 7 in component 0"},
      {"an attempt that is not a positive number", changed([](auto& d) { d["attempt"] = 0; }),
       absl::StatusCode::kDataLoss, "has an \"attempt\" that is not a positive number"},
      {"a progress interval out of range", changed([](auto& d) { d["progressEveryMs"] = 5; }),
       absl::StatusCode::kDataLoss, "has a \"progressEveryMs\" that is not from 100 to 3600000"},
      {"a component's unknown field", changed([](auto& d) { d["components"][0]["gres"] = "tpu:8"; }),
       absl::StatusCode::kDataLoss, "has an unknown field \"gres\" in component 0"},
  };
  for (const auto& c : cases) {
    Put(LaunchJobPath(dir_), c.text);
    auto r = ReadLaunchJob(dir_);
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(LaunchJobPath(dir_) + " " + c.message)) << c.name;
  }
  fs::remove(LaunchJobPath(dir_));
  EXPECT_EQ(ReadLaunchJob(dir_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SlurmFilesTest, TaskLaunchRoundTripsAndIsVersioned) {
  codec::TaskLaunch in{{"/usr/bin/python3", "-m", "trainer.task", "--x=1"},
                       {{"TF_CONFIG", "{\"cluster\": {}}"}, {"RANK", "0"}},
                       "tpuhost1",
                       "",
                       {}};
  ASSERT_TRUE(WriteTaskLaunch(dir_, "master-replica-0", in).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/master-replica-0/launch"));
  auto out = ReadTaskLaunch(dir_, "master-replica-0");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->argv, in.argv);
  EXPECT_EQ(out->env, in.env);
  EXPECT_EQ(out->host, "tpuhost1");
  EXPECT_EQ(out->image, "");

  // A container replica: its image and entrypoint; its arguments may be none.
  codec::TaskLaunch c{{}, {{"RANK", "0"}}, "tpuhost1", "r:5000/p/t@sha256:" + std::string(64, 'd'), {"python3", "/app/t.py"}};
  ASSERT_TRUE(WriteTaskLaunch(dir_, "worker-replica-0", c).ok());
  auto cout = ReadTaskLaunch(dir_, "worker-replica-0");
  ASSERT_TRUE(cout.ok()) << cout.status();
  EXPECT_EQ(cout->image, c.image);
  EXPECT_EQ(cout->entrypoint, c.entrypoint);
  EXPECT_TRUE(cout->argv.empty());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"argv": ["a"], "env": {}, "host": "h"})", "has no \"format\" field"},
      {R"({"format": "mlengine.task-launch/v1", "argv": [], "env": {}, "host": "h"})", "has an empty \"argv\""},
      {R"({"format": "mlengine.task-launch/v1", "argv": ["a"], "env": {"X": 1}, "host": "h"})",
       "has an \"env\" value that is not a string: X"},
      {R"({"format": "mlengine.task-launch/v1", "argv": ["a"], "env": {}})", "has no \"host\""},
      {R"({"format": "mlengine.launch/v1", "argv": ["a"], "env": {}, "host": "h"})", "is in format"},
  };
  for (const auto& [text, message] : bad) {
    Put(TaskLaunchPath(dir_, "w"), text);
    auto r = ReadTaskLaunch(dir_, "w");
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(TaskLaunchPath(dir_, "w") + " " + message)) << text;
  }
}

TEST_F(SlurmFilesTest, SlurmJobIdAndSubmittingMarker) {
  EXPECT_EQ(*ReadSlurmJobId(dir_), std::nullopt);
  EXPECT_FALSE(*HasSubmittingMarker(dir_));
  ASSERT_TRUE(WriteSubmittingMarker(dir_).ok());
  EXPECT_TRUE(*HasSubmittingMarker(dir_));
  ASSERT_TRUE(WriteSlurmJobId(dir_, 4242).ok());
  EXPECT_EQ(*ReadFile(SlurmJobIdPath(dir_)), "4242\n");
  EXPECT_EQ(*ReadSlurmJobId(dir_), 4242);
  EXPECT_EQ(WriteSlurmJobId(dir_, 0).code(), absl::StatusCode::kInvalidArgument);

  for (const std::string text : {"", "\n", "abc\n", "-3\n", "12;cluster\n"}) {
    Put(SlurmJobIdPath(dir_), text);
    auto r = ReadSlurmJobId(dir_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << "\"" << text << "\"";
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(SlurmJobIdPath(dir_) + " holds")) << text;
  }
  // Unreadable is not absent.
  fs::remove(SlurmJobIdPath(dir_));
  fs::create_directory(SlurmJobIdPath(dir_));
  EXPECT_FALSE(ReadSlurmJobId(dir_).ok());
}

TEST_F(SlurmFilesTest, OutcomeRoundTripsAndIsSetAsideOnRequeue) {
  EXPECT_EQ(*ReadRunOutcome(dir_), std::nullopt);
  const std::vector<RunOutcome> outcomes = {
      {true, ""},
      {false, "The replica worker-replica-1 exited with a non-zero status of 3."},
      {false, "The replica master-replica-0 was lost.\nLast lines of its log:\n  boom"},
  };
  for (const auto& o : outcomes) {
    ASSERT_TRUE(WriteRunOutcome(dir_, o).ok());
    EXPECT_EQ(*ReadRunOutcome(dir_), o) << o.message;
  }
  EXPECT_EQ(*ReadFile(OutcomePath(dir_)), "FAILED\nThe replica master-replica-0 was lost.\nLast lines of its log:\n  boom\n");

  ASSERT_TRUE(SetOutcomeAside(dir_, 1).ok());
  EXPECT_EQ(*ReadRunOutcome(dir_), std::nullopt);
  EXPECT_TRUE(fs::exists(dir_ + "/outcome.run1"));
  EXPECT_TRUE(SetOutcomeAside(dir_, 2).ok());  // nothing to set aside

  for (const std::string text : {"", "OK\n", "succeeded\n", "SUCCEEDEDX\n"}) {
    Put(OutcomePath(dir_), text);
    auto r = ReadRunOutcome(dir_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("expected SUCCEEDED or FAILED")) << text;
  }
}

TEST_F(SlurmFilesTest, AFreshRunRemovesTheEarlierRunsResults) {
  ASSERT_TRUE(WriteRunOutcome(dir_, {true, ""}).ok());
  Put(common::ReplicaExitPath(dir_, "master-replica-0"), "exit 0\n");
  Put(common::ReplicaLogPath(dir_, "master-replica-0"), "kept\n");
  ASSERT_TRUE(RemoveEarlierRunResults(dir_, {"master-replica-0", "worker-replica-0"}).ok());
  EXPECT_FALSE(fs::exists(OutcomePath(dir_)));
  EXPECT_FALSE(fs::exists(common::ReplicaExitPath(dir_, "master-replica-0")));
  EXPECT_TRUE(fs::exists(common::ReplicaLogPath(dir_, "master-replica-0")));
  EXPECT_TRUE(RemoveEarlierRunResults(dir_, {"master-replica-0"}).ok());  // already clean
}

TEST_F(SlurmFilesTest, TasksAndPlacement) {
  const std::vector<std::string> tasks = {"master-replica-0", "worker-replica-0", "worker-replica-1"};
  ASSERT_TRUE(WriteSlurmTasks(dir_, tasks).ok());
  EXPECT_EQ(*ReadSlurmTasks(dir_), tasks);
  Put(SlurmTasksPath(dir_), "master-replica-0\nworker replica\n");
  EXPECT_EQ(ReadSlurmTasks(dir_).status().code(), absl::StatusCode::kDataLoss);

  EXPECT_EQ(ReadSlurmPlacement(dir_).status().code(), absl::StatusCode::kNotFound);
  const std::map<std::string, std::string> placement = {{"master-replica-0", "tpuhost1"},
                                                        {"worker-replica-0", "tpuhost3"}};
  ASSERT_TRUE(WriteSlurmPlacement(dir_, placement).ok());
  EXPECT_EQ(*ReadFile(SlurmPlacementPath(dir_)), "master-replica-0 tpuhost1\nworker-replica-0 tpuhost3\n");
  EXPECT_EQ(*ReadSlurmPlacement(dir_), placement);
  Put(SlurmPlacementPath(dir_), "master-replica-0\n");
  auto r = ReadSlurmPlacement(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("expected \"<task> <node>\""));
}

TEST_F(SlurmFilesTest, ClearRunDirectoryStartsOver) {
  Put(dir_ + "/old/log", "x");
  ASSERT_TRUE(WriteSlurmJobId(dir_, 7).ok());
  ASSERT_TRUE(ClearRunDirectory(dir_).ok());
  EXPECT_TRUE(fs::is_directory(dir_));
  EXPECT_TRUE(fs::is_empty(dir_));
  ASSERT_TRUE(ClearRunDirectory(dir_ + "/p/new").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/p/new"));
  EXPECT_EQ(SlurmOutputPath(dir_, 12), dir_ + "/slurm-12.out");
  EXPECT_EQ(SlurmOutputPattern(dir_), dir_ + "/slurm-%j.out");
}

}  // namespace
}  // namespace mle::rundir
