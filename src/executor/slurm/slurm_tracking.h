// How the Slurm executor follows one job, as pure functions: given what it
// knows of the job (TrackedJob), what Slurm's latest `squeue` says of it
// (SlurmView), what the run directory shows (FilesSeen) and the time,
// NextStep decides what to tell the scheduler (waiting and why, preparing,
// running, ended with an outcome and a message) and the bookkeeping that
// follows (requeues, polls it went unlisted, when a requeueable failure was
// first seen). SlurmExecutor gathers the inputs and carries steps out; it
// decides nothing itself. No I/O; thread-safe (no state).
//
// The rules, in order:
//  - squeue failed this round: nothing changes (the next round asks again).
//  - A job whose Slurm id is unknown though it may have been submitted (a
//    crash between sbatch and RUN/slurm_job_id) is looked up by its name:
//    listed, it is tracked under that id from then on (and the id recorded);
//    not listed, and its run left nothing (no outcome, no replica log), sbatch
//    never took it: it is submitted now (or ends, if cancelled, or fails
//    with sbatch's error if this submission's answer was lost). If it did
//    run, it ended while unobserved and is never submitted again.
//  - Slurm does not list the job: after `missing_polls_before_lost` rounds in
//    a row it ended while unobserved (Slurm forgets jobs after MinJobAge):
//    the launcher's outcome decides, else the cancel, else it is lost.
//  - A NODE_FAIL/PREEMPTED job of a cluster that requeues is given
//    `requeue_wait` to come back PENDING before it counts as ended.
//  - A final Slurm state ends it: a cancel asked for wins (unless the master
//    had already succeeded), then the launcher's outcome, then what Slurm's
//    state says (COMPLETED only succeeds if a replica ran; NODE_FAIL is
//    LOST, named by node when the caller can explain it).
//  - Otherwise: PENDING -> waiting with Slurm's reason (a new reason is
//    reported again); allocated -> preparing; RUNNING with every replica's
//    log present -> running. Back to PENDING from preparing/running is a
//    requeue: counted, said in the reason, and the earlier outcome set aside.
//  - A job that ran between two rounds reports preparing and running before
//    it ends. Nothing but the end is reported once a cancel was asked for.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "executor/executor.h"
#include "executor/slurm/slurm_parsers.h"
#include "rundir/slurm_files.h"

namespace mle::executor::slurm {

// The least time between the starts of two polling rounds: `min_poll`, or
// kSqueueDutyFactor times the wall time of the last round's `squeue`,
// whichever is longer. squeue's cost grows with every job the controller
// knows (finished ones too, until MinJobAge: a line of about 50 bytes each), and
// slurmctld, squeue and mlengined's parse of it share the controller host
// with everything else; so polling takes at most about 1/factor of it.
inline constexpr int kSqueueDutyFactor = 4;
absl::Duration RoundGap(absl::Duration min_poll, absl::Duration last_squeue);

enum class TrackPhase {
  kSubmitting,  // not yet in Slurm (or not yet known to be)
  kWaiting,     // in Slurm's queue (QUEUED)
  kPreparing,   // allocated; not every replica has started (PREPARING)
  kRunning,     // every replica started (RUNNING)
};

// What the executor knows of one job between rounds.
struct TrackedJob {
  JobRef ref;
  std::string dir;                  // the run directory
  int64_t slurm_id = 0;             // 0 while submitting or looked up by name
  // Maybe in Slurm under an id nobody recorded (RUN/submitting without
  // RUN/slurm_job_id, or an unreadable one): look it up by name each round.
  bool find_by_name = false;
  // sbatch's answer was lost (it timed out): if the lookup by name finds
  // nothing, the job ends failed with this message rather than being
  // submitted again.
  std::string submit_error;
  std::vector<std::string> tasks;   // every task's name (for "all started")
  TrackPhase phase = TrackPhase::kSubmitting;
  std::string reason;               // the waiting reason last reported
  // Owned by Cancel and the round's scancel, not by NextStep:
  bool cancel_requested = false;
  std::string cancel_reason;
  Outcome cancel_outcome = Outcome::kStopped;  // kStalled: the executor's stall watch ended it
  bool scancel_sent = false;
  // Owned by NextStep:
  int missing_polls = 0;            // rounds in a row that did not list it
  int requeues = 0;                 // times Slurm put it back in its queue
  absl::Time final_seen = absl::InfinitePast();  // NODE_FAIL/PREEMPTED first seen (requeue on)
};

// Copies what NextStep decides (Slurm id found by name, phase, reason,
// requeues, missing polls, final_seen) from `decided` into `live`, keeping
// what others own there (cancel fields, which a Cancel may have changed
// meanwhile).
void AdoptDecisions(const TrackedJob& decided, TrackedJob* live);

// What Slurm's latest `squeue` says about the job.
struct SlurmView {
  enum class Kind { kPollFailed, kAbsent, kListed };
  Kind kind = Kind::kPollFailed;
  SlurmJob job;                     // kListed: its entry (the het leader's)
  std::vector<std::string> nodes;   // kListed: the nodes of every component

  static SlurmView PollFailed() { return {}; }
  static SlurmView Absent() { return {Kind::kAbsent, {}, {}}; }
  static SlurmView Listed(SlurmJob job, std::vector<std::string> nodes) {
    return {Kind::kListed, std::move(job), std::move(nodes)};
  }
};

// The job's view in one squeue listing (listed jobs by id, het leaders
// only): by its Slurm id, or, while `find_by_name`, by its name
// mle-<project>-<job> (the newest if several).
SlurmView ViewOf(const TrackedJob& job, const std::map<int64_t, SlurmView>& listed);

// What the run directory shows.
struct FilesSeen {
  std::optional<rundir::RunOutcome> outcome;  // RUN/outcome, if the launcher wrote one
  // Tasks whose replica log exists. Looked at only while the job is not yet
  // running: a running job stays running until Slurm requeues it.
  std::set<std::string> started_tasks;
};

struct TrackingOptions {
  bool requeue = false;  // the cluster requeues after a node failure (slurm.requeue)
  absl::Duration requeue_wait = absl::Seconds(20);
  int missing_polls_before_lost = 3;
  // The per-project accounts' limits as mlengined set them (slurm_accounts.h),
  // by account: a job held by one is told the number.
  std::map<std::string, AccountLimits> account_limits;
};

// One thing to tell the scheduler.
struct Report {
  enum class Kind { kWaiting, kPreparing, kStarted, kEnded };
  Kind kind = Kind::kWaiting;
  std::string message;                // kWaiting: why; kEnded: the job's errorMessage
  Outcome outcome = Outcome::kFailed;  // kEnded
  bool for_resources = false;          // kWaiting: Slurm's reason is Resources (what preemption may free)
  bool operator==(const Report&) const = default;
};

struct Step {
  TrackedJob next;              // the job after this round (AdoptDecisions)
  std::vector<Report> reports;  // in order; a kEnded report is last: stop tracking the job
  // Requeued: move the earlier run's RUN/outcome aside (as run `next.requeues`).
  bool set_outcome_aside = false;
  // Ended by NODE_FAIL: the ending message may name the lost nodes and what
  // ran there (ExplainNodeFailure) instead of the generic message.
  bool explain_node_failure = false;
  std::vector<std::string> nodes;  // explain_node_failure: the job's nodes
  // Found by name: record `next.slurm_id` in RUN/slurm_job_id.
  bool record_slurm_id = false;
  // Looked up by name and never accepted by Slurm: submit it now.
  bool submit = false;

  bool Ended() const { return !reports.empty() && reports.back().kind == Report::Kind::kEnded; }
};

Step NextStep(const TrackedJob& job, const SlurmView& slurm, const FilesSeen& files, absl::Time now,
              const TrackingOptions& options);

// What NextStep reads of the run directory for this view: the outcome only
// where it may decide the end (Slurm lists the job as ended or no longer
// lists it, or the job is looked up by name); the replicas' logs only until
// the job runs. A round opens no file of a job Slurm lists as running
// (rounds come every 100 ms while jobs move, each over every tracked job).
struct FilesWanted {
  bool outcome = false;
  bool started_tasks = false;
  bool operator==(const FilesWanted&) const = default;
};
FilesWanted FilesNeeded(const TrackedJob& job, const SlurmView& slurm);

// A cancel not yet delivered to Slurm. Cancels go out in one scancel at the
// start of a round, before its squeue, so that the same round sees them.
bool ScancelDue(const TrackedJob& job);

// Whether the job is changing (being submitted or started, a cancel not yet
// sent): the poller then comes back quickly instead of backing off. A job
// looked up by name waits for Slurm to answer: the usual backoff applies.
bool InMotion(const TrackedJob& job);

// "Slurm node tpuhost3 (worker-replica-1) stopped responding, ..." from the
// job's nodes, the cluster's nodes now (`sinfo`) and RUN/placement (task ->
// node); `fallback` when none of the job's nodes is lost.
std::string ExplainNodeFailure(int64_t slurm_id, const std::vector<std::string>& job_nodes,
                               const std::vector<SlurmNode>& cluster_nodes,
                               const std::map<std::string, std::string>& node_of_task, const std::string& fallback);

// What the scheduler is told once sbatch accepted the job.
inline constexpr char kSubmittedReason[] = "Submitted to Slurm; waiting for it to schedule the job";

}  // namespace mle::executor::slurm
