// SlurmExecutor: runs every job as one Slurm job (a heterogeneous job when
// its roles differ; see slurm_plan.h) on an existing Slurm cluster. Slurm
// queues and places (PlacesJobs): a job waits as QUEUED with Slurm's reason,
// becomes PREPARING when Slurm allocates it, RUNNING once every replica's log
// exists, and ends as the launcher (mlengine-slurm-launch, the batch script)
// recorded in RUN/outcome, or as Slurm's final state says.
//
// The run directory (RUNS/<project>/<job>) must be on storage every node
// sees at the same path (NFS in production; one machine in tests): the
// launcher and every replica write their logs, exit files and the outcome
// there, so the log service reads them as for local jobs. Packages are
// installed into the package cache before sbatch, on the same storage.
//
// Slurm is reached only through the CommandRunner seam: sbatch --parsable,
// one `squeue --json` per poll for all jobs (never one call per job), scancel
// of the whole job. Polls come quickly while a job changes (submitted,
// outcome file written, cancel asked) and back off to `max_poll` while
// nothing does.
//
// Restart: RUN/slurm_job_id is written after sbatch; RUN/submitting before
// it, so a server that died in between looks the job up by name
// (mle-<project>-<job>) instead of submitting it twice.
//
// Threads: a submission thread (packages, sbatch) and a poller thread.
// Public methods are thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/worker_pool.h"
#include "executor/executor.h"
#include "executor/slurm/slurm_commands.h"
#include "executor/slurm/slurm_plan.h"
#include "model/demand.h"
#include "model/resources.h"
#include "runtime/package_cache.h"
#include "runtime/runtimes.h"

namespace mle::executor::slurm {

struct SlurmExecutorOptions {
  std::string runs_dir;        // shared: DATA_DIR/runs
  std::string launcher;        // path of mlengine-slurm-launch (same path on every node)
  std::string shim;            // path of mlengine-replica (same path on every node)
  std::string gcs_root;        // shared: bucket B is gcs_root/B on every node
  std::string python_path;     // mlengine's python/ (for PYTHONPATH)
  SlurmSettings settings;
  model::ResourceTable resources = model::ResourceTable::Defaults();  // machine type -> CPUs, memory
  absl::Duration min_poll = absl::Milliseconds(100);
  absl::Duration max_poll = absl::Seconds(5);
};

class SlurmExecutor final : public Executor {
 public:
  // `runner` must outlive the executor. Reads the cluster's nodes
  // (`sinfo --json`) once; UNAVAILABLE when Slurm does not answer.
  static absl::StatusOr<std::unique_ptr<SlurmExecutor>> Create(SlurmExecutorOptions options,
                                                               runtime::RuntimeCatalog runtimes,
                                                               runtime::PackageCache& cache, CommandRunner& runner);
  ~SlurmExecutor() override;

  void SetEvents(ExecutorEvents* events) { events_ = events; }
  const std::vector<SlurmNode>& nodes() const { return nodes_; }

  absl::Status CheckRunnable(const model::Job& job) const override;
  bool PlacesJobs() const override { return true; }
  void Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement) override;
  void Cancel(const JobRef& job, const std::string& reason) override;
  std::optional<model::Placement> Recover(const model::Job& job) override;

 private:
  SlurmExecutor(SlurmExecutorOptions options, runtime::RuntimeCatalog runtimes, runtime::PackageCache& cache,
                CommandRunner& runner, std::vector<SlurmNode> nodes);

  enum class Phase { kSubmitting, kWaiting, kPreparing, kRunning };
  struct Tracked {
    JobRef ref;
    std::string dir;
    int64_t slurm_id = 0;               // 0 while submitting
    std::vector<std::string> tasks;     // every task's name (for "all started")
    Phase phase = Phase::kSubmitting;
    std::string reason;                 // last waiting reason reported
    bool cancel_requested = false;
    std::string cancel_reason;
    bool scancel_sent = false;
    int missing_polls = 0;              // polls in a row that did not list it
    int requeues = 0;                   // times Slurm put it back in its queue
    absl::Time final_seen = absl::InfinitePast();  // first seen NODE_FAIL/PREEMPTED (requeue on)
  };

  void Submit(const std::string& key, const model::Job& job, const model::JobDemand& demand);
  // sbatch's answer, or an error for the user.
  absl::StatusOr<int64_t> SubmitToSlurm(const Tracked& t, const model::Job& job, const model::JobDemand& demand);
  void Poll();
  void PollLoop();
  // A job's outcome file, or the replica log of a job not yet running, exists.
  bool ChangeOnDisk();
  void Wake();
  // Ends a tracked job (erases it) and reports the outcome.
  void Finish(const std::string& key, Outcome outcome, const std::string& message);
  // The outcome the launcher recorded, if any.
  std::optional<std::pair<Outcome, std::string>> ReadOutcome(const Tracked& t) const;
  std::optional<int64_t> FindByName(const std::string& name);
  // Slurm says the job is over: reports how it ended (the launcher's
  // outcome, else what Slurm's state says), once.
  void End(const std::string& key, Tracked& t, const SlurmJob& sj, const std::vector<std::string>& nodes);
  // Reports PREPARING/RUNNING for a job that ran between two polls.
  void CatchUp(const std::string& key, Tracked& t);
  // "Slurm node tpuhost3 (worker-replica-1) stopped responding, ..." from a
  // fresh `sinfo` and the launcher's RUN/placement; `fallback` if unknown.
  std::string ExplainNodeFailure(const Tracked& t, const std::vector<std::string>& nodes, const std::string& fallback);
  std::string Key(const JobRef& ref) const { return ref.project + "/" + ref.job_id; }

  const SlurmExecutorOptions options_;
  const runtime::RuntimeCatalog runtimes_;
  runtime::PackageCache& cache_;
  CommandRunner& runner_;
  const std::vector<SlurmNode> nodes_;
  ExecutorEvents* events_ = nullptr;

  std::mutex mu_;
  std::condition_variable poll_cv_;
  std::map<std::string, Tracked> jobs_;  // guarded by mu_
  bool poll_soon_ = false;               // guarded by mu_
  bool stopping_ = false;                // guarded by mu_
  std::string last_poll_problem_;        // poller thread only
  std::thread poller_;

  common::SerialWorker submitter_;  // packages and sbatch, in order
};

}  // namespace mle::executor::slurm
