// Server: mlengined's parts, built in dependency order and stopped in the
// reverse one. Start-up claims what can fail without side effects first
// (the data directory's lock, the configuration, the listening port), then
// opens the store, builds the executor, scheduler and services, recovers
// state (adopting replicas that survived a restart) and only then serves.
// Any failure on the way stops what was started, in order, and returns a
// Status: a server that cannot listen never touches a job.
//
// Not thread-safe: Start, Stop and the destructor from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/metrics_endpoint.h"

namespace mle::server {

struct ServerOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;      // 0 picks a free one
  std::string data_dir;
  std::string config_path;           // empty: built-in defaults
  std::string executor = "local";    // local | slurm | none
  int threads = 2;
  uint64_t body_limit = 1 << 20;
  bool relaxed_sync = false;
  std::string executable;            // argv[0], to find the helper programs beside it
  api::MetricsAccess metrics_access = api::MetricsAccess::kLoopback;  // who may read /metrics
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "http://127.0.0.1:PORT".
  const std::string& endpoint() const;
  // Stops serving, then the scheduler, then the executor's threads; running
  // replicas keep running (a restart finds them). Idempotent.
  void Stop();
  // Reads the configuration file again (SIGHUP, `systemctl reload`) and
  // applies what may change while serving: quotas and shares (unless the
  // admin API's are in force), accounting.ml_units_per_hour, retention and
  // disk.reserve_mb. The rest takes effect at the next start. A file that
  // cannot be read or is refused changes nothing (the error says why).
  absl::Status Reload();

  struct Parts;

 private:
  explicit Server(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace mle::server
