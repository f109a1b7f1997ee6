#include "executor/slurm/slurm_tracking.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor/slurm/slurm_plan.h"

namespace mle::executor::slurm {
namespace {

bool IsFinal(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "NODE_FAIL" || state == "OUT_OF_MEMORY" || state == "PREEMPTED" || state == "BOOT_FAIL" ||
         state == "DEADLINE";
}

void Say(Step* step, Report::Kind kind) { step->reports.push_back({kind, "", Outcome::kFailed}); }

void End(Step* step, Outcome outcome, std::string message) {
  step->reports.push_back({Report::Kind::kEnded, std::move(message), outcome});
}

void EndAsTheLauncherSaid(Step* step, const rundir::RunOutcome& outcome) {
  End(step, outcome.succeeded ? Outcome::kSucceeded : Outcome::kFailed, outcome.message);
}

// A job can start and end between two rounds: if any replica ran, say it
// started (QUEUED -> PREPARING -> RUNNING) before it ends.
void CatchUp(const FilesSeen& files, Step* step) {
  TrackedJob& t = step->next;
  if (t.phase == TrackPhase::kRunning || t.cancel_requested) return;
  const bool ran = std::any_of(t.tasks.begin(), t.tasks.end(),
                               [&](const std::string& task) { return files.started_tasks.count(task) > 0; });
  if (!ran) return;
  if (t.phase != TrackPhase::kPreparing) Say(step, Report::Kind::kPreparing);
  Say(step, Report::Kind::kStarted);
  t.phase = TrackPhase::kRunning;
}

// Slurm listed the job in a final state: how it ended.
void EndFromSlurm(const SlurmView& slurm, const FilesSeen& files, Step* step) {
  CatchUp(files, step);
  const TrackedJob& t = step->next;
  const SlurmJob& sj = slurm.job;
  if (t.cancel_requested) {
    // A master that finished before the cancel landed still succeeded.
    if (files.outcome && files.outcome->succeeded) return EndAsTheLauncherSaid(step, *files.outcome);
    return End(step, t.cancel_outcome, t.cancel_reason);
  }
  if (files.outcome) return EndAsTheLauncherSaid(step, *files.outcome);
  if (sj.state == "COMPLETED" && t.phase == TrackPhase::kRunning) return End(step, Outcome::kSucceeded, "");
  if (sj.state == "COMPLETED") {
    return End(step, Outcome::kFailed,
               absl::StrCat("The Slurm job ", t.slurm_id, " completed without starting any replica; see ",
                            rundir::SlurmOutputPath(t.dir, t.slurm_id), "."));
  }
  if (sj.state == "CANCELLED") {
    return End(step, Outcome::kFailed,
               absl::StrCat("The Slurm job ", t.slurm_id, " was cancelled outside mlengine (scancel)."));
  }
  const MappedState m = MapSlurmState(sj.state, sj.state_reason);
  std::string message =
      absl::StrCat(m.message, " (Slurm job ", t.slurm_id, ", ", sj.state,
                   slurm.nodes.empty() ? "" : absl::StrCat(", nodes ", absl::StrJoin(slurm.nodes, ",")), ").");
  if (sj.state == "NODE_FAIL") {
    step->explain_node_failure = true;
    step->nodes = slurm.nodes;
    return End(step, Outcome::kLost, std::move(message));
  }
  End(step, Outcome::kFailed, std::move(message));
}

// Slurm stopped listing the job: it ended while nobody looked.
void EndUnobserved(const FilesSeen& files, Step* step) {
  CatchUp(files, step);
  const TrackedJob& t = step->next;
  if (files.outcome) return EndAsTheLauncherSaid(step, *files.outcome);
  if (t.cancel_requested) return End(step, t.cancel_outcome, t.cancel_reason);
  End(step, Outcome::kLost,
      absl::StrCat("Slurm no longer knows its job ", t.slurm_id, " and the job left no outcome; see ",
                   rundir::SlurmOutputPath(t.dir, t.slurm_id)));
}

// Slurm listed the job in a state it can leave: where it stands now.
void Follow(const SlurmView& slurm, const FilesSeen& files, const TrackingOptions& options, Step* step) {
  TrackedJob& t = step->next;
  const auto limits = options.account_limits.find(slurm.job.account);
  MappedState m = MapSlurmState(slurm.job.state, slurm.job.state_reason, slurm.job.account,
                                limits == options.account_limits.end() ? nullptr : &limits->second);
  TrackPhase next = t.phase;
  if (m.state == model::JobState::kQueued) next = TrackPhase::kWaiting;
  if (m.state == model::JobState::kPreparing) next = TrackPhase::kPreparing;
  if (m.state == model::JobState::kRunning) {
    // Running once every replica has started (its log exists).
    const bool all = t.phase == TrackPhase::kRunning ||
                     (!t.tasks.empty() && std::all_of(t.tasks.begin(), t.tasks.end(), [&](const std::string& task) {
                       return files.started_tasks.count(task) > 0;
                     }));
    next = all ? TrackPhase::kRunning : TrackPhase::kPreparing;
  }
  const bool requeued =
      next == TrackPhase::kWaiting && (t.phase == TrackPhase::kPreparing || t.phase == TrackPhase::kRunning);
  if (requeued) {
    ++t.requeues;
    step->set_outcome_aside = true;  // the earlier run's outcome must not decide the next run
  }
  if (next == TrackPhase::kWaiting && t.requeues > 0) {
    m.message = absl::StrCat("Slurm requeued the job (", t.requeues == 1 ? "once" : absl::StrCat(t.requeues, " times"),
                             ": a node failed or it was preempted). ", m.message);
  }
  const bool reason_changed = next == TrackPhase::kWaiting && m.message != t.reason;
  if (next == t.phase && !reason_changed && !requeued) return;
  const TrackPhase before = t.phase;
  t.phase = next;
  t.final_seen = absl::InfinitePast();
  t.reason = m.message;
  if (t.cancel_requested) return;
  switch (next) {
    case TrackPhase::kWaiting:
      step->reports.push_back(
          {Report::Kind::kWaiting, m.message, Outcome::kFailed, slurm.job.state_reason == "Resources"});
      break;
    case TrackPhase::kPreparing:
      Say(step, Report::Kind::kPreparing);
      break;
    case TrackPhase::kRunning:
      if (before == TrackPhase::kWaiting) Say(step, Report::Kind::kPreparing);
      Say(step, Report::Kind::kStarted);
      break;
    case TrackPhase::kSubmitting:
      break;
  }
}

// Looked up by name, and Slurm does not list it.
void NotFoundByName(const FilesSeen& files, Step* step) {
  TrackedJob& t = step->next;
  t.find_by_name = false;
  const bool ran = files.outcome.has_value() || t.phase == TrackPhase::kRunning || !files.started_tasks.empty();
  if (ran) {
    // It ran and Slurm has forgotten it since (MinJobAge): never again.
    CatchUp(files, step);
    if (files.outcome) return EndAsTheLauncherSaid(step, *files.outcome);
    if (t.cancel_requested) return End(step, t.cancel_outcome, t.cancel_reason);
    return End(step, Outcome::kLost,
               absl::StrCat("Slurm no longer knows the job ", SlurmJobName(t.ref.project, t.ref.job_id),
                            ", which ran while mlengined was down and left no outcome; see the launcher's output in ",
                            t.dir));
  }
  if (t.cancel_requested) return End(step, t.cancel_outcome, t.cancel_reason);
  if (!t.submit_error.empty()) return End(step, Outcome::kFailed, t.submit_error);  // sbatch failed after all
  t.phase = TrackPhase::kSubmitting;
  step->submit = true;  // sbatch never accepted it
}

// Looked up by name, and Slurm lists it: tracked under its id from now on.
void FoundByName(const SlurmView& slurm, Step* step) {
  TrackedJob& t = step->next;
  t.find_by_name = false;
  t.submit_error.clear();
  t.slurm_id = slurm.job.job_id;
  step->record_slurm_id = true;
  if (t.phase == TrackPhase::kSubmitting) {
    t.phase = TrackPhase::kWaiting;
    t.reason = kSubmittedReason;
    if (!t.cancel_requested) step->reports.push_back({Report::Kind::kWaiting, kSubmittedReason, Outcome::kFailed});
  }
}

}  // namespace

SlurmView ViewOf(const TrackedJob& job, const std::map<int64_t, SlurmView>& listed) {
  if (!job.find_by_name) {
    auto it = listed.find(job.slurm_id);
    return it == listed.end() ? SlurmView::Absent() : it->second;
  }
  const std::string name = SlurmJobName(job.ref.project, job.ref.job_id);
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    if (it->second.job.name == name) return it->second;
  }
  return SlurmView::Absent();
}

void AdoptDecisions(const TrackedJob& decided, TrackedJob* live) {
  live->slurm_id = decided.slurm_id;
  live->find_by_name = decided.find_by_name;
  live->submit_error = decided.submit_error;
  live->phase = decided.phase;
  live->reason = decided.reason;
  live->missing_polls = decided.missing_polls;
  live->requeues = decided.requeues;
  live->final_seen = decided.final_seen;
}

Step NextStep(const TrackedJob& job, const SlurmView& slurm, const FilesSeen& files, absl::Time now,
              const TrackingOptions& options) {
  Step step;
  step.next = job;
  TrackedJob& t = step.next;
  if (slurm.kind == SlurmView::Kind::kPollFailed) return step;
  if (t.find_by_name) {
    if (slurm.kind == SlurmView::Kind::kAbsent) {
      NotFoundByName(files, &step);
      return step;
    }
    FoundByName(slurm, &step);  // and on: what Slurm says of it now
  }
  switch (slurm.kind) {
    case SlurmView::Kind::kPollFailed:
      return step;
    case SlurmView::Kind::kAbsent:
      // Slurm forgot it (MinJobAge passed) or lost it. Give it a few rounds
      // (a fresh submission can lag), then decide from the files.
      if (++t.missing_polls >= options.missing_polls_before_lost) EndUnobserved(files, &step);
      return step;
    case SlurmView::Kind::kListed:
      t.missing_polls = 0;  // rounds *in a row*
      break;
  }
  // With --requeue, Slurm shows NODE_FAIL/PREEMPTED for a moment before the
  // job is PENDING again: give it time before calling it final. (The
  // launcher may have written an outcome as the node went: it does not count
  // while Slurm can still run the job again.)
  const std::string& state = slurm.job.state;
  if (options.requeue && !t.cancel_requested && (state == "NODE_FAIL" || state == "PREEMPTED")) {
    if (t.final_seen == absl::InfinitePast()) t.final_seen = now;
    if (now - t.final_seen < options.requeue_wait) return step;
  }
  if (IsFinal(state)) {
    EndFromSlurm(slurm, files, &step);
  } else {
    Follow(slurm, files, options, &step);
  }
  return step;
}

FilesWanted FilesNeeded(const TrackedJob& job, const SlurmView& slurm) {
  FilesWanted wanted;
  if (slurm.kind == SlurmView::Kind::kPollFailed) return wanted;  // NextStep decides nothing
  wanted.outcome = job.find_by_name || slurm.kind == SlurmView::Kind::kAbsent || IsFinal(slurm.job.state);
  wanted.started_tasks = job.phase != TrackPhase::kRunning;
  return wanted;
}

bool ScancelDue(const TrackedJob& job) { return job.slurm_id != 0 && job.cancel_requested && !job.scancel_sent; }

bool InMotion(const TrackedJob& job) {
  if (job.find_by_name) return false;
  return job.phase == TrackPhase::kSubmitting || job.phase == TrackPhase::kPreparing ||
         (job.cancel_requested && !job.scancel_sent);
}

std::string ExplainNodeFailure(int64_t slurm_id, const std::vector<std::string>& job_nodes,
                               const std::vector<SlurmNode>& cluster_nodes,
                               const std::map<std::string, std::string>& node_of_task, const std::string& fallback) {
  // The job's nodes: those Slurm lists now and those its replicas ran on. A
  // job ending as NODE_FAIL is COMPLETING, and squeue drops each node from
  // its list as the node is released, the lost one first.
  std::map<std::string, std::vector<std::string>> tasks_on;
  for (const auto& [task, node] : node_of_task) tasks_on[node].push_back(task);
  std::vector<std::string> lost;
  for (const auto& n : cluster_nodes) {
    const bool ours =
        tasks_on.count(n.name) > 0 || std::find(job_nodes.begin(), job_nodes.end(), n.name) != job_nodes.end();
    if (!n.Lost() || !ours) continue;
    auto it = tasks_on.find(n.name);
    lost.push_back(it == tasks_on.end() ? n.name : absl::StrCat(n.name, " (", absl::StrJoin(it->second, ", "), ")"));
  }
  if (lost.empty()) return fallback;
  return absl::StrCat("Slurm node", lost.size() > 1 ? "s " : " ", absl::StrJoin(lost, ", "),
                      " stopped responding, so Slurm ended the job (NODE_FAIL, Slurm job ", slurm_id,
                      ").");
}

absl::Duration RoundGap(absl::Duration min_poll, absl::Duration last_squeue) {
  return std::max(min_poll, kSqueueDutyFactor * std::max(last_squeue, absl::ZeroDuration()));
}

}  // namespace mle::executor::slurm
