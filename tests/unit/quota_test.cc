// Quotas and fair-share weights as data: configurations that compile or are
// refused (with the key named), jobs refused at submission (with the quota,
// its value and the key that raises it), and what a job counts against them.
#include "scheduler/quota.h"

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "scheduler/fair_share.h"

namespace mle::scheduler {
namespace {

using R = QuotaResource;

model::JobDemand Tpu(const std::string& accelerator, int64_t cores) {
  model::JobDemand d;
  d.replicas.push_back({"master", 0, "n1-highcpu-16", 1000, 0, "", 0, ""});
  d.tpu_accelerator = accelerator;
  d.tpu_type = accelerator.substr(0, 6);
  d.tpu_cores = cores;
  d.tpu_hosts = static_cast<int>(cores / 8);
  return d;
}

model::JobDemand Gpus(const std::string& type, int per_replica, int replicas) {
  model::JobDemand d;
  for (int i = 0; i < replicas; ++i) d.replicas.push_back({"worker", i, "n1-standard-8", 1500, 0, type, per_replica, ""});
  return d;
}

TEST(QuotaTest, WhatAJobCounts) {
  struct Row {
    const char* name;
    model::JobDemand demand;
    std::map<R, int64_t> want;  // every other resource 0
  };
  const Row rows[] = {
      {"basic_tpu", Tpu("TPU_V2", 8), {{R::kJobs, 1}, {R::kCpus, 1000}, {R::kTpuV2Cores, 8}}},
      {"v3_pod_slice", Tpu("TPU_V3_POD", 32), {{R::kJobs, 1}, {R::kCpus, 1000}, {R::kTpuV3PodCores, 32}}},
      {"gpus_per_type", Gpus("NVIDIA_TESLA_T4", 2, 3), {{R::kJobs, 1}, {R::kCpus, 4500}, {R::kNvidiaTeslaT4, 6}}},
  };
  for (const auto& row : rows) {
    ResourceAmounts want;
    for (const auto& [r, n] : row.want) want[r] = n;
    EXPECT_EQ(AmountsOf(row.demand), want) << row.name;
  }
}

TEST(QuotaTest, EveryAcceleratorOfTheCatalogHasAQuota) {
  for (const auto& a : model::AcceleratorTypes()) {
    const std::string name = a.kind == model::AcceleratorKind::kGpu ? std::string(a.name) : std::string(a.name) + "_CORES";
    EXPECT_TRUE(FindQuotaResource(name)) << name;
  }
}

TEST(QuotaTest, ConfigurationsRefusedNameTheKey) {
  struct Row {
    const char* name;
    QuotaSpec spec;
    const char* error;  // "" = compiles
  };
  const Row rows[] = {
      {"empty", {}, ""},
      {"pods_allowed", {{{"TPU_V2_POD_CORES", 128}}, {}}, ""},
      {"per_region", {{}, {{"p", {{"us-central1", {{"CPUS", 64}, {"JOBS", 10}, {"NVIDIA_TESLA_T4", 4}}}}}}}, ""},
      {"unknown_resource", {{{"TPU_V9_CORES", 8}}, {}},
       "quotas.defaults.TPU_V9_CORES: unknown resource; known: JOBS, CPUS, TPU_V2_CORES"},
      {"negative", {{}, {{"p", {{"us-central1", {{"CPUS", -1}}}}}}},
       "quotas.projects.p.us-central1.CPUS: -1 is not an amount between 0 and 1000000000"},
      {"too_large", {{{"JOBS", 1'000'000'001}}, {}}, "quotas.defaults.JOBS: 1000000001 is not an amount"},
      {"empty_project", {{}, {{"", {{"us-central1", {}}}}}}, "quotas.projects: a project name is empty"},
      {"empty_region", {{}, {{"p", {{"", {}}}}}}, "quotas.projects.p: a region name is empty"},
  };
  for (const auto& row : rows) {
    auto q = Quotas::Compile(row.spec);
    if (std::string(row.error).empty()) {
      ASSERT_TRUE(q.ok()) << row.name << ": " << q.status();
      EXPECT_EQ(q->spec(), row.spec) << row.name;
    } else {
      ASSERT_FALSE(q.ok()) << row.name;
      EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument) << row.name;
      EXPECT_NE(q.status().message().find(row.error), absl::string_view::npos) << row.name << ": " << q.status();
    }
  }
}

TEST(QuotaTest, LimitsOfAProjectAndRegionOverrideTheDefaultsKeyByKey) {
  auto q = Quotas::Compile({{{"JOBS", 5}, {"TPU_V3_POD_CORES", 32}}, {{"p", {{"us-central1", {{"JOBS", 2}}}}}}});
  ASSERT_TRUE(q.ok()) << q.status();
  const QuotaLimits& own = q->For("p", "us-central1");
  EXPECT_EQ(own[static_cast<int>(R::kJobs)], 2);
  EXPECT_EQ(own[static_cast<int>(R::kTpuV3PodCores)], 32);
  EXPECT_EQ(own[static_cast<int>(R::kTpuV2PodCores)], 0) << "pods stay 0 unless set";
  EXPECT_EQ(own[static_cast<int>(R::kCpus)], kUnlimited);
  EXPECT_EQ(q->For("p", "europe-west4")[static_cast<int>(R::kJobs)], 5);
  EXPECT_EQ(q->For("other", "us-central1")[static_cast<int>(R::kJobs)], 5);
  EXPECT_EQ(q->KeyFor("p", "us-central1", R::kJobs), "quotas.projects.p.us-central1.JOBS");
  EXPECT_EQ(q->KeyFor("p", "us-central1", R::kTpuV3PodCores), "quotas.defaults.TPU_V3_POD_CORES");
}

TEST(QuotaTest, AJobThatCanNeverFitIsRefusedNamingTheQuotaAndHowToRaiseIt) {
  auto limited = Quotas::Compile({{}, {{"p", {{"us-central1", {{"NVIDIA_TESLA_T4", 4}, {"CPUS", 4}}}}}}});
  ASSERT_TRUE(limited.ok());
  auto admin = Quotas::Compile({{}, {{"p", {{"us-central1", {{"NVIDIA_TESLA_T4", 4}}}}}}, /*set_by_admin=*/true});
  ASSERT_TRUE(admin.ok());
  struct Row {
    const char* name;
    const Quotas& quotas;
    model::JobDemand demand;
    const char* error;  // "" = OK
  };
  const Quotas defaults;
  const Row rows[] = {
      {"pod_without_quota", defaults, Tpu("TPU_V2_POD", 32),
       "This job can never run: it needs 32 TPU_V2_POD_CORES but the quota of project p in region us-central1 is 0 "
       "(TPU pod slices need a quota increase first). An operator raises it with "
       "quotas.projects.p.us-central1.TPU_V2_POD_CORES (or quotas.defaults.TPU_V2_POD_CORES for every project and "
       "region) in mlengined's configuration (quotas:), or with `mlengine admin quotas set FILE`."},
      {"single_host_tpu_is_not_limited", defaults, Tpu("TPU_V3", 8), ""},
      {"gpus_over_quota", *limited, Gpus("NVIDIA_TESLA_T4", 4, 2),
       "This job can never run: it needs 8 NVIDIA_TESLA_T4 but the quota of project p in region us-central1 is 4. "
       "An operator raises it with quotas.projects.p.us-central1.NVIDIA_TESLA_T4 in mlengined's configuration "
       "(quotas:), or with `mlengine admin quotas set FILE`."},
      {"set_by_admin", *admin, Gpus("NVIDIA_TESLA_T4", 4, 2),
       "An operator raises it with quotas.projects.p.us-central1.NVIDIA_TESLA_T4 through `mlengine admin quotas set "
       "FILE` (the quotas in force were set that way, not by mlengined's configuration file)."},
      {"gpus_within_quota", *limited, Gpus("NVIDIA_TESLA_T4", 2, 2), ""},
      {"cpus_over_quota", *limited, Gpus("", 0, 3), "it needs 4.5 CPUS but the quota of project p in region "
                                                   "us-central1 is 4."},
  };
  for (const auto& row : rows) {
    absl::Status s = CheckQuotaNever(row.quotas, "p", "us-central1", AmountsOf(row.demand));
    if (std::string(row.error).empty()) {
      EXPECT_TRUE(s.ok()) << row.name << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << row.name;
      EXPECT_NE(s.message().find(row.error), absl::string_view::npos) << row.name << ": " << s.message();
    }
  }
}

TEST(QuotaTest, AWaitNamesTheQuotaItsUseAndTheHolders) {
  auto q = Quotas::Compile({{{"TPU_V3_POD_CORES", 32}}, {{"p", {{"us-central1", {{"JOBS", 4}}}}}}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(DescribeQuotaWait(*q, "p", "us-central1", R::kTpuV3PodCores, 32, 32, {{"pod_1", 32, "us-central1"}}),
            "project quota TPU_V3_POD_CORES 32 in us-central1: 32 in use by job pod_1; it needs 32");
  EXPECT_EQ(DescribeQuotaWait(*q, "p", "us-central1", R::kJobs, 4, 1, {{"a", 1, ""}, {"b", 1, ""}, {"c", 1, ""}, {"d", 1, ""}}),
            "project quota JOBS 4 in us-central1: 4 in use by jobs a, b, c and 1 more; it needs 1");
  EXPECT_EQ(DescribeQuotaWait(*q, "p", "us-central1", R::kTpuV3PodCores, 0, 64, {}),
            "project quota TPU_V3_POD_CORES in us-central1 is 32 but it needs 64: it waits until an operator raises "
            "quotas.projects.p.us-central1.TPU_V3_POD_CORES (or quotas.defaults.TPU_V3_POD_CORES for every project "
            "and region)");
  ResourceAmounts in_use, need;
  in_use[R::kJobs] = 3;
  need[R::kJobs] = 1;
  EXPECT_EQ(QuotaBlock(q->For("p", "us-central1"), in_use, need), std::nullopt);
  in_use[R::kJobs] = 4;
  EXPECT_EQ(QuotaBlock(q->For("p", "us-central1"), in_use, need), R::kJobs);
}

TEST(FairShareTest, WeightsAreCheckedAndDefaultToOne) {
  auto s = Shares::Compile({{"big", 3}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->WeightOf("big"), 3);
  EXPECT_EQ(s->WeightOf("other"), 1);
  EXPECT_EQ(Shares::Compile({{"p", 0}}).status().message(), "shares.p: 0 is not a weight between 1 and 1000000");
  EXPECT_EQ(Shares::Compile({{"", 2}}).status().message(), "shares: a project name is empty");
}

TEST(FairShareTest, TheDominantShareIsTheLargestFractionOfAnyResource) {
  model::Inventory inv;
  model::Host local{"localhost", 8000, 0, {{0, "T4", "NVIDIA_TESLA_T4"}, {1, "T4", "NVIDIA_TESLA_T4"}}, "", false, true};
  inv.hosts.push_back(local);
  for (int i = 0; i < 4; ++i) inv.hosts.push_back({"v3-" + std::to_string(i), 0, 0, {}, "TPU_V3", true, false});
  const ResourceAmounts capacity = CapacityOf(inv);
  EXPECT_EQ(capacity[R::kCpus], 8000);
  EXPECT_EQ(capacity[R::kNvidiaTeslaT4], 2);
  EXPECT_EQ(capacity[R::kTpuV3Cores], 32);

  const DominantShare pod = DominantShareOf(AmountsOf(Tpu("TPU_V3_POD", 16)), capacity);
  EXPECT_DOUBLE_EQ(pod.fraction, 0.5) << "a pod slice counts against the same hosts";
  EXPECT_EQ(ShareResourceName(pod.resource), "TPU_V3 cores");
  const DominantShare gpu = DominantShareOf(AmountsOf(Gpus("NVIDIA_TESLA_T4", 1, 1)), capacity);
  EXPECT_DOUBLE_EQ(gpu.fraction, 0.5);
  EXPECT_EQ(ShareResourceName(gpu.resource), "NVIDIA_TESLA_T4 GPUs");
  EXPECT_DOUBLE_EQ(DominantShareOf({}, capacity).fraction, 0);
}

}  // namespace
}  // namespace mle::scheduler
