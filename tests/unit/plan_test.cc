// PlanPass as data: each case is a cluster, what runs on it, a queue, and
// what must start and why each other job waits (exact text).
#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <deque>
#include <set>

namespace mle::scheduler {
namespace {

// 2024-05-01 12:00 UTC: reasons print times of day.
const absl::Time kNow = absl::FromCivil(absl::CivilMinute(2024, 5, 1, 12, 0), absl::UTCTimeZone());
constexpr absl::Duration kWeek = absl::Hours(24 * 7);

model::JobDemand Cpus(int n) {
  model::JobDemand d;
  for (int i = 0; i < n; ++i) d.replicas.push_back({i == 0 ? "master" : "worker", i == 0 ? 0 : i - 1, "", 1000, 0, "", 0, ""});
  return d;
}

model::JobDemand TpuV3(int hosts) {
  model::JobDemand d = Cpus(1);
  d.tpu_type = "TPU_V3";
  d.tpu_hosts = hosts;
  d.tpu_cores = 8 * hosts;
  d.tpu_accelerator = hosts > 1 ? "TPU_V3_POD" : "TPU_V3";
  return d;
}

class PlanTest : public ::testing::Test {
 protected:
  void Cluster(int cpus, int tpu_v3_hosts = 0) {
    model::Host local;
    local.name = "localhost";
    local.cpu_milli = cpus * 1000;
    inventory_.hosts.push_back(local);
    for (int i = 0; i < tpu_v3_hosts; ++i) {
      model::Host h;
      h.name = "v3-" + std::to_string(i);
      h.tpu_type = "TPU_V3";
      h.runs_replicas = false;
      inventory_.hosts.push_back(h);
    }
  }

  void Queue(const std::string& project, const std::string& id, model::JobDemand demand, int32_t priority = 0,
             absl::Duration max_running = kWeek, std::string reason = "", std::string region = "us-central1") {
    QueuedJob& j = jobs_.emplace_back();
    j.key = {project, id};
    j.region = std::move(region);
    j.priority = priority;
    j.sequence = static_cast<int64_t>(jobs_.size());
    j.demand = std::move(demand);
    j.amounts = AmountsOf(j.demand);
    j.shape = shapes_.emplace(ShapeKey(j.demand), static_cast<int32_t>(shapes_.size())).first->second;
    j.max_running = max_running;
    j.reason = std::move(reason);
    queues_[project].insert({{-priority, j.sequence, j.key}, &j});
  }

  // A job placed on the cluster that ends at the latest `until` from now.
  // (`priority`, started `ago`, already `stopping`: what preemption weighs.)
  void Running(const std::string& project, const std::string& id, model::JobDemand demand, absl::Duration until,
               std::string region = "us-central1", int32_t priority = 0, absl::Duration ago = absl::Hours(1),
               bool stopping = false) {
    auto placement = Place(demand, inventory_, usage_);
    ASSERT_TRUE(placement) << id << " does not fit the test's cluster";
    Held& h = held_.emplace_back(Held{{project, id}, std::move(region), std::move(demand), *placement, {}});
    h.amounts = AmountsOf(h.demand);
    usage_.Add(h.demand, h.placement);
    holdings_[project].total.Add(h.amounts);
    HeldJob& held = held_jobs_.emplace_back(HeldJob{&h.key, &h.region, &h.demand, &h.placement, &h.amounts, kNow + until});
    held.priority = priority;
    held.started = kNow - ago;
    held.preemptible = !exempt_.contains(project);
    held.stopping = stopping;
  }
  // A job of priority `priority` running since `ago`, for an hour more.
  void Low(const std::string& project, const std::string& id, int cpus, int32_t priority, absl::Duration ago,
           bool stopping = false) {
    Running(project, id, Cpus(cpus), absl::Hours(1), "us-central1", priority, ago, stopping);
  }
  std::vector<std::string> Victims() const {
    std::vector<std::string> out;
    if (plan_.preemption) {
      for (const JobKey* k : plan_.preemption->victims) out.push_back(k->project + "/" + k->job_id);
    }
    return out;
  }

  void Limit(QuotaSpec spec) {
    auto q = Quotas::Compile(std::move(spec));
    ASSERT_TRUE(q.ok()) << q.status();
    quotas_ = *std::move(q);
  }

  // Runs the pass; `started` and `reasons` (job id -> why it waits) read it.
  void Run(bool places_jobs = true) {
    plan_ = PlanPass({.queues = queues_,
                      .held = held_jobs_,
                      .holdings = holdings_,
                      .inventory = inventory_,
                      .usage = usage_,
                      .quotas = quotas_,
                      .shares = shares_,
                      .places_jobs = places_jobs,
                      .now = kNow,
                      .preemption = preemption_,
                      .preemption_for_share = for_share_,
                      .claimants = &claimants_});
    started.clear();
    reasons.clear();
    for (const auto& s : plan_.starts) started.push_back(s.job->key.job_id);
    for (const auto& w : plan_.new_reasons) reasons[w.job->key.job_id] = *w.reason;
  }

  static std::string ShapeKey(const model::JobDemand& d) {
    std::string key = d.tpu_type + std::to_string(d.tpu_hosts);
    for (const auto& r : d.replicas) key += "|" + std::to_string(r.cpu_milli);
    return key;
  }

  struct Held {
    JobKey key;
    std::string region;
    model::JobDemand demand;
    model::Placement placement;
    ResourceAmounts amounts;
  };

  model::Inventory inventory_;
  bool preemption_ = false;
  bool for_share_ = false;
  std::set<std::string> exempt_;
  std::vector<JobKey> claimants_;
  Usage usage_;
  Quotas quotas_;
  Shares shares_;
  std::deque<QueuedJob> jobs_;
  std::map<std::string, int32_t> shapes_;
  Queues queues_;
  std::deque<Held> held_;
  std::vector<HeldJob> held_jobs_;
  Holdings holdings_;
  Plan plan_;
  std::vector<std::string> started;
  std::map<std::string, std::string> reasons;
};

TEST_F(PlanTest, OneProjectGoesByPriorityThenAge) {
  Cluster(2);
  Queue("p", "low_old", Cpus(1), 0);
  Queue("p", "high", Cpus(1), 500);
  Queue("p", "low_new", Cpus(1), 0);
  Run();
  EXPECT_EQ(started, (std::vector<std::string>{"high", "low_old"}));
  EXPECT_EQ(reasons["low_new"],
            "needs 1 CPU; 0 free: job high holds 1 until 2024-05-08 12:00 UTC, job low_old holds 1 until 2024-05-08 "
            "12:00 UTC at the latest, by their maxRunningTime; reserved for it from 2024-05-08 12:00 UTC");
}

TEST_F(PlanTest, TheHeadWaitsForTheHoldersAndSaysUntilWhen) {
  Cluster(8, 4);
  Limit({{{"TPU_V3_POD_CORES", 64}}, {}});
  Running("p", "pod_1", TpuV3(4), absl::Minutes(140));
  Queue("p", "pod_2", TpuV3(4));
  Queue("p", "pod_3", TpuV3(4));
  Run();
  EXPECT_TRUE(started.empty());
  EXPECT_EQ(reasons["pod_2"],
            "needs 4 TPU_V3 hosts; 0 free: job pod_1 holds 4 until it ends, at the latest 14:20 UTC by its "
            "maxRunningTime; reserved for it from 14:20 UTC");
  EXPECT_EQ(reasons["pod_3"], "needs 4 TPU_V3 hosts; 0 free") << "only the head has a reservation";
  ASSERT_TRUE(plan_.reservation);
  EXPECT_EQ(plan_.reservation->job->key.job_id, "pod_2");
  EXPECT_EQ(plan_.reservation->from, kNow + absl::Minutes(140));
}

TEST_F(PlanTest, AProjectQuotaInUseMakesItsJobWait) {
  Cluster(8, 8);
  Limit({{}, {{"p", {{"us-central1", {{"TPU_V3_POD_CORES", 32}}}}}}});
  Running("p", "pod_1", TpuV3(4), absl::Hours(1));
  Queue("p", "pod_2", TpuV3(4));
  Queue("q", "other", TpuV3(4));  // another project, not limited: 4 hosts are free
  Run();
  EXPECT_EQ(started, std::vector<std::string>{}) << "q has no pod quota: the default is 0";
  EXPECT_EQ(reasons["pod_2"], "project quota TPU_V3_POD_CORES 32 in us-central1: 32 in use by job pod_1; it needs 32");
  EXPECT_EQ(reasons["other"],
            "project quota TPU_V3_POD_CORES in us-central1 is 0 but it needs 32: it waits until an operator raises "
            "quotas.projects.q.us-central1.TPU_V3_POD_CORES (or quotas.defaults.TPU_V3_POD_CORES for every project "
            "and region)");
}

// The regions a cluster serves share its hosts: naming another region
// finds what the project runs in the first one counted there too.
TEST_F(PlanTest, WhatAProjectRunsInAnyRegionCountsAgainstEachRegionsQuota) {
  Cluster(8);
  Limit({{{"CPUS", 2}}, {{"p", {{"europe-west4", {{"CPUS", 3}}}}}}});
  Running("p", "in_us", Cpus(2), absl::Hours(1));
  Queue("p", "us_again", Cpus(1));
  Queue("p", "in_eu", Cpus(1), 0, kWeek, "", "europe-west4");
  Queue("p", "in_eu_2", Cpus(1), 0, kWeek, "", "europe-west4");
  Run();
  EXPECT_EQ(started, std::vector<std::string>{"in_eu"}) << "europe-west4 allows 3 CPUs: 2 held + 1";
  EXPECT_EQ(reasons["us_again"],
            "project quota CPUS 2 in us-central1: 3 in use by jobs in_us (2), in_eu (1, in europe-west4); it needs 1");
  EXPECT_EQ(reasons["in_eu_2"],
            "project quota CPUS 3 in europe-west4: 3 in use by jobs in_us (2, in us-central1), in_eu (1); it needs 1");
}

TEST_F(PlanTest, BackfillNeverDelaysTheReservationOfTheHead) {
  Cluster(6);
  Running("p", "r1", Cpus(2), absl::Hours(1));
  Running("p", "r2", Cpus(2), absl::Hours(2));
  Queue("p", "big", Cpus(5));                              // head: 6 free at 14:00
  Queue("p", "long_1", Cpus(1));                           // at 14:00, 5 are left for big: starts
  Queue("p", "long_2", Cpus(1));                           // would leave big 4: waits
  Queue("p", "short", Cpus(1), 0, absl::Minutes(30));      // ends before 14:00: starts
  Run();
  EXPECT_EQ(started, (std::vector<std::string>{"long_1", "short"}));
  EXPECT_EQ(reasons["big"],
            "needs 5 CPUs; 2 free: job r1 holds 2 until 13:00 UTC, job r2 holds 2 until 14:00 UTC at the latest, by "
            "their maxRunningTime; reserved for it from 14:00 UTC");
  EXPECT_EQ(reasons["long_2"],
            "fits now, but would delay job big, first in line, which has what it needs reserved from 14:00 UTC; this "
            "job's maxRunningTime ends later");
}

TEST_F(PlanTest, FairShareGivesFreedResourcesToTheProjectBelowItsShare) {
  Cluster(4);
  Running("a", "a1", Cpus(1), absl::Hours(1));
  Running("a", "a2", Cpus(1), absl::Hours(2));
  Running("a", "a3", Cpus(1), absl::Hours(3));
  Queue("a", "a4", Cpus(1), 900);  // a's priority does not matter to b
  Queue("b", "b1", Cpus(2));
  Run();
  EXPECT_TRUE(started.empty()) << "the free CPU is held for b, below its share";
  EXPECT_EQ(reasons["b1"],
            "needs 2 CPUs; 1 free: a job of another project holds 1 until it ends, at the latest 13:00 UTC by its "
            "maxRunningTime; reserved for it from 13:00 UTC");
  EXPECT_EQ(reasons["a4"],
            "project a is above its fair share (it holds 75% of the cluster's CPUs; its share is 50%): waiting for "
            "projects below theirs");
}

TEST_F(PlanTest, WeightsDecideWhoGetsTheFreedResources) {
  Cluster(6);
  auto shares = Shares::Compile({{"a", 2}});
  ASSERT_TRUE(shares.ok());
  shares_ = *shares;
  for (int i = 0; i < 6; ++i) {
    Queue("a", "a" + std::to_string(i), Cpus(1));
    Queue("b", "b" + std::to_string(i), Cpus(1));
  }
  Run();
  int a = 0, b = 0;
  for (const auto& id : started) (id[0] == 'a' ? a : b)++;
  EXPECT_EQ(a, 4);
  EXPECT_EQ(b, 2);
}

TEST_F(PlanTest, OnlyReasonsThatChangedAreReturned) {
  Cluster(1);
  Running("p", "r", Cpus(1), absl::Hours(1));
  Queue("p", "same", Cpus(1), 0, kWeek,
        "needs 1 CPU; 0 free: job r holds 1 until it ends, at the latest 13:00 UTC by its maxRunningTime; reserved "
        "for it from 13:00 UTC");
  Queue("p", "changed", Cpus(1), 0, kWeek, "needs 1 CPU; 3 free");
  Run();
  EXPECT_EQ(plan_.waiting, 2);
  EXPECT_EQ(reasons.count("same"), 0u) << reasons["same"];
  EXPECT_EQ(reasons["changed"], "needs 1 CPU; 0 free");
}

TEST_F(PlanTest, AnExecutorThatPlacesJobsGetsEveryJobWithinQuota) {
  Limit({{}, {{"p", {{"us-central1", {{"JOBS", 2}}}}}}});
  Running("p", "j1", {}, absl::Hours(1));
  Queue("p", "j2", Cpus(64));
  Queue("p", "j3", Cpus(1));
  Queue("q", "k1", Cpus(64));
  Run(/*places_jobs=*/false);
  EXPECT_EQ(started, (std::vector<std::string>{"j2", "k1"}));
  EXPECT_EQ(reasons["j3"], "project quota JOBS 2 in us-central1: 2 in use by jobs j1, j2; it needs 1");
}

// Preemption (plan.h, step 4), as data.

TEST_F(PlanTest, AHigherPriorityHeadPreemptsTheLowestPriorityMostRecentlyStartedFirst) {
  Cluster(4);
  preemption_ = true;
  Low("p", "old", 2, 0, absl::Hours(3));
  Low("p", "mid", 1, 0, absl::Hours(1));
  Low("p", "new", 1, 0, absl::Minutes(10));
  Queue("p", "urgent", Cpus(2), 10);
  Run();
  EXPECT_TRUE(started.empty()) << "it starts once they stopped, not now";
  EXPECT_EQ(Victims(), (std::vector<std::string>{"p/new", "p/mid"})) << "the least work lost; not old (2 CPUs)";
  EXPECT_EQ(reasons["urgent"],
            "needs 2 CPUs; 0 free: preempting job new (priority 0), job mid (priority 0) for it; it starts once they "
            "stop");
}

TEST_F(PlanTest, OnlyTheVictimsTheHeadNeedsAreStopped) {
  Cluster(3);
  preemption_ = true;
  Low("p", "small", 1, 0, absl::Minutes(5));  // taken first (most recent), then found not needed
  Low("p", "big", 2, 0, absl::Hours(1));
  Queue("p", "urgent", Cpus(2), 10);
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"p/big"});
}

TEST_F(PlanTest, LowerPriorityGoesBeforeRecency) {
  Cluster(2);
  preemption_ = true;
  Low("p", "p5_new", 1, 5, absl::Minutes(1));
  Low("p", "p1_old", 1, 1, absl::Hours(5));
  Queue("p", "urgent", Cpus(1), 10);
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"p/p1_old"});
}

TEST_F(PlanTest, NeitherEqualNorHigherPriorityIsEverPreempted) {
  Cluster(2);
  preemption_ = true;
  Low("p", "same", 1, 5, absl::Minutes(1));
  Low("p", "higher", 1, 7, absl::Minutes(1));
  Queue("p", "urgent", Cpus(1), 5);
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{});
  EXPECT_EQ(reasons["urgent"],
            "needs 1 CPU; 0 free: job higher holds 1 until 13:00 UTC, job same holds 1 until 13:00 UTC at the latest, "
            "by their maxRunningTime; reserved for it from 13:00 UTC");
}

TEST_F(PlanTest, AnExemptProjectsJobsAndPreemptionOffStopNothing) {
  Cluster(1);
  exempt_ = {"prod"};
  Low("prod", "serving", 1, 0, absl::Minutes(1));
  Queue("prod", "urgent", Cpus(1), 10);
  preemption_ = true;
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{}) << "prod is exempt";

  exempt_.clear();
  held_.clear();
  held_jobs_.clear();
  usage_ = {};
  holdings_.clear();
  Low("prod", "serving", 1, 0, absl::Minutes(1));
  preemption_ = false;
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{}) << "preemption off";
  preemption_ = true;
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"prod/serving"});
}

TEST_F(PlanTest, JobsAlreadyStoppingAreWaitedForAndNothingMoreIsPreempted) {
  Cluster(2);
  preemption_ = true;
  Low("p", "going", 1, 0, absl::Minutes(1), /*stopping=*/true);
  Low("p", "other", 1, 0, absl::Minutes(1));
  Queue("p", "urgent", Cpus(1), 10);
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{});
  EXPECT_EQ(reasons["urgent"], "needs 1 CPU; 0 free: waiting for job going to stop; it starts then");
}

TEST_F(PlanTest, NothingStartedBehindThePreemptingHeadTakesWhatItCountsOn) {
  Cluster(3);
  preemption_ = true;
  Low("p", "victim", 2, 0, absl::Minutes(1));
  Queue("p", "urgent", Cpus(3), 10);  // 1 free now + the victim's 2
  Queue("p", "small", Cpus(1), 0);    // fits the free CPU now
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"p/victim"});
  EXPECT_TRUE(started.empty()) << "small would take the CPU urgent needs";
  EXPECT_EQ(reasons["small"],
            "fits now, but would delay job urgent (priority 10), first in line, which has what it needs reserved from "
            "12:00 UTC; this job's maxRunningTime ends later");
}

TEST_F(PlanTest, AClaimantTakesWhatItsVictimsFreedBeforeAnyOtherProject) {
  Cluster(2);
  preemption_ = true;
  Queue("b", "b1", Cpus(1));           // fair share alone would start it first (b before z)
  Queue("z", "urgent", Cpus(2), 10);  // preempted for in an earlier pass
  claimants_ = {{"z", "urgent"}};
  Run();
  EXPECT_EQ(started, std::vector<std::string>{"urgent"});
}

TEST_F(PlanTest, PriorityNeverPreemptsAnotherProjectsJobs) {
  Cluster(2);
  preemption_ = true;
  Low("a", "a1", 1, 0, absl::Minutes(1));
  Low("a", "a2", 1, 0, absl::Minutes(1));
  Queue("b", "b1", Cpus(1), 1000);
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{}) << "priority orders jobs within a project only";
  for_share_ = true;
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"a/a1"}) << "by fair share: a holds 100%, its share is 50%";
  EXPECT_EQ(reasons["b1"],
            "needs 1 CPU; 0 free: preempting a job of project a, above its fair share for it; it starts once that "
            "job stops");
}

TEST_F(PlanTest, FairSharePreemptionLeavesTheVictimsProjectAtItsShare) {
  Cluster(4);
  preemption_ = true;
  for_share_ = true;
  Low("a", "a1", 1, 0, absl::Hours(3));
  Low("a", "a2", 1, 0, absl::Hours(2));
  Low("a", "a3", 1, 0, absl::Hours(1));
  Queue("b", "b3", Cpus(3));  // would take a down to 25%, below its 50%
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{});
  jobs_.clear();
  queues_.clear();
  Queue("b", "b2", Cpus(2));  // a down to 50%: at its share
  Run();
  EXPECT_EQ(Victims(), std::vector<std::string>{"a/a3"});
}

}  // namespace
}  // namespace mle::scheduler
