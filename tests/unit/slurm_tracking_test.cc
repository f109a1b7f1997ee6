// How the Slurm executor follows a job (slurm_tracking.h), as a table: what
// it knows of the job, what squeue says, what the run directory shows and
// the time in; what the scheduler is told and the bookkeeping out.
#include "executor/slurm/slurm_tracking.h"

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mle::executor::slurm {

// For gtest's messages (found by argument-dependent lookup).
void PrintTo(const Report& r, std::ostream* os) {
  static const char* kKinds[] = {"waiting", "preparing", "started", "ended"};
  *os << kKinds[static_cast<int>(r.kind)];
  if (r.kind == Report::Kind::kEnded) *os << "[outcome " << static_cast<int>(r.outcome) << "]";
  if (!r.message.empty()) *os << ": \"" << r.message << "\"";
  if (r.for_resources) *os << " (for resources)";
}

namespace {

using ::testing::ElementsAre;
using Kind = Report::Kind;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);
const std::vector<std::string> kTasks = {"master-replica-0", "worker-replica-0"};

TrackedJob Job(TrackPhase phase) {
  TrackedJob t;
  t.ref = {"p", "a"};
  t.dir = "/runs/p/a";
  t.slurm_id = 101;
  t.tasks = kTasks;
  t.phase = phase;
  t.reason = phase == TrackPhase::kWaiting ? kSubmittedReason : "";
  return t;
}

SlurmView Listed(std::string state, std::string reason = "", std::vector<std::string> nodes = {}) {
  SlurmJob j;
  j.job_id = 101;
  j.name = "mle-p-a";
  j.state = std::move(state);
  j.state_reason = std::move(reason);
  return SlurmView::Listed(j, std::move(nodes));
}

FilesSeen Files(std::optional<rundir::RunOutcome> outcome = std::nullopt, std::set<std::string> started = {}) {
  return {std::move(outcome), std::move(started)};
}
const std::set<std::string> kAllStarted(kTasks.begin(), kTasks.end());

// Waiting for `why`; starved when Slurm's reason is Resources (what preemption may free).
Report Waiting(std::string why) {
  const bool resources = why.find("Waiting in the Slurm queue: Resources") != std::string::npos;
  return {Kind::kWaiting, std::move(why), Outcome::kFailed, resources};
}
Report Preparing() { return {Kind::kPreparing, "", Outcome::kFailed}; }
Report Started() { return {Kind::kStarted, "", Outcome::kFailed}; }
Report Ended(Outcome o, std::string message) { return {Kind::kEnded, std::move(message), o}; }

struct Row {
  std::string name;
  TrackedJob job;
  SlurmView slurm;
  FilesSeen files;
  std::vector<Report> reports;
  TrackPhase phase;  // next.phase
  std::function<void(const Step&)> also = nullptr;
  TrackingOptions options = {};
};

TrackedJob With(TrackedJob t, const std::function<void(TrackedJob&)>& change) {
  change(t);
  return t;
}

const TrackingOptions kRequeue = [] {
  TrackingOptions o;
  o.requeue = true;
  o.requeue_wait = absl::Seconds(20);
  o.missing_polls_before_lost = 3;
  return o;
}();

std::vector<Row> Rows() {
  const TrackedJob waiting = Job(TrackPhase::kWaiting);
  const TrackedJob preparing = Job(TrackPhase::kPreparing);
  const TrackedJob running = Job(TrackPhase::kRunning);
  const TrackedJob cancelled = With(waiting, [](auto& t) {
    t.cancel_requested = true;
    t.cancel_reason = "Cancelled by a user request.";
    t.scancel_sent = true;
  });
  const TrackedJob missing_twice = With(waiting, [](auto& t) { t.missing_polls = 2; });
  const TrackedJob looking_up = With(Job(TrackPhase::kSubmitting), [](auto& t) {
    t.slurm_id = 0;
    t.find_by_name = true;
  });
  const rundir::RunOutcome failed{false, "The replica worker-replica-0 exited with a non-zero status of 3."};
  return {
      // squeue failed: nothing changes.
      {"poll failed", waiting, SlurmView::PollFailed(), Files(), {}, TrackPhase::kWaiting,
       [](const Step& s) { EXPECT_EQ(s.next.missing_polls, 0); }},
      // Not listed: a few rounds of grace, then the files decide.
      {"absent once", waiting, SlurmView::Absent(), Files(), {}, TrackPhase::kWaiting,
       [](const Step& s) { EXPECT_EQ(s.next.missing_polls, 1); }},
      {"absent, ran and succeeded unobserved", missing_twice, SlurmView::Absent(), Files({{true, ""}}, kAllStarted),
       {Preparing(), Started(), Ended(Outcome::kSucceeded, "")}, TrackPhase::kRunning},
      {"absent, the launcher's failure", With(running, [](auto& t) { t.missing_polls = 2; }), SlurmView::Absent(),
       Files(failed), {Ended(Outcome::kFailed, failed.message)}, TrackPhase::kRunning},
      {"absent after a cancel", With(cancelled, [](auto& t) { t.missing_polls = 2; }), SlurmView::Absent(), Files(),
       {Ended(Outcome::kStopped, "Cancelled by a user request.")}, TrackPhase::kWaiting},
      {"absent, no trace", missing_twice, SlurmView::Absent(), Files(),
       {Ended(Outcome::kLost, "Slurm no longer knows its job 101 and the job left no outcome; see "
                              "/runs/p/a/slurm-101.out")},
       TrackPhase::kWaiting},
      // In Slurm's queue.
      {"pending, a new reason", waiting, Listed("PENDING", "Resources"), Files(),
       {Waiting("Waiting in the Slurm queue: Resources (the nodes it needs are in use by other jobs)")},
       TrackPhase::kWaiting},
      {"pending, the same reason", With(waiting, [](auto& t) { t.reason = "Waiting in the Slurm queue: Priority "
                                                                          "(jobs of higher priority are ahead of it)"; }),
       Listed("PENDING", "Priority"), Files(), {}, TrackPhase::kWaiting},
      {"pending again resets the missing count", With(waiting, [](auto& t) { t.missing_polls = 2; }),
       Listed("PENDING", "Resources"), Files(),
       {Waiting("Waiting in the Slurm queue: Resources (the nodes it needs are in use by other jobs)")},
       TrackPhase::kWaiting, [](const Step& s) { EXPECT_EQ(s.next.missing_polls, 0); }},
      {"listed at all resets the missing count", With(running, [](auto& t) { t.missing_polls = 2; }),
       Listed("RUNNING"), Files(), {}, TrackPhase::kRunning, [](const Step& s) { EXPECT_EQ(s.next.missing_polls, 0); }},
      // Allocated, then started.
      {"allocated, no replica yet", waiting, Listed("RUNNING", "", {"tpuhost1"}), Files(), {Preparing()},
       TrackPhase::kPreparing},
      {"configuring", waiting, Listed("CONFIGURING"), Files(), {Preparing()}, TrackPhase::kPreparing},
      {"some replicas started", preparing, Listed("RUNNING"), Files(std::nullopt, {"master-replica-0"}), {},
       TrackPhase::kPreparing},
      {"every replica started", preparing, Listed("RUNNING"), Files(std::nullopt, kAllStarted), {Started()},
       TrackPhase::kRunning},
      {"started between two rounds", waiting, Listed("RUNNING"), Files(std::nullopt, kAllStarted),
       {Preparing(), Started()}, TrackPhase::kRunning},
      {"running stays running", running, Listed("RUNNING"), Files(), {}, TrackPhase::kRunning},
      {"completing is still running", running, Listed("COMPLETING"), Files(), {}, TrackPhase::kRunning},
      // Requeued.
      {"requeued", running, Listed("PENDING", "BeginTime"), Files(),
       {Waiting("Slurm requeued the job (once: a node failed or it was preempted). Waiting in the Slurm queue: "
                "BeginTime (its start time has not come)")},
       TrackPhase::kWaiting,
       [](const Step& s) {
         EXPECT_TRUE(s.set_outcome_aside);
         EXPECT_EQ(s.next.requeues, 1);
       }},
      {"requeued twice", With(preparing, [](auto& t) { t.requeues = 1; }), Listed("REQUEUED"), Files(),
       {Waiting("Slurm requeued the job (2 times: a node failed or it was preempted). Requeued by Slurm (REQUEUED)")},
       TrackPhase::kWaiting, [](const Step& s) { EXPECT_EQ(s.next.requeues, 2); }},
      {"a node failed, requeue on: wait for Slurm", running, Listed("NODE_FAIL", "", {"tpuhost1"}), Files(failed), {},
       TrackPhase::kRunning, [](const Step& s) { EXPECT_EQ(s.next.final_seen, kNow); }, kRequeue},
      {"still within the requeue wait", With(running, [](auto& t) { t.final_seen = kNow - absl::Seconds(19); }),
       Listed("PREEMPTED"), Files(), {}, TrackPhase::kRunning, nullptr, kRequeue},
      {"the requeue wait is over",
       With(running, [](auto& t) { t.final_seen = kNow - absl::Seconds(20); }), Listed("NODE_FAIL", "", {"tpuhost1"}),
       Files(), {Ended(Outcome::kLost, "A node of the Slurm job failed (Slurm job 101, NODE_FAIL, nodes tpuhost1).")},
       TrackPhase::kRunning, [](const Step& s) { EXPECT_TRUE(s.explain_node_failure); }, kRequeue},
      {"a cancelled job is not waited for", With(cancelled, [](auto& t) { t.phase = TrackPhase::kRunning; }),
       Listed("PREEMPTED"), Files(), {Ended(Outcome::kStopped, "Cancelled by a user request.")}, TrackPhase::kRunning,
       nullptr, kRequeue},
      // Final states.
      {"node failure", running, Listed("NODE_FAIL", "NodeDown", {"tpuhost1", "tpuhost3"}), Files(),
       {Ended(Outcome::kLost,
              "A node of the Slurm job failed (NodeDown) (Slurm job 101, NODE_FAIL, nodes "
              "tpuhost1,tpuhost3).")},
       TrackPhase::kRunning,
       [](const Step& s) {
         EXPECT_TRUE(s.explain_node_failure);
         EXPECT_THAT(s.nodes, ElementsAre("tpuhost1", "tpuhost3"));
       }},
      {"completed after running", running, Listed("COMPLETED"), Files(), {Ended(Outcome::kSucceeded, "")},
       TrackPhase::kRunning},
      {"completed, the launcher's word", running, Listed("COMPLETED"), Files(failed),
       {Ended(Outcome::kFailed, failed.message)}, TrackPhase::kRunning},
      {"completed without a replica", waiting, Listed("COMPLETED"), Files(),
       {Ended(Outcome::kFailed,
              "The Slurm job 101 completed without starting any replica; see /runs/p/a/slurm-101.out.")},
       TrackPhase::kWaiting},
      {"cancelled outside mlengine", running, Listed("CANCELLED"), Files(),
       {Ended(Outcome::kFailed, "The Slurm job 101 was cancelled outside mlengine (scancel).")}, TrackPhase::kRunning},
      {"cancelled by us: no catching up", cancelled, Listed("CANCELLED"), Files(std::nullopt, kAllStarted),
       {Ended(Outcome::kStopped, "Cancelled by a user request.")}, TrackPhase::kWaiting},
      {"the master finished before the cancel", cancelled, Listed("COMPLETED"), Files({{true, ""}}),
       {Ended(Outcome::kSucceeded, "")}, TrackPhase::kWaiting},
      {"time limit", running, Listed("TIMEOUT", "TimeLimit", {"tpuhost2"}), Files(),
       {Ended(Outcome::kFailed, "The Slurm job reached its time limit (Slurm job 101, TIMEOUT, nodes tpuhost2).")},
       TrackPhase::kRunning, [](const Step& s) { EXPECT_FALSE(s.explain_node_failure); }},
      {"ran and failed between two rounds", waiting, Listed("FAILED", "NonZeroExitCode"),
       Files(failed, {"master-replica-0"}), {Preparing(), Started(), Ended(Outcome::kFailed, failed.message)},
       TrackPhase::kRunning},
      // Looked up by name (a crash between sbatch and recording the id).
      {"looked up, squeue failed", looking_up, SlurmView::PollFailed(), Files(), {}, TrackPhase::kSubmitting,
       [](const Step& s) {
         EXPECT_TRUE(s.next.find_by_name);
         EXPECT_FALSE(s.submit);
       }},
      {"looked up, never accepted: submit now", looking_up, SlurmView::Absent(), Files(), {},
       TrackPhase::kSubmitting,
       [](const Step& s) {
         EXPECT_TRUE(s.submit);
         EXPECT_FALSE(s.next.find_by_name);
         EXPECT_EQ(s.next.missing_polls, 0);
       }},
      {"looked up, never accepted, cancelled", With(looking_up, [](auto& t) {
         t.cancel_requested = true;
         t.cancel_reason = "Cancelled by a user request.";
       }),
       SlurmView::Absent(), Files(), {Ended(Outcome::kStopped, "Cancelled by a user request.")},
       TrackPhase::kSubmitting, [](const Step& s) { EXPECT_FALSE(s.submit); }},
      {"looked up after sbatch's answer was lost: it failed", With(looking_up, [](auto& t) {
         t.submit_error = "Slurm did not accept the job: sbatch timed out after 60 s";
       }),
       SlurmView::Absent(), Files(),
       {Ended(Outcome::kFailed, "Slurm did not accept the job: sbatch timed out after 60 s")},
       TrackPhase::kSubmitting, [](const Step& s) { EXPECT_FALSE(s.submit); }},
      {"looked up, ran and was forgotten: never again", looking_up, SlurmView::Absent(), Files({{true, ""}}),
       {Ended(Outcome::kSucceeded, "")}, TrackPhase::kSubmitting, [](const Step& s) { EXPECT_FALSE(s.submit); }},
      {"looked up, started and was forgotten", With(looking_up, [](auto& t) { t.phase = TrackPhase::kPreparing; }),
       SlurmView::Absent(), Files(std::nullopt, {"worker-replica-0"}),
       {Started(), Ended(Outcome::kLost, "Slurm no longer knows the job mle-p-a, which ran while mlengined was down "
                                         "and left no outcome; see the launcher's output in /runs/p/a")},
       TrackPhase::kRunning, [](const Step& s) { EXPECT_FALSE(s.submit); }},
      {"looked up and found waiting", looking_up, Listed("PENDING", "Resources"), Files(),
       {Waiting(kSubmittedReason),
        Waiting("Waiting in the Slurm queue: Resources (the nodes it needs are in use by other jobs)")},
       TrackPhase::kWaiting,
       [](const Step& s) {
         EXPECT_EQ(s.next.slurm_id, 101);
         EXPECT_TRUE(s.record_slurm_id);
         EXPECT_FALSE(s.next.find_by_name);
       }},
      {"looked up and found ended (adopted as running)",
       With(looking_up, [](auto& t) { t.phase = TrackPhase::kRunning; }), Listed("COMPLETED"), Files(),
       {Ended(Outcome::kSucceeded, "")}, TrackPhase::kRunning,
       [](const Step& s) { EXPECT_TRUE(s.record_slurm_id); }},
      {"looked up and found after a cancel", With(looking_up, [](auto& t) { t.cancel_requested = true; }),
       Listed("PENDING"), Files(), {}, TrackPhase::kWaiting, [](const Step& s) {
         EXPECT_EQ(s.next.slurm_id, 101);
         EXPECT_TRUE(ScancelDue(s.next));
       }},
      // After a cancel nothing but the end is reported; the phase still follows.
      {"running after a cancel", cancelled, Listed("RUNNING"), Files(std::nullopt, kAllStarted), {},
       TrackPhase::kRunning},
  };
}

TEST(NextStepTest, Table) {
  for (const Row& row : Rows()) {
    const Step step = NextStep(row.job, row.slurm, row.files, kNow, row.options);
    EXPECT_EQ(step.reports, row.reports) << row.name;
    EXPECT_EQ(step.next.phase, row.phase) << row.name;
    EXPECT_EQ(step.Ended(), !row.reports.empty() && row.reports.back().kind == Kind::kEnded) << row.name;
    // What others own is never changed by a step.
    EXPECT_EQ(step.next.cancel_requested, row.job.cancel_requested) << row.name;
    EXPECT_EQ(step.next.scancel_sent, row.job.scancel_sent) << row.name;
    if (row.also) {
      SCOPED_TRACE(row.name);
      row.also(step);
    }
  }
}

// A round reads only what FilesNeeded names: for every row, and for every
// row with an outcome and every replica's log on disk besides, the step
// from just those files is the step from all of them.
TEST(FilesNeededTest, WhatIsNotReadDecidesNothing) {
  const FilesSeen everything = Files(rundir::RunOutcome{false, "The replica master-replica-0 exited."}, kAllStarted);
  for (const Row& row : Rows()) {
    for (const FilesSeen& all : {row.files, everything}) {
      const FilesWanted wanted = FilesNeeded(row.job, row.slurm);
      FilesSeen read;
      if (wanted.outcome) read.outcome = all.outcome;
      if (wanted.started_tasks) read.started_tasks = all.started_tasks;
      const Step full = NextStep(row.job, row.slurm, all, kNow, row.options);
      const Step lean = NextStep(row.job, row.slurm, read, kNow, row.options);
      EXPECT_EQ(lean.reports, full.reports) << row.name;
      EXPECT_EQ(lean.next.phase, full.next.phase) << row.name;
      EXPECT_EQ(lean.next.reason, full.next.reason) << row.name;
      EXPECT_EQ(lean.next.missing_polls, full.next.missing_polls) << row.name;
      EXPECT_EQ(lean.set_outcome_aside, full.set_outcome_aside) << row.name;
      EXPECT_EQ(lean.explain_node_failure, full.explain_node_failure) << row.name;
      EXPECT_EQ(lean.record_slurm_id, full.record_slurm_id) << row.name;
      EXPECT_EQ(lean.submit, full.submit) << row.name;
    }
  }
}

TEST(FilesNeededTest, Table) {
  struct Case {
    std::string name;
    TrackedJob job;
    SlurmView slurm;
    FilesWanted want;
  };
  const TrackedJob looking_up = With(Job(TrackPhase::kSubmitting), [](auto& t) {
    t.slurm_id = 0;
    t.find_by_name = true;
  });
  const Case cases[] = {
      {"squeue failed", Job(TrackPhase::kWaiting), SlurmView::PollFailed(), {false, false}},
      {"pending", Job(TrackPhase::kWaiting), Listed("PENDING", "Resources"), {false, true}},
      {"allocated", Job(TrackPhase::kPreparing), Listed("RUNNING"), {false, true}},
      {"running", Job(TrackPhase::kRunning), Listed("RUNNING"), {false, false}},
      {"completing", Job(TrackPhase::kRunning), Listed("COMPLETING"), {false, false}},
      {"completed", Job(TrackPhase::kRunning), Listed("COMPLETED"), {true, false}},
      {"failed before it ran", Job(TrackPhase::kPreparing), Listed("FAILED"), {true, true}},
      {"node failure", Job(TrackPhase::kRunning), Listed("NODE_FAIL"), {true, false}},
      {"no longer listed", Job(TrackPhase::kRunning), SlurmView::Absent(), {true, false}},
      {"looked up by name", looking_up, Listed("RUNNING"), {true, true}},
  };
  for (const Case& c : cases) EXPECT_EQ(FilesNeeded(c.job, c.slurm), c.want) << c.name;
}

TEST(ViewOfTest, ByIdOrByName) {
  auto listed = [](int64_t id, std::string name) {
    SlurmJob j;
    j.job_id = id;
    j.name = std::move(name);
    j.state = "PENDING";
    return SlurmView::Listed(j, {});
  };
  const std::map<int64_t, SlurmView> squeue = {
      {7, listed(7, "mle-p-a")}, {101, listed(101, "mle-p-b")}, {102, listed(102, "mle-p-a")}};
  TrackedJob a = Job(TrackPhase::kWaiting);
  a.slurm_id = 7;
  EXPECT_EQ(ViewOf(a, squeue).job.job_id, 7);
  a.slurm_id = 8;
  EXPECT_EQ(ViewOf(a, squeue).kind, SlurmView::Kind::kAbsent);
  a.slurm_id = 0;
  a.find_by_name = true;
  EXPECT_EQ(ViewOf(a, squeue).job.job_id, 102);  // the newest of that name
  a.ref.job_id = "c";
  EXPECT_EQ(ViewOf(a, squeue).kind, SlurmView::Kind::kAbsent);
}

TEST(NextStepTest, AdoptDecisionsKeepsACancelThatArrivedMeanwhile) {
  TrackedJob live = Job(TrackPhase::kWaiting);
  const Step step = NextStep(live, Listed("RUNNING"), Files(), kNow, {});
  live.cancel_requested = true;  // Cancel() while the round ran
  live.cancel_reason = "Cancelled by a user request.";
  AdoptDecisions(step.next, &live);
  EXPECT_EQ(live.phase, TrackPhase::kPreparing);
  EXPECT_TRUE(live.cancel_requested);
  EXPECT_EQ(live.cancel_reason, "Cancelled by a user request.");
}

TEST(NextStepTest, ScancelAndMotion) {
  TrackedJob t = Job(TrackPhase::kWaiting);
  EXPECT_FALSE(ScancelDue(t));
  EXPECT_FALSE(InMotion(t));
  t.cancel_requested = true;
  EXPECT_TRUE(ScancelDue(t));
  EXPECT_TRUE(InMotion(t));
  t.scancel_sent = true;
  EXPECT_FALSE(ScancelDue(t));
  EXPECT_FALSE(InMotion(t));
  TrackedJob submitting = Job(TrackPhase::kSubmitting);
  submitting.slurm_id = 0;
  submitting.cancel_requested = true;
  EXPECT_FALSE(ScancelDue(submitting));  // nothing in Slurm to cancel yet
  EXPECT_TRUE(InMotion(submitting));
  submitting.find_by_name = true;
  EXPECT_FALSE(InMotion(submitting));  // waits for Slurm to answer: no quick rounds
  EXPECT_TRUE(InMotion(Job(TrackPhase::kPreparing)));
  EXPECT_FALSE(InMotion(Job(TrackPhase::kRunning)));
}

TEST(ExplainNodeFailureTest, NamesTheLostNodesAndWhatRanThere) {
  auto node = [](std::string name, bool lost) {
    SlurmNode n;
    n.name = std::move(name);
    n.state = lost ? "down" : "idle";
    if (lost) n.state_flags = {"NOT_RESPONDING"};
    return n;
  };
  const std::vector<SlurmNode> cluster = {node("tpuhost1", false), node("tpuhost2", true), node("tpuhost3", true),
                                          node("tpuhost4", true)};
  const std::map<std::string, std::string> placement = {
      {"master-replica-0", "tpuhost1"}, {"worker-replica-0", "tpuhost2"}, {"worker-replica-1", "tpuhost3"}};
  const std::vector<std::string> job_nodes = {"tpuhost1", "tpuhost2", "tpuhost3"};
  EXPECT_EQ(ExplainNodeFailure(7, job_nodes, cluster, placement, "fallback"),
            "Slurm nodes tpuhost2 (worker-replica-0), tpuhost3 (worker-replica-1) stopped responding, so Slurm ended "
            "the job (NODE_FAIL, Slurm job 7).");
  EXPECT_EQ(ExplainNodeFailure(7, {"tpuhost3"}, cluster, {}, "fallback"),
            "Slurm node tpuhost3 stopped responding, so Slurm ended the job (NODE_FAIL, Slurm job 7).");
  // squeue had already released the lost nodes (the job is COMPLETING): the
  // placement still says they were the job's.
  EXPECT_EQ(ExplainNodeFailure(7, {"tpuhost1"}, cluster, placement, "fallback"),
            "Slurm nodes tpuhost2 (worker-replica-0), tpuhost3 (worker-replica-1) stopped responding, so Slurm ended "
            "the job (NODE_FAIL, Slurm job 7).");
  EXPECT_EQ(ExplainNodeFailure(7, {"tpuhost1"}, cluster, {{"master-replica-0", "tpuhost1"}}, "fallback"),
            "fallback");  // tpuhost2-4 are lost, but none of them was its
}

}  // namespace
// Rounds keep squeue to about a quarter of the time at most, never more
// often than min_poll.
TEST(RoundGapTest, Table) {
  struct Row {
    absl::Duration min_poll, last_squeue, want;
  };
  const Row rows[] = {
      {absl::Milliseconds(100), absl::ZeroDuration(), absl::Milliseconds(100)},   // no squeue yet
      {absl::Milliseconds(100), absl::Milliseconds(10), absl::Milliseconds(100)},  // cheap: min_poll
      {absl::Milliseconds(100), absl::Milliseconds(25), absl::Milliseconds(100)},
      {absl::Milliseconds(100), absl::Milliseconds(60), absl::Milliseconds(240)},  // 200 jobs known
      {absl::Milliseconds(100), absl::Seconds(2), absl::Seconds(8)},               // a controller that struggles
      {absl::Milliseconds(100), -absl::Milliseconds(5), absl::Milliseconds(100)},  // a clock step
  };
  for (const Row& r : rows) {
    EXPECT_EQ(RoundGap(r.min_poll, r.last_squeue), r.want) << r.last_squeue;
  }
}

}  // namespace mle::executor::slurm
