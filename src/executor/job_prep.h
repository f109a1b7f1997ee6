// What every executor does the same way, whatever runs the processes:
//  - CheckJobRunnable: can an installed runtime run this job at all (custom
//    containers, tuning, runtime/Python version, TPU capability)?
//  - PrepareJobEnvironment: the job's gs:// packages installed into the
//    package cache (a venv shared by jobs with the same packages).
//  - DescribeReplicaEnd: "The replica worker-replica-1 exited with a non-zero
//    status of 3. Last lines of its log: ..." from what mlengine-replica
//    recorded in the run directory (common/run_layout.h).
// Thread-safe (no state of their own).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "buckets/bucket_store.h"
#include "containers/podman.h"
#include "model/job.h"
#include "model/resources.h"
#include "runtime/replica_env.h"
#include "runtime/package_cache.h"
#include "runtime/runtimes.h"
#include "sandbox/kernel_log.h"
#include "sandbox/plan.h"
#include "rundir/replica_files.h"

namespace mle::executor {

// OK, or FAILED_PRECONDITION telling the user why no runtime here can run it.
// `containers`: whether the executor runs custom containers.
absl::Status CheckJobRunnable(const model::Job& job, const runtime::RuntimeCatalog& runtimes, bool containers);

// Does the job run custom containers (masterConfig.imageUri)?
bool IsContainerJob(const model::Job& job);
// Pulls every (pinned) image of the job into the node's store.
// FAILED_PRECONDITION with a message for the user when one cannot be.
absl::Status PullJobImages(const model::Job& job, const containers::Podman* podman);
// The container of one replica: its pinned image, entrypoint and arguments,
// the environment names of `env` (the replica's whole contract; values stay
// in podman's environment), the bucket root and the replica's run directory
// mounted at the same paths, its GPUs, labels naming the run and the task.
// Sandboxed (docs/security.md), the container runs as the job's identity
// within the replica's limits, and only its work and hypertune directories
// and the buckets its account reaches (read-only unless it may write them)
// are mounted.
struct ContainerSandbox {
  uid_t uid = 0;
  std::vector<sandbox::BucketAccess> buckets;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t pids_limit = 0;
};
containers::ContainerRun ContainerRunOf(const model::Job& job, const runtime::ReplicaLaunch& launch,
                                        const std::string& run_dir, const std::string& replica_dir,
                                        const std::string& gcs_root, const std::map<std::string, std::string>& env,
                                        const model::Placement& placement,
                                        const ContainerSandbox* sandbox = nullptr);
// The environment `podman run` of `run` needs (CONTAINERS_CONF), whether its
// image is a simulated stand-in (MLENGINE_SIMULATED_IMAGE), and the
// contract as the container sees it: GPUs given through CDI are numbered
// from 0 inside, so CUDA_VISIBLE_DEVICES says 0..n-1 there.
// `simulated`: imageUri -> note, for the job's simulated stand-ins
// (SimulatedImageNotes).
void SetContainerEnvironment(const containers::Podman& podman, const model::Job& job,
                             const std::map<std::string, std::string>& simulated, containers::ContainerRun& run,
                             std::map<std::string, std::string>* env);
// imageUri -> containers::SimulatedImageNote, for every image of the job
// that is a simulated stand-in.
std::map<std::string, std::string> SimulatedImageNotes(const containers::ContainerSettings& settings,
                                                       const model::Job& job);

// The package `uri` (gs://BUCKET/OBJECT) opened in the bucket store as the
// storage API opens an object: never through a symbolic link (a job that
// may write a bucket can plant one pointing at the data directory or at
// another project's bucket), a regular file only. FAILED_PRECONDITION with
// a message for the user otherwise.
absl::StatusOr<buckets::ScopedFd> OpenPackage(const buckets::BucketStore& buckets, const std::string& uri);

// Opens the job's packageUris (OpenPackage; `buckets` may be null for a
// job without packages) and installs them.
// FAILED_PRECONDITION with a message for the user when a package is missing
// or cannot be installed.
absl::StatusOr<runtime::PreparedEnvironment> PrepareJobEnvironment(const model::Job& job,
                                                                   const runtime::RuntimeCatalog& runtimes,
                                                                   runtime::PackageCache& cache,
                                                                   const buckets::BucketStore* buckets);

// The file's contents, "" when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);
// How the replica's program ended, as mlengine-replica recorded it at
// `path`; nullopt when it did not (or the record is unreadable: logged).
std::optional<rundir::ReplicaExit> ReadReplicaExit(const std::string& path);
// The last `n` lines of a replica log, without their timestamps.
std::vector<std::string> LogTail(const std::string& path, size_t n);
// "9 (SIGKILL: Killed)".
std::string SignalName(int sig);
// In a replica's directory: why it ended when that was its memory limit
// (the node's launcher writes it under Slurm); DescribeReplicaEnd says it.
inline constexpr char kMemoryNote[] = "out-of-memory";
// Where podman writes a container replica's id (--cidfile), in its
// replica directory: the kernel log names its memory cgroup by that id.
inline constexpr char kContainerIdFile[] = "container-id";
// "The replica master-replica-0 ran out of memory: ..." for errorMessage;
// `limit_mib` 0: not known; `killed`: what the kernel killed, "" for the
// replica itself.
std::string OutOfMemoryMessage(const std::string& task, int64_t limit_mib, const std::string& killed = "");
// The same when the kernel log holds a memory-limit kill in the container
// of the replica whose directory is `replica_dir` (its id in
// kContainerIdFile); nullopt otherwise, and for a replica that ran no
// container (the log is read only when there is an id: `read_kernel_log`,
// sandbox::ReadKernelLog but in tests). The container's own cgroup is gone
// by the time its replica is seen to end (runc removes it), and podman does
// not tell on a cgroup v1 host (its OOMKilled stays false there).
std::optional<std::string> ContainerMemoryFailure(
    const std::string& replica_dir, const std::string& task, int64_t limit_mib,
    const std::function<std::vector<std::string>()>& read_kernel_log = sandbox::ReadKernelLog);
// What the last Python traceback in `lines` (a replica's log, oldest
// first) ended with: the exception line and the innermost frame it came
// from. nullopt when there is none, or its end was not logged.
struct PythonError {
  std::string exception;  // "ValueError: bad shape" (the first line of it)
  std::string frame;      // "trainer/task.py, line 12, in train" (a path in an environment
                          // from its site-packages on)
  bool operator==(const PythonError&) const = default;
};
std::optional<PythonError> LastPythonError(const std::vector<std::string>& lines);
// How a replica ended, for errorMessage, with the last lines of its log;
// a trainer's traceback leads it: "... status of 1: ValueError: bad shape
// (trainer/task.py, line 12, in train). Last lines of its log: ...".
// `exit` nullopt: it ended without a record (killed).
std::string DescribeReplicaEnd(const std::string& job_dir, const std::string& task,
                               const std::optional<rundir::ReplicaExit>& exit);

}  // namespace mle::executor
