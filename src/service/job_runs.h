// JobRuns: what a job's run directories say about it, for the console:
// where its replicas run and how they ended (the local run manifest, or
// under Slurm the run's tasks and placement, and each replica's exit
// record), and the metrics its trainer reported through the hypertune helper
// (RUN/<task>/hypertune/output.metrics). A hyperparameter tuning job's runs
// are its trials' jobs. Reads files only, while the job runs and after;
// the formats are rundir/'s.
//
// The assembly of what was read is pure (DescribeReplicas) and tested as a
// table. Thread-safe (no state but the JobService it asks).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "logs/log_store.h"
#include "model/job.h"
#include "rundir/replica_files.h"
#include "service/job_service.h"

namespace mle::service {

// The runs that make up `job` (of `project`): its own, or a tuning job's
// trials' jobs by trial id (only `trial_id`'s when set). NOT_FOUND for a
// trial the tuning job does not have; INVALID_ARGUMENT (field trialId) for a
// trial id on a job that is not a tuning job.
absl::StatusOr<std::vector<logs::LogSource>> RunSourcesOf(const JobService& jobs, const std::string& project,
                                                          const model::Job& job, const std::string& trial_id);

enum class ReplicaState { kStarting, kRunning, kSucceeded, kFailed, kKilled };
const char* ReplicaStateName(ReplicaState state);  // "STARTING", ...

struct ReplicaStatus {
  std::string task;  // master-replica-0
  std::string host;  // localhost, a Slurm node; "" while Slurm has not placed it
  std::vector<int> gpus;
  ReplicaState state = ReplicaState::kStarting;
  std::optional<int> exit_code;  // it exited with this status
  std::optional<int> signal;     // it was killed by this signal
  std::string trial_id;          // a tuning job's trial; "" otherwise
  bool operator==(const ReplicaStatus&) const = default;
};

struct JobReplicas {
  std::vector<ReplicaStatus> replicas;  // by trial, then in the run's order
  std::vector<std::string> tpu_hosts;
  bool tpu_simulated = false;
  bool operator==(const JobReplicas&) const = default;
};

// What one run directory holds, as read.
struct RunFiles {
  std::string trial_id;
  std::optional<rundir::RunManifest> manifest;                  // a local run
  std::vector<std::string> slurm_tasks;                         // a Slurm run: RUN/tasks
  std::map<std::string, std::string> slurm_placement;           // task -> node, once the launcher ran
  std::map<std::string, rundir::ReplicaExit> exits;             // by task
};

// Pure: the replicas of `runs` (in order). A replica with an exit record
// ended as it says (exit 0 SUCCEEDED, another status FAILED, a signal
// KILLED); one without is STARTING or RUNNING as far as its run got, and
// KILLED once `job_ended` (its end was never recorded). A run with neither
// a manifest nor Slurm tasks has not started: no replicas.
JobReplicas DescribeReplicas(const std::vector<RunFiles>& runs, bool job_ended);

struct MetricSeries {
  std::string tag;
  std::string task;
  std::string trial_id;  // "" but for a tuning job's trials
  std::vector<rundir::MetricReport> points;  // by step
};

class JobRuns {
 public:
  JobRuns(const JobService& jobs, std::string runs_dir) : jobs_(jobs), runs_dir_(std::move(runs_dir)) {}

  // NOT_FOUND for an unknown job; an empty list before it started.
  absl::StatusOr<JobReplicas> Replicas(const std::string& project, const std::string& job_id) const;
  // Every series reported so far, by trial (numerically), task, tag; only
  // `trial_id`'s when set (errors as RunSourcesOf's).
  absl::StatusOr<std::vector<MetricSeries>> Metrics(const std::string& project, const std::string& job_id,
                                                    const std::string& trial_id) const;

 private:
  const JobService& jobs_;
  const std::string runs_dir_;
};

}  // namespace mle::service
