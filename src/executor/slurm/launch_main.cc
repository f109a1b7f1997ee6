// mlengine-slurm-launch: runs inside a Slurm allocation made for one
// mlengine job (it is what the batch script execs; see slurm_plan.h).
//
//   batch mode (default): on the master's node. Reads the job
//     (RUN/job.json, "mlengine.launch/v1": rundir/slurm_files.h), finds
//     each component's nodes in SLURM_JOB_NODELIST[_HET_GROUP_<k>], computes
//     every replica's environment from the real allocation (the replica
//     contract, runtime/replica_env.h), writes RUN/<task>/launch, starts one
//     `srun` per component, and waits. The master ending decides the job (as
//     on AI Platform); any other replica failing first fails it. The result
//     goes to RUN/outcome ("SUCCEEDED" or "FAILED" then the message) before
//     the script exits, after which Slurm stops whatever still runs.
//   --component K / --task NAME: one task inside an srun step; becomes
//     mlengine-replica running the replica (timestamped log, exit file).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codec/launch_codec.h"
#include "containers/podman.h"
#include "common/run_layout.h"
#include "common/subprocess.h"
#include "executor/job_prep.h"
#include "executor/sandboxing.h"
#include "sandbox/cgroups.h"
#include "sandbox/host.h"
#include "executor/slurm/slurm_parsers.h"
#include "executor/slurm/slurm_plan.h"
#include "model/demand.h"
#include "obs/log.h"
#include "rundir/file_io.h"
#include "rundir/slurm_files.h"
#include "runtime/replica_env.h"

extern char** environ;

namespace mle::executor::slurm {
namespace {

namespace fs = std::filesystem;

// How long the other replicas get to stop once the job is decided: the
// shim's grace period (10 s) and podman's stop and removal.
constexpr int kStopReplicasSeconds = 25;

struct Flags {
  std::string run_dir, python, shim, gcs_root, python_path;
  bool tpu_simulated = false;
  std::vector<std::string> node_addresses;  // name=address
  int component = -1;
  std::string task;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The launcher's own lines (in the Slurm job's output file, slurm-<id>.out).
spdlog::logger& Log() { return obs::Log("launcher"); }

int Die(const std::string& message) {
  Log().error("{}", message);
  return 2;
}

// Records how the job ended for mlengined (RUN/outcome) and in the launcher's
// own output. Returns the batch script's exit status, which sets Slurm's
// final state: what mlengined judges from if the outcome cannot be written.
int Conclude(const Flags& f, bool succeeded, const std::string& message) {
  Log().info("job {}{}{}", succeeded ? "succeeded" : "failed", message.empty() ? "" : ": ", message);
  if (auto s = rundir::WriteRunOutcome(f.run_dir, {succeeded, message}); !s.ok()) {
    Log().error("cannot record the outcome: {}", std::string(s.message()));
  }
  return succeeded ? 0 : 1;
}

struct Loaded {
  model::Job job;  // project, job_id and training_input: what the replicas' environment is built from
  model::JobDemand demand;
  std::vector<Component> components;
  std::string service_account, access_token, api_endpoint;  // the replicas' credential, if given
  std::optional<codec::LaunchContainers> containers;        // a custom container job
  std::optional<codec::LaunchSandbox> sandbox;              // the replicas' sandbox (none: unsandboxed)
  int attempt = 1;                                          // MLENGINE_ATTEMPT
  int progress_every_ms = 0;                                // the shims' --progress-every-ms (0: none)
  bool watch_joins = false;                                 // the shims' --join-ports
};

// The ports of the job's rendezvous as the replica's environment names them
// (MASTER_PORT, every address of TF_CONFIG's cluster): where its replicas
// connect to one another.
std::vector<int> RendezvousPorts(const std::map<std::string, std::string>& env) {
  std::set<int> ports;
  auto add = [&ports](absl::string_view text) {
    int p = 0;
    if (absl::SimpleAtoi(text, &p) && p > 0 && p < 65536) ports.insert(p);
  };
  if (auto it = env.find("MASTER_PORT"); it != env.end()) add(it->second);
  if (auto it = env.find("TF_CONFIG"); it != env.end()) {
    const auto tf = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (tf.is_object() && tf.contains("cluster") && tf["cluster"].is_object()) {
      for (const auto& [role, addresses] : tf["cluster"].items()) {
        if (!addresses.is_array()) continue;
        for (const auto& a : addresses) {
          if (!a.is_string()) continue;
          const std::string address = a.get<std::string>();
          if (const size_t colon = address.rfind(':'); colon != std::string::npos) add(address.substr(colon + 1));
        }
      }
    }
  }
  return {ports.begin(), ports.end()};
}

// This node's side of the job's sandbox (docs/security.md): mlengined chose
// the identity and the buckets; the cgroups and the view are made here.
struct NodeSandbox {
  std::optional<sandbox::Cgroups> cgroups;
  std::unique_ptr<sandbox::IdentityPool> identities;
  SandboxRuntime runtime;
  std::unique_ptr<Sandboxing> sandboxing;
  JobSandbox job;
};

absl::StatusOr<std::unique_ptr<NodeSandbox>> MakeNodeSandbox(const codec::LaunchSandbox& ls) {
  auto node = std::make_unique<NodeSandbox>();
  auto cgroups = sandbox::Cgroups::DetectHost();
  if (!cgroups.ok()) return cgroups.status();
  node->cgroups = *std::move(cgroups);
  if (auto s = node->cgroups->Prepare(); !s.ok()) return s;
  node->identities = std::make_unique<sandbox::IdentityPool>(ls.uid, 1);
  node->identities->Hold(ls.uid, "job");
  node->runtime.settings.pids_limit = ls.pids_limit;
  node->runtime.layout = sandbox::DetectHostLayout(ls.read_only);
  node->runtime.cgroups = &*node->cgroups;
  node->runtime.identities = node->identities.get();
  node->sandboxing = std::make_unique<Sandboxing>(node->runtime);
  node->job.uid = ls.uid;
  for (const auto& [bucket, writable] : ls.buckets) node->job.buckets.push_back({bucket, writable});
  return node;
}

absl::StatusOr<Loaded> Load(const Flags& f) {
  auto launch = rundir::ReadLaunchJob(f.run_dir);
  if (!launch.ok()) return launch.status();
  Loaded l;
  l.job.project = launch->project;
  l.job.job_id = launch->job_id;
  l.job.trial_of = launch->trial_of;
  l.job.trial_id = launch->trial_id;
  l.attempt = launch->attempt;
  l.progress_every_ms = launch->progress_every_ms;
  l.watch_joins = launch->watch_joins;
  l.job.training_input = std::move(launch->training_input);
  l.job.vertex = std::move(launch->vertex);
  l.demand = model::DemandOf(l.job, model::ResourceTable::Defaults());
  l.components = FromLaunchComponents(launch->components);
  l.service_account = launch->service_account;
  l.access_token = launch->access_token;
  l.api_endpoint = launch->api_endpoint;
  l.containers = launch->containers;
  l.sandbox = launch->sandbox;
  if (l.containers) l.job.resolved_images = l.containers->images;
  return l;
}

// One task: becomes mlengine-replica running the replica.
int RunTask(const Flags& f, const Loaded& l) {
  std::string task = f.task;
  if (task.empty()) {
    if (f.component < 0 || f.component >= static_cast<int>(l.components.size())) return Die("bad --component");
    const Component& c = l.components[f.component];
    int rank = 0;
    if (!absl::SimpleAtoi(Env("SLURM_PROCID"), &rank) || rank < 0 || rank >= static_cast<int>(c.tasks.size())) {
      return Die(absl::StrCat("SLURM_PROCID ", Env("SLURM_PROCID"), " is not a task of component ", f.component));
    }
    task = c.tasks[rank];
  }
  auto launch = rundir::ReadTaskLaunch(f.run_dir, task);
  if (!launch.ok()) return Die(absl::StrCat("cannot start ", task, ": ", launch.status().message()));
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (absl::StartsWith(key, "MLENGINE_")) continue;  // mlengined's own, not the replica's
    env[key] = kv.substr(eq + 1);
  }
  const std::string inherited_path = env["PYTHONPATH"];
  const std::string slurm_gpus = env.count("CUDA_VISIBLE_DEVICES") ? env["CUDA_VISIBLE_DEVICES"] : "";
  const bool slurm_set_gpus = env.count("SLURM_STEP_GPUS") || env.count("SLURM_JOB_GPUS");
  for (const auto& [k, v] : launch->env) env[k] = v;
  if (!inherited_path.empty()) env["PYTHONPATH"] = env["PYTHONPATH"] + ":" + inherited_path;
  if (slurm_set_gpus) env["CUDA_VISIBLE_DEVICES"] = slurm_gpus;  // Slurm chose this node's GPUs
  const std::string rdir = common::ReplicaDir(f.run_dir, task);
  env["CLOUD_ML_HP_METRIC_FILE"] = common::ReplicaMetricPath(f.run_dir, task);
  // Not fsynced: a crash of this node ends the replica they are for.
  if (auto s = rundir::CreateDirectories(rdir + "/work", rundir::Durability::kProcessCrash); !s.ok()) {
    return Die(std::string(s.message()));
  }
  // A replica that cannot start is recorded as ended, so the job's
  // errorMessage says why.
  auto never_started = [&](const std::string& why, int code) {
    (void)rundir::AppendLogLine(common::ReplicaLogPath(f.run_dir, task), true, why);
    (void)rundir::WriteExit(common::ReplicaExitPath(f.run_dir, task), {false, code});
    return Die(why);
  };
  std::unique_ptr<NodeSandbox> node_sandbox;
  codec::LaunchSandbox::Limits limits;
  if (l.sandbox) {
    auto made = MakeNodeSandbox(*l.sandbox);
    if (!made.ok()) {
      return never_started(absl::StrCat("mlengine-replica: cannot start the replica in its sandbox on ",
                                        Env("SLURMD_NODENAME"), ": ", made.status().message()),
                           126);
    }
    node_sandbox = *std::move(made);
    if (auto it = l.sandbox->limits.find(task); it != l.sandbox->limits.end()) limits = it->second;
    // What the loader and libc act on never reaches the shim (root).
    std::erase_if(env, [](const auto& kv) { return IsLoaderVariable(kv.first); });
    Sandboxing::AdjustEnvironment(&env);
  } else {
    (void)rundir::AppendLogLine(common::ReplicaLogPath(f.run_dir, task), false,
                                "mlengine: no sandbox: this replica runs as root with the node's whole file system "
                                "(the operator set sandbox: {enabled: false})");
  }

  std::vector<std::string> argv = {f.shim, "--log", common::ReplicaLogPath(f.run_dir, task), "--exit",
                                   common::ReplicaExitPath(f.run_dir, task), "--cwd", rdir + "/work"};
  // mlengined cannot see this node's processes: the shim records the
  // replica's CPU time for the stall watch (a container's processes are
  // podman's, not the shim's: not watched).
  if (l.progress_every_ms > 0 && launch->image.empty()) {
    argv.insert(argv.end(), {"--progress", common::ReplicaProgressPath(f.run_dir, task), "--progress-every-ms",
                             std::to_string(l.progress_every_ms)});
    if (const std::vector<int> ports = RendezvousPorts(env); l.watch_joins && !ports.empty()) {
      std::vector<std::string> text;
      for (int p : ports) text.push_back(std::to_string(p));
      argv.insert(argv.end(), {"--join-ports", absl::StrJoin(text, ",")});
    }
  }
  if (!launch->image.empty()) {
    // A custom container: this node pulls the pinned image from the
    // registry, and the shim runs it with podman (stopping and removing it
    // through podman when the replica ends).
    if (!l.containers) return Die(absl::StrCat(task, " names an image, but the job has no containers section"));
    const codec::LaunchContainers& lc = *l.containers;
    containers::ContainerSettings settings;
    settings.enabled = true;
    settings.podman = lc.podman;
    settings.init = lc.init;
    settings.runtime = lc.runtime;
    settings.gpu_devices = lc.gpu_devices;
    settings.registry_insecure = lc.registry_insecure;
    const containers::Podman podman(settings, lc.containers_conf);
    if (auto s = podman.Pull(launch->image); !s.ok()) {
      // Recorded as the replica's end, so the job's errorMessage says it.
      const std::string log = common::ReplicaLogPath(f.run_dir, task);
      (void)rundir::AppendLogLine(log, true, std::string(s.message()));
      (void)rundir::WriteExit(common::ReplicaExitPath(f.run_dir, task), {false, 125});
      return Die(std::string(s.message()));
    }
    runtime::ReplicaLaunch rl;
    rl.task_name = task;
    rl.image = launch->image;
    rl.entrypoint = launch->entrypoint;
    rl.argv = launch->argv;
    rl.env = launch->env;
    std::vector<int> gpus;
    for (absl::string_view g : absl::StrSplit(env["CUDA_VISIBLE_DEVICES"], ',', absl::SkipEmpty())) {
      int index = 0;
      if (absl::SimpleAtoi(g, &index)) gpus.push_back(index);
    }
    model::Placement placement;
    placement.replicas[task].gpu_indices = gpus;
    std::optional<ContainerSandbox> confined;
    if (node_sandbox) {
      if (auto s = node_sandbox->sandboxing->PrepareContainerReplica(node_sandbox->job, f.run_dir, task); !s.ok()) {
        return never_started(absl::StrCat("mlengine-replica: cannot prepare the replica's sandbox: ", s.message()), 126);
      }
      confined = ContainerSandbox{node_sandbox->job.uid, node_sandbox->job.buckets, limits.cpu_milli, limits.memory_mib,
                                  l.sandbox->pids_limit};
    }
    containers::ContainerRun run = ContainerRunOf(l.job, rl, f.run_dir, rdir, f.gcs_root, env, placement,
                                                  confined ? &*confined : nullptr);
    SetContainerEnvironment(podman, l.job, lc.simulated, run, &env);
    if (!run.cidfile.empty()) ::unlink(run.cidfile.c_str());  // podman refuses one that exists (a requeued run's)
    argv.insert(argv.end(), {"--container", run.name, "--podman", settings.podman, "--"});
    const auto podman_argv = containers::PodmanRunArgv(settings, run);
    argv.insert(argv.end(), podman_argv.begin(), podman_argv.end());
  } else {
    if (node_sandbox) {
      std::vector<int> gpus;
      for (absl::string_view g : absl::StrSplit(env["CUDA_VISIBLE_DEVICES"], ',', absl::SkipEmpty())) {
        int index = 0;
        if (absl::SimpleAtoi(g, &index)) gpus.push_back(index);
      }
      model::ReplicaDemand demand;
      demand.cpu_milli = limits.cpu_milli;
      demand.memory_mib = limits.memory_mib;
      // (The job's package environment is in the launch document's read_only.)
      auto spec = node_sandbox->sandboxing->PrepareReplica(node_sandbox->job, l.job.project, l.job.job_id, f.run_dir,
                                                           task, demand, {}, gpus, f.gcs_root);
      absl::StatusOr<std::string> spec_path =
          spec.ok() ? executor::Sandboxing::WriteSpecFile(f.run_dir, task, *spec) : spec.status();
      if (!spec_path.ok()) {
        return never_started(absl::StrCat("mlengine-replica: cannot prepare the replica's sandbox: ",
                                          spec_path.status().message()),
                             126);
      }
      argv.insert(argv.end(), {"--sandbox", *spec_path});
    }
    argv.push_back("--");
    argv.insert(argv.end(), launch->argv.begin(), launch->argv.end());
  }
  common::SpawnOptions exec;
  exec.argv = std::move(argv);
  exec.env = std::move(env);
  exec.in = common::Stdio::Inherit();
  if (!node_sandbox) return Die(std::string(common::Exec(exec).message()));
  // Sandboxed: the shim runs as a child, so that once it ended this node's
  // cgroup of the replica is read (was it killed for memory?) and removed.
  // Stop signals reach the shim from Slurm itself (the step's processes).
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_IGN);
  auto child = common::Spawn(exec);
  if (!child.ok()) return never_started(std::string(child.status().message()), 127);
  const int status = child->Wait();
  const std::string cgroup = ReplicaCgroup(l.job.project, l.job.job_id, task);
  auto oom = node_sandbox->sandboxing->MemoryFailure(l.job.project, l.job.job_id, task, limits.memory_mib);
  if (!oom && status == 137 && !launch->image.empty()) {
    // A container's (podman's status 137): the kernel log says whether its limit was the reason.
    oom = ContainerMemoryFailure(rdir, task, limits.memory_mib);
  }
  if (oom) (void)rundir::WriteFileAtomically(rdir + "/" + kMemoryNote, *oom);
  // Its group, and the job's and the project's above it once no other
  // replica on this node uses them (Remove prunes empty parents).
  if (auto s = node_sandbox->cgroups->Remove(cgroup); !s.ok()) Log().warn("{}", std::string(s.message()));
  return status;
}

// Whether the job is one replica on one node (a BASIC job, a CUSTOM one
// with a master alone): the batch step runs it without srun.
bool SingleTask(const std::vector<Component>& components, bool het) {
  return !het && components.size() == 1 && components[0].tasks.size() == 1 && components[0].first_node_task.empty();
}

// Starts `argv` (srun) with the launcher's stdio; waitpid(-1) in RunBatch reaps it.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv) {
  common::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.in = common::Stdio::Inherit();
  auto child = common::Spawn(spawn);
  if (!child.ok()) return child.status();
  return child->Release();
}

// Batch mode: plan, write launch files, srun every component, wait.
int RunBatch(const Flags& f, const Loaded& l) {
  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Die(absl::StrCat("cannot find this program's own path (/proc/self/exe): ", ec.message()));
  // A fresh run (also after Slurm requeued the job): nothing of an earlier
  // run may decide this one.
  if (auto s = rundir::RemoveEarlierRunResults(f.run_dir, TasksOf(l.components)); !s.ok()) {
    return Die(absl::StrCat("cannot start from a clean run directory: ", s.message()));
  }
  const std::string restarts = Env("SLURM_RESTART_COUNT");
  if (!restarts.empty() && restarts != "0") {
    Log().info("Slurm requeued this job (restart {})", restarts);
  }
  int het_size = 0;
  const bool het = absl::SimpleAtoi(Env("SLURM_HET_SIZE"), &het_size) && het_size > 1;
  std::vector<std::vector<std::string>> nodes;
  for (size_t k = 0; k < l.components.size(); ++k) {
    const std::string var = het ? absl::StrCat("SLURM_JOB_NODELIST_HET_GROUP_", k) : "SLURM_JOB_NODELIST";
    auto list = ExpandHostlist(Env(var.c_str()));
    if (!list.ok()) return Die(absl::StrCat(var, ": ", list.status().message()));
    nodes.push_back(*std::move(list));
  }
  auto placement = PlacementFromAllocation(l.components, nodes, f.tpu_simulated);
  if (!placement.ok()) {
    return Conclude(f, false, absl::StrCat("Slurm's allocation does not match the job: ", placement.status().message()));
  }
  std::map<std::string, std::string> address;
  for (const auto& na : f.node_addresses) {
    auto eq = na.find('=');
    if (eq != std::string::npos) address[na.substr(0, eq)] = na.substr(eq + 1);
  }
  auto addr = [&](const std::string& node) {
    auto it = address.find(node);
    return it == address.end() ? node : it->second;
  };

  // Ports, the same on every node without talking: from the Slurm job id.
  int64_t slurm_id = 0;
  if (!absl::SimpleAtoi(Env("SLURM_JOB_ID"), &slurm_id) || slurm_id <= 0) {
    return Die(absl::StrCat("SLURM_JOB_ID is \"", Env("SLURM_JOB_ID"),
                            "\": run only by the batch script mlengined submits"));
  }
  std::vector<std::string> endpoint_tasks;
  for (const auto& r : l.demand.replicas) {
    if (r.role != "evaluator") endpoint_tasks.push_back(r.TaskName());
  }
  for (int i = 0; i < l.demand.tpu_hosts; ++i) endpoint_tasks.push_back(runtime::TpuTaskName(i));
  std::vector<int> ports = JobPorts(slurm_id, static_cast<int>(endpoint_tasks.size()) + 1);

  runtime::LaunchContext ctx;
  ctx.python = f.python;
  ctx.gcs_root = f.gcs_root;
  ctx.python_path = f.python_path;
  ctx.trial_id = l.job.trial_id;
  ctx.attempt = l.attempt;
  ctx.service_account = l.service_account;
  ctx.access_token = l.access_token;
  ctx.api_endpoint = l.api_endpoint;
  for (const auto& [task, rp] : placement->replicas) ctx.hosts[task] = addr(rp.host);
  for (size_t i = 0; i < placement->tpu_hosts.size(); ++i) {
    ctx.hosts[runtime::TpuTaskName(static_cast<int>(i))] = addr(placement->tpu_hosts[i]);
  }
  for (size_t i = 0; i < endpoint_tasks.size(); ++i) ctx.ports[endpoint_tasks[i]] = ports[i];
  ctx.torch_port = ports.back();
  if (l.demand.tpu_hosts > 0) ctx.tpu_worker_argv = {f.python, "-m", "mlengine.tpu_worker"};

  std::map<std::string, std::string> host_of;
  for (const auto& launch : runtime::BuildReplicaLaunches(l.job, l.demand, *placement, ctx)) {
    if (auto s = rundir::WriteTaskLaunch(f.run_dir, launch.task_name,
                                         {launch.argv, launch.env, launch.host, launch.image, launch.entrypoint});
        !s.ok()) {
      return Conclude(f, false, absl::StrCat("Could not prepare the replica ", launch.task_name, ": ", s.message()));
    }
    host_of[launch.task_name] = launch.task_name.rfind("tpu-", 0) == 0
                                    ? placement->tpu_hosts[launch.index]
                                    : placement->replicas.at(launch.task_name).host;
  }
  // Which Slurm node runs which task: mlengined names them when a node is lost.
  if (auto s = rundir::WriteSlurmPlacement(f.run_dir, host_of); !s.ok()) {
    Log().warn("{} (a lost node will be named without its tasks)", std::string(s.message()));
  }
  std::string where;
  for (const auto& [task, node] : host_of) absl::StrAppend(&where, " ", task, "@", node);
  Log().info("Slurm job {} for projects/{}/jobs/{}:{}", slurm_id, l.job.project, l.job.job_id, where);

  // One srun per component (plus the master beside TPU worker 0). --overlap:
  // steps of this job may share the CPUs of its own allocation.
  struct Step {
    std::vector<std::string> tasks;
    std::string what;  // what ran the tasks, for a lost replica's message
  };
  std::map<pid_t, Step> steps;
  std::string srun_error;  // why the last srun could not be started
  auto srun = [&](size_t k, std::vector<std::string> extra, std::vector<std::string> tail,
                  std::vector<std::string> tasks) -> bool {
    std::vector<std::string> argv = {"srun"};
    if (het) argv.push_back(absl::StrCat("--het-group=", k));
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--overlap", "--kill-on-bad-exit=0", "--ntasks-per-node=1", "--quiet", self,
                             "--run-dir", f.run_dir, "--shim", f.shim, "--gcs-root", f.gcs_root});
    argv.insert(argv.end(), tail.begin(), tail.end());
    auto pid = Spawn(argv);
    if (!pid.ok()) {
      srun_error = std::string(pid.status().message());
      return false;
    }
    steps[*pid] = Step{std::move(tasks), "srun"};
    return true;
  };
  std::string master_task = "master-replica-0";
  const bool single = SingleTask(l.components, het);
  if (single) {
    // One replica, on this node: it runs here, in the batch step, as the
    // task of an srun step would (RunTask), without a step of its own:
    // creating one costs slurmctld and slurmd a round of RPCs and a
    // slurmstepd, about 100 ms per job. Slurm's signals (scancel, the time
    // limit) reach it as the batch step's; nothing else differs. A forked
    // child, not this program run again: starting it (its shared libraries)
    // costs about 18 ms of CPU.
    const std::string& task = l.components[0].tasks[0];
    Log().info("{} runs in the batch step (one replica: no srun step)", task);
    std::fflush(nullptr);
    const pid_t pid = ::fork();  // this process has one thread: RunTask may run in the child
    if (pid < 0) {
      return Conclude(f, false, absl::StrCat("could not start the ", l.components[0].role,
                                             " replica: fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      Flags one = f;
      one.task = task;
      ::_exit(RunTask(one, l));
    }
    steps[pid] = Step{{task}, "its launcher"};
  }
  for (size_t k = 0; !single && k < l.components.size(); ++k) {
    const Component& c = l.components[k];
    const std::string n = std::to_string(c.tasks.size());
    bool ok = srun(k, {"--nodes=" + n, "--ntasks=" + n}, {"--component", std::to_string(k)}, c.tasks);
    if (ok && !c.first_node_task.empty()) {
      ok = srun(k, {"--nodes=1", "--ntasks=1", "--nodelist=" + nodes[k][0]}, {"--task", c.first_node_task},
                {c.first_node_task});
    }
    if (!ok) {
      return Conclude(f, false, absl::StrCat("could not run srun for the ", c.role, " replicas: ", srun_error));
    }
  }

  // Once the job is decided, the other replicas are stopped the way a cancel
  // stops them (SIGTERM to every step's tasks, through `scancel --signal`:
  // mlengine-replica then stops its program, or its container through
  // podman) and waited for, before the outcome is written and the batch
  // script ends: Slurm would otherwise kill them after only KillWait, and
  // srun itself answers SIGTERM by killing its step, either of which can cut
  // a container's removal short.
  auto finish = [&](bool succeeded, const std::string& message) {
    if (!steps.empty()) {
      common::CommandOptions options;
      options.timeout = absl::Seconds(10);
      auto signalled = common::RunCommand({"scancel", "--signal=TERM", std::to_string(slurm_id)}, options);
      if (!signalled.ok() || signalled->exit_code != 0) {
        Log().warn("scancel --signal=TERM {} failed ({}); stopping the steps through srun", slurm_id,
                   signalled.ok() ? signalled->output : std::string(signalled.status().message()));
        for (const auto& [pid, step] : steps) ::kill(pid, SIGTERM);
      }
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(kStopReplicasSeconds);
    while (!steps.empty() && std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        steps.erase(pid);
      } else if (pid == 0) {
        ::usleep(20000);
      } else if (errno != EINTR) {
        break;
      }
    }
    if (!steps.empty()) Log().warn("{} srun step(s) still running after {} s; Slurm ends them", steps.size(),
                                   kStopReplicasSeconds);
    return Conclude(f, succeeded, message);
  };

  // Wait. The master decides; another replica failing first fails the job.
  while (!steps.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it = steps.find(pid);
    if (it == steps.end()) continue;
    Step step = std::move(it->second);
    steps.erase(it);
    for (const auto& task : step.tasks) {
      const auto exit = ReadReplicaExit(common::ReplicaExitPath(f.run_dir, task));
      const bool is_master = task == master_task;
      if (exit && exit->Succeeded()) {
        if (is_master) return finish(true, "");
        continue;
      }
      std::string message;
      if (!exit) {
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        message = absl::StrCat("The replica ", task, " on node ", host_of[task],
                               " was lost: it ended without recording an exit status (", step.what, " exited with ", code,
                               "; the node may have failed). See ", f.run_dir, "/slurm-", slurm_id, ".out.");
      } else {
        message = DescribeReplicaEnd(f.run_dir, task, exit);
      }
      return finish(false, message);
    }
  }
  return Conclude(f, false, "Every srun step ended without the master replica recording how it ended.");
}

}  // namespace
}  // namespace mle::executor::slurm

int main(int argc, char** argv) {
  using namespace mle::executor::slurm;
  Flags f;
  CLI::App app{"Runs one mlengine job inside its Slurm allocation (started by mlengined's batch script)."};
  app.add_option("--run-dir", f.run_dir, "the job's run directory (shared by every node)")->required();
  app.add_option("--python", f.python, "the interpreter of the job's prepared environment");
  app.add_option("--shim", f.shim, "path of mlengine-replica")->required();
  app.add_option("--gcs-root", f.gcs_root, "where bucket B is the directory GCS_ROOT/B");
  app.add_option("--python-path", f.python_path, "mlengine's python/ directory");
  app.add_flag("--tpu-simulated", f.tpu_simulated, "the TPU GRES is simulated: tell the replicas");
  app.add_option("--node-address", f.node_addresses, "NODE=ADDRESS for nodes not reachable by their name");
  app.add_option("--component", f.component, "(inside srun) run this component's task for SLURM_PROCID");
  app.add_option("--task", f.task, "(inside srun) run this task");
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  const bool batch = f.component < 0 && f.task.empty();
  auto loaded = Load(f);
  if (!loaded.ok()) {
    const std::string message = absl::StrCat("mlengine-slurm-launch cannot read the job: ", loaded.status().message());
    return batch ? Conclude(f, false, message) : Die(message);
  }
  if (!batch) return RunTask(f, *loaded);
  return RunBatch(f, *loaded);
}
