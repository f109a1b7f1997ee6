// The handlers of the read-only views the web console needs beyond the ml
// API (docs/console.md): where a job's replicas run, the metrics its trainer
// reported, why it waits, and the cluster. Each checks its query, asks a service and
// encodes the view; access was checked by the route table's gate (the
// cluster's per-job and per-project filtering is the service's, through
// ClusterAccess).

#include <cmath>

#include <nlohmann/json.hpp>

#include "api/api_call.h"
#include "api/http_util.h"
#include "common/time_format.h"
#include "iam/roles.h"

namespace mle::api::console_routes {
namespace {

using nlohmann::json;

json EncodeReplicas(const service::JobReplicas& view) {
  json replicas = json::array();
  for (const auto& r : view.replicas) {
    json out = {{"taskName", r.task},
                {"host", r.host},
                {"gpus", r.gpus},
                {"state", service::ReplicaStateName(r.state)}};
    if (r.exit_code) out["exitCode"] = *r.exit_code;
    if (r.signal) out["signal"] = *r.signal;
    if (!r.trial_id.empty()) out["trialId"] = r.trial_id;
    replicas.push_back(std::move(out));
  }
  return {{"replicas", std::move(replicas)}, {"tpuHosts", view.tpu_hosts}, {"tpuSimulated", view.tpu_simulated}};
}

json EncodeMetrics(const std::vector<service::MetricSeries>& series) {
  json out = json::array();
  for (const auto& s : series) {
    json points = json::array();
    for (const auto& p : s.points) {
      // int64 as a JSON string, as Google's APIs write them.
      json point = {{"step", std::to_string(p.step)}, {"value", p.value}};
      if (p.timestamp > 0 && std::isfinite(p.timestamp)) {
        point["time"] = common::FormatRfc3339(absl::FromUnixMicros(static_cast<int64_t>(p.timestamp * 1e6)));
      }
      points.push_back(std::move(point));
    }
    json one = {{"tag", s.tag}, {"taskName", s.task}};
    if (!s.trial_id.empty()) one["trialId"] = s.trial_id;
    one["points"] = std::move(points);
    out.push_back(std::move(one));
  }
  return {{"series", std::move(out)}};
}

json EncodeCluster(const service::ClusterView& view) {
  json hosts = json::array();
  for (const auto& h : view.hosts) {
    json gpus = json::array();
    for (const auto& g : h.host.host.gpus) gpus.push_back({{"index", g.index}, {"model", g.model}, {"type", g.type}});
    json replicas = json::array();
    for (const auto& r : h.replicas) {
      if (r.hidden) {
        replicas.push_back({{"hidden", true}});
        continue;
      }
      json one = {{"project", r.project}, {"jobId", r.job_id}};
      if (!r.task.empty()) one["taskName"] = r.task;
      if (!r.trial_id.empty()) one["trialId"] = r.trial_id;
      replicas.push_back(std::move(one));
    }
    hosts.push_back({{"name", h.host.host.name},
                     {"cpuMilli", h.host.host.cpu_milli},
                     {"memoryMib", h.host.host.memory_mib},
                     {"gpus", std::move(gpus)},
                     {"tpuType", h.host.host.tpu_type},
                     {"simulated", h.host.host.simulated},
                     {"state", h.host.state},
                     {"replicas", std::move(replicas)}});
  }
  json queues = json::array();
  for (const auto& q : view.queues) {
    queues.push_back({{"project", q.project}, {"queued", q.queued}, {"running", q.running}});
  }
  return {{"executor", view.executor}, {"hosts", std::move(hosts)}, {"queues", std::move(queues)}};
}

}  // namespace

void JobReplicas(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto view = s.runs.Replicas(call.Var("project"), call.Var("job"));
  if (!view.ok()) return respond(Fail(view.status(), pretty));
  respond(Render(EncodeReplicas(*view), pretty));
}

// Why a job waits (or may be stuck), whichever API made it: ml v1 answers
// it in a job's errorMessage and jobPosition, but Vertex AI's resources have
// no field for it.
void JobWaiting(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  auto job = s.jobs.GetJob(call.Var("project"), call.Var("job"));
  if (!job.ok()) return respond(Fail(job.status(), pretty));
  json out = {{"state", model::JobStateName(job->state)}};
  if (!model::IsTerminal(job->state) && !job->error_message.empty()) out["reason"] = job->error_message;
  // int64 as a JSON string, as Google's APIs write them.
  if (job->job_position) out["position"] = std::to_string(*job->job_position);
  respond(Render(out, pretty));
}

void JobMetrics(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {"trialId"}); !st.ok()) return respond(Fail(st, pretty));
  auto series = s.runs.Metrics(call.Var("project"), call.Var("job"), call.Param("trialId"));
  if (!series.ok()) return respond(Fail(series.status(), pretty));
  respond(Render(EncodeMetrics(*series), pretty));
}

void GetCluster(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  const iam::Principal& caller = call.caller;
  service::ClusterAccess access;
  access.job = [&](const std::string& project, const std::string& job_id) {
    return s.iam.Authorize(caller, JobReadPermission(s.jobs, project, job_id), iam::Resource::Job(project, job_id)).ok();
  };
  access.project = [&](const std::string& project) {
    return s.iam.Authorize(caller, iam::perm::kJobsList, iam::Resource::Project(project)).ok();
  };
  respond(Render(EncodeCluster(s.cluster.View(access)), pretty));
}

}  // namespace mle::api::console_routes
