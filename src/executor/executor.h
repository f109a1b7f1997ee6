// Executor: the seam between the scheduler (which decides) and a way of
// running processes (local child processes, or a Slurm cluster). The scheduler
// calls Launch/Cancel/Recover; the executor reports back through
// ExecutorEvents, from any thread. Implementations own their threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/job.h"
#include "model/resources.h"

namespace mle::executor {

struct JobRef {
  std::string project;
  std::string job_id;
};

enum class Outcome {
  kSucceeded,    // the master exited 0
  kFailed,       // a replica failed or could not start; message says which and why
  kStopped,      // stopped on request (Cancel)
  kLost,         // the infrastructure lost it (a host died, mlengine's shim was killed); message says why
  kOutOfMemory,  // a replica went past its memory limit (a failure of the trainer)
  kStalled,      // ended by the executor's stall policy
  kNotJoined,    // its replicas did not all start or connect in time
};
// A failure the job's own program caused or may have caused (not kLost).
inline bool IsTrainerFailure(Outcome o) {
  return o == Outcome::kFailed || o == Outcome::kOutOfMemory || o == Outcome::kStalled || o == Outcome::kNotJoined;
}

class ExecutorEvents {
 public:
  virtual ~ExecutorEvents() = default;
  // Every replica has started (PREPARING -> RUNNING).
  virtual void JobStarted(const JobRef& job) = 0;
  // Executors whose cluster manager queues jobs itself (PlacesJobs()):
  // the job waits in that queue, `reason` says why in words for the user
  // (QUEUED; also after a requeue from PREPARING/RUNNING) ...
  virtual void JobWaiting(const JobRef& job, const std::string& reason) = 0;
  // ... and it has been given its nodes and is being started (PREPARING).
  virtual void JobPreparing(const JobRef& job) = 0;
  // The job's processes are all gone. Called exactly once per Launch/Recover.
  virtual void JobEnded(const JobRef& job, Outcome outcome, const std::string& message) = 0;
  // A note on a running job for its errorMessage (it looks stalled); ""
  // takes it back (it moves again).
  virtual void JobNote(const JobRef& job, const std::string& note) {
    (void)job;
    (void)note;
  }
  // Executors that place jobs themselves (Slurm): the job waits in their
  // queue for resources others hold (true: what preemption may free), or
  // no longer / for something else (false). Said with JobWaiting.
  virtual void JobStarved(const JobRef& job, bool starved) {
    (void)job;
    (void)starved;
  }
  // Executors that place jobs themselves (Slurm): where the job's replicas
  // ran, said before JobEnded, for the record of its attempt.
  virtual void JobHosts(const JobRef& job, const std::vector<std::string>& hosts) {
    (void)job;
    (void)hosts;
  }
};

// Where a job's replicas get their credential: a token of the service
// account the job runs as (its trainingInput.serviceAccount, or its
// project's default account), and nothing more powerful. The token lives
// while the job may run and is revoked when it ends.
struct Credential {
  std::string account;  // the service account's email
  std::string token;
};
class CredentialIssuer {
 public:
  virtual ~CredentialIssuer() = default;
  // Blocks until the token is stored; call from an executor's own thread.
  // `outlives_machine`: the job's replicas may outlive a crash of this
  // machine (Slurm's, on other nodes), so the token is on disk before it is
  // handed out; otherwise (local replicas end with the machine) it need only
  // survive mlengined's own crash, which costs no disk flush (db::Sync).
  virtual absl::StatusOr<Credential> IssueFor(const model::Job& job, bool outlives_machine) = 0;
};

// Which buckets a job's replicas see through the file system
// ($MLENGINE_GCS_ROOT/BUCKET, docs/security.md): those the account the job
// runs as may read (storage.objects.get), writable where it may also create
// objects (storage.objects.create). Asked once per start: the view is fixed
// while the replica runs.
struct BucketGrant {
  std::string bucket;
  bool writable = false;
};
class BucketAccessPolicy {
 public:
  virtual ~BucketAccessPolicy() = default;
  virtual std::vector<BucketGrant> BucketsFor(const model::Job& job) const = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Admission at submission: can this executor run the job at all (runtime
  // installed, containers supported, ...)? FAILED_PRECONDITION saying why not.
  virtual absl::Status CheckRunnable(const model::Job& job) const = 0;
  // False: the scheduler places jobs on the inventory and hands over
  // placed jobs (local). True: the executor's cluster manager queues and
  // places jobs itself (Slurm); the scheduler hands every job over at once
  // with an empty placement and learns its progress from JobWaiting /
  // JobPreparing / JobStarted, and CheckRunnable also answers whether the
  // cluster could ever run the job.
  virtual bool PlacesJobs() const { return false; }
  // Prepares (packages, environment) and starts every replica of `job` where
  // `placement` says. Asynchronous; reports through ExecutorEvents.
  virtual void Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement& placement) = 0;
  // Stops every process of the job: TERM, a grace period, then KILL.
  // `reason` ends up in the job's errorMessage.
  virtual void Cancel(const JobRef& job, const std::string& reason) = 0;
  // After a server restart: finds the job's processes again and resumes
  // watching them. Returns the placement it holds (so the scheduler can
  // account for it), or nullopt when nothing of the job was started, in which
  // case no event will follow and the scheduler may place it again.
  virtual std::optional<model::Placement> Recover(const model::Job& job) = 0;
};

}  // namespace mle::executor
