// The replica contract (docs/runtime-contract.md), checked field by field.
#include "runtime/replica_env.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scheduler/placement.h"

namespace mle::runtime {
namespace {

using nlohmann::json;

model::Job DistributedJob() {
  model::Job j;
  j.project = "p";
  j.job_id = "dist_1";
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = "n1-standard-4";
  t.worker_type = "n1-standard-4";
  t.worker_count = 2;
  t.parameter_server_type = "n1-standard-4";
  t.parameter_server_count = 1;
  t.evaluator_type = "n1-standard-4";
  t.evaluator_count = 1;
  t.python_module = "trainer.task";
  t.args = {"--epochs=2"};
  t.job_dir = "gs://b/out";
  t.runtime_version = "pytorch-1.13-cpu";
  j.training_input = t;
  return j;
}

std::map<std::string, ReplicaLaunch> Launch(const model::Job& job, model::Placement placement = {}) {
  model::JobDemand d = scheduler::DemandOf(job, scheduler::ResourceTable::Defaults());
  LaunchContext c;
  c.python = "/env/bin/python";
  c.gcs_root = "/data/buckets";
  c.python_path = "/src/python";
  int port = 5000;
  for (const auto& r : d.replicas) {
    c.hosts[r.TaskName()] = r.role == "master" ? "host-a" : "host-b";
    if (r.role != "evaluator") c.ports[r.TaskName()] = port++;
  }
  c.torch_port = 6000;
  std::map<std::string, ReplicaLaunch> out;
  for (auto& l : BuildReplicaLaunches(job, d, placement, c)) out[l.task_name] = l;
  return out;
}

TEST(ReplicaEnvTest, TfConfigClusterSpecAndTorch) {
  auto launches = Launch(DistributedJob());
  ASSERT_EQ(launches.size(), 5u);
  const auto& master = launches.at("master-replica-0");
  EXPECT_EQ(master.argv, (std::vector<std::string>{"/env/bin/python", "-m", "trainer.task", "--epochs=2",
                                                    "--job-dir", "gs://b/out"}));
  json tf = json::parse(master.env.at("TF_CONFIG"));
  EXPECT_EQ(tf["cluster"]["master"], json({"host-a:5000"}));
  EXPECT_EQ(tf["cluster"]["worker"], json({"host-b:5001", "host-b:5002"}));
  EXPECT_EQ(tf["cluster"]["ps"], json({"host-b:5003"}));
  EXPECT_FALSE(tf["cluster"].contains("evaluator"));  // evaluators are not in TF_CONFIG's cluster
  EXPECT_EQ(tf["task"], json({{"type", "master"}, {"index", 0}}));
  EXPECT_EQ(tf["environment"], "cloud");
  EXPECT_EQ(tf["job"]["pythonModule"], "trainer.task");
  json spec = json::parse(master.env.at("CLUSTER_SPEC"));
  EXPECT_EQ(spec["cluster"]["evaluator"].size(), 1u);  // but CLUSTER_SPEC lists them
  EXPECT_EQ(master.env.at("MASTER_ADDR"), "host-a");
  EXPECT_EQ(master.env.at("MASTER_PORT"), "6000");
  EXPECT_EQ(master.env.at("WORLD_SIZE"), "3");
  EXPECT_EQ(master.env.at("RANK"), "0");
  EXPECT_EQ(launches.at("worker-replica-1").env.at("RANK"), "2");
  EXPECT_EQ(json::parse(launches.at("worker-replica-1").env.at("TF_CONFIG"))["task"]["index"], 1);
  EXPECT_EQ(launches.at("ps-replica-0").env.count("RANK"), 0u);
  EXPECT_EQ(launches.at("evaluator-replica-0").env.count("WORLD_SIZE"), 0u);
  EXPECT_EQ(master.env.at("CLOUD_ML_JOB_ID"), "dist_1");
  EXPECT_EQ(master.env.at("MLENGINE_GCS_ROOT"), "/data/buckets");
  EXPECT_EQ(master.env.at("MLENGINE_TASK_NAME"), "master-replica-0");
  EXPECT_EQ(master.env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(master.env.count("TPU_CONFIG"), 0u);
}

TEST(ReplicaEnvTest, ChiefForTf2RuntimesAndUseChief) {
  model::Job job = DistributedJob();
  job.training_input->runtime_version = "2.11";
  json tf = json::parse(Launch(job).at("master-replica-0").env.at("TF_CONFIG"));
  EXPECT_TRUE(tf["cluster"].contains("chief"));
  EXPECT_EQ(tf["task"]["type"], "chief");
  // CLUSTER_SPEC always says master.
  EXPECT_TRUE(json::parse(Launch(job).at("master-replica-0").env.at("CLUSTER_SPEC"))["cluster"].contains("master"));
}

TEST(ReplicaEnvTest, TpuPodEnvironmentIsMarkedSimulated) {
  model::Job job;
  job.project = "p";
  job.job_id = "pod";
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = "n1-highcpu-16";
  t.worker_type = "cloud_tpu";
  t.worker_count = 1;
  model::ReplicaConfig w;
  w.accelerator_config = model::AcceleratorConfig{32, "TPU_V3_POD"};
  t.worker_config = w;
  t.python_module = "m";
  job.training_input = t;
  model::Placement placement;
  placement.tpu_hosts = {"t1", "t2", "t3", "t4"};
  placement.tpu_simulated = true;
  auto launches = Launch(job, placement);
  ASSERT_EQ(launches.size(), 1u);  // the TPU is hosts, not a process of ours
  const auto& env = launches.at("master-replica-0").env;
  json tpu = json::parse(env.at("TPU_CONFIG"));
  EXPECT_EQ(tpu["project"], "p");
  EXPECT_EQ(tpu["tpu_node_name"], "pod-tpu");
  EXPECT_EQ(env.at("TPU_WORKER_HOSTNAMES"), "t1,t2,t3,t4");
  EXPECT_EQ(env.at("TPU_ACCELERATOR_TYPE"), "v3-32");
  EXPECT_EQ(env.at("MLENGINE_SIMULATED_ACCELERATOR"), "tpu-v3-32 (simulated)");
}

TEST(ReplicaEnvTest, GpusGoToCudaVisibleDevices) {
  model::Job job = DistributedJob();
  model::Placement placement;
  placement.replicas["master-replica-0"] = {"host-a", {1, 3}};
  EXPECT_EQ(Launch(job, placement).at("master-replica-0").env.at("CUDA_VISIBLE_DEVICES"), "1,3");
}

// A custom container job: each replica runs its own image, else the master's,
// as pinned at submission; its command and arguments go with the image.
TEST(ReplicaEnvTest, ContainerReplicasRunTheirPinnedImages) {
  model::Job job = DistributedJob();
  auto& t = *job.training_input;
  t.runtime_version.clear();
  t.python_module.clear();
  t.master_config.emplace();
  t.master_config->image_uri = "gcr.io/p/trainer:1";
  t.master_config->container_command = {"python3", "/app/task.py"};
  t.master_config->container_args = {"--mode=train"};
  t.worker_config.emplace();
  t.worker_config->image_uri = "gcr.io/p/worker:1";
  t.evaluator_config.emplace();
  job.resolved_images = {{"gcr.io/p/trainer:1", "r/trainer@sha256:1"}};
  const auto launches = Launch(job);
  const ReplicaLaunch& master = launches.at("master-replica-0");
  EXPECT_EQ(master.image, "r/trainer@sha256:1");
  EXPECT_EQ(master.entrypoint, (std::vector<std::string>{"python3", "/app/task.py"}));
  EXPECT_EQ(master.argv, (std::vector<std::string>{"--mode=train", "--epochs=2", "--job-dir", "gs://b/out"}));
  EXPECT_EQ(master.env.count("PYTHONPATH"), 0u);  // the image's own packages
  // The master's image and command, for a replica without an image.
  EXPECT_EQ(launches.at("evaluator-replica-0").image, "r/trainer@sha256:1");
  EXPECT_EQ(launches.at("evaluator-replica-0").entrypoint, master.entrypoint);
  // Its own image (not pinned here: as named), with the image's entrypoint.
  EXPECT_EQ(launches.at("worker-replica-0").image, "gcr.io/p/worker:1");
  EXPECT_TRUE(launches.at("worker-replica-0").entrypoint.empty());
}

}  // namespace
}  // namespace mle::runtime
