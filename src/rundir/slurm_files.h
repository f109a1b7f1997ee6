// The files a Slurm run adds to its run directory RUN (beside the replicas'
// own, common/run_layout.h), with their typed readers and writers. The one
// place that spells their names and formats: mlengined's Slurm executor and
// mlengine-slurm-launch (which runs in the allocation, on another node) both
// use it.
//
//   RUN/job.json          the job for the launcher (codec/launch_codec.h,
//                         "mlengine.launch/v1")                    mlengined
//   RUN/tasks             every task name, one per line            mlengined
//   RUN/batch.sh          what was given to sbatch                 mlengined
//   RUN/submitting        empty marker, written before sbatch      mlengined
//   RUN/slurm_job_id      "<id>\n", written after sbatch           mlengined
//   RUN/slurm-<id>.out    the launcher's own output                Slurm
//   RUN/<task>/launch     the task's argv, environment and node
//                         ("mlengine.task-launch/v1")              launcher
//   RUN/placement         "<task> <Slurm node>\n" per task         launcher
//   RUN/outcome           "SUCCEEDED\n<message>\n" or
//                         "FAILED\n<message>\n"                    launcher
//
// Every write is atomic (rundir/file_io.h: temp file, rename) and returns a
// Status. What mlengined writes before sbatch (the job, tasks, script, the
// submission markers: what a restarted server adopts Slurm's jobs by) is
// durable too (fsync of the file and the directory); what the launcher
// writes on the node (a task's launch, the placement, the outcome) is not:
// it describes processes that end with that node, as a local run's
// manifest does, and a node that crashes loses its job to Slurm's
// NODE_FAIL, which mlengined reads without them. Readers tell "absent"
// (std::nullopt, or NOT_FOUND where a file must exist) from unreadable
// (UNAVAILABLE, PERMISSION_DENIED) and from malformed (DATA_LOSS, or
// FAILED_PRECONDITION for a document of another format version); every
// message names the file. Thread-safe (no state); one writer per file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codec/launch_codec.h"

namespace mle::rundir {

std::string LaunchJobPath(const std::string& run_dir);
std::string SlurmTasksPath(const std::string& run_dir);
std::string BatchScriptPath(const std::string& run_dir);
std::string SubmittingPath(const std::string& run_dir);
std::string SlurmJobIdPath(const std::string& run_dir);
// "RUN/slurm-%j.out": sbatch's --output pattern (%j: the Slurm job id).
std::string SlurmOutputPattern(const std::string& run_dir);
std::string SlurmOutputPath(const std::string& run_dir, int64_t slurm_job_id);
std::string TaskLaunchPath(const std::string& run_dir, const std::string& task);
std::string SlurmPlacementPath(const std::string& run_dir);
std::string OutcomePath(const std::string& run_dir);

// A fresh submission: removes whatever an earlier one left in `run_dir` and
// creates it (durably).
absl::Status ClearRunDirectory(const std::string& run_dir);

absl::Status WriteLaunchJob(const std::string& run_dir, const codec::LaunchJob& job);
absl::StatusOr<codec::LaunchJob> ReadLaunchJob(const std::string& run_dir);

absl::Status WriteSlurmTasks(const std::string& run_dir, const std::vector<std::string>& tasks);
absl::StatusOr<std::vector<std::string>> ReadSlurmTasks(const std::string& run_dir);

absl::Status WriteBatchScript(const std::string& run_dir, const std::string& script);

absl::Status WriteSubmittingMarker(const std::string& run_dir);
absl::StatusOr<bool> HasSubmittingMarker(const std::string& run_dir);

absl::Status WriteSlurmJobId(const std::string& run_dir, int64_t slurm_job_id);
// std::nullopt when absent; DATA_LOSS when it holds no positive job id.
absl::StatusOr<std::optional<int64_t>> ReadSlurmJobId(const std::string& run_dir);

// Creates RUN/<task>/ if needed.
absl::Status WriteTaskLaunch(const std::string& run_dir, const std::string& task, const codec::TaskLaunch& launch);
absl::StatusOr<codec::TaskLaunch> ReadTaskLaunch(const std::string& run_dir, const std::string& task);

// Which Slurm node runs each task: task name -> node name.
absl::Status WriteSlurmPlacement(const std::string& run_dir, const std::map<std::string, std::string>& node_of_task);
absl::StatusOr<std::map<std::string, std::string>> ReadSlurmPlacement(const std::string& run_dir);

// How the launcher saw the job end.
struct RunOutcome {
  bool succeeded = false;
  std::string message;  // why it failed, for the user; may span lines; "" when it succeeded
  bool operator==(const RunOutcome&) const = default;
};
absl::Status WriteRunOutcome(const std::string& run_dir, const RunOutcome& outcome);
// std::nullopt when absent; DATA_LOSS when its first line is neither
// SUCCEEDED nor FAILED.
absl::StatusOr<std::optional<RunOutcome>> ReadRunOutcome(const std::string& run_dir);
// Slurm requeued the job: the earlier run's outcome must not decide the next
// run, so it moves to RUN/outcome.run<run> (kept for the operator). OK when
// there is none.
absl::Status SetOutcomeAside(const std::string& run_dir, int run);
// A fresh run in the allocation (also after a requeue): removes the outcome
// and the given tasks' exit files, so nothing of an earlier run decides this
// one. OK for files already absent.
absl::Status RemoveEarlierRunResults(const std::string& run_dir, const std::vector<std::string>& tasks);

}  // namespace mle::rundir
