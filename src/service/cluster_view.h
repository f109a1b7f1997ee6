// The cluster as the console shows it: the executor, every host (its
// resources, accelerators and state) with the replicas placed on it, and how
// many jobs each project has queued and running. What a caller may not read
// is hidden, never named: a replica of a job the caller may not get is
// {hidden}, and only the queues of projects whose jobs it may list appear.
//
// AssembleClusterView is pure (tested as a table); ClusterService gathers
// its inputs: the scheduler's snapshot (inventory, placements, counts) and,
// for an executor that places jobs itself (Slurm), its nodes and each
// running job's RUN/placement. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/resources.h"
#include "scheduler/scheduler.h"

namespace mle::service {

struct ClusterHost {
  model::Host host;
  std::string state;  // Slurm's node state ("idle", "mixed", "down", ...); "up" for the local machine
};

// One replica (or TPU host) held by a job, where it runs.
struct PlacedReplica {
  std::string host;
  std::string project;
  std::string job_id;    // the job the user knows (a trial's tuning job)
  std::string trial_id;  // a tuning job's trial; ""
  std::string task;      // "" for a TPU host the job holds
};

struct ClusterInputs {
  std::string executor;  // "local", "slurm" or "none"
  std::vector<ClusterHost> hosts;
  std::vector<PlacedReplica> replicas;
  std::map<std::string, scheduler::SchedulerSnapshot::ProjectCounts> projects;
};

struct ClusterView {
  struct Replica {
    bool hidden = false;  // then nothing else is set
    std::string project, job_id, trial_id, task;
    bool operator==(const Replica&) const = default;
  };
  struct Host {
    ClusterHost host;
    std::vector<Replica> replicas;
  };
  struct Queue {
    std::string project;
    int64_t queued = 0;
    int64_t running = 0;
    bool operator==(const Queue&) const = default;
  };
  std::string executor;
  std::vector<Host> hosts;    // in the inventory's order; hosts only replicas name come last
  std::vector<Queue> queues;  // by project
};

// Whether the caller may read job `job_id` of `project` (ml.jobs.get), and
// a project's jobs (ml.jobs.list).
struct ClusterAccess {
  std::function<bool(const std::string& project, const std::string& job_id)> job;
  std::function<bool(const std::string& project)> project;
};

ClusterView AssembleClusterView(const ClusterInputs& inputs, const ClusterAccess& access);

// The replicas of the scheduler's placements: a trial job ("JOB.TRIAL") as
// its tuning job and trial; a placement's TPU hosts as task-less entries.
std::vector<PlacedReplica> ReplicasOf(const std::vector<scheduler::SchedulerSnapshot::PlacedJob>& jobs);

struct ClusterOptions {
  std::string executor;  // "local", "slurm" or "none"
  // The hosts of an executor that places jobs itself (Slurm's nodes); empty:
  // the scheduler's inventory, "up".
  std::vector<ClusterHost> hosts;
  // Where runs live, to read RUN/placement when the executor places jobs,
  // and which attempt's run a job runs now (JobService::AttemptOf; unset: 1).
  std::string runs_dir;
  std::function<int(const scheduler::JobKey&)> attempt_of;
};

class ClusterService {
 public:
  ClusterService(const scheduler::Scheduler& scheduler, ClusterOptions options)
      : scheduler_(scheduler), options_(std::move(options)) {}

  ClusterView View(const ClusterAccess& access) const;

 private:
  const scheduler::Scheduler& scheduler_;
  const ClusterOptions options_;
};

}  // namespace mle::service
