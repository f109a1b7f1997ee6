// Projects as Slurm accounts and quotas as association limits
// (slurm_accounts.h): tables from quotas and what Slurm has now to the
// sacctmgr commands that bring Slurm there.
#include "executor/slurm/slurm_accounts.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace mle::executor::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

scheduler::Quotas Compile(scheduler::QuotaSpec spec) {
  auto q = scheduler::Quotas::Compile(std::move(spec));
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? *q : scheduler::Quotas();
}

std::vector<std::string> Joined(const std::vector<std::vector<std::string>>& commands) {
  std::vector<std::string> out;
  for (const auto& c : commands) out.push_back(absl::StrJoin(c, " "));
  return out;
}

TEST(SlurmAccountOf, LowercasedWithOtherCharactersReplaced) {
  EXPECT_EQ(SlurmAccountOf("my-project-1"), "mle-my-project-1");
  EXPECT_EQ(SlurmAccountOf("My.Proj:x"), "mle-my_proj_x");
  EXPECT_EQ(SlurmAccountOf("a_b"), "mle-a_b");
}

TEST(SlurmLimitsOf, Table) {
  SlurmSettings settings;
  settings.gpu_gres_types["NVIDIA_TESLA_A100"] = "a100-80g";
  struct Row {
    std::string name;
    std::map<std::string, int64_t> quota;  // one project's region, over the built-in defaults
    AccountLimits want;
  };
  const std::vector<Row> rows = {
      // Pod cores are 0 by default but single-host TPU cores are unlimited:
      // Slurm's tpu GRES cannot tell them apart, so no TPU limit.
      {"NothingSet", {}, {}},
      {"JobsAndCpus", {{"JOBS", 1}, {"CPUS", 2}}, {1, {{"cpu", 2}}}},
      {"GpusByGresType", {{"NVIDIA_TESLA_T4", 4}, {"NVIDIA_TESLA_A100", 0}},
       {std::nullopt, {{"gres/gpu:t4", 4}, {"gres/gpu:a100-80g", 0}}}},
      {"TpuCoresSummedWhenAllFourAreLimited",
       {{"TPU_V2_CORES", 8}, {"TPU_V3_CORES", 16}, {"TPU_V2_POD_CORES", 0}, {"TPU_V3_POD_CORES", 32}},
       {std::nullopt, {{"gres/tpu", 56}}}},
      {"OneTpuKindUnlimitedMeansNoTpuLimit", {{"TPU_V2_CORES", 8}, {"TPU_V2_POD_CORES", 32}}, {}},
  };
  for (const auto& row : rows) {
    scheduler::QuotaSpec spec;
    spec.projects["p"]["us-central1"] = row.quota;
    const auto quotas = Compile(spec);
    EXPECT_EQ(SlurmLimitsOf(quotas.For("p", "us-central1"), settings), row.want) << row.name;
  }
  // Fractional CPUs round up: Slurm's limit is never stricter than mlengine's.
  scheduler::QuotaLimits limits;
  limits.fill(scheduler::kUnlimited);
  limits[static_cast<int>(scheduler::QuotaResource::kCpus)] = 2500;
  EXPECT_EQ(SlurmLimitsOf(limits, settings), (AccountLimits{std::nullopt, {{"cpu", 3}}}));
}

TEST(PlanAccounts, NewProjectGetsAccountUserAndLimits) {
  scheduler::QuotaSpec spec;
  spec.projects["p1"]["us-central1"] = {{"JOBS", 1}, {"CPUS", 2}};
  spec.projects["p1"]["europe-west4"] = {{"JOBS", 5}};  // another region: not this cluster's
  const auto plan = PlanAccounts(Compile(spec), "us-central1", {"p1"}, "root",
                                 {{"root", "", {}}, {"root", "root", {}}}, SlurmSettings{});
  EXPECT_THAT(Joined(plan.commands),
              ElementsAre("sacctmgr -i add account mle-p1 Description=mlengine project p1 Organization=mlengine",
                          "sacctmgr -i add user root Account=mle-p1",
                          "sacctmgr -i modify account where name=mle-p1 set GrpJobs=1 GrpTRES=cpu=2"));
  EXPECT_EQ(plan.limits.at("mle-p1"), (AccountLimits{1, {{"cpu", 2}}}));
}

TEST(PlanAccounts, NothingWhenSlurmAlreadyHasIt) {
  scheduler::QuotaSpec spec;
  spec.projects["p1"]["us-central1"] = {{"JOBS", 1}, {"CPUS", 2}};
  const std::vector<SlurmAssociation> existing = {
      {"root", "", {}}, {"mle-p1", "", {1, {{"cpu", 2}}}}, {"mle-p1", "root", {}}};
  const auto plan = PlanAccounts(Compile(spec), "us-central1", {"p1"}, "root", existing, SlurmSettings{});
  EXPECT_THAT(plan.commands, IsEmpty());
}

TEST(PlanAccounts, AQuotaRemovedClearsTheLimitsOfEveryAccountOfOurs) {
  // mle-old is ours (the prefix) though no project here names it; acct-x is
  // not ours and is left alone.
  const std::vector<SlurmAssociation> existing = {
      {"mle-p1", "", {1, {{"cpu", 2}, {"gres/tpu", 8}}}},
      {"mle-p1", "root", {}},
      {"mle-old", "", {std::nullopt, {{"cpu", 4}}}},
      {"mle-old", "root", {}},
      {"acct-x", "", {3, {{"cpu", 1}}}},
  };
  scheduler::QuotaSpec spec;
  spec.defaults = {{"TPU_V2_POD_CORES", 32}};
  const auto plan = PlanAccounts(Compile(spec), "us-central1", {"p1"}, "root", existing, SlurmSettings{});
  EXPECT_THAT(Joined(plan.commands),
              ElementsAre("sacctmgr -i modify account where name=mle-old set GrpJobs=-1 GrpTRES=cpu=-1",
                          "sacctmgr -i modify account where name=mle-p1 set GrpJobs=-1 GrpTRES=cpu=-1,gres/tpu=-1"));
  EXPECT_EQ(plan.limits.size(), 2u);
}

TEST(PlanAccounts, DefaultsApplyToEveryProjectAndTheProjectsRegionOverrides) {
  scheduler::QuotaSpec spec;
  spec.defaults = {{"JOBS", 4}};
  spec.projects["big"]["us-central1"] = {{"JOBS", 10}};
  const auto plan = PlanAccounts(Compile(spec), "us-central1", {"big", "small"}, "",
                                 {{"mle-big", "", {}}, {"mle-small", "", {}}}, SlurmSettings{});
  EXPECT_THAT(Joined(plan.commands),
              ElementsAre("sacctmgr -i modify account where name=mle-big set GrpJobs=10",
                          "sacctmgr -i modify account where name=mle-small set GrpJobs=4"));
}

}  // namespace
}  // namespace mle::executor::slurm
