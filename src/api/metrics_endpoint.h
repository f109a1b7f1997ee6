// MetricsEndpoint: GET /metrics, every metric of obs::Metrics::Default() in
// Prometheus' text format (version 0.0.4), after refreshing the gauges read
// from the JobService (jobs by state, queue length and oldest wait per
// project).
//
// Who may read it is the operator's choice (MetricsAccess, the flag
// --metrics-access; docs/operations.md): a Prometheus scraper usually sends
// no bearer token, so by default a client on this machine (loopback) needs
// none, and any other needs the admin token, like every API call. A job is
// never such a client: a loopback caller whose socket belongs to a job's
// identity (`is_job_uid`, the sandbox's uid range), or whose owner cannot
// be found, needs the token too.
//
// Thread-safe; the JobService and IamService must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/access.h"
#include "api/http_server.h"
#include "service/job_service.h"

namespace mle::api {

enum class MetricsAccess {
  kLoopback,  // no token needed from this machine; the admin token from anywhere else
  kToken,     // the admin token, always
  kOpen,      // anyone who can reach the port
};

// "loopback", "token" or "open".
absl::StatusOr<MetricsAccess> ParseMetricsAccess(absl::string_view name);

class MetricsEndpoint {
 public:
  MetricsEndpoint(const service::JobService& jobs, const iam::IamService& iam, MetricsAccess access,
                  std::function<bool(uint32_t)> is_job_uid = nullptr)
      : jobs_(jobs), gate_(iam), access_(access), is_job_uid_(std::move(is_job_uid)) {}

  // Whether `target` is "/metrics" (with or without a query).
  static bool Serves(absl::string_view target);

  void Handle(HttpRequest request, Responder respond) const;

 private:
  const service::JobService& jobs_;
  const AccessGate gate_;
  const MetricsAccess access_;
  const std::function<bool(uint32_t)> is_job_uid_;
};

// The uid owning the TCP socket at 127.0.0.0/8 or ::1 port `remote_port`
// connected to our `local_port` (from /proc/net/tcp and tcp6, read from
// `proc_net`); nullopt when it is not found.
std::optional<uint32_t> LoopbackPeerUid(uint16_t remote_port, uint16_t local_port,
                                        const std::string& proc_net = "/proc/net");

}  // namespace mle::api
