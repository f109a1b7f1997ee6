// Sandboxing: what an executor does to run a job's replicas in their
// sandbox (docs/security.md), the same for every executor and every start
// (cold, warm, a package build):
//  - BeginJob: the job's identity (a uid of the pool), the buckets its
//    account reaches;
//  - PrepareReplica: the replica's private directories owned by that
//    identity, its cgroup with the limits the scheduler counted, and its
//    spec (sandbox/spec.h), which carries the view's /etc/passwd and
//    /etc/group (no file of its own); the shim takes it in its environment
//    (sandbox::kSpecVariable), or from the file WriteSpecFile makes (the
//    warm interpreter, Slurm's node launcher);
//  - MemoryFailure: why a replica the kernel killed at its memory limit
//    ended, for errorMessage;
//  - EndJob: the job's cgroups removed (what is left in them killed), its
//    identity released.
// Thread-safe (its parts are).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"
#include "executor/executor.h"
#include "model/job.h"
#include "model/resources.h"
#include "runtime/package_cache.h"
#include "sandbox/cgroup_pool.h"
#include "sandbox/cgroups.h"
#include "sandbox/host.h"
#include "sandbox/plan.h"

namespace mle::executor {

// What every sandbox is made from; built once by the server.
struct SandboxRuntime {
  sandbox::SandboxSettings settings;
  sandbox::HostLayout layout;
  const sandbox::Cgroups* cgroups = nullptr;
  sandbox::CgroupPool* replica_groups = nullptr;  // replicas' groups, used again (null: made and removed each time)
  sandbox::IdentityPool* identities = nullptr;
  const BucketAccessPolicy* buckets = nullptr;  // null: no bucket is visible
  std::string sandbox_lib;   // libmlengine-sandbox.so, for the warm interpreter
  std::string sandbox_tool;  // mlengine-sandbox, for package builds
};

struct JobSandbox {
  uid_t uid = 0;
  std::vector<sandbox::BucketAccess> buckets;
};

class Sandboxing {
 public:
  // Reads the host's /etc/passwd and /etc/group once: every job's view gets
  // them with its identity added.
  explicit Sandboxing(const SandboxRuntime& runtime);

  // The job keeps the identity it holds (a resubmission, a recovered job);
  // RESOURCE_EXHAUSTED when it has none and every identity is in use.
  absl::StatusOr<JobSandbox> BeginJob(const model::Job& job) const;
  // Everything the replica `task` needs to start sandboxed; returns its
  // spec (sandbox::EncodeSpec's text). `read_only`: more host directories it
  // reads (its package environment). FAILED_PRECONDITION saying what could
  // not be made.
  absl::StatusOr<std::string> PrepareReplica(const JobSandbox& job, const std::string& project,
                                             const std::string& job_id, const std::string& run_dir,
                                             const std::string& task, const model::ReplicaDemand& demand,
                                             const std::vector<std::string>& read_only,
                                             const std::vector<int>& gpus, const std::string& gcs_root) const;
  // The spec as a file, RUN/<task>/sandbox (root's alone): for what reads it
  // by path (`mlengine-replica --sandbox FILE`, the warm interpreter).
  // Returns its path.
  static absl::StatusOr<std::string> WriteSpecFile(const std::string& run_dir, const std::string& task,
                                                   const std::string& spec);
  // The largest spec a replica's environment carries (sandbox::kSpecVariable;
  // an environment string is at most 128 KiB); a larger one goes in a file.
  static constexpr size_t kMaxSpecInEnvironment = 64 * 1024;
  // A container replica's part: its work and hypertune directories, owned
  // by the job's identity (podman confines the rest: job_prep.h's
  // ContainerSandbox).
  absl::Status PrepareContainerReplica(const JobSandbox& job, const std::string& run_dir,
                                       const std::string& task) const;
  int64_t pids_limit() const { return runtime_.settings.pids_limit; }
  // "The replica master-0 ran out of memory: ..." when the kernel killed a
  // process of it at its memory limit; nullopt otherwise.
  // `limit_mib`: its limit (0: not known).
  std::optional<std::string> MemoryFailure(const std::string& project, const std::string& job_id,
                                           const std::string& task, int64_t limit_mib) const;
  // Ends what is left of the job (its replicas' cgroups, `tasks`: each
  // group's processes killed, the group removed; one never made is fine)
  // and releases its identity if the job holds it. Idempotent.
  void EndJob(const std::string& project, const std::string& job_id, uid_t uid,
              const std::vector<std::string>& tasks) const;

  // Package builds (runtime/package_cache.h), each in a sandbox as an
  // identity of its own: its `writable` directory and what it reads, no
  // bucket, a pids limit; what it built is root's afterwards.
  runtime::BuildRunner BuildRunner() const;

  // The environment every sandboxed replica gets over the job's: HOME and
  // TMPDIR in its own /tmp, USER and LOGNAME its identity's name.
  static void AdjustEnvironment(std::map<std::string, std::string>* env);
  const SandboxRuntime& runtime() const { return runtime_; }

 private:
  const SandboxRuntime& runtime_;
  const std::string host_passwd_;
  const std::string host_group_;
};

// common::IsLoaderVariable (common/subprocess.h): what never reaches
// mlengine-replica, which runs as root, for a sandboxed replica.
using common::IsLoaderVariable;

// The cgroup of a replica (below mlengined's own `mlengine/`).
std::string ReplicaCgroup(const std::string& project, const std::string& job_id, const std::string& task);
std::string JobCgroup(const std::string& project, const std::string& job_id);

}  // namespace mle::executor
