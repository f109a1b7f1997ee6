// How a job becomes a Slurm job, as data: each row is a job shape from the
// TPU guide (or a CUSTOM cluster) and the components, batch-script lines and
// admission answer it must give on the test cluster's nodes (captured
// `sinfo --json` of scripts/slurm/cluster.sh: tpuhost1..4, 2 CPUs, tpu:8).
#include "executor/slurm/slurm_plan.h"

#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/demand.h"

namespace mle::executor::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(MLE_TEST_DATA) + "/slurm/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

model::Job Custom(std::string master, std::string worker, int64_t workers, std::string accel = "", int64_t count = 0,
                  int64_t ps = 0) {
  model::Job j;
  j.project = "p";
  j.job_id = "j";
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = master;
  t.worker_type = worker;
  t.worker_count = workers;
  if (ps > 0) {
    t.parameter_server_type = worker;
    t.parameter_server_count = ps;
  }
  if (!accel.empty()) {
    model::ReplicaConfig rc;
    rc.accelerator_config = model::AcceleratorConfig{count, accel};
    t.worker_config = rc;
  }
  j.training_input = t;
  return j;
}

model::Job Tier(std::string tier) {
  model::Job j;
  j.project = "p";
  j.job_id = "j";
  model::TrainingInput t;
  t.scale_tier = tier;
  j.training_input = t;
  return j;
}

std::vector<SlurmNode> TestNodes() {
  auto nodes = ParseNodesJson(ReadData("sinfo.json"));
  EXPECT_TRUE(nodes.ok()) << nodes.status();
  return nodes.ok() ? *nodes : std::vector<SlurmNode>{};
}

struct Row {
  std::string name;
  model::Job job;
  // "role:tasks...[+first_node_task]:gres" per component
  std::vector<std::string> components;
  bool fits = true;
  std::string why;  // part of the refusal
};

std::string Describe(const Component& c) {
  std::string s = c.role + ":";
  for (size_t i = 0; i < c.tasks.size(); ++i) s += (i ? "," : "") + c.tasks[i];
  if (!c.first_node_task.empty()) s += "+" + c.first_node_task;
  return s + ":" + c.gres;
}

class PlanTest : public ::testing::TestWithParam<Row> {};

TEST_P(PlanTest, ComponentsAndAdmission) {
  const Row& row = GetParam();
  const model::JobDemand demand = model::DemandOf(row.job, model::ResourceTable::Defaults());
  const auto components = PlanComponents(demand, SlurmSettings{});
  std::vector<std::string> got;
  for (const auto& c : components) got.push_back(Describe(c));
  EXPECT_EQ(got, row.components);
  absl::Status fit = CheckComponentsFit(components, demand, TestNodes());
  EXPECT_EQ(fit.ok(), row.fits) << fit;
  if (!row.fits) {
    EXPECT_EQ(fit.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(fit.message(), HasSubstr(row.why));
    EXPECT_THAT(fit.message(), HasSubstr("tpuhost1 (2 CPUs, 2000 MiB, tpu:8)"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, PlanTest,
    ::testing::Values(
        // The guide's walkthrough: master VM + one TPU v2 host -> one node.
        Row{"GuideBasicTpu", Tier("BASIC_TPU"), {"tpu:tpu-replica-0+master-replica-0:tpu:8"}, true, ""},
        Row{"GuideComputeEngineMasterTpuV2", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V2", 8),
            {"tpu:tpu-replica-0+master-replica-0:tpu:8"}, true, ""},
        Row{"GuideTpuV3Pod32FourHostsAtOnce", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32),
            {"tpu:tpu-replica-0,tpu-replica-1,tpu-replica-2,tpu-replica-3+master-replica-0:tpu:8"}, true, ""},
        Row{"GuideTpuV2Pod128NeverFits", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V2_POD", 128),
            {"tpu:tpu-replica-0,tpu-replica-1,tpu-replica-2,tpu-replica-3,tpu-replica-4,tpu-replica-5,"
             "tpu-replica-6,tpu-replica-7,tpu-replica-8,tpu-replica-9,tpu-replica-10,tpu-replica-11,"
             "tpu-replica-12,tpu-replica-13,tpu-replica-14,tpu-replica-15+master-replica-0:tpu:8"},
            false, "it needs 16 TPU hosts (TPU_V2_POD with 128 cores)"},
        Row{"Basic", Tier("BASIC"), {"master:master-replica-0:"}, true, ""},
        Row{"MasterAndTwoWorkersHetjob", Custom("n1-standard-4", "n1-standard-4", 2),
            {"master:master-replica-0:", "worker:worker-replica-0,worker-replica-1:"}, true, ""},
        Row{"WorkersAndParameterServers", Custom("n1-standard-4", "n1-standard-4", 2, "", 0, 1),
            {"master:master-replica-0:", "worker:worker-replica-0,worker-replica-1:", "ps:ps-replica-0:"}, true, ""},
        Row{"FiveWorkersNeverFit", Custom("n1-standard-4", "n1-standard-4", 5),
            {"master:master-replica-0:",
             "worker:worker-replica-0,worker-replica-1,worker-replica-2,worker-replica-3,worker-replica-4:"},
            false, "it needs 5 nodes for its worker replicas"},
        Row{"ThreeWorkersPlusMasterNeedFiveNodes", Custom("n1-standard-4", "n1-standard-4", 4),
            {"master:master-replica-0:",
             "worker:worker-replica-0,worker-replica-1,worker-replica-2,worker-replica-3:"},
            false, "its replicas need 5 nodes"},
        Row{"GpuWorkersAskForTheGpuGres", Custom("n1-standard-4", "n1-standard-4", 1, "NVIDIA_TESLA_T4", 2),
            {"master:master-replica-0:", "worker:worker-replica-0:gpu:t4:2"}, false,
            "GRES gpu:t4:2, but no node"}),
    [](const auto& info) { return info.param.name; });

TEST(BatchScriptTest, HetjobWithJobWideOptionsFirst) {
  model::Job job = Custom("n1-standard-4", "n1-standard-4", 2);
  const auto demand = model::DemandOf(job, model::ResourceTable::Defaults());
  SlurmSettings settings;
  settings.partition = "debug";
  settings.account = "ml";
  BatchScriptInput in;
  in.project = "p";
  in.job_id = "j";
  in.run_dir = "/runs/p/j";
  in.launcher_argv = {"/bin/launch", "--run-dir", "/runs/p/j", "it's"};
  in.time_limit_minutes = 61;
  in.nice = 500;
  in.labels = {{"team", "vision"}, {"env", "dev"}};
  const std::string s = BuildBatchScript(in, PlanComponents(demand, settings), settings);
  EXPECT_EQ(s,
            "#!/bin/sh\n"
            "# mlengine job projects/p/jobs/j (written by mlengined; one component per replica role)\n"
            "#SBATCH --job-name=mle-p-j\n"
            "#SBATCH --output=\"/runs/p/j/slurm-%j.out\"\n"
            "#SBATCH --open-mode=append\n"
            "#SBATCH --comment=\"env=dev,team=vision\"\n"
            "#SBATCH --no-requeue\n"
            "#SBATCH --partition=debug\n"
            "#SBATCH --account=ml\n"
            "#SBATCH --time=61\n"
            "#SBATCH --nice=500\n"
            "#SBATCH --nodes=1\n"
            "#SBATCH --ntasks-per-node=1\n"
            "#SBATCH --cpus-per-task=1\n"
            "#SBATCH hetjob\n"
            "#SBATCH --partition=debug\n"
            "#SBATCH --account=ml\n"
            "#SBATCH --time=61\n"
            "#SBATCH --nice=500\n"
            "#SBATCH --nodes=2\n"
            "#SBATCH --ntasks-per-node=1\n"
            "#SBATCH --cpus-per-task=1\n"
            "exec '/bin/launch' '--run-dir' '/runs/p/j' 'it'\\''s'\n");
}

TEST(BatchScriptTest, MachineShapesAndTpuConstraintFromTheOperatorsTable) {
  model::ResourceTable table = model::ResourceTable::Defaults();
  table.machine_types["n1-highcpu-16"] = {16000, 14746};
  model::Job job = Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32);
  SlurmSettings settings;
  settings.tpu_type_constraint = true;
  settings.requeue = true;
  BatchScriptInput in;
  in.project = "p";
  in.job_id = "j";
  in.run_dir = "/r";
  in.launcher_argv = {"/bin/launch"};
  const std::string s = BuildBatchScript(in, PlanComponents(model::DemandOf(job, table), settings), settings);
  EXPECT_THAT(s, HasSubstr("#SBATCH --requeue\n"));
  EXPECT_THAT(s, HasSubstr("#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=16\n"
                           "#SBATCH --mem=14746M\n#SBATCH --gres=tpu:8\n#SBATCH --constraint=tpu_v3\n"));
  EXPECT_THAT(s, Not(HasSubstr("hetjob")));
}

TEST(BatchScriptTest, AccountPerComponent) {
  const model::Job job = Custom("n1-standard-4", "n1-standard-4", 1);
  struct Row {
    std::string settings_account;
    std::string input_account;  // the project's account (per-project accounts)
    std::string want;           // in every component; "" none
  };
  for (const Row& row : std::vector<Row>{{"", "", ""},
                                         {"ml", "", "ml"},
                                         {"", "mle-p", "mle-p"},
                                         {"ml", "mle-p", "mle-p"}}) {
    SlurmSettings settings;
    settings.account = row.settings_account;
    BatchScriptInput in;
    in.project = "p";
    in.job_id = "j";
    in.run_dir = "/r";
    in.account = row.input_account;
    in.launcher_argv = {"/bin/launch"};
    const std::string s =
        BuildBatchScript(in, PlanComponents(model::DemandOf(job, model::ResourceTable::Defaults()), settings), settings);
    size_t count = 0;
    for (size_t at = s.find("#SBATCH --account="); at != std::string::npos; at = s.find("#SBATCH --account=", at + 1)) {
      ++count;
    }
    if (row.want.empty()) {
      EXPECT_EQ(count, 0u) << s;
    } else {
      EXPECT_EQ(count, 2u) << s;  // master and worker components
      EXPECT_THAT(s, HasSubstr("#SBATCH --account=" + row.want + "\n"));
    }
  }
}

TEST(PlacementFromAllocationTest, TaskIOnNodeIAndTheMasterBesideTpuWorkerZero) {
  model::Job job = Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32);
  const auto components = PlanComponents(model::DemandOf(job, model::ResourceTable::Defaults()), SlurmSettings{});
  auto p = PlacementFromAllocation(components, {{"tpuhost3", "tpuhost1", "tpuhost2", "tpuhost4"}}, true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->tpu_hosts, ElementsAre("tpuhost3", "tpuhost1", "tpuhost2", "tpuhost4"));
  EXPECT_EQ(p->replicas.at("master-replica-0").host, "tpuhost3");
  EXPECT_TRUE(p->tpu_simulated);
  auto short_alloc = PlacementFromAllocation(components, {{"tpuhost1", "tpuhost2"}}, true);
  EXPECT_EQ(short_alloc.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlacementFromAllocationTest, HetjobComponentsInOrder) {
  model::Job job = Custom("n1-standard-4", "n1-standard-4", 2);
  const auto components = PlanComponents(model::DemandOf(job, model::ResourceTable::Defaults()), SlurmSettings{});
  auto p = PlacementFromAllocation(components, {{"tpuhost2"}, {"tpuhost1", "tpuhost4"}}, false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->replicas.at("master-replica-0").host, "tpuhost2");
  EXPECT_EQ(p->replicas.at("worker-replica-0").host, "tpuhost1");
  EXPECT_EQ(p->replicas.at("worker-replica-1").host, "tpuhost4");
  EXPECT_FALSE(PlacementFromAllocation(components, {{"tpuhost2"}}, false).ok());
}

TEST(LaunchComponentsTest, TheLauncherPlacesTasksAsThePlanDoes) {
  // What travels to the launcher in RUN/job.json gives the same placement
  // and the same task list as the plan it came from.
  const std::vector<std::pair<model::Job, std::vector<std::vector<std::string>>>> rows = {
      {Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32), {{"tpuhost3", "tpuhost1", "tpuhost2", "tpuhost4"}}},
      {Custom("n1-standard-4", "n1-standard-4", 2, "", 0, 1), {{"tpuhost2"}, {"tpuhost1", "tpuhost4"}, {"tpuhost3"}}},
  };
  for (const auto& [job, nodes] : rows) {
    const auto planned = PlanComponents(model::DemandOf(job, model::ResourceTable::Defaults()), SlurmSettings{});
    const auto carried = FromLaunchComponents(ToLaunchComponents(planned));
    EXPECT_EQ(TasksOf(carried), TasksOf(planned));
    auto a = PlacementFromAllocation(planned, nodes, true);
    auto b = PlacementFromAllocation(carried, nodes, true);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(a->tpu_hosts, b->tpu_hosts);
    for (const auto& [task, rp] : a->replicas) EXPECT_EQ(b->replicas.at(task).host, rp.host) << task;
  }
  EXPECT_THAT(TasksOf(PlanComponents(model::DemandOf(rows[0].first, model::ResourceTable::Defaults()), SlurmSettings{})),
              ElementsAre("master-replica-0", "tpu-replica-0", "tpu-replica-1", "tpu-replica-2", "tpu-replica-3"));
}

TEST(JobPortsTest, ConsecutiveJobsNeverShareAPort) {
  std::set<int> seen;
  for (int64_t id = 1; id <= 2000; ++id) {
    for (int port : JobPorts(id, 16)) EXPECT_TRUE(seen.insert(port).second) << id;
  }
  EXPECT_EQ(JobPorts(2001, 3), JobPorts(1, 3));  // the cycle
  for (int port : seen) EXPECT_TRUE(port >= 20000 && port < 52000);
}

TEST(SinfoTest, ParsesTheTestClusterAndGres) {
  auto nodes = TestNodes();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "tpuhost1");
  EXPECT_EQ(nodes[0].cpus, 2);
  EXPECT_EQ(nodes[0].memory_mib, 2000);
  EXPECT_EQ(nodes[0].gres.at("tpu"), 8);
  EXPECT_FALSE(nodes[0].address.empty());
  EXPECT_EQ(nodes[0].state, "idle");
  auto g = ParseGres("gpu:a100:2(S:0-1),tpu:8,gpu:t4:1,mps");
  EXPECT_EQ(g.at("gpu"), 3);
  EXPECT_EQ(g.at("gpu:a100"), 2);
  EXPECT_EQ(g.at("gpu:t4"), 1);
  EXPECT_EQ(g.at("tpu"), 8);
  EXPECT_EQ(g.at("mps"), 1);
  EXPECT_TRUE(ParseGres("(null)").empty());
  EXPECT_FALSE(ParseNodesJson("not json").ok());
  EXPECT_FALSE(ParseNodesJson(R"({"nodes":[{"cpus":2}]})").ok());
}

// Nodes as the cluster view shows them: GPUs one by one from their GRES,
// the TPU type from the node's feature.
TEST(HostOfNodeTest, GpusAndTpusFromTheGres) {
  SlurmSettings settings;
  settings.gpu_gres_types = {{"NVIDIA_TESLA_T4", "t4"}};
  settings.tpu_simulated = true;
  SlurmNode gpu_node;
  gpu_node.name = "gpu1";
  gpu_node.cpus = 16;
  gpu_node.memory_mib = 64000;
  gpu_node.gres = {{"gpu", 3}, {"gpu:t4", 2}};
  const model::Host gpu = HostOfNode(gpu_node, settings);
  EXPECT_EQ(gpu.name, "gpu1");
  EXPECT_EQ(gpu.cpu_milli, 16000);
  EXPECT_EQ(gpu.memory_mib, 64000);
  ASSERT_EQ(gpu.gpus.size(), 3u);
  EXPECT_EQ(gpu.gpus[0].index, 0);
  EXPECT_EQ(gpu.gpus[0].model, "t4");
  EXPECT_EQ(gpu.gpus[0].type, "NVIDIA_TESLA_T4");
  EXPECT_EQ(gpu.gpus[2].index, 2);
  EXPECT_EQ(gpu.gpus[2].model, "");
  EXPECT_EQ(gpu.tpu_type, "");
  EXPECT_FALSE(gpu.simulated);

  SlurmNode tpu_node;
  tpu_node.name = "tpuhost1";
  tpu_node.cpus = 2;
  tpu_node.gres = {{"tpu", 8}};
  EXPECT_EQ(HostOfNode(tpu_node, settings).tpu_type, "TPU");
  tpu_node.features = {"tpu_v3"};
  const model::Host tpu = HostOfNode(tpu_node, settings);
  EXPECT_EQ(tpu.tpu_type, "TPU_V3");
  EXPECT_TRUE(tpu.simulated);
  EXPECT_TRUE(tpu.gpus.empty());
}

}  // namespace
}  // namespace mle::executor::slurm
