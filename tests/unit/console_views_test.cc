// The pure pieces behind the console's read-only views, as tables: the
// projects a caller lists (filter, pages), a job's replicas from its run
// files, the cluster view with what the caller may not read hidden.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/status.h"
#include "model/job.h"
#include "service/cluster_view.h"
#include "service/job_runs.h"
#include "service/project_list.h"

namespace mle::service {
namespace {

// ---- projects.list ----

std::vector<model::Project> Projects(std::initializer_list<const char*> ids) {
  std::vector<model::Project> out;
  for (const char* id : ids) out.push_back({id, 100000000000 + static_cast<int64_t>(out.size()), "", "", {}});
  return out;
}

std::vector<std::string> Ids(const ProjectPage& page) {
  std::vector<std::string> out;
  for (const auto& p : page.projects) out.push_back(p.id);
  return out;
}

TEST(ProjectListTest, FilterAndVisibilityAsATable) {
  const auto all = Projects({"zeta", "alpha", "beta-1", "beta-2", "Gamma"});
  const auto everyone = [](const model::Project&) { return true; };
  struct Row {
    std::string filter;
    std::vector<std::string> want;  // empty with `error` set: refused
    std::string error;              // a word the message must hold
  };
  const Row rows[] = {
      {"", {"Gamma", "alpha", "beta-1", "beta-2", "zeta"}, ""},
      {"   ", {"Gamma", "alpha", "beta-1", "beta-2", "zeta"}, ""},
      {"name:beta*", {"beta-1", "beta-2"}, ""},
      {"id:BETA-1", {"beta-1"}, ""},
      {"NAME:gamma", {"Gamma"}, ""},
      {"projectId:alpha", {"alpha"}, ""},
      {"id=zeta", {"zeta"}, ""},
      {"lifecycleState:ACTIVE", {"Gamma", "alpha", "beta-1", "beta-2", "zeta"}, ""},
      {"lifecycleState:DELETE_REQUESTED", {}, ""},
      {"name:beta* AND id:beta-2", {"beta-2"}, ""},
      {"name:*", {"Gamma", "alpha", "beta-1", "beta-2", "zeta"}, ""},
      {"name:nothing", {}, ""},
      {"labels.color:red", {}, "labels.color"},
      {"parent.type:folder", {}, "parent.type"},
      {"name:a OR name:b", {}, "OR"},
      {"alpha", {}, "alpha"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.filter);
    auto page = ListProjectsPage(all, {row.filter, 0, ""}, everyone);
    if (!row.error.empty()) {
      ASSERT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
      const auto violations = common::GetFieldViolations(page.status());
      ASSERT_EQ(violations.size(), 1u);
      EXPECT_EQ(violations[0].field, "filter");
      EXPECT_TRUE(absl::StrContains(violations[0].description, row.error)) << violations[0].description;
      continue;
    }
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(Ids(*page), row.want);
    EXPECT_EQ(page->next_page_token, "");
  }
}

TEST(ProjectListTest, OnlyVisibleProjectsInPages) {
  const auto all = Projects({"p5", "p1", "p3", "p2", "p4", "p6"});
  const std::set<std::string> mine = {"p1", "p2", "p4", "p5", "p6"};
  const auto visible = [&](const model::Project& p) { return mine.count(p.id) > 0; };
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = ListProjectsPage(all, {"", 2, token}, visible);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->projects.size(), 2u);
    for (const auto& id : Ids(*page)) seen.push_back(id);
    token = page->next_page_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"p1", "p2", "p4", "p5", "p6"}));
  EXPECT_EQ(pages, 3);

  EXPECT_EQ(ListProjectsPage(all, {"", 0, "garbage!"}, visible).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListProjectsPage(all, {"", -1, ""}, visible).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListProjectsPage(all, {"", 1001, ""}, visible).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- a job's replicas ----

rundir::RunManifest Manifest(rundir::RunManifest::Stage stage) {
  rundir::RunManifest m;
  m.stage = stage;
  m.replicas = {{"master-replica-0", "localhost", {0, 1}, 0}, {"worker-replica-0", "localhost", {}, 0}};
  return m;
}

TEST(DescribeReplicasTest, StatesAsATable) {
  using Stage = rundir::RunManifest::Stage;
  using S = ReplicaState;
  struct Row {
    std::string name;
    std::vector<RunFiles> runs;
    bool job_ended;
    std::vector<ReplicaStatus> want;
  };
  RunFiles starting{"", Manifest(Stage::kStarting), {}, {}, {}};
  RunFiles started{"", Manifest(Stage::kStarted), {}, {}, {}};
  RunFiles ended = started;
  ended.exits = {{"master-replica-0", {false, 0}}, {"worker-replica-0", {true, 15}}};
  RunFiles failed = started;
  failed.exits = {{"master-replica-0", {false, 3}}};
  RunFiles slurm{"", std::nullopt, {"master-replica-0", "worker-replica-0"}, {{"master-replica-0", "node1"}}, {}};
  RunFiles trial2{"2", Manifest(Stage::kStarted), {}, {}, {{"master-replica-0", {false, 0}}}};
  RunFiles trial10{"10", Manifest(Stage::kStarting), {}, {}, {}};
  const Row rows[] = {
      {"not started", {RunFiles{}}, false, {}},
      {"starting",
       {starting},
       false,
       {{"master-replica-0", "localhost", {0, 1}, S::kStarting, {}, {}, ""},
        {"worker-replica-0", "localhost", {}, S::kStarting, {}, {}, ""}}},
      {"running",
       {started},
       false,
       {{"master-replica-0", "localhost", {0, 1}, S::kRunning, {}, {}, ""},
        {"worker-replica-0", "localhost", {}, S::kRunning, {}, {}, ""}}},
      {"ended: exit 0 and a signal",
       {ended},
       true,
       {{"master-replica-0", "localhost", {0, 1}, S::kSucceeded, 0, {}, ""},
        {"worker-replica-0", "localhost", {}, S::kKilled, {}, 15, ""}}},
      {"one failed, the other still runs",
       {failed},
       false,
       {{"master-replica-0", "localhost", {0, 1}, S::kFailed, 3, {}, ""},
        {"worker-replica-0", "localhost", {}, S::kRunning, {}, {}, ""}}},
      {"job ended, no exit recorded",
       {failed},
       true,
       {{"master-replica-0", "localhost", {0, 1}, S::kFailed, 3, {}, ""},
        {"worker-replica-0", "localhost", {}, S::kKilled, {}, {}, ""}}},
      {"slurm: one placed",
       {slurm},
       false,
       {{"master-replica-0", "node1", {}, S::kRunning, {}, {}, ""},
        {"worker-replica-0", "", {}, S::kStarting, {}, {}, ""}}},
      {"trials in the order given",
       {trial2, trial10},
       false,
       {{"master-replica-0", "localhost", {0, 1}, S::kSucceeded, 0, {}, "2"},
        {"worker-replica-0", "localhost", {}, S::kRunning, {}, {}, "2"},
        {"master-replica-0", "localhost", {0, 1}, S::kStarting, {}, {}, "10"},
        {"worker-replica-0", "localhost", {}, S::kStarting, {}, {}, "10"}}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(DescribeReplicas(row.runs, row.job_ended).replicas, row.want);
  }
}

TEST(DescribeReplicasTest, TpuHostsOnce) {
  RunFiles a{"1", Manifest(rundir::RunManifest::Stage::kStarted), {}, {}, {}};
  a.manifest->tpu_hosts = {"v2-1", "v2-2"};
  a.manifest->tpu_simulated = true;
  RunFiles b = a;
  b.trial_id = "2";
  b.manifest->tpu_hosts = {"v2-2", "v2-3"};
  const JobReplicas r = DescribeReplicas({a, b}, false);
  EXPECT_EQ(r.tpu_hosts, (std::vector<std::string>{"v2-1", "v2-2", "v2-3"}));
  EXPECT_TRUE(r.tpu_simulated);
  EXPECT_FALSE(DescribeReplicas({RunFiles{"", Manifest(rundir::RunManifest::Stage::kStarted), {}, {}, {}}}, false)
                   .tpu_simulated);
}

TEST(TrialJobIdTest, SplitsWhatTrialJobIdJoins) {
  EXPECT_EQ(model::SplitTrialJobId(model::TrialJobId("tune_1", "12")),
            (std::make_pair(std::string("tune_1"), std::string("12"))));
  EXPECT_EQ(model::SplitTrialJobId("plain_job"), std::nullopt);
  EXPECT_EQ(model::SplitTrialJobId(".3"), std::nullopt);
  EXPECT_EQ(model::SplitTrialJobId("job."), std::nullopt);
}

// ---- the cluster ----

ClusterHost Host(const std::string& name, std::string state = "up") {
  ClusterHost h;
  h.host.name = name;
  h.host.cpu_milli = 8000;
  h.state = std::move(state);
  return h;
}

TEST(ClusterViewTest, WhatTheCallerMayNotReadIsHiddenNeverNamed) {
  using SchedJob = scheduler::SchedulerSnapshot::PlacedJob;
  model::Placement mine;
  mine.replicas["master-replica-0"] = {"localhost", {0}};
  mine.replicas["worker-replica-0"] = {"localhost", {}};
  mine.tpu_hosts = {"v2-1"};
  model::Placement theirs;
  theirs.replicas["master-replica-0"] = {"localhost", {1}};
  model::Placement trial;
  trial.replicas["master-replica-0"] = {"gone-node", {}};
  ClusterInputs inputs;
  inputs.executor = "local";
  inputs.hosts = {Host("localhost"), Host("v2-1"), Host("v2-2")};
  inputs.replicas = ReplicasOf({SchedJob{{"mine", "job1"}, mine, true},
                                SchedJob{{"theirs", "secret_job"}, theirs, true},
                                SchedJob{{"mine", model::TrialJobId("tune", "4")}, trial, false}});
  inputs.projects = {{"mine", {2, 1}}, {"theirs", {5, 1}}};
  ClusterAccess access;
  access.job = [](const std::string& project, const std::string&) { return project == "mine"; };
  access.project = [](const std::string& project) { return project == "mine"; };

  const ClusterView view = AssembleClusterView(inputs, access);
  EXPECT_EQ(view.executor, "local");
  ASSERT_EQ(view.hosts.size(), 4u);  // the inventory's three, then the node only a placement names
  EXPECT_EQ(view.hosts[0].host.host.name, "localhost");
  using R = ClusterView::Replica;
  EXPECT_EQ(view.hosts[0].replicas, (std::vector<R>{{false, "mine", "job1", "", "master-replica-0"},
                                                    {false, "mine", "job1", "", "worker-replica-0"},
                                                    {true, "", "", "", ""}}));
  EXPECT_EQ(view.hosts[1].replicas, (std::vector<R>{{false, "mine", "job1", "", ""}}));  // its TPU host
  EXPECT_TRUE(view.hosts[2].replicas.empty());
  EXPECT_EQ(view.hosts[3].host.host.name, "gone-node");
  EXPECT_EQ(view.hosts[3].host.state, "unknown");
  EXPECT_EQ(view.hosts[3].replicas, (std::vector<R>{{false, "mine", "tune", "4", "master-replica-0"}}));
  EXPECT_EQ(view.queues, (std::vector<ClusterView::Queue>{{"mine", 2, 1}}));

  // The operator (everything readable) sees every job and queue.
  ClusterAccess all{[](const std::string&, const std::string&) { return true; },
                    [](const std::string&) { return true; }};
  const ClusterView full = AssembleClusterView(inputs, all);
  EXPECT_EQ(full.hosts[0].replicas.back(), (R{false, "theirs", "secret_job", "", "master-replica-0"}));
  EXPECT_EQ(full.queues.size(), 2u);
}

}  // namespace
}  // namespace mle::service
