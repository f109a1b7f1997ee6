#include "executor/sandboxing.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <atomic>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "executor/job_prep.h"
#include "obs/log.h"
#include "rundir/file_io.h"
#include "sandbox/spec.h"

namespace mle::executor {
namespace fs = std::filesystem;
namespace {

// The sandbox's files and directories are made before the replica starts
// and read once as it does: a crash of the machine before then starts the
// job again from scratch (the run manifest says `starting`), so they need
// no fsync, which would cost every start milliseconds.
absl::Status MakeDirectory(const std::string& path) {
  return rundir::CreateDirectories(path, rundir::Durability::kProcessCrash);
}

absl::Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  return rundir::WriteFileAtomically(path, text, mode, rundir::Durability::kProcessCrash);
}

// A directory of the replica that only its identity may use.
absl::Status OwnedDirectory(const std::string& path, uid_t uid, mode_t mode) {
  if (auto s = MakeDirectory(path); !s.ok()) return s;
  if (::chown(path.c_str(), uid, uid) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot give ", path, " to uid ", uid, ": ",
                                                      std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string JobCgroup(const std::string& project, const std::string& job_id) { return project + "/" + job_id; }
std::string ReplicaCgroup(const std::string& project, const std::string& job_id, const std::string& task) {
  // One level below the project's group, not a job's group above its
  // replicas' (v1: three directories a start makes and an end removes, not
  // six); a job id has no '.', so JOB.TASK names one replica of one job.
  return absl::StrCat(JobCgroup(project, job_id), ".", task);
}

Sandboxing::Sandboxing(const SandboxRuntime& runtime)
    : runtime_(runtime), host_passwd_(ReadFileOrEmpty("/etc/passwd")), host_group_(ReadFileOrEmpty("/etc/group")) {}

absl::StatusOr<JobSandbox> Sandboxing::BeginJob(const model::Job& job) const {
  JobSandbox out;
  const std::string owner = JobCgroup(job.project, job.job_id);
  auto acquired = runtime_.identities->Acquire(owner);
  if (!acquired) {
    return absl::ResourceExhaustedError(absl::StrCat("every one of the ", runtime_.settings.uid_count,
                                                     " identities jobs run as is in use"));
  }
  out.uid = *acquired;
  if (runtime_.buckets != nullptr) {
    for (const auto& g : runtime_.buckets->BucketsFor(job)) out.buckets.push_back({g.bucket, g.writable});
  }
  return out;
}

absl::StatusOr<std::string> Sandboxing::PrepareReplica(const JobSandbox& job, const std::string& project,
                                                       const std::string& job_id, const std::string& run_dir,
                                                       const std::string& task, const model::ReplicaDemand& demand,
                                                       const std::vector<std::string>& read_only,
                                                       const std::vector<int>& gpus,
                                                       const std::string& gcs_root) const {
  const std::string rdir = common::ReplicaDir(run_dir, task);
  sandbox::ReplicaView view;
  view.uid = job.uid;
  view.gid = job.uid;
  view.cwd = rdir + "/work";
  view.tmp = rdir + "/tmp";
  const std::string hypertune = rdir + "/hypertune";
  view.writable = {view.cwd, hypertune};
  for (const auto& dir : {view.cwd, view.tmp, hypertune}) {
    if (auto s = OwnedDirectory(dir, job.uid, dir == view.tmp ? 01777 : 0755); !s.ok()) return s;
  }
  view.read_only = read_only;
  view.gcs_root = gcs_root;
  view.buckets = job.buckets;
  view.gpus = gpus;
  view.passwd = sandbox::PasswdWithIdentity(host_passwd_, job.uid, job.uid);
  view.group = sandbox::GroupWithIdentity(host_group_, job.uid);
  sandbox::CgroupLimits limits;
  limits.cpu_milli = demand.cpu_milli;
  limits.memory_mib = demand.memory_mib;
  limits.pids = runtime_.settings.pids_limit;
  const std::string group = ReplicaCgroup(project, job_id, task);
  auto dirs = runtime_.replica_groups != nullptr ? runtime_.replica_groups->Acquire(group, limits)
                                                 : runtime_.cgroups->Create(group, limits);
  if (!dirs.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot limit the replica ", task, ": ", dirs.status().message()));
  }
  view.cgroups = *dirs;
  const sandbox::SandboxSpec spec = sandbox::PlanReplicaSandbox(runtime_.layout, view);
  std::string text, error;
  if (!sandbox::EncodeSpec(spec, &text, &error)) {
    return absl::FailedPreconditionError(absl::StrCat("the replica ", task, " cannot be sandboxed: ", error));
  }
  return text;
}

absl::StatusOr<std::string> Sandboxing::WriteSpecFile(const std::string& run_dir, const std::string& task,
                                                      const std::string& spec) {
  const std::string path = common::ReplicaDir(run_dir, task) + "/sandbox";
  if (auto s = WriteFile(path, spec, 0600); !s.ok()) return s;
  return path;
}

absl::Status Sandboxing::PrepareContainerReplica(const JobSandbox& job, const std::string& run_dir,
                                                 const std::string& task) const {
  const std::string rdir = common::ReplicaDir(run_dir, task);
  for (const auto& dir : {rdir + "/work", rdir + "/hypertune"}) {
    if (auto s = OwnedDirectory(dir, job.uid, 0755); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<std::string> Sandboxing::MemoryFailure(const std::string& project, const std::string& job_id,
                                                     const std::string& task, int64_t limit_mib) const {
  auto usage = runtime_.cgroups->Usage(ReplicaCgroup(project, job_id, task));
  if (!usage.ok() || usage->oom_kills == 0) return std::nullopt;
  return OutOfMemoryMessage(task, limit_mib);
}

void Sandboxing::EndJob(const std::string& project, const std::string& job_id, uid_t uid,
                        const std::vector<std::string>& tasks) const {
  // A sandboxed process cannot leave its cgroup: removing the job's groups
  // kills whatever of it is left (a container's processes are podman's to
  // end, which its shim did before it exited).
  const std::string owner = JobCgroup(project, job_id);
  const bool owns = uid != 0 && runtime_.identities->Owns(uid, owner);
  for (const std::string& task : tasks) {
    const std::string group = ReplicaCgroup(project, job_id, task);
    const absl::Status s = runtime_.replica_groups != nullptr ? runtime_.replica_groups->Release(group)
                                                              : runtime_.cgroups->Remove(group);
    if (!s.ok()) {
      obs::Log("local").error("cannot remove the cgroup of {}/{}: {}", project, job_id, std::string(s.message()));
    }
  }
  if (owns) runtime_.identities->Release(uid, owner);
}

runtime::BuildRunner Sandboxing::BuildRunner() const {
  return [this](const std::vector<std::string>& argv, const common::CommandOptions& options,
                const std::string& writable, const std::vector<std::string>& readable)
             -> absl::StatusOr<common::CommandResult> {
    static std::atomic<uint64_t> builds{0};
    const std::string owner = absl::StrCat("build ", builds.fetch_add(1));
    auto acquired = runtime_.identities->Acquire(owner);
    if (!acquired) return absl::ResourceExhaustedError("every identity jobs run as is in use");
    const uid_t uid = *acquired;
    const fs::path work = fs::path(writable).parent_path().parent_path() / ".builds" / std::to_string(uid);
    const std::string cgroup = absl::StrCat("builds/", uid);
    std::error_code ec;
    fs::remove_all(work, ec);
    absl::StatusOr<common::CommandResult> result = absl::UnknownError("the build did not run");
    absl::Status s = OwnedDirectory((work / "tmp").string(), uid, 01777);
    if (s.ok()) s = OwnedDirectory(writable, uid, 0755);
    absl::StatusOr<std::vector<std::string>> dirs =
        s.ok() ? runtime_.cgroups->Create(cgroup, {0, 0, runtime_.settings.pids_limit})
               : absl::StatusOr<std::vector<std::string>>(s);
    if (dirs.ok()) {
      sandbox::ReplicaView view;
      view.uid = uid;
      view.gid = uid;
      view.cwd = options.cwd.empty() ? writable : options.cwd;
      view.writable = {writable};
      view.tmp = (work / "tmp").string();
      view.read_only = readable;
      view.cgroups = *dirs;
      std::string text, error;
      if (!sandbox::EncodeSpec(sandbox::PlanReplicaSandbox(runtime_.layout, view), &text, &error)) {
        s = absl::FailedPreconditionError(absl::StrCat("the package build cannot be sandboxed: ", error));
      } else {
        s = WriteFile((work / "spec").string(), text, 0600);
      }
    } else {
      s = dirs.status();
    }
    if (s.ok()) {
      std::vector<std::string> confined = {runtime_.sandbox_tool, "--spec", (work / "spec").string(), "--"};
      confined.insert(confined.end(), argv.begin(), argv.end());
      common::CommandOptions o = options;
      // Only what a build needs of mlengined's environment.
      std::map<std::string, std::string> env;
      for (const auto& [k, v] : options.env ? *options.env : common::CurrentEnvironment()) {
        if (k == "PATH" || k == "LANG" || absl::StartsWith(k, "LC_") || absl::StartsWith(k, "PIP_") ||
            absl::StartsWith(k, "PYTHON")) {
          env[k] = v;
        }
      }
      AdjustEnvironment(&env);
      o.env = env;
      result = common::RunCommand(confined, o);
    } else {
      result = s;
    }
    // Nothing of the build outlives it (its cgroup's processes are killed
    // as it is removed), and what it built is root's.
    (void)runtime_.cgroups->Remove(cgroup);
    for (fs::recursive_directory_iterator it(writable, ec), end; !ec && it != end; it.increment(ec)) {
      (void)::lchown(it->path().c_str(), 0, 0);
    }
    (void)::lchown(writable.c_str(), 0, 0);
    fs::remove_all(work, ec);
    runtime_.identities->Release(uid, owner);
    return result;
  };
}

void Sandboxing::AdjustEnvironment(std::map<std::string, std::string>* env) {
  (*env)["HOME"] = "/tmp";
  (*env)["TMPDIR"] = "/tmp";
  (*env)["USER"] = "mlengine-job";
  (*env)["LOGNAME"] = "mlengine-job";
}

}  // namespace mle::executor
