// LocalExecutor: runs each replica as a child process on this machine.
// Each replica is started through mlengine-replica (its own session and
// process group, a timestamped log and an exit file on disk), so replicas
// survive a restart of mlengined and are found again by Recover().
//
// Threads: start_threads preparation threads (package installs, the run's
// files, spawning; several jobs start side by side) and one watcher thread
// (pidfds in epoll: replica exits, grace-period kills). Events
// go out through ExecutorEvents. Public methods are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "buckets/bucket_store.h"
#include "common/worker_pool.h"
#include "containers/podman.h"
#include "executor/executor.h"
#include "executor/sandboxing.h"
#include "executor/shim_forks.h"
#include "executor/stall_watch.h"
#include "executor/warm_interpreters.h"
#include "runtime/package_cache.h"
#include "rundir/replica_files.h"
#include "runtime/runtimes.h"

namespace mle::executor {

struct LocalExecutorOptions {
  std::string runs_dir;         // DATA_DIR/runs
  std::string shim;             // path of mlengine-replica
  std::string gcs_root;         // where bucket B is the directory gcs_root/B
  const buckets::BucketStore* buckets = nullptr;  // the store at gcs_root: where packages are read (null: none)
  std::string python_path;      // mlengine's python/ for PYTHONPATH
  absl::Duration cancel_grace = absl::Seconds(10);
  int first_port = 27200;       // ports for TF_CONFIG / MASTER_PORT come from here up
  int last_port = 29999;
  // Gives each job's replicas a token of its account (null: none given);
  // api_endpoint tells them where to use it.
  CredentialIssuer* credentials = nullptr;
  std::string api_endpoint;
  // Runs custom container jobs (null: they are refused at submission).
  const containers::Podman* podman = nullptr;
  // Warm starts: python replicas of a runtime with a warm interpreter are
  // forked by it (null: every replica starts cold).
  WarmInterpreters* warm = nullptr;
  // Runs every replica in its sandbox (docs/security.md); null: replicas
  // run as mlengined's own user with its whole file system (the operator
  // turned the sandbox off).
  const Sandboxing* sandbox = nullptr;
  // Jobs prepared and started side by side (at least 1): a start mostly
  // waits (on the database for its token, on the disk, on pip).
  int start_threads = 4;
  // Each shim forked by a fork server of the shim (executor/shim_forks.h),
  // started at the first launch; false (or a server that cannot start):
  // each executed.
  bool fork_shims = true;
  // A running job whose replicas wrote no log line and used no CPU for this
  // long is stalled: said in its errorMessage (ExecutorEvents::JobNote), and
  // with `stall_fails` it is ended FAILED with that reason. Zero: never.
  // Container replicas are not watched (their processes are podman's).
  absl::Duration stall_after = absl::ZeroDuration();
  bool stall_fails = false;
  // A job of several replicas whose replicas have not all connected to one
  // another (a TCP connection on one of the job's ports: MASTER_PORT,
  // TF_CONFIG's) this long after they started fails naming who is missing.
  // Zero: never (replicas that do not talk to each other are a job too).
  absl::Duration join_timeout = absl::ZeroDuration();
};

class LocalExecutor final : public Executor {
 public:
  LocalExecutor(LocalExecutorOptions options, runtime::RuntimeCatalog runtimes, runtime::PackageCache& cache);
  ~LocalExecutor() override;

  // Must be called before the first Launch/Recover.
  void SetEvents(ExecutorEvents* events) { events_ = events; }

  absl::Status CheckRunnable(const model::Job& job) const override;
  void Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement) override;
  void Cancel(const JobRef& job, const std::string& reason) override;
  std::optional<model::Placement> Recover(const model::Job& job) override;

 private:
  struct Replica {
    std::string task;
    pid_t pid = 0;
    int pidfd = -1;
    bool own_child = false;  // started by this process (reap it)
    int64_t memory_mib = 0;  // its memory limit (0: none or not known)
    bool exited = false;
    std::optional<rundir::ReplicaExit> exit;  // how it ended; nullopt: killed without a record
  };
  enum class Ending { kNone, kSucceeded, kFailed, kStopped };
  struct RunningJob {
    JobRef ref;
    std::string dir;
    std::map<std::string, Replica> replicas;
    std::set<int> ports;
    Ending ending = Ending::kNone;  // decided; waiting for every replica to be gone
    Outcome failure = Outcome::kFailed;  // of Ending::kFailed: what kind of failure
    std::string message;
    absl::Time kill_at = absl::InfiniteFuture();
    bool cancel_requested = false;
    std::string cancel_reason;
    bool preparing = true;
    bool containers = false;  // its replicas run in containers
    bool force_killed = false;  // a shim had to be SIGKILLed (it could not remove its container)
    uid_t uid = 0;              // sandboxed: the identity its replicas run as
    // Stall watch (stall_watch.h): what was seen of its replicas, and its
    // limit and action (the operator's, or its labels').
    StallWatch stall;
    StallPolicy stall_policy;
    absl::Time started_at = absl::InfiniteFuture();  // every replica running since
    bool joined = false;        // its replicas have all connected (join_timeout)
  };

  void PrepareAndStart(const std::string& key, model::Job job, model::JobDemand demand, model::Placement placement);
  void Watch();
  // The stall watch's round (mu_ held): notes to send, jobs it ended.
  void CheckStalls(absl::Time now, std::vector<std::pair<JobRef, std::string>>* notes,
                   std::vector<std::string>* ended);
  // The join watch's round (mu_ held): jobs it ended.
  void CheckJoins(absl::Time now, std::vector<std::string>* ended);
  void OnReplicaExit(RunningJob& job, Replica& replica);
  void BeginStop(RunningJob& job, Ending ending, std::string message, Outcome failure = Outcome::kFailed);
  void MaybeFinish(const std::string& key);
  void Signal(const RunningJob& job, int sig);
  std::string Key(const JobRef& ref) const { return ref.project + "/" + ref.job_id; }
  // Why the replica's failure ended the job, and of what kind.
  std::pair<Outcome, std::string> Failure(const RunningJob& job, const Replica& replica) const;
  std::vector<int> AllocatePorts(int n);
  void AddToEpoll(Replica& r, int pidfd = -1);
  // The replica's shim: forked by the fork server when it can, else
  // executed (own_child). Under mu_.
  absl::Status StartShim(const common::SpawnOptions& spawn, Replica& rep);

  const LocalExecutorOptions options_;
  const runtime::RuntimeCatalog runtimes_;
  runtime::PackageCache& cache_;
  ExecutorEvents* events_ = nullptr;

  std::mutex mu_;
  std::map<std::string, RunningJob> jobs_;       // guarded by mu_
  std::set<int> ports_in_use_;                   // guarded by mu_
  std::map<int, std::pair<std::string, std::string>> by_pidfd_;  // pidfd -> (job key, task); guarded by mu_

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd to wake the watcher
  std::atomic<bool> stopping_{false};  // read by both threads
  std::thread watcher_;

  // Started at the first launch (options_.fork_shims); guarded by mu_.
  std::unique_ptr<ShimForkServer> forks_;
  bool forks_tried_ = false;

  common::WorkerPool preparer_;  // package installs and spawning (options_.start_threads)
};

}  // namespace mle::executor
