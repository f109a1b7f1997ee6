#include "runtime/replica_env.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "codec/job_codec.h"
#include "codec/vertex_codec.h"
#include "common/subprocess.h"

namespace mle::runtime {
namespace {

// The job's credential and where to use it: a trainer reaching the API is
// exactly as powerful as the account the job runs as.
void SetCredentialEnv(const LaunchContext& context, std::map<std::string, std::string>* e) {
  if (context.access_token.empty()) return;
  (*e)["MLENGINE_SERVICE_ACCOUNT"] = context.service_account;
  (*e)["MLENGINE_ACCESS_TOKEN"] = context.access_token;
  if (context.api_endpoint.empty()) return;
  (*e)["MLENGINE_API_ENDPOINT"] = context.api_endpoint;
  // Google's storage clients talk to an emulator at this URL, without an
  // Authorization header: the path carries the job's token instead.
  (*e)["STORAGE_EMULATOR_HOST"] = absl::StrCat(context.api_endpoint, "/_token/", context.access_token);
}

// The replica config of a role (nullptr when the job has none).
const model::ReplicaConfig* ConfigOf(const model::TrainingInput& t, const std::string& role) {
  const std::optional<model::ReplicaConfig>* c = role == "master"   ? &t.master_config
                                                 : role == "worker" ? &t.worker_config
                                                 : role == "ps"     ? &t.parameter_server_config
                                                                    : &t.evaluator_config;
  return c->has_value() ? &**c : nullptr;
}

// A custom container replica: its image (own, else the master's, pinned at
// submission), entrypoint (containerCommand) and arguments (containerArgs,
// then the job's args and --job-dir, as for a package).
void SetContainer(const model::Job& job, const std::string& role, ReplicaLaunch* l) {
  const model::TrainingInput& t = *job.training_input;
  const model::ReplicaConfig* own = ConfigOf(t, role);
  const model::ReplicaConfig* master = t.master_config ? &*t.master_config : nullptr;
  // A replica without an image of its own runs the master's, with its command.
  const model::ReplicaConfig* source = own != nullptr && !own->image_uri.empty() ? own : master;
  const model::ReplicaConfig* words =
      own != nullptr && (!own->container_command.empty() || !own->container_args.empty()) ? own : source;
  auto pinned = job.resolved_images.find(source->image_uri);
  l->image = pinned == job.resolved_images.end() ? source->image_uri : pinned->second;
  l->entrypoint = words->container_command;
  l->argv = words->container_args;
}

using nlohmann::json;

bool UsesChief(const model::TrainingInput& t) {
  const bool custom_container = model::UsesCustomContainer(t);
  if (custom_container) return t.use_chief_in_tf_config.value_or(false);
  return absl::StartsWith(t.runtime_version, "2.") || t.use_chief_in_tf_config.value_or(false);
}

std::string Address(const LaunchContext& c, const std::string& task) {
  auto h = c.hosts.find(task);
  auto p = c.ports.find(task);
  return absl::StrCat(h == c.hosts.end() ? "localhost" : h->second, ":", p == c.ports.end() ? 0 : p->second);
}

// TPU_CONFIG, TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, TPU_ACCELERATOR_TYPE.
void SetTpuEnv(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement,
               const LaunchContext& context, int worker_id, std::map<std::string, std::string>* env) {
  auto& e = *env;
  const std::string node =
      placement.tpu_hosts.size() == 1 ? placement.tpu_hosts[0] : absl::StrCat(job.job_id, "-tpu");
  e["TPU_CONFIG"] = json{{"project", job.project}, {"zone", context.zone}, {"tpu_node_name", node}}.dump();
  e["TPU_WORKER_ID"] = std::to_string(worker_id);
  e["TPU_WORKER_HOSTNAMES"] = absl::StrJoin(placement.tpu_hosts, ",");
  e["TPU_ACCELERATOR_TYPE"] = TpuAcceleratorName(demand);
  // What the TPU host was prepared for: the worker's tpuTfVersion (custom
  // containers, as the guide says), else the job's runtimeVersion.
  const model::TrainingInput none;
  const model::TrainingInput& t = job.training_input ? *job.training_input : none;
  const std::string tpu_version = t.worker_config && !t.worker_config->tpu_tf_version.empty()
                                      ? t.worker_config->tpu_tf_version
                                      : t.runtime_version;
  if (!tpu_version.empty()) e["MLENGINE_TPU_RUNTIME_VERSION"] = tpu_version;
  if (placement.tpu_simulated) {
    e["MLENGINE_SIMULATED_ACCELERATOR"] = absl::StrCat("tpu-", TpuAcceleratorName(demand), " (simulated)");
  }
}

}  // namespace

std::string TpuTaskName(int index) { return absl::StrCat("tpu-replica-", index); }

std::string TpuAcceleratorName(const model::JobDemand& demand) {
  std::string gen = demand.tpu_type == "TPU_V3" ? "v3" : "v2";
  return absl::StrCat(gen, "-", demand.tpu_cores);
}

std::vector<ReplicaLaunch> BuildReplicaLaunches(const model::Job& job, const model::JobDemand& demand,
                                                const model::Placement& placement, const LaunchContext& context) {
  const model::TrainingInput empty;
  const model::TrainingInput& t = job.training_input ? *job.training_input : empty;
  // A Vertex AI job (model/vertex.h) gets Vertex's contract: TF_CONFIG
  // calls the first pool "chief", CLUSTER_SPEC names the pools
  // workerpool0..3, AIP_MODEL_DIR and its siblings lie under the base
  // output directory, and no --job-dir is passed.
  const bool vertex = model::IsVertexJob(job);
  const std::string primary = vertex || UsesChief(t) ? "chief" : "master";
  const bool custom_container = model::UsesCustomContainer(t);
  const json job_json = vertex ? codec::EncodeVertexJobSpec(*job.vertex)
                               : codec::EncodeJob(job).value("trainingInput", json::object());
  // CLUSTER_SPEC's name of a role: ml v1's own, or Vertex's pool.
  auto spec_role = [vertex](const std::string& role) -> std::string {
    return vertex ? model::WorkerPoolName(model::WorkerPoolIndex(role)) : role;
  };

  // The cluster, as every replica sees it.
  json tf_cluster = json::object(), spec_cluster = json::object();
  int workers = 0;
  for (const auto& r : demand.replicas) {
    const std::string addr = Address(context, r.TaskName());
    if (r.role == "worker") ++workers;
    const std::string tf_role = r.role == "master" ? primary : r.role;
    if (r.role != "evaluator") tf_cluster[tf_role].push_back(addr);
    spec_cluster[spec_role(r.role)].push_back(addr);
  }
  const std::string master_task = "master-replica-0";
  auto master_host = context.hosts.find(master_task);

  std::vector<ReplicaLaunch> out;
  for (const auto& r : demand.replicas) {
    ReplicaLaunch l;
    l.task_name = r.TaskName();
    l.role = r.role;
    l.index = r.index;
    auto host = context.hosts.find(l.task_name);
    l.host = host == context.hosts.end() ? "localhost" : host->second;

    if (custom_container) {
      SetContainer(job, r.role, &l);
    } else {
      l.argv = {context.python, "-m", t.python_module};
    }
    l.argv.insert(l.argv.end(), t.args.begin(), t.args.end());
    if (!t.job_dir.empty() && !vertex) {
      l.argv.push_back("--job-dir");
      l.argv.push_back(t.job_dir);
    }

    json task = {{"type", r.role == "master" ? primary : r.role}, {"index", r.index}};
    if (!context.trial_id.empty()) task["trial"] = context.trial_id;
    json tf_config = {{"cluster", tf_cluster}, {"task", task}, {"job", job_json}, {"environment", "cloud"}};
    json spec_task = {{"type", spec_role(r.role)}, {"index", r.index}};
    if (!context.trial_id.empty()) spec_task["trial"] = context.trial_id;
    json cluster_spec = {{"cluster", spec_cluster}, {"task", spec_task}, {"job", job_json}, {"environment", "cloud"}};
    auto& e = l.env;
    e["TF_CONFIG"] = tf_config.dump();
    e["CLUSTER_SPEC"] = cluster_spec.dump();
    e["CLOUD_ML_JOB_ID"] = model::IsTrialJob(job) ? job.trial_of : job.job_id;
    if (!context.trial_id.empty()) e["CLOUD_ML_TRIAL_ID"] = context.trial_id;
    if (!context.hp_metric_file.empty()) e["CLOUD_ML_HP_METRIC_FILE"] = context.hp_metric_file;
    e["MLENGINE_TASK_NAME"] = l.task_name;
    e["MLENGINE_GCS_ROOT"] = context.gcs_root;
    // Which run of the job this is (2, 3, ... after a preemption or a
    // retry), and where a resumed attempt finds what an earlier one saved:
    // Vertex AI's AIP_CHECKPOINT_DIR, under the job's jobDir
    // (docs/interruptions.md).
    e["MLENGINE_ATTEMPT"] = std::to_string(context.attempt > 0 ? context.attempt : model::CurrentAttempt(job));
    if (!t.job_dir.empty()) {
      const std::string base(absl::StripSuffix(t.job_dir, "/"));
      e["AIP_CHECKPOINT_DIR"] = absl::StrCat(base, "/checkpoints/");
      if (vertex) {
        // A trial's under its own number, as Vertex's tuning does.
        const std::string dir = context.trial_id.empty() ? base : absl::StrCat(base, "/", context.trial_id);
        e["AIP_MODEL_DIR"] = absl::StrCat(dir, "/model/");
        e["AIP_CHECKPOINT_DIR"] = absl::StrCat(dir, "/checkpoints/");
        e["AIP_TENSORBOARD_LOG_DIR"] = absl::StrCat(dir, "/logs/");
      }
    }
    if (vertex) {
      // What the pool's spec sets for its replicas (containerSpec.env or
      // pythonPackageSpec.env), over mlengine's own.
      const size_t pool = model::WorkerPoolIndex(r.role);
      if (pool < job.vertex->pools.size()) {
        for (const auto& var : job.vertex->pools[pool].env) {
          // Refused at admission; never passed, whatever a stored spec says.
          if (common::IsLoaderVariable(var.name) || absl::StartsWith(var.name, "MLENGINE_")) continue;
          e[var.name] = var.value;
        }
      }
    }
    e["PYTHONUNBUFFERED"] = "1";
    // A container's image has its own Python packages (mlengine's among them).
    if (!context.python_path.empty() && !custom_container) e["PYTHONPATH"] = context.python_path;
    SetCredentialEnv(context, &e);

    // torch.distributed over the master and the workers.
    if (r.role == "master" || r.role == "worker") {
      e["MASTER_ADDR"] = master_host == context.hosts.end() ? "localhost" : master_host->second;
      e["MASTER_PORT"] = std::to_string(context.torch_port);
      e["WORLD_SIZE"] = std::to_string(1 + workers);
      e["RANK"] = std::to_string(r.role == "master" ? 0 : r.index + 1);
    }

    std::vector<std::string> gpus;
    if (auto p = placement.replicas.find(l.task_name); p != placement.replicas.end()) {
      for (int g : p->second.gpu_indices) gpus.push_back(std::to_string(g));
    }
    e["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(gpus, ",");

    if (demand.tpu_hosts > 0 && r.role == "master") {
      SetTpuEnv(job, demand, placement, context, 0, &e);
      if (!context.tpu_worker_argv.empty()) {
        std::vector<std::string> endpoints;
        for (size_t i = 0; i < placement.tpu_hosts.size(); ++i) {
          endpoints.push_back(Address(context, TpuTaskName(static_cast<int>(i))));
        }
        e["MLENGINE_TPU_WORKER_ENDPOINTS"] = absl::StrJoin(endpoints, ",");
      }
    }
    out.push_back(std::move(l));
  }
  // A process on each TPU host (Slurm executor): the TPU worker.
  if (!context.tpu_worker_argv.empty()) {
    for (size_t i = 0; i < placement.tpu_hosts.size(); ++i) {
      ReplicaLaunch l;
      l.task_name = TpuTaskName(static_cast<int>(i));
      l.role = "tpu";
      l.index = static_cast<int>(i);
      auto host = context.hosts.find(l.task_name);
      l.host = host == context.hosts.end() ? placement.tpu_hosts[i] : host->second;
      l.argv = context.tpu_worker_argv;
      auto& e = l.env;
      e["CLOUD_ML_JOB_ID"] = model::IsTrialJob(job) ? job.trial_of : job.job_id;
      e["MLENGINE_TASK_NAME"] = l.task_name;
      e["MLENGINE_GCS_ROOT"] = context.gcs_root;
      e["PYTHONUNBUFFERED"] = "1";
      if (!context.python_path.empty()) e["PYTHONPATH"] = context.python_path;
      auto port = context.ports.find(l.task_name);
      e["MLENGINE_TPU_PORT"] = std::to_string(port == context.ports.end() ? 0 : port->second);
      SetTpuEnv(job, demand, placement, context, static_cast<int>(i), &e);
      out.push_back(std::move(l));
    }
  }
  return out;
}

}  // namespace mle::runtime
