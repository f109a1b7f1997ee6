// The files of a local run and of every replica (layout: common/run_layout.h),
// each with its writer and reader side by side, so no format is spelled twice:
//
//   RUN/replicas        the run manifest (LocalExecutor): what was placed
//                       where, and how far the start got; see RunManifest.
//   RUN/environment     the package environment (its directory) the run's
//                       replicas use, when the job has packages: retention
//                       keeps an environment while a job that names it
//                       has not ended. Both executors write it.
//   RUN/<task>/exit     "exit N" | "signal N": how the replica's program
//                       ended (written by mlengine-replica, which is
//                       dependency-free and so writes it itself; this is the
//                       reader, and the one definition of the format).
//   RUN/<task>/log      "<RFC 3339 time> TAB <O|E> TAB <text>" per line
//                       (written by mlengine-replica; ParseLogLine reads it).
//
// Writers are atomic (rundir/file_io.h); the manifest survives a crash of
// the server, not of the machine (Durability::kProcessCrash: its replicas
// end with the machine, and a restarted server that finds no manifest
// starts the job again). Readers return
// NOT_FOUND-free results (absent = nullopt) and DATA_LOSS, naming the file,
// for contents that do not parse. Thread-safe (no state).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mle::rundir {

// The manifest of a local run. Written before the first replica
// is spawned, with every replica's placement and stage kStarting; the pids
// and kStarted are appended once every replica runs. A restarted server
// that finds kStarting looks for the replicas by their run directory: every
// one found is adopted; if one never started, the start is undone.
struct ManifestReplica {
  std::string task;         // master-replica-0
  std::string host;         // localhost
  std::vector<int> gpus;    // GPU indices given to it
  pid_t pid = 0;            // mlengine-replica's pid; 0 while starting
  auto operator<=>(const ManifestReplica&) const = default;
};
struct RunManifest {
  enum class Stage { kStarting, kStarted };
  Stage stage = Stage::kStarting;
  std::vector<std::string> tpu_hosts;
  bool tpu_simulated = false;
  std::vector<ManifestReplica> replicas;
  uint32_t uid = 0;  // the identity the job's replicas run as; 0: not sandboxed
  auto operator<=>(const RunManifest&) const = default;
};

std::string ManifestPath(const std::string& run_dir);
std::string FormatManifest(const RunManifest& manifest);
absl::StatusOr<RunManifest> ParseManifest(absl::string_view text);
absl::Status WriteManifest(const std::string& run_dir, const RunManifest& manifest);
// Records that every replica runs, with each one's pid: appended to the
// manifest WriteManifest wrote, in one write(2) (a crash of the server sees
// all of it or none; the file is never replaced, so a start frees no inode).
absl::Status MarkManifestStarted(const std::string& run_dir, const std::map<std::string, pid_t>& pids);
// nullopt when the run has no manifest (nothing was ever started).
absl::StatusOr<std::optional<RunManifest>> ReadManifest(const std::string& run_dir);

// The package environment a run uses (RUN/environment): written before
// its first replica starts (kProcessCrash, as the manifest); nullopt when
// the run has none (no packages, or a container job).
absl::Status WriteRunEnvironment(const std::string& run_dir, const std::string& environment_dir);
absl::StatusOr<std::optional<std::string>> ReadRunEnvironment(const std::string& run_dir);

// How a replica's program ended, as mlengine-replica records it.
struct ReplicaExit {
  bool signaled = false;  // killed by signal `value`; else exited with status `value`
  int value = 0;
  bool Succeeded() const { return !signaled && value == 0; }
  // SIGKILL, or the status 137 (128 + SIGKILL) a container runtime reports
  // for a container whose process was killed.
  bool KilledOrStatus137() const { return signaled ? value == 9 : value == 137; }
  auto operator<=>(const ReplicaExit&) const = default;
};
std::string FormatExit(const ReplicaExit& exit);  // "exit 3\n"
// Records how a replica ended when mlengine-replica never ran it (e.g. its
// image could not be pulled on the node): atomically, durably.
absl::Status WriteExit(const std::string& exit_path, const ReplicaExit& exit);
absl::StatusOr<ReplicaExit> ParseExit(absl::string_view text);
// nullopt while the replica has not recorded an end.
absl::StatusOr<std::optional<ReplicaExit>> ReadExit(const std::string& exit_path);

// One line of a replica log (without its newline). A line that does not have
// the three fields (a writer cut short, or foreign text) is returned whole as
// `text` with no time: logs are shown, not rejected.
struct LogLine {
  std::string time;  // RFC 3339 UTC as written; "" when the line had none
  bool is_stderr = false;
  std::string text;
};
LogLine ParseLogLine(absl::string_view line);
// Appends one line (stamped now) to a replica log, as mlengine-replica writes
// them: for what mlengine itself has to tell about a replica.
absl::Status AppendLogLine(const std::string& log_path, bool is_stderr, absl::string_view text);

// The hyperparameter metric file a replica's cloudml-hypertune (or
// python/mlengine/hypertune.py) rewrites whole on each report: one JSON
// object per line, {"<tag>": "<value>", "global_step": "<step>",
// "timestamp": <unix seconds>, ...}, values as strings. The reports of one
// tag, in file order (the writer keeps the last 100). Lines that are not such
// an object, or lack the tag, or whose value is not a finite number, are
// skipped: a trainer's file is input, never a reason to fail.
struct MetricReport {
  int64_t step = 0;
  double value = 0;
  double timestamp = 0;
  auto operator<=>(const MetricReport&) const = default;
};
std::vector<MetricReport> ParseMetricReports(absl::string_view text, const std::string& tag);
// Empty when the file does not exist (nothing reported yet).
absl::StatusOr<std::vector<MetricReport>> ReadMetricReports(const std::string& path, const std::string& tag);
// Every tag's reports (every key of a line but global_step, timestamp,
// trial and checkpoint_path), each in file order, with the same leniency.
std::map<std::string, std::vector<MetricReport>> ParseAllMetricReports(absl::string_view text);
absl::StatusOr<std::map<std::string, std::vector<MetricReport>>> ReadAllMetricReports(const std::string& path);

}  // namespace mle::rundir
