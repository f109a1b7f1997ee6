// Where a job's run lives on disk (under the server's runs directory):
//   (RUNS/<project>/<job_id>@<n> for attempt n > 1: JobRunDir)
//   RUNS/<project>/<job_id>/replicas            task name, pid, host, GPUs (one line each)
//   RUNS/<project>/<job_id>/<task_name>/log     timestamped lines (see mlengine-replica)
//   RUNS/<project>/<job_id>/<task_name>/exit    "exit N" | "signal N" once it ended
//   RUNS/<project>/<job_id>/<task_name>/progress "cpu_ticks T" (Slurm, when stalls are watched)
//   RUNS/<project>/<job_id>/<task_name>/work/   the replica's working directory
//   RUNS/<project>/<job_id>/<task_name>/hypertune/output.metrics
//                                               its hyperparameter metric reports
// The executor writes it; the log service reads it. Pure functions.
#pragma once

#include <string>

namespace mle::common {

// Attempt 1 of a job runs in RUNS/<project>/<job_id>; a later attempt
// (after a preemption or an infrastructure failure) in
// RUNS/<project>/<job_id>@<n>, beside the earlier ones, which stay as they
// ended ('@' is in no job id).
inline std::string JobRunDir(const std::string& runs, const std::string& project, const std::string& job_id,
                             int attempt = 1) {
  std::string dir = runs + "/" + project + "/" + job_id;
  if (attempt > 1) dir += "@" + std::to_string(attempt);
  return dir;
}
inline std::string ReplicaDir(const std::string& job_dir, const std::string& task) { return job_dir + "/" + task; }
inline std::string ReplicaLogPath(const std::string& job_dir, const std::string& task) {
  return ReplicaDir(job_dir, task) + "/log";
}
// CLOUD_ML_HP_METRIC_FILE: where the replica's hypertune reports go.
inline std::string ReplicaMetricPath(const std::string& job_dir, const std::string& task) {
  return ReplicaDir(job_dir, task) + "/hypertune/output.metrics";
}
inline std::string ReplicaExitPath(const std::string& job_dir, const std::string& task) {
  return ReplicaDir(job_dir, task) + "/exit";
}
// "cpu_ticks T": the replica's CPU time, as its shim last recorded it
// (mlengine-replica --progress; the Slurm executor's stall watch).
inline std::string ReplicaProgressPath(const std::string& job_dir, const std::string& task) {
  return ReplicaDir(job_dir, task) + "/progress";
}

}  // namespace mle::common
