#include "service/cluster_view.h"

#include <algorithm>

#include "common/run_layout.h"
#include "model/job.h"
#include "rundir/slurm_files.h"

namespace mle::service {

std::vector<PlacedReplica> ReplicasOf(const std::vector<scheduler::SchedulerSnapshot::PlacedJob>& jobs) {
  std::vector<PlacedReplica> out;
  for (const auto& placed : jobs) {
    PlacedReplica base;
    base.project = placed.key.project;
    base.job_id = placed.key.job_id;
    if (auto trial = model::SplitTrialJobId(placed.key.job_id)) {
      base.job_id = trial->first;
      base.trial_id = trial->second;
    }
    for (const auto& [task, where] : placed.placement.replicas) {
      PlacedReplica r = base;
      r.host = where.host;
      r.task = task;
      out.push_back(std::move(r));
    }
    for (const auto& host : placed.placement.tpu_hosts) {
      PlacedReplica r = base;
      r.host = host;
      out.push_back(std::move(r));
    }
  }
  return out;
}

ClusterView AssembleClusterView(const ClusterInputs& inputs, const ClusterAccess& access) {
  ClusterView view;
  view.executor = inputs.executor;
  std::map<std::string, size_t> index;  // host name -> view.hosts
  for (const auto& h : inputs.hosts) {
    index.emplace(h.host.name, view.hosts.size());
    view.hosts.push_back({h, {}});
  }
  for (const auto& r : inputs.replicas) {
    auto it = index.find(r.host);
    if (it == index.end()) {
      // Placed on a host the inventory does not list (a node that left):
      // shown, so no replica is ever missing from the view.
      ClusterHost unknown;
      unknown.host.name = r.host;
      unknown.state = "unknown";
      it = index.emplace(r.host, view.hosts.size()).first;
      view.hosts.push_back({unknown, {}});
    }
    ClusterView::Replica shown;
    if (access.job(r.project, r.job_id)) {
      shown = {false, r.project, r.job_id, r.trial_id, r.task};
    } else {
      shown.hidden = true;
    }
    view.hosts[it->second].replicas.push_back(std::move(shown));
  }
  for (auto& h : view.hosts) {
    // The caller's own first (by project, job, trial, task), the hidden last.
    std::stable_sort(h.replicas.begin(), h.replicas.end(), [](const auto& a, const auto& b) {
      return std::tie(a.hidden, a.project, a.job_id, a.trial_id, a.task) <
             std::tie(b.hidden, b.project, b.job_id, b.trial_id, b.task);
    });
  }
  for (const auto& [project, counts] : inputs.projects) {
    if (access.project(project)) view.queues.push_back({project, counts.queued, counts.running});
  }
  return view;
}

ClusterView ClusterService::View(const ClusterAccess& access) const {
  const scheduler::SchedulerSnapshot snapshot = scheduler_.Snapshot();
  ClusterInputs inputs;
  inputs.executor = options_.executor;
  inputs.projects = snapshot.projects;
  if (options_.hosts.empty()) {
    for (const auto& h : snapshot.inventory.hosts) inputs.hosts.push_back({h, "up"});
    inputs.replicas = ReplicasOf(snapshot.jobs);
    return AssembleClusterView(inputs, access);
  }
  inputs.hosts = options_.hosts;
  // Slurm places the jobs: where each task runs is in its run's placement,
  // written by the launcher once the allocation started.
  for (const auto& placed : snapshot.jobs) {
    const int attempt = options_.attempt_of ? options_.attempt_of(placed.key) : 1;
    auto node_of_task = rundir::ReadSlurmPlacement(
        common::JobRunDir(options_.runs_dir, placed.key.project, placed.key.job_id, attempt));
    if (!node_of_task.ok()) continue;  // not started yet (or unreadable): nothing placed to show
    scheduler::SchedulerSnapshot::PlacedJob job{placed.key, {}, placed.running};
    for (const auto& [task, node] : *node_of_task) job.placement.replicas[task].host = node;
    for (auto& r : ReplicasOf({job})) inputs.replicas.push_back(std::move(r));
  }
  return AssembleClusterView(inputs, access);
}

}  // namespace mle::service
