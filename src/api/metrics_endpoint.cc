#include "api/metrics_endpoint.h"

#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/http_util.h"
#include "model/job_state.h"
#include "obs/metrics.h"

namespace mle::api {

absl::StatusOr<MetricsAccess> ParseMetricsAccess(absl::string_view name) {
  if (name == "loopback") return MetricsAccess::kLoopback;
  if (name == "token") return MetricsAccess::kToken;
  if (name == "open") return MetricsAccess::kOpen;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown metrics access \"", name, "\": use loopback, token or open"));
}

bool MetricsEndpoint::Serves(absl::string_view target) {
  return target == "/metrics" || absl::StartsWith(target, "/metrics?");
}

void MetricsEndpoint::Handle(HttpRequest request, Responder respond) const {
  auto respond_named = [&respond](HttpResponse r) {
    r.route = "metrics";
    respond(std::move(r));
  };
  auto target = ParseTarget(request.target);
  if (!target.ok()) return respond_named(RenderError(target.status(), true));
  bool needs_token =
      access_ == MetricsAccess::kToken || (access_ == MetricsAccess::kLoopback && !request.from_loopback);
  if (!needs_token && access_ == MetricsAccess::kLoopback && is_job_uid_) {
    const std::optional<uint32_t> uid = LoopbackPeerUid(request.remote_port, request.local_port);
    needs_token = !uid || is_job_uid_(*uid);
  }
  if (needs_token) {
    // The metrics count every project's jobs: the operator's to read.
    auto caller = gate_.Authenticate(request.authorization, QueryParam(target->query, "access_token"));
    if (!caller.ok()) return respond_named(RenderError(caller.status(), true));
    if (!caller->IsOperator()) {
      return respond_named(RenderError(
          absl::PermissionDeniedError("/metrics covers every project: only the operator's token may read it."),
          true));
    }
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return respond_named(RenderError(
        absl::NotFoundError(absl::StrCat("The requested URL ", request.method,
                                         " /metrics was not found on this server: /metrics answers GET.")),
        true));
  }

  obs::Metrics& metrics = obs::Metrics::Default();
  const service::JobService::JobCounts counts = jobs_.CountJobs();
  for (const auto& [state, n] : counts.by_state) metrics.SetJobCount(std::string(model::JobStateName(state)), n);
  for (const auto& [project, queue] : counts.queues) metrics.SetQueue(project, queue.length, queue.oldest_wait);

  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics.Render();
  respond_named(std::move(r));
}

std::optional<uint32_t> LoopbackPeerUid(uint16_t remote_port, uint16_t local_port, const std::string& proc_net) {
  // "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...", the
  // addresses as HEX_IP:HEX_PORT. The peer's socket is the one whose local
  // port is the peer's and whose remote port is ours.
  for (const char* file : {"tcp", "tcp6"}) {
    std::ifstream in(proc_net + "/" + file);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 8) continue;
      auto port_of = [](absl::string_view endpoint) -> int {
        const size_t colon = endpoint.rfind(':');
        unsigned int port = 0;
        if (colon == absl::string_view::npos || !absl::SimpleHexAtoi(endpoint.substr(colon + 1), &port)) return -1;
        return static_cast<int>(port);
      };
      if (port_of(f[1]) != remote_port || port_of(f[2]) != local_port) continue;
      uint32_t uid = 0;
      if (absl::SimpleAtoi(f[7], &uid)) return uid;
    }
  }
  return std::nullopt;
}

}  // namespace mle::api
