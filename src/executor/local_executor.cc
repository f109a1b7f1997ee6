#include "executor/local_executor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codec/launch_codec.h"
#include "common/run_layout.h"
#include "common/time_format.h"
#include "common/subprocess.h"
#include "rundir/file_io.h"
#include "rundir/replica_files.h"
#include "executor/job_prep.h"
#include "model/catalog.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "runtime/replica_env.h"
#include "sandbox/spec.h"

namespace mle::executor {

namespace fs = std::filesystem;

namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// Every process of the run still alive: each mlengine-replica whose command
// line names `run_dir` (its --log/--exit paths live there) and each process
// that started with MLENGINE_RUN_DIR=`run_dir` (what a replica started, even
// one that left its session). Pids, from /proc.
std::vector<pid_t> RunProcesses(const std::string& run_dir) {
  std::vector<pid_t> out;
  const std::string marker = "MLENGINE_RUN_DIR=" + run_dir;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid <= 1 || pid == ::getpid()) continue;
    std::string cmdline = ReadFileOrEmpty(e.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const bool shim = cmdline.find("mlengine-replica") != std::string::npos &&
                      cmdline.find(run_dir + "/") != std::string::npos;
    bool marked = false;
    if (!shim) {
      const std::string environ = ReadFileOrEmpty(e.path().string() + "/environ");
      for (size_t at = environ.find(marker); at != std::string::npos; at = environ.find(marker, at + 1)) {
        const size_t end = at + marker.size();
        if ((at == 0 || environ[at - 1] == '\0') && (end == environ.size() || environ[end] == '\0')) marked = true;
      }
    }
    if (shim || marked) out.push_back(pid);
  }
  return out;
}

// SIGKILLs every process of the run (see RunProcesses), shims first so they
// cannot start anything more.
void KillLeftovers(const std::string& run_dir) {
  for (int round = 0; round < 50; ++round) {
    const std::vector<pid_t> pids = RunProcesses(run_dir);
    if (pids.empty()) return;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    ::usleep(10000);
  }
  obs::Log("local").error("processes of {} are still alive after SIGKILL", run_dir);
}

// The pid of the mlengine-replica running `task` of the run, found by the
// exit path on its command line; 0 when none runs.
pid_t FindShim(const std::string& run_dir, const std::string& task, pid_t hint) {
  const std::string exit_path = common::ReplicaExitPath(run_dir, task);
  auto is_ours = [&](pid_t pid) {
    std::string cmdline = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cmdline"));
    return cmdline.find("mlengine-replica") != std::string::npos && cmdline.find(exit_path) != std::string::npos;
  };
  if (hint > 0 && is_ours(hint)) return hint;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (absl::SimpleAtoi(e.path().filename().string(), &pid) && pid > 1 && is_ours(pid)) return pid;
  }
  return 0;
}

// Removes what is left of the run's containers (logged, never fatal: the
// run's processes are gone already).
void RemoveContainers(const containers::Podman* podman, const std::string& run_dir) {
  if (podman == nullptr) return;
  auto removed = podman->RemoveRunContainers(run_dir);
  if (!removed.ok()) {
    obs::Log("local").error("cannot remove the containers of {}: {}", run_dir, std::string(removed.status().message()));
  } else if (*removed > 0) {
    obs::Log("local").warn("removed {} container(s) left by {}", *removed, run_dir);
  }
}

// What the warm interpreter becomes for `launch` (a python replica:
// PYTHON -m MODULE ARGS), or nullopt with why it must start cold.
std::optional<codec::WarmSpec> WarmSpecOf(const model::Job& job, const runtime::ReplicaLaunch& launch,
                                          const std::vector<std::string>& preload,
                                          const runtime::PreparedEnvironment& env, const std::string& cwd,
                                          const std::map<std::string, std::string>& env_map, std::string* why_cold) {
  if (auto it = job.labels.find("mlengine-warm-start"); it != job.labels.end() && it->second == "false") {
    *why_cold = "the job's label mlengine-warm-start is false";
    return std::nullopt;
  }
  if (launch.argv.size() < 3 || launch.argv[1] != "-m") {
    *why_cold = "the replica is not a python -m module";
    return std::nullopt;
  }
  codec::WarmSpec spec;
  spec.module = launch.argv[2];
  spec.args.assign(launch.argv.begin() + 3, launch.argv.end());
  spec.cwd = cwd;
  spec.env = env_map;
  if (!env.digest.empty()) {
    // The job's packages, in a virtual environment over the runtime's.
    spec.prefix = env.dir;
    std::error_code ec;
    for (const auto& lib : fs::directory_iterator(fs::path(spec.prefix) / "lib", ec)) {
      const fs::path site = lib.path() / "site-packages";
      if (!fs::is_directory(site, ec)) continue;
      for (const auto& module : preload) {
        const std::string top = module.substr(0, module.find('.'));
        if (fs::exists(site / top, ec) || fs::exists(site / (top + ".py"), ec)) {
          *why_cold = absl::StrCat("the job's packages bring their own ", top);
          return std::nullopt;
        }
      }
      spec.site_dirs.push_back(site.string());
    }
  }
  return spec;
}

// `root` and every process below it. The shim is a child subreaper, so
// whatever a replica starts stays below it.
std::vector<pid_t> ProcessTree(pid_t root) {
  std::vector<pid_t> tree, todo = {root};
  std::set<pid_t> seen;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!seen.insert(pid).second) continue;
    tree.push_back(pid);
    std::error_code ec;
    for (const auto& task : fs::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
      for (absl::string_view child : absl::StrSplit(ReadFileOrEmpty(task.path().string() + "/children"), ' ',
                                                     absl::SkipWhitespace())) {
        pid_t c = 0;
        if (absl::SimpleAtoi(child, &c)) todo.push_back(c);
      }
    }
  }
  return tree;
}

// The CPU (clock ticks: user and system, its own and its reaped
// children's) of `root` and of every process below it.
// The CPU time of the replica below its shim `root`: every process of the
// tree, with what their reaped children used; of the shim itself only its
// reaped children's (its own wake-ups are not the replica's work).
int64_t TreeCpuTicks(pid_t root) {
  int64_t total = 0;
  for (pid_t pid : ProcessTree(root)) {
    const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    // After the command: state (3), ... utime (14), stime, cutime, cstime (17).
    const std::vector<absl::string_view> fields = absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ');
    for (size_t i = pid == root ? 13 : 11; i <= 14 && i < fields.size(); ++i) {
      int64_t v = 0;
      if (absl::SimpleAtoi(fields[i], &v)) total += v;
    }
  }
  return total;
}

// The established TCP connections of this network namespace (replicas share
// it): socket inode -> (local port, remote port).
std::map<uint64_t, std::pair<int, int>> EstablishedConnections() {
  std::map<uint64_t, std::pair<int, int>> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    bool header = true;
    for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(table), '\n', absl::SkipEmpty())) {
      if (std::exchange(header, false)) continue;
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (f.size() < 10 || f[3] != "01") continue;  // 01: ESTABLISHED
      auto port = [](absl::string_view address) {
        int p = 0;
        const size_t colon = address.rfind(':');
        return colon != absl::string_view::npos && absl::SimpleHexAtoi(address.substr(colon + 1), &p) ? p : -1;
      };
      uint64_t inode = 0;
      if (absl::SimpleAtoi(f[9], &inode) && inode != 0) out[inode] = {port(f[1]), port(f[2])};
    }
  }
  return out;
}

// Whether a process of `root`'s tree holds a connection on one of `ports`.
bool TreeConnectedOn(pid_t root, const std::set<int>& ports,
                     const std::map<uint64_t, std::pair<int, int>>& connections) {
  for (pid_t pid : ProcessTree(root)) {
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd.path(), link_ec).string();
      uint64_t inode = 0;
      if (link_ec || !absl::StartsWith(target, "socket:[") ||
          !absl::SimpleAtoi(absl::string_view(target).substr(8, target.size() - 9), &inode)) {
        continue;
      }
      auto c = connections.find(inode);
      if (c != connections.end() && (ports.count(c->second.first) || ports.count(c->second.second))) return true;
    }
  }
  return false;
}


}  // namespace

LocalExecutor::LocalExecutor(LocalExecutorOptions options, runtime::RuntimeCatalog runtimes,
                             runtime::PackageCache& cache)
    : options_(std::move(options)),
      runtimes_(std::move(runtimes)),
      cache_(cache),
      preparer_(std::max(1, options_.start_threads), common::WorkerPool::OnStop::kDiscard) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  watcher_ = std::thread([this] { Watch(); });
}

LocalExecutor::~LocalExecutor() {
  stopping_ = true;
  preparer_.Stop();
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  watcher_.join();
  // Replicas keep running: a restarted server finds them again (Recover).
  for (auto& [fd, who] : by_pidfd_) ::close(fd);
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

absl::Status LocalExecutor::CheckRunnable(const model::Job& job) const {
  return CheckJobRunnable(job, runtimes_, options_.podman != nullptr);
}

void LocalExecutor::Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement) {
  const JobRef ref{job.project, job.job_id};
  const std::string key = Key(ref);
  {
    std::lock_guard<std::mutex> lock(mu_);
    RunningJob& r = jobs_[key];
    r = RunningJob{};
    r.ref = ref;
    r.dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id, model::CurrentAttempt(job));
    r.stall_policy = StallPolicyOf(job, options_.stall_after, options_.stall_fails);
  }
  preparer_.Post([this, key, job, demand, placement] { PrepareAndStart(key, job, demand, placement); });
}

std::vector<int> LocalExecutor::AllocatePorts(int n) {
  std::vector<int> out;
  for (int port = options_.first_port; port <= options_.last_port && static_cast<int>(out.size()) < n; ++port) {
    if (ports_in_use_.count(port) || !PortFree(port)) continue;
    out.push_back(port);
  }
  return out;
}

// A start in three steps, so that starts run side by side on the preparer's
// threads and the executor's lock is held only for the moments that need
// it: (1) claim the job and its ports, under the lock; (2) everything on
// disk (run directory, sandbox, manifest, warm specs), each replica's
// command and environment, without it; (3) spawn the replicas and record
// them, under the lock. The job stays `preparing` throughout, so nothing
// else finishes it meanwhile; a cancel seen at (1) or (3) stops it there.
void LocalExecutor::PrepareAndStart(const std::string& key, model::Job job, model::JobDemand demand,
                                    model::Placement placement) {
  const JobRef ref{job.project, job.job_id};
  uid_t sandbox_uid = 0;  // the identity this start took (released if it fails)
  auto fail = [&](Ending ending, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = jobs_.find(key); it != jobs_.end()) {
        for (int p : it->second.ports) ports_in_use_.erase(p);
        jobs_.erase(it);
      }
    }
    if (options_.sandbox != nullptr && sandbox_uid != 0) {
      std::vector<std::string> tasks;  // whichever of their groups were made
      for (const auto& r : demand.replicas) tasks.push_back(r.TaskName());
      options_.sandbox->EndJob(ref.project, ref.job_id, sandbox_uid, tasks);
    }
    events_->JobEnded(ref, ending == Ending::kStopped ? Outcome::kStopped : Outcome::kFailed, message);
  };
  const bool containers = IsContainerJob(job);
  runtime::PreparedEnvironment env;
  if (containers) {
    // Every image the job runs is in the node's store before any replica starts.
    if (auto s = PullJobImages(job, options_.podman); !s.ok()) return fail(Ending::kFailed, std::string(s.message()));
  } else {
    auto prepared = PrepareJobEnvironment(job, runtimes_, cache_, options_.buckets);
    if (!prepared.ok()) return fail(Ending::kFailed, std::string(prepared.status().message()));
    env = *std::move(prepared);
  }
  std::optional<Credential> credential;
  if (options_.credentials != nullptr) {
    auto issued = options_.credentials->IssueFor(job, /*outlives_machine=*/false);
    if (!issued.ok()) {
      return fail(Ending::kFailed, absl::StrCat("mlengined could not issue the job's credential, so it was not "
                                                "started: ",
                                                issued.status().message()));
    }
    credential = *std::move(issued);
  }

  // (1) Claim: the job is still wanted; its ports, one per clustered
  // replica and one for torch's rendezvous.
  std::string run_dir;
  std::vector<int> ports;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    RunningJob& run = it->second;
    run.containers = containers;
    if (run.cancel_requested) {
      const std::string reason = run.cancel_reason;
      lock.unlock();
      return fail(Ending::kStopped, reason);
    }
    run_dir = run.dir;
    int needed = 1;
    for (const auto& r : demand.replicas) needed += r.role == "evaluator" ? 0 : 1;
    ports = AllocatePorts(needed);
    if (static_cast<int>(ports.size()) < needed) {
      lock.unlock();
      return fail(Ending::kFailed, absl::StrCat("No free ports in ", options_.first_port, "-", options_.last_port,
                                                " for the job's ", needed, " endpoints."));
    }
    for (int p : ports) {
      ports_in_use_.insert(p);
      run.ports.insert(p);
    }
  }

  // (2) On disk, without the lock. A run directory left by an earlier
  // attempt (a start undone at recovery) holds nothing alive: make sure,
  // then start clean.
  std::error_code ec;
  if (fs::exists(run_dir, ec)) {
    KillLeftovers(run_dir);
    RemoveContainers(options_.podman, run_dir);
    fs::remove_all(run_dir, ec);
  }
  if (auto s = ec ? absl::UnavailableError(ec.message())
                  : rundir::CreateSpreadDirectory(run_dir, rundir::Durability::kProcessCrash);
      !s.ok()) {
    return fail(Ending::kFailed, absl::StrCat("cannot create the job's run directory ", run_dir, ": ", s.message()));
  }
  // Its package environment is kept while the job runs (retention).
  if (!env.dir.empty()) {
    if (auto s = rundir::WriteRunEnvironment(run_dir, env.dir); !s.ok()) {
      return fail(Ending::kFailed, absl::StrCat("cannot write the job's run directory: ", s.message()));
    }
  }

  // The job's identity and what its account reaches, before anything of
  // it is written that a restart would adopt.
  std::optional<JobSandbox> job_sandbox;
  if (options_.sandbox != nullptr) {
    auto begun = options_.sandbox->BeginJob(job);
    if (!begun.ok()) {
      return fail(Ending::kFailed, absl::StrCat("The job could not be started in its sandbox: ", begun.status().message()));
    }
    job_sandbox = *std::move(begun);
    sandbox_uid = job_sandbox->uid;
  }

  runtime::LaunchContext ctx;
  ctx.python = env.python;
  ctx.gcs_root = options_.gcs_root;
  ctx.python_path = options_.python_path;
  ctx.trial_id = job.trial_id;
  if (credential) {
    ctx.service_account = credential->account;
    ctx.access_token = credential->token;
    ctx.api_endpoint = options_.api_endpoint;
  }
  size_t next = 0;
  for (const auto& r : demand.replicas) {
    ctx.hosts[r.TaskName()] = "localhost";
    if (r.role != "evaluator") ctx.ports[r.TaskName()] = ports[next++];
  }
  ctx.torch_port = ports[next];

  // The manifest is on disk before the first replica starts: a restarted
  // server then finds every replica that did start (Recover).
  const std::vector<runtime::ReplicaLaunch> launches = runtime::BuildReplicaLaunches(job, demand, placement, ctx);
  rundir::RunManifest manifest;
  manifest.tpu_hosts = placement.tpu_hosts;
  manifest.tpu_simulated = placement.tpu_simulated;
  manifest.uid = sandbox_uid;
  for (const auto& launch : launches) {
    rundir::ManifestReplica r;
    r.task = launch.task_name;
    r.host = launch.host;
    if (auto p = placement.replicas.find(launch.task_name); p != placement.replicas.end()) r.gpus = p->second.gpu_indices;
    manifest.replicas.push_back(std::move(r));
  }
  absl::Status prepared = absl::OkStatus();
  std::map<std::string, std::string> sandbox_specs;  // task -> its sandbox spec (sandbox/spec.h)
  std::map<std::string, model::ReplicaDemand> demands;  // task -> what the scheduler counted for it
  for (const auto& r : demand.replicas) demands[r.TaskName()] = r;
  std::vector<std::string> read_only;  // the job's package environment
  if (!env.dir.empty()) read_only.push_back(env.dir);
  for (const auto& launch : launches) {
    if (prepared.ok()) {
      prepared = rundir::CreateDirectories(common::ReplicaDir(run_dir, launch.task_name) + "/work",
                                           rundir::Durability::kProcessCrash);
    }
    if (!prepared.ok() || !job_sandbox) continue;
    if (containers) {
      prepared = options_.sandbox->PrepareContainerReplica(*job_sandbox, run_dir, launch.task_name);
      continue;
    }
    std::vector<int> gpus;
    if (auto p = placement.replicas.find(launch.task_name); p != placement.replicas.end()) gpus = p->second.gpu_indices;
    auto spec = options_.sandbox->PrepareReplica(*job_sandbox, job.project, job.job_id, run_dir, launch.task_name,
                                                 demands[launch.task_name], read_only, gpus, options_.gcs_root);
    if (spec.ok()) {
      sandbox_specs[launch.task_name] = *spec;
    } else {
      prepared = spec.status();
    }
  }
  if (prepared.ok()) prepared = rundir::WriteManifest(run_dir, manifest);
  if (!prepared.ok()) return fail(Ending::kFailed, absl::StrCat("The job could not be started: ", prepared.message()));

  auto base = common::CurrentEnvironment();
  std::erase_if(base, [](const auto& kv) { return absl::StartsWith(kv.first, "MLENGINE_"); });
  if (job_sandbox) {
    // What the dynamic loader and libc act on never reaches the shim, which
    // runs as root (glibc's list of variables it drops for setuid programs).
    std::erase_if(base, [](const auto& kv) { return IsLoaderVariable(kv.first); });
  }
  const std::string grace = absl::StrCat(std::max<int64_t>(0, absl::ToInt64Seconds(options_.cancel_grace)));
  std::vector<common::SpawnOptions> spawns;  // one per launch, in order
  for (const runtime::ReplicaLaunch& launch : launches) {
    const std::string rdir = common::ReplicaDir(run_dir, launch.task_name);
    auto env_map = base;
    for (const auto& [k, v] : launch.env) env_map[k] = v;
    if (auto old = base.find("PYTHONPATH"); old != base.end() && !old->second.empty()) {
      env_map["PYTHONPATH"] = launch.env.at("PYTHONPATH") + ":" + old->second;
    }
    env_map["CLOUD_ML_HP_METRIC_FILE"] = common::ReplicaMetricPath(run_dir, launch.task_name);
    // Every process of the replica carries it, even one that leaves its
    // session: how a restarted server finds what is left of a run.
    env_map["MLENGINE_RUN_DIR"] = run_dir;
    const auto sandbox_spec = sandbox_specs.find(launch.task_name);
    if (sandbox_spec != sandbox_specs.end()) Sandboxing::AdjustEnvironment(&env_map);
    if (!job_sandbox) {
      (void)rundir::AppendLogLine(common::ReplicaLogPath(run_dir, launch.task_name), false,
                                  "mlengine: no sandbox: this replica runs as mlengined's own user with the whole "
                                  "file system (the operator set sandbox: {enabled: false})");
    }
    std::vector<std::string> argv = {options_.shim, "--log", common::ReplicaLogPath(run_dir, launch.task_name),
                                     "--exit", common::ReplicaExitPath(run_dir, launch.task_name),
                                     "--cwd", rdir + "/work", "--grace", grace};
    if (containers) {
      // The shim runs `podman run` and stops and removes the container
      // through podman (mlengine-replica, --container).
      std::optional<ContainerSandbox> confined;
      if (job_sandbox) {
        const model::ReplicaDemand& d = demands[launch.task_name];
        confined = ContainerSandbox{job_sandbox->uid, job_sandbox->buckets, d.cpu_milli, d.memory_mib,
                                    options_.sandbox->pids_limit()};
      }
      containers::ContainerRun c = ContainerRunOf(job, launch, run_dir, rdir, options_.gcs_root, env_map, placement,
                                                  confined ? &*confined : nullptr);
      SetContainerEnvironment(*options_.podman, job, SimulatedImageNotes(options_.podman->settings(), job), c,
                              &env_map);
      if (!c.cidfile.empty()) ::unlink(c.cidfile.c_str());  // podman refuses one that exists
      argv.insert(argv.end(), {"--container", c.name, "--podman", options_.podman->settings().podman, "--"});
      const auto run_argv = containers::PodmanRunArgv(options_.podman->settings(), c);
      argv.insert(argv.end(), run_argv.begin(), run_argv.end());
    } else {
      // A warm start when the job's runtime has a warm interpreter: it forks
      // the replica (the shim falls back to this argv when it cannot).
      const std::string runtime = job.training_input ? job.training_input->runtime_version : "";
      const std::string socket = options_.warm != nullptr ? options_.warm->SocketFor(runtime) : "";
      // How the shim takes the replica's sandbox spec: in its environment,
      // no file to make (each new file costs a start a fraction of a
      // millisecond of CPU); a file where the warm interpreter reads it by
      // path, or where it is too large for an environment string.
      std::string sandbox_arg;   // --sandbox's value; "" unsandboxed
      std::string no_spec_file;  // why the file could not be written (the start is then cold)
      if (sandbox_spec != sandbox_specs.end()) {
        const std::string& text = sandbox_spec->second;
        const bool fits = text.size() <= Sandboxing::kMaxSpecInEnvironment;
        absl::StatusOr<std::string> path = std::string("-");
        if (!socket.empty() || !fits) path = Sandboxing::WriteSpecFile(run_dir, launch.task_name, text);
        if (!path.ok() && !fits) {
          return fail(Ending::kFailed, absl::StrCat("The job could not be started: ", path.status().message()));
        }
        if (!path.ok()) no_spec_file = std::string(path.status().message());
        sandbox_arg = path.ok() ? *path : "-";
        if (sandbox_arg == "-") env_map[sandbox::kSpecVariable] = text;
      }
      if (!socket.empty()) {
        const std::vector<std::string> preload = options_.warm->PreloadOf(runtime);
        std::string why_cold;
        auto spec = WarmSpecOf(job, launch, preload, env, rdir + "/work", env_map, &why_cold);
        if (spec && !no_spec_file.empty()) {
          spec.reset();
          why_cold = no_spec_file;
        } else if (spec && !sandbox_arg.empty()) {
          spec->sandbox = sandbox_arg;
        }
        const std::string spec_path = rdir + "/warm-spec.json";
        if (spec) {
          // The spec holds the replica's environment (its token too): the shim's to read only.
          if (auto s = rundir::WriteFileAtomically(spec_path, codec::EncodeWarmSpec(*spec) + "\n", 0600,
                                                   rundir::Durability::kProcessCrash);
              !s.ok()) {
            spec.reset();
            why_cold = absl::StrCat("cannot write ", spec_path, ": ", s.message());
          }
        }
        if (spec) {
          argv.insert(argv.end(), {"--warm", socket, "--spec", spec_path, "--note",
                                   absl::StrCat("mlengine: warm start: forked from an interpreter that imported ",
                                                absl::StrJoin(preload, ", "))});
        } else {
          (void)rundir::AppendLogLine(common::ReplicaLogPath(run_dir, launch.task_name), false,
                                      absl::StrCat("mlengine: cold start: ", why_cold));
        }
      }
      if (!sandbox_arg.empty()) argv.insert(argv.end(), {"--sandbox", sandbox_arg});
      argv.push_back("--");
      argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    }
    common::SpawnOptions spawn;
    spawn.argv = std::move(argv);
    spawn.env = std::move(env_map);
    // Its own session (and process group) from the first instant, so a stop
    // signalled to the group right after the spawn cannot miss it.
    spawn.group = common::ProcessGroup::kNewSession;
    spawns.push_back(std::move(spawn));
  }

  // (3) Spawn and record, under the lock: a cancel or a replica's exit from
  // here on sees every replica that runs.
  std::unique_lock<std::mutex> lock(mu_);
  RunningJob& run = jobs_.at(key);  // preparing: only this thread removes it
  if (run.cancel_requested) {
    const std::string reason = run.cancel_reason;
    lock.unlock();
    return fail(Ending::kStopped, reason);
  }
  run.uid = sandbox_uid;
  for (size_t i = 0; i < launches.size(); ++i) {
    const std::string& task = launches[i].task_name;
    Replica candidate;
    if (absl::Status started = StartShim(spawns[i], candidate); !started.ok()) {
      BeginStop(run, Ending::kFailed,
                absl::StrCat("The replica ", task, " could not be started: ", started.message(), "."));
      break;
    }
    obs::Metrics::Default().ReplicaStarts("local").Increment();
    Replica& rep = run.replicas[task];
    rep = std::move(candidate);
    rep.task = task;
    rep.memory_mib = demands[task].memory_mib;
    manifest.replicas[i].pid = rep.pid;
    AddToEpoll(rep, rep.pidfd);
  }
  if (run.ending == Ending::kNone) {
    std::map<std::string, pid_t> pids;  // every replica is running
    for (const auto& r : manifest.replicas) pids[r.task] = r.pid;
    if (auto s = rundir::MarkManifestStarted(run_dir, pids); !s.ok()) {
      BeginStop(run, Ending::kFailed, absl::StrCat("The job could not be started: ", s.message()));
    }
  }
  run.preparing = false;
  run.started_at = absl::Now();
  const bool failed_to_start = run.ending != Ending::kNone;
  if (run.cancel_requested && !failed_to_start) BeginStop(run, Ending::kStopped, run.cancel_reason);
  lock.unlock();
  if (!failed_to_start) events_->JobStarted(ref);
  MaybeFinish(key);
}

absl::Status LocalExecutor::StartShim(const common::SpawnOptions& spawn, Replica& rep) {
  if (options_.fork_shims && !forks_tried_) {
    forks_tried_ = true;
    auto started = ShimForkServer::Start(options_.shim);
    if (started.ok()) {
      forks_ = *std::move(started);
    } else {
      obs::Log("local").warn("shims are executed, not forked: {}", std::string(started.status().message()));
    }
  }
  // What a forked shim gets is what an executed one would: stdin from
  // /dev/null, mlengined's stdout and stderr, a session of its own.
  const bool forkable = spawn.env && spawn.cwd.empty() && spawn.group == common::ProcessGroup::kNewSession &&
                        spawn.in.kind == common::Stdio::Kind::kNull &&
                        spawn.out.kind == common::Stdio::Kind::kInherit &&
                        spawn.err.kind == common::Stdio::Kind::kInherit;
  if (forks_ != nullptr && forkable) {
    auto forked = forks_->Fork(spawn.argv, *spawn.env);
    if (forked.ok()) {
      rep.pid = forked->pid;
      rep.pidfd = forked->pidfd;
      rep.own_child = false;  // the fork server's child, reaped by it
      return absl::OkStatus();
    }
    if (!forks_->usable()) {
      obs::Log("local").warn("shims are executed from now on: {}", std::string(forked.status().message()));
      forks_.reset();
    }
  }
  auto child = common::Spawn(spawn);
  if (!child.ok()) return child.status();
  rep.pid = child->Release();  // reaped by the watcher (pidfd, waitpid)
  rep.own_child = true;
  return absl::OkStatus();
}

void LocalExecutor::AddToEpoll(Replica& r, int pidfd) {
  r.pidfd = pidfd >= 0 ? pidfd : PidfdOpen(r.pid);
  if (r.pidfd < 0) {
    r.exited = true;
    r.exit.reset();
    return;
  }
  by_pidfd_[r.pidfd] = {"", r.task};
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = r.pidfd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, r.pidfd, &ev);
}

void LocalExecutor::Cancel(const JobRef& ref, const std::string& reason) {
  const std::string key = Key(ref);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    RunningJob& run = it->second;
    run.cancel_requested = true;
    run.cancel_reason = reason;
    if (run.preparing) return;  // the preparation thread stops it
    if (run.ending == Ending::kNone) BeginStop(run, Ending::kStopped, reason);
  }
  MaybeFinish(key);
}

void LocalExecutor::Signal(const RunningJob& job, int sig) {
  for (const auto& [task, r] : job.replicas) {
    if (r.exited || r.pid <= 0) continue;
    // SIGTERM goes to mlengine-replica, which stops every process of the
    // replica (those that left its session too) within the grace period.
    // SIGKILL is the last resort for a shim that did not: its group and it.
    if (sig == SIGKILL) ::kill(-r.pid, SIGKILL);
    ::kill(r.pid, sig);
  }
}

void LocalExecutor::BeginStop(RunningJob& job, Ending ending, std::string message, Outcome failure) {
  if (job.ending != Ending::kNone) return;
  job.ending = ending;
  job.failure = failure;
  job.message = std::move(message);
  Signal(job, SIGTERM);
  // The shim kills its replica's processes after cancel_grace itself.
  job.kill_at = absl::Now() + options_.cancel_grace + absl::Seconds(10);
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

std::pair<Outcome, std::string> LocalExecutor::Failure(const RunningJob& job, const Replica& replica) const {
  if (options_.sandbox != nullptr && job.uid != 0) {
    auto oom = options_.sandbox->MemoryFailure(job.ref.project, job.ref.job_id, replica.task, replica.memory_mib);
    if (oom) return {Outcome::kOutOfMemory, *oom};
    // A container's: podman reports a memory kill as status 137; the kernel
    // log says whether its limit was the reason.
    if (replica.exit && replica.exit->KilledOrStatus137()) {
      oom = ContainerMemoryFailure(common::ReplicaDir(job.dir, replica.task), replica.task, replica.memory_mib);
      if (oom) return {Outcome::kOutOfMemory, *oom};
    }
  }
  // No record of its end: mlengine's shim itself was killed (the host's
  // OOM killer, an operator), not by anything of the job's.
  return {replica.exit ? Outcome::kFailed : Outcome::kLost, DescribeReplicaEnd(job.dir, replica.task, replica.exit)};
}

void LocalExecutor::OnReplicaExit(RunningJob& job, Replica& replica) {
  if (job.ending != Ending::kNone) return;
  const bool role_master = absl::StartsWith(replica.task, "master-");
  if (replica.exit && replica.exit->Succeeded()) {
    if (role_master) BeginStop(job, Ending::kSucceeded, "");
    return;
  }
  obs::Metrics::Default().ReplicaFailures("local").Increment();
  auto [failure, message] = Failure(job, replica);
  BeginStop(job, Ending::kFailed, std::move(message), failure);
}

void LocalExecutor::MaybeFinish(const std::string& key) {
  JobRef ref;
  Outcome outcome;
  std::string message;
  uid_t uid = 0;
  std::vector<std::string> tasks;  // its replicas, whose cgroups go with the job's
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    RunningJob& run = it->second;
    if (run.preparing || run.ending == Ending::kNone) return;
    for (const auto& [task, r] : run.replicas) {
      if (!r.exited) return;
    }
    ref = run.ref;
    message = run.message;
    outcome = run.ending == Ending::kSucceeded ? Outcome::kSucceeded
              : run.ending == Ending::kStopped ? Outcome::kStopped
                                               : run.failure;
    for (int p : run.ports) ports_in_use_.erase(p);
    // Each replica's shim removed its container when it recorded how the
    // replica ended; a shim that was killed may have left one, which goes
    // now, before the job is reported ended (off the watcher thread).
    bool sweep = run.containers && run.force_killed;
    for (const auto& [task, r] : run.replicas) sweep = sweep || (run.containers && !r.exit.has_value());
    const std::string dir = run.dir;
    uid = run.uid;
    for (const auto& [task, r] : run.replicas) tasks.push_back(task);
    jobs_.erase(it);
    if (sweep) {
      preparer_.Post([this, ref, outcome, message, dir, uid, tasks] {
        RemoveContainers(options_.podman, dir);
        if (options_.sandbox != nullptr && uid != 0) options_.sandbox->EndJob(ref.project, ref.job_id, uid, tasks);
        events_->JobEnded(ref, outcome, message);
      });
      return;
    }
  }
  // Whatever of the job escaped its shims (its identity's processes) goes,
  // with its cgroups, before the job is reported ended.
  if (options_.sandbox != nullptr && uid != 0) options_.sandbox->EndJob(ref.project, ref.job_id, uid, tasks);
  events_->JobEnded(ref, outcome, message);
}

void LocalExecutor::CheckStalls(absl::Time now, std::vector<std::pair<JobRef, std::string>>* notes,
                                std::vector<std::string>* ended) {
  for (auto& [key, run] : jobs_) {
    if (run.preparing || run.containers || run.ending != Ending::kNone || run.cancel_requested) continue;
    int64_t ticks = 0;
    absl::Time newest = absl::InfinitePast();
    for (const auto& [task, rep] : run.replicas) {
      if (rep.exited) continue;
      ticks += TreeCpuTicks(rep.pid);
      struct stat st;
      if (::stat(common::ReplicaLogPath(run.dir, task).c_str(), &st) == 0) {
        newest = std::max(newest, absl::TimeFromTimespec(st.st_mtim));
      }
    }
    StallVerdict verdict = JudgeStall(run.stall, ticks, newest, now, run.stall_policy, "local.stall_action");
    if (verdict.stalled) {
      obs::Metrics::Default().Stalls("local").Increment();
      obs::Log("local").warn("{}: {}", key, verdict.text);
    }
    if (verdict.kind == StallVerdict::Kind::kNote) notes->push_back({run.ref, std::move(verdict.text)});
    if (verdict.kind == StallVerdict::Kind::kFail) {
      BeginStop(run, Ending::kFailed, std::move(verdict.text), Outcome::kStalled);
      ended->push_back(key);
    }
  }
}

void LocalExecutor::CheckJoins(absl::Time now, std::vector<std::string>* ended) {
  std::optional<std::map<uint64_t, std::pair<int, int>>> connections;  // read once a round, when needed
  for (auto& [key, run] : jobs_) {
    if (run.joined || run.preparing || run.containers || run.ending != Ending::kNone || run.cancel_requested) {
      continue;
    }
    if (run.replicas.size() < 2 || run.ports.empty()) {
      run.joined = true;  // nobody to join, or (adopted) ports not known
      continue;
    }
    if (!connections) connections = EstablishedConnections();
    std::vector<std::string> missing;
    for (const auto& [task, rep] : run.replicas) {
      if (!rep.exited && !TreeConnectedOn(rep.pid, run.ports, *connections)) missing.push_back(task);
    }
    if (missing.empty()) {
      run.joined = true;
      continue;
    }
    if (now - run.started_at < options_.join_timeout) continue;
    std::vector<std::string> ports;
    for (int p : run.ports) ports.push_back(std::to_string(p));
    const std::string message = NotJoinedFailure(missing, options_.join_timeout,
                                                 absl::StrCat("the job's ports ", absl::StrJoin(ports, ", ")),
                                                 "local.join_timeout_seconds");
    obs::Log("local").warn("{}: {}", key, message);
    BeginStop(run, Ending::kFailed, message, Outcome::kNotJoined);
    ended->push_back(key);
  }
}

void LocalExecutor::Watch() {
  epoll_event events[64];
  // The stall and join watches look a few times per limit (the shortest of
  // the running jobs'), at most every 30 s.
  absl::Time next_progress_check = absl::Now();
  for (;;) {
    int timeout_ms = 1000;
    std::vector<std::pair<JobRef, std::string>> notes;
    std::vector<std::string> stalled_ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      const absl::Time now = absl::Now();
      absl::Duration progress_every = WatchEvery({}, options_.join_timeout);
      for (const auto& [key, run] : jobs_) {
        const absl::Duration every = WatchEvery(run.stall_policy, options_.join_timeout);
        if (every > absl::ZeroDuration()) {
          progress_every = progress_every > absl::ZeroDuration() ? std::min(progress_every, every) : every;
        }
      }
      if (progress_every > absl::ZeroDuration()) {
        next_progress_check = std::min(next_progress_check, now + progress_every);
        if (now >= next_progress_check) {
          CheckStalls(now, &notes, &stalled_ended);
          if (options_.join_timeout > absl::ZeroDuration()) CheckJoins(now, &stalled_ended);
          next_progress_check = now + progress_every;
        }
        timeout_ms = std::min<int>(timeout_ms,
                                   std::max<int64_t>(1, absl::ToInt64Milliseconds(next_progress_check - now)));
      }
      for (auto& [key, run] : jobs_) {
        if (run.kill_at == absl::InfiniteFuture()) continue;
        if (now >= run.kill_at) {
          obs::Log("local").warn("a replica of {} did not stop within its grace period; killing it", key);
          Signal(run, SIGKILL);
          run.force_killed = true;
          run.kill_at = now + absl::Seconds(1);  // and again, for stragglers
        }
        timeout_ms = std::min<int>(timeout_ms, std::max<int64_t>(1, absl::ToInt64Milliseconds(run.kill_at - now)));
      }
    }
    for (const auto& [ref, note] : notes) {
      if (events_ != nullptr) events_->JobNote(ref, note);
    }
    for (const auto& key : stalled_ended) MaybeFinish(key);
    int n = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
    obs::ScopedTimer round_timer(obs::Metrics::Default().ExecutorPoll("local"));
    std::vector<std::string> touched;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          uint64_t v;
          (void)!::read(wake_fd_, &v, sizeof(v));
          continue;
        }
        auto who = by_pidfd_.find(fd);
        if (who == by_pidfd_.end()) continue;
        const std::string task = who->second.second;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        ::close(fd);
        by_pidfd_.erase(who);
        for (auto& [key, run] : jobs_) {
          auto r = run.replicas.find(task);
          if (r == run.replicas.end() || r->second.pidfd != fd) continue;
          Replica& rep = r->second;
          rep.pidfd = -1;
          if (rep.own_child) {
            int status;
            while (::waitpid(rep.pid, &status, 0) < 0 && errno == EINTR) {
            }
          }
          rep.exited = true;
          rep.exit = ReadReplicaExit(common::ReplicaExitPath(run.dir, task));
          OnReplicaExit(run, rep);
          touched.push_back(key);
        }
      }
    }
    for (const auto& key : touched) MaybeFinish(key);
  }
}

std::optional<model::Placement> LocalExecutor::Recover(const model::Job& job) {
  const JobRef ref{job.project, job.job_id};
  const std::string key = Key(ref);
  const std::string dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id, model::CurrentAttempt(job));
  auto read = rundir::ReadManifest(dir);
  if (!read.ok() || !read->has_value()) {
    // No manifest: nothing was started (it is durable before any replica
    // is). Defensively end anything that carries the run's name.
    if (!read.ok()) obs::Log("local").warn("{}; the job is started again", std::string(read.status().message()));
    std::error_code ec;
    if (fs::exists(dir, ec)) KillLeftovers(dir);
    return std::nullopt;
  }
  const rundir::RunManifest& manifest = **read;
  model::Placement placement;
  placement.tpu_hosts = manifest.tpu_hosts;
  placement.tpu_simulated = manifest.tpu_simulated;
  RunningJob run;
  run.ref = ref;
  run.dir = dir;
  run.preparing = false;
  run.uid = manifest.uid;
  for (const auto& m : manifest.replicas) {
    Replica r;
    r.task = m.task;
    const std::string exit_path = common::ReplicaExitPath(dir, m.task);
    r.pid = FindShim(dir, m.task, m.pid);
    if (r.pid == 0) {
      r.exited = true;
      r.exit = ReadReplicaExit(exit_path);  // read once: it decides both below
      if (!r.exit && manifest.stage == rundir::RunManifest::Stage::kStarting) {
        // The server stopped while it was starting this job, before this
        // replica was spawned: undo the start (end whatever did start) so
        // the job is placed again from scratch, never run twice.
        // Its uid is not taken again: another job may hold it by now (this
        // record is stale), so only what carries the run's name, and its
        // cgroups, are ended.
        KillLeftovers(dir);
        if (options_.sandbox != nullptr && manifest.uid != 0) {
          std::vector<std::string> tasks;
          for (const auto& each : manifest.replicas) tasks.push_back(each.task);
          options_.sandbox->EndJob(job.project, job.job_id, 0, tasks);
        }
        return std::nullopt;
      }
    }
    model::ReplicaPlacement rp;
    rp.host = m.host;
    rp.gpu_indices = m.gpus;
    placement.replicas[m.task] = rp;
    run.replicas[m.task] = r;
  }
  // Adopted: its identity is its own again.
  if (run.uid != 0) {
    if (options_.sandbox == nullptr) {
      obs::Log("local").warn("{} ran sandboxed, as uid {}; the sandbox is now off, but it stays as it is", key,
                             run.uid);
    } else if (!options_.sandbox->runtime().identities->Hold(run.uid, JobCgroup(job.project, job.job_id))) {
      obs::Log("local").error("{} runs as uid {}, which is outside the configured range or another job's", key,
                              run.uid);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    RunningJob& stored = jobs_[key] = std::move(run);
    for (auto& [task, r] : stored.replicas) {
      if (!r.exited) AddToEpoll(r);
    }
    // Replicas that ended while the server was away decide the outcome now:
    // a master that finished first wins; otherwise the first failure does.
    for (auto& [task, r] : stored.replicas) {
      if (r.exited && absl::StartsWith(task, "master-")) OnReplicaExit(stored, r);
    }
    for (auto& [task, r] : stored.replicas) {
      if (r.exited) OnReplicaExit(stored, r);
    }
  }
  if (job.state == model::JobState::kPreparing || job.state == model::JobState::kQueued) events_->JobStarted(ref);
  MaybeFinish(key);
  return placement;
}

}  // namespace mle::executor
