// Placement as data: each row is a job shape, a cluster and what must happen
// (placed now, not yet, never).
#include "scheduler/placement.h"

#include <gtest/gtest.h>

#include "model/catalog.h"

namespace mle::scheduler {
namespace {

using model::Inventory;
using model::Job;

Inventory Cluster(int cpus, std::vector<std::string> gpu_types, int tpu_v2, int tpu_v3) {
  Inventory inv;
  model::Host local;
  local.name = "localhost";
  local.cpu_milli = cpus * 1000;
  for (size_t i = 0; i < gpu_types.size(); ++i) local.gpus.push_back({static_cast<int>(i), "gpu", gpu_types[i]});
  inv.hosts.push_back(local);
  for (int i = 0; i < tpu_v2; ++i) {
    model::Host h;
    h.name = "v2-" + std::to_string(i);
    h.tpu_type = "TPU_V2";
    h.simulated = true;
    h.runs_replicas = false;
    inv.hosts.push_back(h);
  }
  for (int i = 0; i < tpu_v3; ++i) {
    model::Host h;
    h.name = "v3-" + std::to_string(i);
    h.tpu_type = "TPU_V3";
    h.simulated = true;
    h.runs_replicas = false;
    inv.hosts.push_back(h);
  }
  return inv;
}

Job Custom(std::string master, std::string worker, int64_t workers, std::string accel = "", int64_t count = 0,
           bool accel_on_master = false) {
  Job j;
  j.job_id = "j";
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = master;
  t.worker_type = worker;
  t.worker_count = workers;
  if (!accel.empty()) {
    model::ReplicaConfig rc;
    rc.accelerator_config = model::AcceleratorConfig{count, accel};
    (accel_on_master ? t.master_config : t.worker_config) = rc;
  }
  j.training_input = t;
  return j;
}

Job Tier(std::string tier) {
  Job j;
  model::TrainingInput t;
  t.scale_tier = tier;
  j.training_input = t;
  return j;
}

enum class Want { kPlaced, kNever };

struct Row {
  const char* name;
  Job job;
  Inventory cluster;
  Want want;
  size_t replicas;   // processes the job needs
  int tpu_hosts;     // TPU hosts it needs
  const char* never_says = "";
};

TEST(PlacementTest, Table) {
  const Row rows[] = {
      {"basic", Tier("BASIC"), Cluster(2, {}, 0, 0), Want::kPlaced, 1, 0},
      {"basic_tpu", Tier("BASIC_TPU"), Cluster(2, {}, 1, 0), Want::kPlaced, 1, 1},
      {"basic_tpu_no_tpu", Tier("BASIC_TPU"), Cluster(2, {}, 0, 4), Want::kNever, 1, 1, "TPU_V2"},
      {"standard_1", Tier("STANDARD_1"), Cluster(8, {}, 0, 0), Want::kPlaced, 8, 0},
      {"standard_1_small", Tier("STANDARD_1"), Cluster(2, {}, 0, 0), Want::kNever, 8, 0, "schedulable CPUs"},
      {"legacy_cloud_tpu", Custom("complex_model_m", "cloud_tpu", 1), Cluster(2, {}, 1, 0), Want::kPlaced, 1, 1},
      {"v3_8", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3", 8), Cluster(2, {}, 0, 1), Want::kPlaced, 1, 1},
      {"v2_pod_128_on_4", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V2_POD", 128), Cluster(2, {}, 4, 0),
       Want::kNever, 1, 16, "16 TPU_V2 hosts"},
      {"v3_pod_32", Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32), Cluster(2, {}, 0, 4), Want::kPlaced,
       1, 4},
      {"distributed", Custom("n1-standard-4", "n1-standard-4", 2), Cluster(3, {}, 0, 0), Want::kPlaced, 3, 0},
      {"gpu", Custom("n1-standard-4", "", 0, "NVIDIA_TESLA_T4", 1, true), Cluster(2, {"NVIDIA_TESLA_T4"}, 0, 0),
       Want::kPlaced, 1, 0},
      {"gpu_wrong_type", Custom("n1-standard-4", "", 0, "NVIDIA_TESLA_V100", 1, true),
       Cluster(2, {"NVIDIA_TESLA_T4"}, 0, 0), Want::kNever, 1, 0, "NVIDIA_TESLA_V100"},
      {"gpu_too_many", Custom("n1-standard-4", "", 0, "NVIDIA_TESLA_T4", 4, true),
       Cluster(2, {"NVIDIA_TESLA_T4", "NVIDIA_TESLA_T4"}, 0, 0), Want::kNever, 1, 0, "most any host has is 2"},
      {"legacy_gpu_type", Custom("standard_gpu", "", 0), Cluster(2, {"NVIDIA_TESLA_K80"}, 0, 0), Want::kPlaced, 1,
       0},
      // A tier that implies a GPU says so, and how to ask for one the cluster has.
      {"basic_gpu_on_t4s", Tier("BASIC_GPU"), Cluster(2, {"NVIDIA_TESLA_T4"}, 0, 0), Want::kNever, 1, 0,
       "(scale tier BASIC_GPU means 1 x NVIDIA_TESLA_K80 for the master); to use a GPU this cluster has "
       "(NVIDIA_TESLA_T4), submit with scaleTier CUSTOM and masterConfig.acceleratorConfig, e.g. --scale-tier custom "
       "--master-machine-type n1-standard-8 --master-accelerator type=nvidia-tesla-t4,count=1"},
      {"legacy_gpu_machine_on_no_gpus", Custom("standard_gpu", "", 0), Cluster(2, {}, 0, 0), Want::kNever, 1, 0,
       "(machine type standard_gpu means 1 x NVIDIA_TESLA_K80 for the master)"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    model::JobDemand d = DemandOf(row.job, ResourceTable::Defaults());
    EXPECT_EQ(d.replicas.size(), row.replicas);
    EXPECT_EQ(d.tpu_hosts, row.tpu_hosts);
    absl::Status feasible = CheckFeasible(d, row.cluster);
    auto placed = Place(d, row.cluster, Usage{});
    if (row.want == Want::kPlaced) {
      EXPECT_TRUE(feasible.ok()) << feasible;
      ASSERT_TRUE(placed.has_value());
      EXPECT_EQ(placed->replicas.size(), row.replicas);
      EXPECT_EQ(static_cast<int>(placed->tpu_hosts.size()), row.tpu_hosts);
    } else {
      EXPECT_EQ(feasible.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(std::string(feasible.message()).find(row.never_says), std::string::npos) << feasible.message();
      EXPECT_NE(std::string(feasible.message()).find("The cluster has:"), std::string::npos);
      EXPECT_FALSE(placed.has_value());
    }
  }
}

TEST(PlacementTest, GangWaitsForEveryReplicaAndReleases) {
  Inventory cluster = Cluster(3, {}, 0, 0);
  model::JobDemand three = DemandOf(Custom("n1-standard-4", "n1-standard-4", 2), ResourceTable::Defaults());
  model::JobDemand one = DemandOf(Tier("BASIC"), ResourceTable::Defaults());
  Usage usage;
  auto first = Place(one, cluster, usage);
  ASSERT_TRUE(first);
  usage.Add(one, *first);
  // Two CPUs left: the three-replica job does not start partly.
  EXPECT_FALSE(Place(three, cluster, usage).has_value());
  usage.Remove(one, *first);
  EXPECT_TRUE(Place(three, cluster, usage).has_value());
}

TEST(PlacementTest, TpuHostsAndGpusAreExclusive) {
  Inventory cluster = Cluster(8, {"NVIDIA_TESLA_T4", "NVIDIA_TESLA_T4"}, 0, 4);
  model::JobDemand pod = DemandOf(Custom("n1-highcpu-16", "cloud_tpu", 1, "TPU_V3_POD", 32), ResourceTable::Defaults());
  Usage usage;
  auto a = Place(pod, cluster, usage);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tpu_hosts, (std::vector<std::string>{"v3-0", "v3-1", "v3-2", "v3-3"}));
  EXPECT_TRUE(a->tpu_simulated);
  usage.Add(pod, *a);
  EXPECT_FALSE(Place(pod, cluster, usage).has_value());
  model::JobDemand gpu = DemandOf(Custom("n1-standard-4", "", 0, "NVIDIA_TESLA_T4", 1, true), ResourceTable::Defaults());
  auto g1 = Place(gpu, cluster, usage);
  ASSERT_TRUE(g1);
  usage.Add(gpu, *g1);
  auto g2 = Place(gpu, cluster, usage);
  ASSERT_TRUE(g2);
  EXPECT_NE(g1->replicas.at("master-replica-0").gpu_indices, g2->replicas.at("master-replica-0").gpu_indices);
  usage.Add(gpu, *g2);
  EXPECT_FALSE(Place(gpu, cluster, usage).has_value());
}

}  // namespace
}  // namespace mle::scheduler
