#include "server/server.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/api_router.h"
#include "api/console_endpoint.h"
#include "api/dispatch.h"
#include "api/http_server.h"
#include "api/metrics_endpoint.h"
#include "api/storage_router.h"
#include "buckets/bucket_store.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/sha256.h"
#include "db/store.h"
#include "executor/local_executor.h"
#include "executor/sandboxing.h"
#include "executor/slurm/slurm_executor.h"
#include "iam/iam_service.h"
#include "obs/log.h"
#include "sandbox/cgroup_pool.h"
#include "sandbox/cgroups.h"
#include "sandbox/host.h"
#include "absl/strings/str_join.h"
#include "rundir/file_io.h"
#include "runtime/package_cache.h"
#include "scheduler/scheduler.h"
#include "server/server_config.h"
#include "containers/podman.h"
#include "containers/resolver.h"
#include "service/job_credentials.h"
#include "service/cluster_view.h"
#include "service/job_runs.h"
#include "service/job_service.h"
#include "common/subprocess.h"
#include "service/job_studies.h"
#include "service/tuning_coordinator.h"
#include "service/quota_service.h"
#include "service/log_service.h"
#include "service/study_service.h"
#include "obs/metrics.h"
#include "service/disk_watch.h"
#include "service/retention.h"
#include "service/webhook_service.h"
#include "validate/validate.h"

namespace mle::server {

namespace fs = std::filesystem;

namespace {

// Reads DIR/admin.token, creating it (mode 0600) with a fresh random token on
// first start.
absl::StatusOr<std::string> LoadOrCreateAdminToken(const fs::path& dir) {
  const fs::path path = dir / "admin.token";
  auto existing = rundir::ReadFile(path.string());
  if (existing.ok()) {
    std::string token = existing->substr(0, existing->find('\n'));
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (!token.empty()) return token;
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  // Missing or empty (a crash during the first start): write a fresh one,
  // atomically, so a half-written token can never be read.
  const std::optional<std::string> random = common::RandomHex(32);
  if (!random) return absl::InternalError("cannot generate a random token");
  const std::string token = *random;
  if (auto s = rundir::WriteFileAtomically(path.string(), token + "\n", 0600); !s.ok()) return s;
  return token;
}

// The user this process runs as (as Slurm knows it); its uid when it has no name.
std::string CurrentUserName() {
  const uid_t uid = ::geteuid();
  if (const struct passwd* pw = ::getpwuid(uid); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return std::to_string(uid);
}

// The directory of this executable (the build tree's build/src/server, or an
// installed bin/).
fs::path ExecutableDirectory(const std::string& argv0) {
  std::error_code ec;
  fs::path self = fs::canonical("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv0);
  return self.parent_path();
}

// The configuration file's quotas and fair-share weights, as QuotaService keeps them.
service::QuotaSettings FileQuotaSettings(const ServerConfig& config) {
  service::QuotaSettings settings{config.quotas.spec(), {}};
  for (const auto& [project, weight] : config.shares.weights()) settings.shares[project] = weight;
  return settings;
}

service::RetentionBudgets RetentionBudgetsOf(const ServerConfig::Retention& r) {
  auto of = [](const ServerConfig::RetentionBudget& b) {
    service::RetentionBudget out;
    if (b.max_age_days) out.max_age = absl::Seconds(*b.max_age_days * 86400);
    if (b.max_size_mb) out.max_bytes = *b.max_size_mb << 20;
    return out;
  };
  return {of(r.run_files), of(r.logs), of(r.packages), of(r.images)};
}

// Where mlengine's helper files are, relative to this executable: the build
// tree (build/src/server/mlengined) or an installed layout.
fs::path FindBeside(const std::string& argv0, const std::vector<std::string>& candidates) {
  const fs::path dir = ExecutableDirectory(argv0);
  for (const auto& c : candidates) {
    fs::path p = (dir / c).lexically_normal();
    if (fs::exists(p)) return p;
  }
  return {};
}

// The web console's directory: the configured one (relative to the working
// directory), else `console` beside this executable (where the front end's
// build puts it: build/src/server/console); "" when disabled.
std::string ConsoleDirectory(const std::optional<std::string>& configured, const std::string& argv0) {
  if (configured) return configured->empty() ? "" : fs::absolute(*configured).lexically_normal().string();
  const fs::path beside = ExecutableDirectory(argv0) / "console";
  // Installed (mlengine's Debian package): /usr/sbin/mlengined, /usr/share/mlengine/console.
  const fs::path installed = (ExecutableDirectory(argv0) / "../share/mlengine/console").lexically_normal();
  std::error_code ec;
  return (!fs::exists(beside, ec) && fs::exists(installed, ec) ? installed : beside).string();
}

}  // namespace

// Declared in dependency order: each part may use those above it. Stop()
// ends the threads top-down; the destructor frees bottom-up.
struct Server::Parts {
  ServerOptions options;
  int lock_fd = -1;
  std::string endpoint;
  ServerConfig config;
  std::unique_ptr<api::HttpServer> http;  // bound first, serving last
  std::unique_ptr<db::Store> store;
  std::unique_ptr<runtime::PackageCache> packages;
  std::unique_ptr<containers::Podman> podman;            // null: no container jobs
  std::unique_ptr<containers::ImageResolver> images;
  // The sandbox (null when the operator turned it off): before the
  // executors and the warm interpreters that use it.
  std::unique_ptr<sandbox::Cgroups> cgroups;
  std::unique_ptr<sandbox::CgroupPool> cgroup_pool;
  std::unique_ptr<sandbox::IdentityPool> identities;
  std::unique_ptr<service::JobBucketAccess> bucket_access;
  std::unique_ptr<executor::SandboxRuntime> sandbox_runtime;
  std::unique_ptr<executor::Sandboxing> sandboxing;
  std::vector<std::string> sandbox_read_only;  // what every view holds beside the system
  std::unique_ptr<executor::WarmInterpreters> warm;  // before the executor that uses it
  std::unique_ptr<executor::LocalExecutor> local_executor;
  std::unique_ptr<executor::slurm::SubprocessCommandRunner> slurm_runner;
  std::unique_ptr<executor::slurm::SlurmExecutor> slurm_executor;
  std::unique_ptr<service::JobService> jobs;
  std::unique_ptr<service::JobCredentials> credentials;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<service::TuningCoordinator> tuning;
  std::unique_ptr<iam::IamService> iam;
  std::unique_ptr<service::LogService> logs;
  std::unique_ptr<service::QuotaService> quotas;
  std::unique_ptr<service::StudyService> studies;
  std::unique_ptr<service::TuningJobStudies> job_studies;
  std::unique_ptr<service::JobRuns> job_runs;
  std::unique_ptr<service::ClusterService> cluster;
  std::unique_ptr<service::BackupService> backups;
  // Told of job changes by the store's callbacks: kept until the store is gone.
  std::unique_ptr<service::WebhookService> webhooks;
  std::unique_ptr<service::DiskWatch> disk;  // asks `jobs` to write what the store refused
  std::unique_ptr<service::RetentionService> retention;
  model::ResourceTable accounting_resources;  // the cluster's machine shapes, for usage
  std::unique_ptr<api::ApiRouter> router;
  std::unique_ptr<api::MetricsEndpoint> metrics;
  std::unique_ptr<api::ConsoleEndpoint> console;
  std::unique_ptr<buckets::BucketStore> bucket_store;
  std::unique_ptr<api::StorageRouter> storage;
  bool stopped = false;

  ~Parts() {
    Stop();
    // Free in reverse dependency order: the HTTP server's sessions first
    // (they hold the routers), the store last (it drains its writer).
    http.reset();
    storage.reset();
    console.reset();
    metrics.reset();
    router.reset();
    backups.reset();  // waits for a backup under way: before the store and the buckets
    studies.reset();
    cluster.reset();
    job_runs.reset();
    logs.reset();
    quotas.reset();
    scheduler.reset();
    jobs.reset();
    iam.reset();
    slurm_executor.reset();
    local_executor.reset();
    warm.reset();  // the warm interpreters take no new replicas; the ones they run go on
    images.reset();
    podman.reset();
    credentials.reset();
    sandboxing.reset();
    sandbox_runtime.reset();
    bucket_access.reset();
    identities.reset();
    if (cgroup_pool) cgroup_pool->RemoveSpares();
    cgroup_pool.reset();
    cgroups.reset();
    store.reset();  // drains the writer: every acknowledged write is on disk
    webhooks.reset();
    if (lock_fd >= 0) ::close(lock_fd);
  }

  void Stop() {
    if (stopped) return;
    stopped = true;
    if (http) http->Stop();
    if (disk) disk->Stop();
    if (retention) retention->Stop();
    if (jobs) jobs->StopAdmission();  // before the scheduler it hands jobs to
    if (storage) storage->Stop();  // finish queued storage work while the io_context still exists
    if (tuning) tuning->Stop();
    if (scheduler) scheduler->Stop();
    if (webhooks) webhooks->Stop();  // what is not delivered stays stored
    // Executor threads may still report into the (stopped) scheduler: end
    // them while it exists. Jobs keep running; a restart finds them again.
    slurm_executor.reset();
    local_executor.reset();
    warm.reset();  // the warm interpreters take no new replicas; the ones they run go on
  }

  absl::Status Build();
  absl::Status Reload();
  // The sandbox's parts, once the host has shown it can sandbox a replica;
  // FAILED_PRECONDITION saying what is missing otherwise.
  absl::Status BuildSandbox(const fs::path& data_dir, const fs::path& python_dir);
};

absl::Status Server::Parts::BuildSandbox(const fs::path& data_dir, const fs::path& python_dir) {
  auto detected = sandbox::Cgroups::DetectHost();
  std::vector<std::string> problems;
  if (detected.ok()) {
    cgroups = std::make_unique<sandbox::Cgroups>(*std::move(detected));
    // v2, where mlengined's own cgroup cannot hand controllers down (a
    // shell's session holds it): a cgroup of its own at the root, one per
    // data directory, so a restart finds its jobs' groups again.
    const std::string fallback =
        "mlengined-" + common::Sha256Hex(fs::weakly_canonical(data_dir).string()).substr(0, 12);
    if (auto s = cgroups->Prepare(fallback); !s.ok()) problems.push_back(std::string(s.message()));
  } else {
    problems.push_back(std::string(detected.status().message()));
  }
  // The build tree's places, then beside mlengined, then the package's
  // (/usr/sbin/mlengined, /usr/lib/mlengine/...).
  const fs::path lib = FindBeside(options.executable, {"../sandbox/libmlengine-sandbox.so", "libmlengine-sandbox.so",
                                                       "../lib/mlengine/libmlengine-sandbox.so"});
  if (lib.empty()) problems.push_back("cannot find libmlengine-sandbox.so next to mlengined");
  const fs::path tool = FindBeside(options.executable, {"../sandbox/mlengine-sandbox", "mlengine-sandbox",
                                                        "../lib/mlengine/mlengine-sandbox"});
  if (tool.empty()) problems.push_back("cannot find mlengine-sandbox next to mlengined");
  sandbox_read_only = {python_dir.string(), lib.parent_path().string()};
  for (const auto& rt : config.runtimes.runtimes()) {
    // A runtime outside /usr (a conda or a venv of its own) is seen whole.
    sandbox_read_only.push_back(fs::path(rt.python).parent_path().parent_path().string());
  }
  sandbox::HostLayout layout = sandbox::DetectHostLayout(sandbox_read_only);
  if (auto s = sandbox::CheckHost(config.sandbox, layout, data_dir.string(), (data_dir / "sandbox-check").string());
      !s.ok()) {
    problems.push_back(std::string(s.message()));
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(absl::StrJoin(problems, "\n"));
  }
  identities = std::make_unique<sandbox::IdentityPool>(config.sandbox.first_uid, config.sandbox.uid_count,
                                                       "/run/mlengine/uids.lock");
  if (!identities->status().ok()) return identities->status();
  bucket_access = std::make_unique<service::JobBucketAccess>(*iam, *jobs);
  sandbox_runtime = std::make_unique<executor::SandboxRuntime>();
  sandbox_runtime->settings = config.sandbox;
  sandbox_runtime->layout = std::move(layout);
  sandbox_runtime->cgroups = cgroups.get();
  cgroup_pool = std::make_unique<sandbox::CgroupPool>(*cgroups);
  if (const size_t left = cgroup_pool->RemoveSpares(); left > 0) {
    obs::Log("server").info("sandbox: removed {} spare replica cgroups an earlier mlengined left", left);
  }
  sandbox_runtime->replica_groups = cgroup_pool.get();
  sandbox_runtime->identities = identities.get();
  sandbox_runtime->buckets = bucket_access.get();
  sandbox_runtime->sandbox_lib = lib.string();
  sandbox_runtime->sandbox_tool = tool.string();
  sandboxing = std::make_unique<executor::Sandboxing>(*sandbox_runtime);
  packages->SetBuildRunner(sandboxing->BuildRunner());
  std::string dynmods = "left as the host has it (sandbox.favordynmods: false)";
  if (config.sandbox.favordynmods) {
    // Best effort: without it every replica start waits ~10 ms longer.
    absl::StatusOr<bool> turned = sandbox::TurnOnFavorDynmods((data_dir / "cgroup2-favordynmods").string());
    dynmods = !turned.ok() ? std::string(turned.status().message())
              : *turned    ? "favordynmods turned on (sandbox.favordynmods)"
                           : "favordynmods on";
  }
  obs::Log("server").info("sandbox: on; jobs run as uids {}-{}, limited through cgroup {}{}; {}",
                          config.sandbox.first_uid, config.sandbox.first_uid + config.sandbox.uid_count - 1,
                          cgroups->version() == sandbox::CgroupVersion::kV1 ? "v1" : "v2",
                          cgroups->relocation().empty() ? "" : " " + cgroups->relocation(), dynmods);
  return absl::OkStatus();
}

absl::Status Server::Parts::Build() {
  const fs::path data_dir = fs::absolute(options.data_dir);
  if (auto s = rundir::CreateDirectories(data_dir.string()); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create data directory ", data_dir.string(), ": ", s.message()));
  }
  ::chmod(data_dir.c_str(), 0700);

  // One server per data directory.
  const fs::path lock_path = data_dir / "lock";
  lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("another mlengined is already using ", data_dir.string(), " (",
                                                      lock_path.string(), " is locked)"));
  }
  auto loaded = LoadServerConfig(options.config_path);
  if (!loaded.ok()) return loaded.status();
  config = *std::move(loaded);
  auto token = LoadOrCreateAdminToken(data_dir);
  if (!token.ok()) return token.status();

  // Claim the port before anything touches a job.
  api::HttpServerOptions http_options;
  http_options.address = options.listen_host;
  http_options.port = options.listen_port;
  http_options.threads = options.threads;
  http_options.body_limit = options.body_limit;
  http_options.error_body = &api::ApiRouter::ErrorBody;
  const fs::path buckets = data_dir / "buckets";
  auto opened_buckets = buckets::BucketStore::Open(buckets.string());
  if (!opened_buckets.ok()) return opened_buckets.status();
  bucket_store = *std::move(opened_buckets);
  // The storage router needs IamService, which needs the store, opened
  // only once the port is ours: the check finds the router when uploads come.
  http_options.upload_dir = bucket_store->upload_dir();
  http_options.upload_check = [this](const api::HttpRequest& head,
                                     std::function<void(std::optional<api::HttpResponse>)> done) {
    storage->CheckUpload(head, std::move(done));
  };
  auto bound = api::HttpServer::Bind(http_options);
  if (!bound.ok()) return bound.status();
  http = *std::move(bound);

  auto opened = db::OpenSqliteStore({(data_dir / "mlengine.db").string(), !options.relaxed_sync});
  if (!opened.ok()) return opened.status();
  store = *std::move(opened);
  auto& clock = common::RealClock::Get();
  iam = std::make_unique<iam::IamService>(*store, clock, *token);
  if (auto s = iam->Recover(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot recover identities: ", s.message()));
  }
  storage = std::make_unique<api::StorageRouter>(*bucket_store, *iam);

  const fs::path shim = FindBeside(options.executable, {"../shim/mlengine-replica", "mlengine-replica",
                                                        "../lib/mlengine/mlengine-replica"});
  if (shim.empty()) return absl::FailedPreconditionError("cannot find mlengine-replica next to mlengined");
  const fs::path python_dir = FindBeside(options.executable, {"../../../python", "../share/mlengine/python"});
  const fs::path runs = data_dir / "runs";
  if (auto s = rundir::CreateDirectories(runs.string()); !s.ok()) return s;
  // Projects' and jobs' run directories spread over the disk (and those
  // of a data directory from before this was done).
  if (auto s = rundir::MarkTopDirectory(runs.string()); !s.ok()) return s;
  {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(runs, ec)) {
      std::error_code dir_ec;
      if (!entry.is_directory(dir_ec) || entry.is_symlink(dir_ec)) continue;
      if (auto s = rundir::MarkTopDirectory(entry.path().string()); !s.ok()) return s;
    }
  }

  validate::Config validation = validate::Config::Defaults();
  // The regions this cluster serves (`regions:`), TPU jobs in those of them
  // AI Platform had TPUs in.
  validation.served_regions = config.regions;
  for (const auto& r : config.runtimes.runtimes()) {
    validation.runtime_versions.push_back({r.name, {r.python_version}, r.tpu_capable});
    validation.installed_runtimes.push_back(r.name);
    for (const auto& image : r.executor_images) validation.executor_images.emplace_back(image, r.name);
  }
  packages = std::make_unique<runtime::PackageCache>((data_dir / "envs").string());
  if (!python_dir.empty()) packages->SetHelpers(python_dir.string());
  packages->RemoveLeftovers();
  if (config.containers.enabled) {
    // podman runs with mlengine's own configuration (runc, no default
    // ulimits), written where every podman it starts finds it.
    const std::string conf = (data_dir / "containers.conf").string();
    if (auto s = rundir::WriteFileAtomically(conf, containers::ContainersConf(config.containers)); !s.ok()) return s;
    podman = std::make_unique<containers::Podman>(config.containers, conf);
    images = std::make_unique<containers::ImageResolver>(containers::ImageTable(config.containers), podman.get());
  }
  scheduler::SchedulerOptions sched_options;
  sched_options.inventory = DetectLocalInventory(config);
  sched_options.resources.fallback = {config.replica_cpu_milli,
                                      config.sandbox.enabled ? config.replica_memory_mib : 0};
  sched_options.quotas = config.quotas;
  sched_options.shares = config.shares;
  sched_options.preemption = config.preemption;
  sched_options.retries = config.retries;

  const std::string& host = options.listen_host;
  endpoint = absl::StrCat("http://", host.find(':') != std::string::npos ? "[" + host + "]" : host, ":", http->port());
  jobs = std::make_unique<service::JobService>(*store, clock, validation);
  service::WebhookOptions webhook_options;
  webhook_options.enabled = config.webhooks.enabled;
  webhook_options.allow_loopback = config.webhooks.allow_loopback;
  webhook_options.max_per_project = config.webhooks.max_per_project;
  webhooks = std::make_unique<service::WebhookService>(*store, clock, webhook_options);
  if (auto s = webhooks->Recover(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot recover webhooks: ", s.message()));
  }
  jobs->Subscribe(webhooks.get());
  jobs->AttachImages(images.get());
  credentials = std::make_unique<service::JobCredentials>(*iam, *jobs);
  if (config.sandbox.enabled && options.executor != "none") {
    if (auto s = BuildSandbox(data_dir, python_dir); !s.ok()) return s;
  } else if (options.executor != "none") {
    obs::Log("server").warn(
        "the sandbox is OFF (sandbox: {{enabled: false}}): every job runs as {} with the whole file system, "
        "including the data directory and its tokens, every bucket and all of this machine",
        CurrentUserName());
  }

  executor::Executor* executor = nullptr;
  if (options.executor == "local") {
    executor::LocalExecutorOptions o;
    o.runs_dir = runs.string();
    o.shim = shim.string();
    o.gcs_root = buckets.string();
    o.buckets = bucket_store.get();
    o.python_path = python_dir.string();
    o.cancel_grace = absl::Seconds(config.cancel_grace_seconds);
    o.stall_after = absl::Seconds(config.stall_after_seconds);
    o.stall_fails = config.stall_fails;
    o.join_timeout = absl::Seconds(config.join_timeout_seconds);
    o.credentials = credentials.get();
    o.api_endpoint = endpoint;
    o.podman = podman.get();
    o.sandbox = sandboxing.get();
    // Warm starts: a warm interpreter for each runtime that asks for one.
    std::map<std::string, executor::WarmRuntimeSpec> warm_runtimes;
    for (const auto& rt : config.runtimes.runtimes()) {
      if (rt.warm_start) warm_runtimes[rt.name] = {rt.python, rt.warm_preload};
    }
    if (!warm_runtimes.empty()) {
      auto env = common::CurrentEnvironment();
      std::erase_if(env, [](const auto& kv) { return absl::StartsWith(kv.first, "MLENGINE_"); });
      env["PYTHONPATH"] = python_dir.string();
      env.insert_or_assign("PYTHONUNBUFFERED", std::string("1"));
      warm = std::make_unique<executor::WarmInterpreters>((data_dir / "warm").string(), std::move(env),
                                                         std::move(warm_runtimes),
                                                         sandbox_runtime ? sandbox_runtime->sandbox_lib : "");
      warm->Start();
      o.warm = warm.get();
    }
    local_executor = std::make_unique<executor::LocalExecutor>(o, config.runtimes, *packages);
    executor = local_executor.get();
  } else if (options.executor == "slurm") {
    const fs::path launcher =
        FindBeside(options.executable, {"../executor/slurm/mlengine-slurm-launch", "mlengine-slurm-launch",
                                        "../lib/mlengine/mlengine-slurm-launch"});
    if (launcher.empty()) return absl::FailedPreconditionError("cannot find mlengine-slurm-launch next to mlengined");
    std::map<std::string, std::string> slurm_env;
    if (!config.slurm.conf.empty()) slurm_env["SLURM_CONF"] = config.slurm.conf;
    slurm_runner = std::make_unique<executor::slurm::SubprocessCommandRunner>(slurm_env, absl::Seconds(60));
    executor::slurm::SlurmExecutorOptions so;
    so.runs_dir = runs.string();
    so.launcher = launcher.string();
    so.shim = shim.string();
    so.gcs_root = buckets.string();
    so.buckets = bucket_store.get();
    so.python_path = python_dir.string();
    so.user = CurrentUserName();
    so.credentials = credentials.get();
    so.api_endpoint = endpoint;
    so.podman = podman.get();
    so.sandbox = sandboxing.get();
    if (sandbox_runtime) so.sandbox_read_only = sandbox_read_only;
    so.settings = config.slurm.settings;
    so.resources = config.slurm.machines;
    so.max_poll = absl::Seconds(std::max(1, config.slurm.max_poll_seconds));
    so.stall_after = absl::Seconds(config.slurm.stall_after_seconds);
    so.stall_fails = config.slurm.stall_fails;
    so.join_timeout = absl::Seconds(config.slurm.join_timeout_seconds);
    so.submit_concurrency = config.slurm.submit_concurrency;
    auto created = executor::slurm::SlurmExecutor::Create(so, config.runtimes, *packages, *slurm_runner, clock);
    if (!created.ok()) return created.status();
    slurm_executor = *std::move(created);
    executor = slurm_executor.get();
    sched_options.resources = config.slurm.machines;
  }

  scheduler = std::make_unique<scheduler::Scheduler>(clock, *jobs, executor, sched_options);
  if (local_executor) local_executor->SetEvents(scheduler.get());
  if (slurm_executor) slurm_executor->SetEvents(scheduler.get());
  jobs->AttachScheduler(scheduler.get());
  accounting_resources = sched_options.resources;
  jobs->SetAccounting(accounting_resources, config.usage_rates);  // before any job is recorded
  tuning = std::make_unique<service::TuningCoordinator>(*jobs, service::TuningOptions{runs.string()});
  jobs->AttachTuning(tuning.get());
  jobs->AttachIam(iam.get());
  iam->AttachProjects(jobs.get());
  quotas = std::make_unique<service::QuotaService>(*store, *scheduler, FileQuotaSettings(config), slurm_executor.get());
  // Before recovery: adopted and queued jobs meet the quotas in force.
  if (auto s = quotas->Recover(); !s.ok()) return absl::Status(s.code(), absl::StrCat("cannot recover quotas: ", s.message()));
  if (slurm_executor) {
    obs::Log("server").info("Slurm cluster: {}", executor::slurm::DescribeNodes(slurm_executor->nodes()));
  } else {
    obs::Log("server").info("inventory: {}", scheduler::DescribeInventory(sched_options.inventory));
  }
  if (auto s = jobs->Recover(); !s.ok()) return absl::Status(s.code(), absl::StrCat("cannot recover state: ", s.message()));
  scheduler->Start();
  scheduler->Drain();  // every unfinished job adopted or queued again before the first request
  tuning->Start();
  tuning->Drain();  // every unfinished tuning job taken back

  logs = std::make_unique<service::LogService>(*jobs, logs::LogReader(runs.string()));
  studies = std::make_unique<service::StudyService>(*store, clock, validation.regions, validation.tpu_regions);
  job_studies = std::make_unique<service::TuningJobStudies>(*jobs);
  studies->AttachJobStudies(job_studies.get());  // tuning jobs are studies too
  jobs->AttachStudies(studies.get());
  if (auto s = studies->Recover(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot recover studies: ", s.message()));
  }
  job_runs = std::make_unique<service::JobRuns>(*jobs, runs.string());
  service::ClusterOptions cluster_options;
  cluster_options.executor = options.executor;
  cluster_options.runs_dir = runs.string();
  cluster_options.attempt_of = [jobs = jobs.get()](const scheduler::JobKey& key) { return jobs->AttemptOf(key); };
  if (slurm_executor) {
    for (const auto& node : slurm_executor->nodes()) {
      cluster_options.hosts.push_back({executor::slurm::HostOfNode(node, config.slurm.settings), node.state});
    }
  }
  cluster = std::make_unique<service::ClusterService>(*scheduler, std::move(cluster_options));
  router = std::make_unique<api::ApiRouter>(*jobs, *logs, *iam, *quotas, *studies, *job_runs, *cluster);
  backups = std::make_unique<service::BackupService>(*store, *bucket_store, data_dir.string());
  router->ServeBackups(backups.get());
  router->ServeWebhooks(webhooks.get());
  disk = std::make_unique<service::DiskWatch>(
      data_dir.string(), static_cast<uint64_t>(config.disk.reserve_mb) << 20, absl::Seconds(config.disk.check_seconds),
      [jobs = jobs.get()](const service::DiskState& d) {
        obs::Metrics::Default().SetDataDisk(static_cast<double>(d.size_bytes), static_cast<double>(d.free_bytes),
                                            d.full);
        jobs->SaveUnsaved();
      });
  disk->Start();
  service::RetentionOptions retention_options;
  retention_options.runs = runs.string();
  retention_options.interval = absl::Seconds(config.retention.check_seconds);
  retention_options.budgets = RetentionBudgetsOf(config.retention);
  retention_options.packages = packages.get();
  // Images in this node's store: the local executor's (Slurm's nodes each
  // keep their own).
  if (options.executor != "slurm") retention_options.podman = podman.get();
  retention = std::make_unique<service::RetentionService>(*jobs, clock, std::move(retention_options));
  retention->Start();
  jobs->AttachDisk(disk.get());
  router->AttachDisk(disk.get());
  storage->AttachDisk(disk.get());
  webhooks->Start();
  std::function<bool(uint32_t)> is_job_uid;
  if (identities) is_job_uid = [pool = identities.get()](uint32_t uid) { return pool->Contains(uid); };
  metrics = std::make_unique<api::MetricsEndpoint>(*jobs, *iam, options.metrics_access, std::move(is_job_uid));
  console = std::make_unique<api::ConsoleEndpoint>(ConsoleDirectory(config.console_dir, options.executable));
  obs::Log("server").info("{}", console->Describe());
  http->Serve(api::Dispatch(*router, *storage, *metrics, *console));

  // Where clients (the mlengine CLI) find this server.
  const std::string server_json = absl::StrCat("{\"endpoint\": \"", endpoint, "\", \"token_file\": \"",
                                               (data_dir / "admin.token").string(), "\", \"pid\": ", ::getpid(), "}\n");
  if (auto s = rundir::WriteFileAtomically((data_dir / "server.json").string(), server_json); !s.ok()) return s;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto parts = std::make_unique<Parts>();
  parts->options = options;
  if (auto s = parts->Build(); !s.ok()) return s;  // ~Parts stops what started
  return std::unique_ptr<Server>(new Server(std::move(parts)));
}

Server::Server(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
Server::~Server() = default;
const std::string& Server::endpoint() const { return parts_->endpoint; }
void Server::Stop() { parts_->Stop(); }
absl::Status Server::Reload() { return parts_->Reload(); }

absl::Status Server::Parts::Reload() {
  if (options.config_path.empty()) {
    return absl::FailedPreconditionError("mlengined was started without --config: there is no file to read again");
  }
  auto loaded = LoadServerConfig(options.config_path);
  if (!loaded.ok()) return loaded.status();
  const ServerConfig& next = *loaded;
  if (auto s = quotas->ReloadFile(FileQuotaSettings(next)); !s.ok()) return s;
  jobs->SetAccounting(accounting_resources, next.usage_rates);
  retention->SetBudgets(RetentionBudgetsOf(next.retention));
  disk->SetReserve(static_cast<uint64_t>(next.disk.reserve_mb) << 20);
  return absl::OkStatus();
}

}  // namespace mle::server
