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
// one `squeue` per poll for all jobs (never one call per job; a second
// one by name while a job is looked up by name, below), scancel
// of the whole job. Polls come quickly while a job changes (submitted,
// outcome file written, cancel asked) and back off to `max_poll` while
// nothing does.
//
// Restart: RUN/slurm_job_id is written after sbatch; RUN/submitting before
// it, so a server that died in between looks the job up by name
// (mle-<project>-<job>) in the polls' squeue instead of submitting it twice.
// A lookup that fails (squeue does not answer) decides nothing: the job is
// neither submitted again nor given up, and the next polls look again.
//
// What each poll decides for a job is a pure function (slurm_tracking.h);
// this class gathers its inputs and carries its steps out.
//
// Accounts (slurm.accounts: per_project): each job runs under its project's
// account (slurm_accounts.h), which is created, with the user mlengined runs
// as associated, before the project's first submission; the account's
// limits carry out the project's quotas, set at start and whenever the
// quotas change (MirrorQuotas). Create fails when Slurm has no accounting
// (`sacctmgr show assoc` fails).
//
// Time comes from the injected Clock (requeue waits, poll cadence).
//
// Threads: a submission thread (packages, sbatch) and a poller thread
// (SlurmExecutorOptions::background_threads). Public methods are
// thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "buckets/bucket_store.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "containers/podman.h"
#include "executor/executor.h"
#include "executor/sandboxing.h"
#include "executor/slurm/slurm_commands.h"
#include "executor/slurm/slurm_plan.h"
#include "executor/stall_watch.h"
#include "executor/slurm/slurm_tracking.h"
#include "model/demand.h"
#include "model/resources.h"
#include "runtime/package_cache.h"
#include "runtime/runtimes.h"
#include "scheduler/quota.h"

namespace mle::executor::slurm {

struct SlurmExecutorOptions {
  std::string runs_dir;        // shared: DATA_DIR/runs
  std::string launcher;        // path of mlengine-slurm-launch (same path on every node)
  std::string shim;            // path of mlengine-replica (same path on every node)
  std::string gcs_root;        // shared: bucket B is gcs_root/B on every node
  const buckets::BucketStore* buckets = nullptr;  // the store at gcs_root: where packages are read (null: none)
  std::string python_path;     // mlengine's python/ (for PYTHONPATH)
  std::string user;            // the user mlengined runs as: associated with the per-project accounts
  // Gives each job's replicas a token of its account (null: none given);
  // api_endpoint tells them where to use it (it must be reachable from the nodes).
  CredentialIssuer* credentials = nullptr;
  std::string api_endpoint;
  // Runs custom container jobs (null: they are refused at submission); the
  // nodes need podman and reach containers.registry.
  const containers::Podman* podman = nullptr;
  // Runs every replica in its sandbox on its node (docs/security.md): the
  // identity and buckets chosen here, the cgroups and view made by each
  // node's launcher; null: replicas run unsandboxed, as root.
  const Sandboxing* sandbox = nullptr;
  std::vector<std::string> sandbox_read_only;  // what every view holds beside the system (runtimes, python/)
  SlurmSettings settings;
  model::ResourceTable resources = model::ResourceTable::Defaults();  // machine type -> CPUs, memory
  absl::Duration min_poll = absl::Milliseconds(100);
  absl::Duration max_poll = absl::Seconds(5);
  // How long a NODE_FAIL/PREEMPTED job of a requeueing cluster may take to
  // be PENDING again before mlengine calls it ended.
  absl::Duration requeue_wait = absl::Seconds(20);
  // The stall watch (stall_watch.h; `slurm.stall_after_seconds`,
  // `slurm.stall_action`): a running job whose replicas wrote no log line
  // and used no CPU (as their shims record it) for `stall_after` is flagged,
  // or ended with `stall_fails`. 0: not watched (a job's labels may still
  // ask for it).
  absl::Duration stall_after = absl::ZeroDuration();
  bool stall_fails = false;
  // The join deadline (`slurm.join_timeout_seconds`): a job of several
  // replicas that have not all connected to one another (a TCP connection on
  // the job's ports, as their shims see it on their nodes) this long after
  // it began running fails, naming who did not. 0: not watched.
  absl::Duration join_timeout = absl::ZeroDuration();
  // How many submissions (package environment, launch files, sbatch) run
  // at once, each job's always on the same thread (its submissions stay in
  // order). sbatch waits on slurmctld and munge for tens of milliseconds
  // on a busy host: one at a time, 200 jobs created at once reached Slurm
  // at about 12 a second, slower than Slurm ran them.
  int submit_concurrency = 4;
  // Production: submission threads and a poller thread. False (tests):
  // Launch submits on the caller's thread and nothing polls until the caller
  // calls PollOnce(), so a test decides when each round happens.
  bool background_threads = true;
};

class SlurmExecutor final : public Executor, public scheduler::QuotaMirror {
 public:
  // `runner` and `clock` must outlive the executor. Reads the cluster's
  // nodes (`sinfo --json`) once; UNAVAILABLE when Slurm does not answer.
  // With per-project accounts, FAILED_PRECONDITION when Slurm has no
  // accounting.
  static absl::StatusOr<std::unique_ptr<SlurmExecutor>> Create(SlurmExecutorOptions options,
                                                               runtime::RuntimeCatalog runtimes,
                                                               runtime::PackageCache& cache, CommandRunner& runner,
                                                               common::Clock& clock);
  ~SlurmExecutor() override;

  void SetEvents(ExecutorEvents* events) { events_ = events; }
  const std::vector<SlurmNode>& nodes() const { return nodes_; }

  absl::Status CheckRunnable(const model::Job& job) const override;
  bool PlacesJobs() const override { return true; }
  void Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement) override;
  void Cancel(const JobRef& job, const std::string& reason) override;
  std::optional<model::Placement> Recover(const model::Job& job) override;

  // The stall watch's round (the poller's, after each poll): each running
  // job due a look, its replicas' progress files and logs read.
  void LookForStalls();
  // Whether the join deadline applies to `job` (several replicas, not in
  // containers, whose processes are podman's) under these options.
  bool WatchesJoins(const model::Job& job, const model::JobDemand& demand) const;
  // One round, now, on the calling thread: the cancels due in one scancel,
  // one squeue, and every tracked job's next step carried out (reports
  // included). The poller thread calls it; with background_threads off, tests
  // do. Not to be called concurrently with itself.
  void PollOnce();

  // Per-project accounts: every project with quotas of its own and every
  // project that submitted gets its account and its limits in
  // settings.region; later submissions of new projects use these quotas.
  // OK at once without per-project accounts. Thread-safe.
  absl::Status MirrorQuotas(const scheduler::Quotas& quotas) override;

 private:
  SlurmExecutor(SlurmExecutorOptions options, runtime::RuntimeCatalog runtimes, runtime::PackageCache& cache,
                CommandRunner& runner, common::Clock& clock, std::vector<SlurmNode> nodes);

  // A tracked job, and which Launch/Recover it belongs to (a job launched
  // again meanwhile must not receive an older round's decisions).
  struct Entry {
    TrackedJob job;
    uint64_t generation = 0;
    std::string files_problem;  // last problem reading its run files (logged once)
    model::Job spec;            // what to submit if it turns out never to have been
    model::JobDemand demand;
    StallPolicy stall_policy;   // its limit and action (the operator's, or its labels')
    StallWatch stall;           // what the last look saw of its replicas
    absl::Time next_stall_look = absl::InfinitePast();
    absl::Time running_since = absl::InfinitePast();  // first seen running by the watch
    bool watch_joins = false;   // the join deadline applies (WatchesJoins)
    bool joined = false;        // every replica connected (join_timeout)
  };

  // An earlier submission of a job, as its run directory tells: its Slurm id
  // (RUN/slurm_job_id); or `look_up` when it may be in Slurm under an id
  // nobody recorded (RUN/submitting without RUN/slurm_job_id, or files that
  // cannot be read), `why` saying which; neither when it was never submitted.
  struct EarlierSubmission {
    int64_t slurm_id = 0;
    bool look_up = false;
    std::string why;
  };
  static EarlierSubmission FindEarlierSubmission(const std::string& dir);

  // Submits the job unless an earlier submission may be in Slurm.
  void Submit(const std::string& key, uint64_t generation, const model::Job& job, const model::JobDemand& demand);
  // Submits the job (known not to be in Slurm), or ends it if cancelled.
  void SubmitNew(const std::string& key, uint64_t generation, const model::Job& job, const model::JobDemand& demand);
  // Tracks the job as Slurm job `slurm_id`, waiting in its queue.
  void Adopt(const std::string& key, uint64_t generation, int64_t slurm_id);
  // The job may be in Slurm: the polls look it up by name (says why, once).
  void LookUpByName(const std::string& key, uint64_t generation, const std::string& why);
  // sbatch's answer (the Slurm job id), or an error for the user: UNKNOWN
  // when the answer was lost and Slurm may have queued the job.
  absl::StatusOr<int64_t> SubmitToSlurm(const TrackedJob& t, const model::Job& job, const model::JobDemand& demand);
  // The job ended: its identity is released.
  void EndSandbox(const JobRef& ref);
  void PollLoop();
  // A job's outcome file, or the replica log of a job not yet running, exists.
  bool ChangeOnDisk();
  void Wake();
  // One scancel for every cancel of the round; undelivered ones are asked again next round.
  void SendCancels(const std::vector<int64_t>& slurm_ids);
  // Slurm's view of every listed job by id (het leaders; nodes of all
  // components); the jobs named `names` with their names.
  absl::StatusOr<std::map<int64_t, SlurmView>> ReadSlurmJobs(const std::set<std::string>& names);
  // What the run directory shows for `t`, of what `wanted` names; problems
  // go to the log once per job.
  FilesSeen LookAtFiles(const std::string& key, const TrackedJob& t, FilesWanted wanted);
  // Carries a step out: files, bookkeeping (if the job is still this
  // generation's), reports to the scheduler.
  void CarryOut(const std::string& key, uint64_t generation, Step step);
  // Ends a tracked job (erases it) and reports the outcome.
  void Finish(const std::string& key, uint64_t generation, Outcome outcome, const std::string& message);
  // ExplainNodeFailure from a fresh `sinfo` and RUN/placement; `fallback` if unknown.
  std::string ExplainLostNodes(const TrackedJob& t, const std::vector<std::string>& nodes, const std::string& fallback);
  std::string Key(const JobRef& ref) const { return ref.project + "/" + ref.job_id; }
  // The account `project`'s jobs run under (empty: the settings' account);
  // per project, made ready (PrepareAccounts) before its first submission.
  absl::StatusOr<std::string> AccountFor(const std::string& project);
  // Brings every known project's account and limits to what quotas_ say.
  absl::Status PrepareAccounts();  // holds accounts_mu_

  const SlurmExecutorOptions options_;
  const runtime::RuntimeCatalog runtimes_;
  runtime::PackageCache& cache_;
  CommandRunner& runner_;
  common::Clock& clock_;
  const std::vector<SlurmNode> nodes_;
  ExecutorEvents* events_ = nullptr;

  std::mutex mu_;
  std::condition_variable poll_cv_;
  std::map<std::string, Entry> jobs_;    // guarded by mu_
  uint64_t next_generation_ = 1;         // guarded by mu_
  bool poll_soon_ = false;               // guarded by mu_
  bool stopping_ = false;                // guarded by mu_
  std::string last_poll_problem_;        // poller thread only
  absl::Duration last_squeue_ = absl::ZeroDuration();  // the last squeue's wall time; poller thread only
  std::thread poller_;

  std::mutex accounts_mu_;                  // held while Slurm's accounts are changed
  scheduler::Quotas quotas_;               // guarded by accounts_mu_
  std::set<std::string> known_projects_;   // guarded by accounts_mu_: accounts made ready
  std::map<std::string, AccountLimits> account_limits_;  // guarded by mu_: what each account's limits are

  // Packages and sbatch (background_threads): `submit_concurrency` queues,
  // a job's submissions always on the one its key picks.
  std::vector<std::unique_ptr<common::SerialWorker>> submitters_;
  common::SerialWorker* SubmitterFor(const std::string& key) const;
};

}  // namespace mle::executor::slurm
