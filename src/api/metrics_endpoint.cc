#include "api/metrics_endpoint.h"

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
  const bool needs_token =
      access_ == MetricsAccess::kToken || (access_ == MetricsAccess::kLoopback && !request.from_loopback);
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

}  // namespace mle::api
