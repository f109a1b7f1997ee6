// mlengined: the mlengine API server. Reads its flags, starts a Server
// (server/server.h: every part, in dependency order), waits for SIGINT or
// SIGTERM and stops it. No application logic lives here.

#include <signal.h>
#include <systemd/sd-daemon.h>
#include <sys/resource.h>

#include <algorithm>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "api/metrics_endpoint.h"
#include "obs/log.h"
#include "server/maintenance.h"
#include "server/server.h"

namespace {

// Each follower of a job's logs holds a connection: a thousand followers
// take a thousand descriptors, past the soft limit of 1,024 a service gets
// by default (systemd's, a login shell's). The hard limit allows more: the
// soft limit goes up to it, at most to 65,536 (what the replicas inherit
// too; no select()-based program there counts on less).
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t want = limit.rlim_max == RLIM_INFINITY ? 65536 : std::min<rlim_t>(limit.rlim_max, 65536);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= want) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = want;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    mle::obs::Log("server").info("open files: soft limit raised from {} to {}", before, want);
  }
}

int Fail(const std::string& message) {
  mle::obs::Log("server").error("{}", message);
  return 1;
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
  app.set_version_flag("--version", "mlengined " MLE_VERSION);
  mle::server::ServerOptions options;
  std::string listen = "127.0.0.1:8080";
  app.add_option("--listen", listen, "Address and port to serve on; port 0 picks a free one and prints it")
      ->capture_default_str();
  app.add_option("--data-dir", options.data_dir, "Directory for all state (database, token, buckets, logs)")
      ->required();
  app.add_option("--config", options.config_path,
                 "Configuration file (YAML): runtimes, TPU hosts, GPU types; see config/mlengined.yaml. "
                 "Without it: one runtime (pytorch-1.13-cpu = /usr/bin/python3) and no TPU hosts");
  app.add_option("--executor", options.executor,
                 "Where jobs run: \"local\" (child processes on this machine), \"slurm\" (a Slurm "
                 "cluster: the config's slurm: section, sbatch/squeue/scancel/sinfo on PATH, DATA_DIR on "
                 "storage every node mounts at the same path; see docs/operations.md) or \"none\" (jobs are "
                 "accepted and queued but never started: a control plane only, for API tests and benchmarks)")
      ->check(CLI::IsMember({"local", "slurm", "none"}))
      ->capture_default_str();
  app.add_option("--threads", options.threads, "HTTP worker threads")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", options.body_limit, "Largest request body accepted (larger: 413)")
      ->capture_default_str();
  app.add_flag("--relaxed-sync", options.relaxed_sync,
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
  // Maintenance: each runs and exits (server/maintenance.h).
  std::string backup_to;
  CLI::App* backup = app.add_subcommand(
      "backup",
      "Write a backup of --data-dir into a new or empty directory and exit: online, by the mlengined serving it, "
      "while jobs run (or by this process when none serves it). See docs/operations.md");
  backup->add_option("--to", backup_to, "The directory to write the backup into (absolute; outside --data-dir)")
      ->required();
  backup->fallthrough();
  std::string restore_from;
  CLI::App* restore = app.add_subcommand(
      "restore",
      "Restore a backup into --data-dir (a new or empty directory) and exit; then start mlengined on it");
  restore->add_option("--from", restore_from, "The backup's directory (what `mlengined backup --to` wrote)")
      ->required()
      ->check(CLI::ExistingDirectory);
  restore->fallthrough();
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  {
    auto level = mle::obs::ParseLogLevel(log_level);
    if (!level.ok()) return Fail("--log-level: " + std::string(level.status().message()));
    auto format = mle::obs::ParseLogFormat(log_format);
    if (!format.ok()) return Fail("--log-format: " + std::string(format.status().message()));
    mle::obs::InitLogging({*level, *format, nullptr});
    auto access = mle::api::ParseMetricsAccess(metrics_access);
    if (!access.ok()) return Fail("--metrics-access: " + std::string(access.status().message()));
    options.metrics_access = *access;
  }
  if (*backup) return mle::server::RunBackup(options.data_dir, backup_to);
  if (*restore) return mle::server::RunRestore(restore_from, options.data_dir);
  if (!SplitListen(listen, &options.listen_host, &options.listen_port)) {
    return Fail("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got " + listen + ")");
  }
  options.executable = argv[0];

  // Block the signals we wait for before any thread starts, so they all inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();

  auto server = mle::server::Server::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  std::cout << "mlengined listening on " << (*server)->endpoint() << std::endl;
  mle::obs::Log("server").info("listening on {}", (*server)->endpoint());
  // Under systemd (Type=notify): `systemctl start` returns now. Elsewhere a no-op.
  sd_notifyf(0, "READY=1\nSTATUS=Listening on %s", (*server)->endpoint().c_str());

  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) {
      mle::obs::Log("server").info("received signal {}, shutting down", sig);
      sd_notify(0, "STOPPING=1\nSTATUS=Stopping: running jobs go on and are adopted at the next start");
      break;
    }
    sd_notify(0, "RELOADING=1\nSTATUS=Reading the configuration again");
    const absl::Status reloaded = (*server)->Reload();
    if (reloaded.ok()) {
      mle::obs::Log("server").info("reloaded {}: quotas, shares, accounting, retention and disk.reserve_mb are in "
                                   "force; other settings take effect at the next start",
                                   options.config_path);
    } else {
      mle::obs::Log("server").error("reload refused, nothing changed: {}", reloaded.ToString());
    }
    sd_notifyf(0, "READY=1\nSTATUS=Listening on %s%s", (*server)->endpoint().c_str(),
               reloaded.ok() ? "" : " (the last reload was refused: see the log)");
  }
  (*server)->Stop();
  return 0;
}
