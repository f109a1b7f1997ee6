// mlengined: the mlengine API server. Wiring only: read flags, open the data
// directory, recover state, start the scheduler and the HTTP API, wait for a
// signal, shut down in order. No application logic lives here.

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/strings/string_view.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/api_router.h"
#include "api/auth.h"
#include "api/dispatch.h"
#include "api/metrics_endpoint.h"
#include "api/storage_router.h"
#include "buckets/bucket_store.h"
#include "api/http_server.h"
#include "common/clock.h"
#include "db/store.h"
#include "executor/local_executor.h"
#include "executor/slurm/slurm_executor.h"
#include "obs/log.h"
#include "runtime/package_cache.h"
#include "scheduler/scheduler.h"
#include "server/server_config.h"
#include "service/job_service.h"
#include "service/log_service.h"
#include "validate/validate.h"

namespace fs = std::filesystem;

namespace {

int Fail(const std::string& message) {
  mle::obs::Log("server").error("{}", message);
  return 1;
}

// Reads DIR/admin.token, creating it (mode 0600) with a fresh random token on
// first start.
absl::StatusOr<std::string> LoadOrCreateAdminToken(const fs::path& dir) {
  const fs::path path = dir / "admin.token";
  std::ifstream in(path);
  if (in) {
    std::string token;
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (!token.empty()) return token;
  }
  // Missing or empty (a crash during the first start): write a fresh one,
  // atomically, so a half-written token can never be read.
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return absl::InternalError("cannot generate a random token");
  std::string token = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  const fs::path tmp = dir / "admin.token.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", tmp.string(), ": ", strerror(errno)));
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path.string()));
  }
  return token;
}

// Where mlengine's helper files are, relative to this executable: the build
// tree (build/src/server/mlengined) or an installed layout.
fs::path FindBeside(const char* argv0, const std::vector<std::string>& candidates) {
  std::error_code ec;
  fs::path self = fs::canonical("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv0);
  for (const auto& c : candidates) {
    fs::path p = (self.parent_path() / c).lexically_normal();
    if (fs::exists(p)) return p;
  }
  return {};
}

bool SplitListen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  uint32_t p = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &p) || p > 65535) return false;
  *port = static_cast<uint16_t>(p);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mlengined: a self-hosted AI Platform Training (ml v1) API server.\n"
      "Keeps all state under --data-dir; on first start it writes an admin token to\n"
      "DATA_DIR/admin.token (mode 0600). Every request needs\n"
      "\"Authorization: Bearer <that token>\"."};
  std::string listen = "127.0.0.1:8080";
  std::string data_dir;
  std::string config_path;
  std::string executor_kind = "local";
  int threads = 2;
  bool relaxed_sync = false;
  uint64_t body_limit = 1 << 20;
  app.add_option("--listen", listen, "Address and port to serve on; port 0 picks a free one and prints it")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir, "Directory for all state (database, token, buckets, logs)")->required();
  app.add_option("--config", config_path,
                 "Configuration file (YAML): runtimes, TPU hosts, GPU types; see config/mlengined.yaml. "
                 "Without it: one runtime (pytorch-1.13-cpu = /usr/bin/python3) and no TPU hosts");
  app.add_option("--executor", executor_kind,
                 "Where jobs run: \"local\" (child processes on this machine), \"slurm\" (a Slurm "
                 "cluster: the config's slurm: section, sbatch/squeue/scancel/sinfo on PATH, DATA_DIR on "
                 "storage every node mounts at the same path; see docs/operations.md) or \"none\" (jobs are "
                 "accepted and queued but never started: a control plane only, for API tests and benchmarks)")
      ->check(CLI::IsMember({"local", "slurm", "none"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "HTTP worker threads")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", body_limit, "Largest request body accepted (larger: 413)")->capture_default_str();
  app.add_flag("--relaxed-sync", relaxed_sync,
               "Commit without fsync (SQLite synchronous=NORMAL): survives a crash of mlengined, "
               "not of the machine");
  std::string log_level = "info";
  std::string log_format = "text";
  std::string metrics_access = "loopback";
  app.add_option("--log-level", log_level, "Least severe log lines written: trace, debug, info, warn, error or off")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "Log lines on stderr as \"text\" or \"json\" (one object a line)")
      ->capture_default_str();
  app.add_option("--metrics-access", metrics_access,
                 "Who may read /metrics: \"loopback\" (no token from this machine, the admin token from "
                 "elsewhere), \"token\" (always the admin token) or \"open\" (anyone who reaches the port)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  {
    auto level = mle::obs::ParseLogLevel(log_level);
    if (!level.ok()) return Fail("--log-level: " + std::string(level.status().message()));
    auto format = mle::obs::ParseLogFormat(log_format);
    if (!format.ok()) return Fail("--log-format: " + std::string(format.status().message()));
    mle::obs::InitLogging({*level, *format, nullptr});
  }
  auto metrics_access_mode = mle::api::ParseMetricsAccess(metrics_access);
  if (!metrics_access_mode.ok()) return Fail("--metrics-access: " + std::string(metrics_access_mode.status().message()));

  std::string host;
  uint16_t port = 0;
  if (!SplitListen(listen, &host, &port)) return Fail("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got " + listen + ")");

  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) return Fail("cannot create data directory " + data_dir + ": " + ec.message());
  ::chmod(data_dir.c_str(), 0700);

  // One server per data directory.
  const fs::path lock_path = fs::path(data_dir) / "lock";
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Fail("another mlengined is already using " + data_dir + " (" + lock_path.string() + " is locked)");
  }

  auto config = mle::server::LoadServerConfig(config_path);
  if (!config.ok()) return Fail(std::string(config.status().message()));

  auto token = LoadOrCreateAdminToken(data_dir);
  if (!token.ok()) return Fail(std::string(token.status().message()));

  // Block the signals we wait for before any thread starts, so they all inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto store = mle::db::OpenSqliteStore({(fs::path(data_dir) / "mlengine.db").string(), !relaxed_sync});
  if (!store.ok()) return Fail(std::string(store.status().message()));

  const fs::path shim = FindBeside(argv[0], {"../shim/mlengine-replica", "mlengine-replica"});
  if (shim.empty()) return Fail("cannot find mlengine-replica next to mlengined");
  const fs::path python_dir = FindBeside(argv[0], {"../../../python", "../share/mlengine/python"});
  const fs::path buckets = fs::absolute(fs::path(data_dir) / "buckets");
  fs::create_directories(buckets, ec);
  fs::create_directories(fs::path(data_dir) / "runs", ec);

  auto& clock = mle::common::RealClock::Get();
  mle::validate::Config validation = mle::validate::Config::Defaults();
  for (const auto& r : config->runtimes.runtimes()) {
    validation.runtime_versions.push_back({r.name, {r.python_version}, r.tpu_capable});
  }
  mle::runtime::PackageCache packages((fs::absolute(data_dir) / "envs").string());
  mle::executor::LocalExecutorOptions exec_options;
  exec_options.runs_dir = (fs::absolute(data_dir) / "runs").string();
  exec_options.shim = shim.string();
  exec_options.gcs_root = buckets.string();
  exec_options.python_path = python_dir.string();
  exec_options.cancel_grace = absl::Seconds(config->cancel_grace_seconds);
  mle::scheduler::SchedulerOptions sched_options;
  sched_options.inventory = mle::server::DetectLocalInventory(*config);
  sched_options.resources.fallback = {config->replica_cpu_milli, 0};

  // The executor: local processes, a Slurm cluster, or none.
  std::unique_ptr<mle::executor::LocalExecutor> local_executor;
  std::unique_ptr<mle::executor::slurm::SubprocessCommandRunner> slurm_runner;
  std::unique_ptr<mle::executor::slurm::SlurmExecutor> slurm_executor;
  mle::executor::Executor* executor = nullptr;
  if (executor_kind == "local") {
    local_executor = std::make_unique<mle::executor::LocalExecutor>(exec_options, config->runtimes, packages);
    executor = local_executor.get();
  } else if (executor_kind == "slurm") {
    const fs::path launcher = FindBeside(argv[0], {"../executor/slurm/mlengine-slurm-launch", "mlengine-slurm-launch"});
    if (launcher.empty()) return Fail("cannot find mlengine-slurm-launch next to mlengined");
    std::map<std::string, std::string> slurm_env;
    if (!config->slurm.conf.empty()) slurm_env["SLURM_CONF"] = config->slurm.conf;
    slurm_runner = std::make_unique<mle::executor::slurm::SubprocessCommandRunner>(slurm_env, absl::Seconds(60));
    mle::executor::slurm::SlurmExecutorOptions so;
    so.runs_dir = exec_options.runs_dir;
    so.launcher = fs::absolute(launcher).string();
    so.shim = fs::absolute(shim).string();
    so.gcs_root = exec_options.gcs_root;
    so.python_path = exec_options.python_path;
    so.settings = config->slurm.settings;
    so.resources = config->slurm.machines;
    so.max_poll = absl::Seconds(std::max(1, config->slurm.max_poll_seconds));
    auto created = mle::executor::slurm::SlurmExecutor::Create(so, config->runtimes, packages, *slurm_runner);
    if (!created.ok()) return Fail(std::string(created.status().message()));
    slurm_executor = *std::move(created);
    executor = slurm_executor.get();
    sched_options.resources = config->slurm.machines;
  }

  mle::service::JobService jobs(**store, clock, validation);
  mle::scheduler::Scheduler scheduler(clock, jobs, executor, sched_options);
  if (local_executor) local_executor->SetEvents(&scheduler);
  if (slurm_executor) slurm_executor->SetEvents(&scheduler);
  jobs.AttachScheduler(&scheduler);
  if (slurm_executor) {
    mle::obs::Log("server").info("Slurm cluster: {}", mle::executor::slurm::DescribeNodes(slurm_executor->nodes()));
  } else {
    mle::obs::Log("server").info("inventory: {}", mle::scheduler::DescribeInventory(sched_options.inventory));
  }
  if (auto s = jobs.Recover(); !s.ok()) return Fail("cannot recover state: " + std::string(s.message()));
  scheduler.Start();

  mle::api::Authenticator auth(*token);
  mle::service::LogService logs(jobs, mle::logs::LogReader(exec_options.runs_dir));
  mle::api::ApiRouter router(jobs, logs, auth);
  mle::api::HttpServerOptions options;
  options.address = host;
  options.port = port;
  options.threads = threads;
  options.body_limit = body_limit;
  options.error_body = &mle::api::ApiRouter::ErrorBody;
  auto bucket_store = mle::buckets::BucketStore::Open(buckets.string());
  if (!bucket_store.ok()) return Fail(std::string(bucket_store.status().message()));
  mle::api::StorageRouter storage(**bucket_store, auth);
  mle::api::ConfigureUploads(&options, storage, (*bucket_store)->upload_dir());
  mle::api::MetricsEndpoint metrics(jobs, auth, *metrics_access_mode);
  auto server = mle::api::HttpServer::Start(options, mle::api::Dispatch(router, storage, metrics));
  if (!server.ok()) return Fail(std::string(server.status().message()));

  const std::string endpoint = absl::StrCat("http://", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                                            ":", (*server)->port());
  {
    // Where clients (the mlengine CLI) find this server.
    std::ofstream out(fs::path(data_dir) / "server.json");
    out << "{\"endpoint\": \"" << endpoint << "\", \"token_file\": \""
        << (fs::absolute(data_dir) / "admin.token").string() << "\", \"pid\": " << ::getpid() << "}\n";
  }
  std::cout << "mlengined listening on " << endpoint << std::endl;
  mle::obs::Log("server").info("listening on {}", endpoint);

  int sig = 0;
  sigwait(&signals, &sig);
  mle::obs::Log("server").info("received signal {}, shutting down", sig);
  (*server)->Stop();
  storage.Stop();  // finish queued storage work while the io_context still exists
  scheduler.Stop();
  // Executor threads may still report into the (stopped) scheduler: end them
  // while it exists. Jobs keep running; a restart finds them again.
  slurm_executor.reset();
  local_executor.reset();
  return 0;
}
