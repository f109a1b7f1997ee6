// JobService: the application logic of the jobs API, with no HTTP types.
// It validates, keeps the working set of projects and jobs in memory, writes
// every change through db::Store before it reports success, and tells the
// scheduler about new and cancelled jobs. It also applies the scheduler's
// decisions (StateRecorder), checking each against the state machine.
//
// Thread-safe: any method may be called from any thread. Writes that must be
// durable complete through a callback (called on a store thread) so HTTP
// threads never block on fsync.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "db/store.h"
#include "iam/iam_service.h"
#include "containers/resolver.h"
#include "model/job.h"
#include "model/demand.h"
#include "model/project.h"
#include "model/usage.h"
#include "scheduler/scheduler.h"
#include "service/disk_watch.h"
#include "service/job_events.h"
#include "service/usage_report.h"
#include "validate/validate.h"

namespace mle::service {

class TuningCoordinator;
class StudyService;

struct ListJobsRequest {
  std::string filter;
  int32_t page_size = 0;  // 0 = default (20); capped at 100
  std::string page_token;
  // Which API lists: unset, ml v1 (its jobs alone); set, Vertex AI's
  // customJobs of that location, or with vertex_tuning its
  // hyperparameterTuningJobs.
  std::optional<std::string> vertex_location;
  bool vertex_tuning = false;
};

struct ListJobsResult {
  std::vector<model::Job> jobs;
  std::string next_page_token;
};

struct PatchJobRequest {
  std::vector<std::string> update_mask;  // "labels", "etag"
  std::map<std::string, std::string> labels;
  std::string etag;  // as sent; checked when the mask has "etag" or it is non-empty
};

class JobService final : public scheduler::StateRecorder, public iam::ProjectDirectory {
 public:
  using JobCallback = std::function<void(absl::StatusOr<model::Job>)>;
  using StatusCallback = std::function<void(absl::Status)>;

  JobService(db::Store& store, common::Clock& clock, validate::Config validation);

  // Connects the scheduler (after construction: the scheduler records into us).
  void AttachScheduler(scheduler::Scheduler* scheduler) { scheduler_ = scheduler; }
  // Connects access control: TPU jobs then need the project's TPU service
  // account set up, and a job's serviceAccount needs actAs. Without it
  // (tests of the service alone) neither is checked.
  // Its replicas' token is revoked when a job ends.
  void AttachIam(iam::IamService* iam) { iam_ = iam; }
  // Connects image admission: a custom container job's images are located
  // and pinned at submission (refused when missing). Without it they are
  // left as named, and the executor decides.
  void AttachImages(const containers::ImageResolver* images) { images_ = images; }
  // Connects hyperparameter tuning: a job with trainingInput.hyperparameters
  // goes to the coordinator, which runs its trials as jobs (below). Without
  // it such jobs are accepted and wait (tests of the service alone).
  void AttachTuning(TuningCoordinator* tuning) { tuning_ = tuning; }
  // Connects the study API: a tuning job is a study named by its id, so a
  // user study of that name in the project refuses the job.
  void AttachStudies(const StudyService* studies) { studies_ = studies; }
  // Connects a subscriber to job state changes (service/job_events.h):
  // webhooks. Before serving.
  void Subscribe(JobSubscriber* subscriber) { subscriber_ = subscriber; }
  // Connects the data directory's disk: no job is created while it is full
  // (RESOURCE_EXHAUSTED). Before serving.
  void AttachDisk(const DiskWatch* disk) { disk_ = disk; }
  // Writes again every change of a job the store refused (a full disk): the
  // job moved on in memory (its replicas ran, ended) and its row is behind.
  // Called by the disk watch after each look; cheap when there is none.
  void SaveUnsaved();
  // How usage is counted (model/usage.h): the CPUs and memory the cluster
  // sets aside per machine type, and the ML-unit rates (the defaults until
  // set). Any time: jobs that end afterwards are counted with these.
  void SetAccounting(model::ResourceTable resources, model::UsageRates rates) {
    std::unique_lock lock(mu_);
    accounting_resources_ = std::move(resources);
    accounting_rates_ = std::move(rates);
  }

  // Loads projects and jobs from the store and hands unfinished jobs back to
  // the scheduler. Call once, before serving.
  absl::Status Recover();
  // Ends admission before what it hands jobs to stops (after the HTTP
  // server, which answers nothing more): a create being admitted finishes;
  // one not yet begun is dropped.
  void StopAdmission();

  // projects.getConfig. Registers the project on first use (durably).
  void GetConfig(const std::string& project, std::function<void(absl::StatusOr<model::Project>)> done);

  // `wire_violations` are problems the codec found in the request body
  // (unknown fields, wrong types); they are reported together with the
  // semantic ones, all at once. `caller` submits it (actAs is theirs to hold).
  // `with_job`: more writes made durable in the job's own transaction (the
  // call's audit line), written only if the job is. `validate_only`: every
  // check, then the job as it would be created (no state, no time), nothing
  // stored. A job whose images must be pinned (a registry asked) is admitted
  // on an admission thread, never the caller's: `done` is called there.
  void CreateJob(const std::string& project, model::Job job, JobCallback done,
                 std::vector<common::FieldViolation> wire_violations = {},
                 const iam::Principal& caller = iam::Principal::Operator(),
                 std::vector<db::Mutation> with_job = {}, bool validate_only = false);
  absl::StatusOr<model::Job> GetJob(const std::string& project, const std::string& job_id) const;
  // Which API's resource the job is (none: no such job). No copy.
  enum class JobApi { kNone, kMl, kCustomJob, kTuningJob };
  JobApi ApiOf(const std::string& project, const std::string& job_id) const;
  absl::StatusOr<ListJobsResult> ListJobs(const std::string& project, const ListJobsRequest& request) const;
  void PatchJob(const std::string& project, const std::string& job_id, PatchJobRequest request,
                JobCallback done);
  // Removes a job that ended, for good (Vertex AI's customJobs.delete):
  // durable before `done` is called with OK. FAILED_PRECONDITION for a job
  // that has not ended (cancel it first), NOT_FOUND for none.
  void DeleteJob(const std::string& project, const std::string& job_id, StatusCallback done);
  // `caller` is named in the job's errorMessage and its last attempt.
  void CancelJob(const std::string& project, const std::string& job_id, StatusCallback done,
                 const iam::Principal& caller = iam::Principal::Operator());

  // What /metrics reports of the jobs: how many are in each state (every
  // state, 0 included), and per known project how many wait (QUEUED) and
  // for how long the oldest has waited. Reads every job: O(jobs).
  struct JobCounts {
    struct Queue {
      int64_t length = 0;
      absl::Duration oldest_wait;
    };
    std::map<model::JobState, int64_t> by_state;
    std::map<std::string, Queue> queues;
  };
  JobCounts CountJobs() const;

  // What retention (service/retention.h) needs of the jobs, trials too.
  // O(jobs).
  struct Uses {
    // Every job and when it ended (nullopt: not yet).
    std::map<scheduler::JobKey, std::optional<absl::Time>> ends;
    // Every image a container job pinned (resolved_images' values) and
    // when the last job pinning it ended (nullopt: one has not).
    std::map<std::string, std::optional<absl::Time>> images;
    // The jobs that have not ended and run trainer packages (each uses a
    // package environment).
    std::set<scheduler::JobKey> packaged;
    // When the oldest job that has not ended and not yet started running
    // (queued, preparing) was created: what it will run may be in use
    // already, not yet recorded in its run directory.
    std::optional<absl::Time> oldest_not_running;
  };
  Uses RetentionUses() const;
  // Whether a job that has not ended pins any of `images`.
  bool PinnedByUnfinishedJob(const std::vector<std::string>& images) const;

  // What jobs used (service/usage_report.h), as of now. Reads every job of
  // the query's projects: O(jobs).
  std::vector<UsageRow> ReportUsage(const UsageQuery& query) const;

  // Every project mlengine knows (registered by getConfig or a first job),
  // by id. O(projects).
  std::vector<model::Project> ListProjects() const;

  // iam::ProjectDirectory
  std::optional<model::Project> FindProject(const std::string& id) const override;
  std::optional<model::Project> FindProjectByNumber(int64_t number) const override;

  // scheduler::StateRecorder
  void Record(const scheduler::JobKey& key, const scheduler::JobUpdate& update, Done done = nullptr) override;

  // For TuningCoordinator: a tuning job's trials are jobs of their own
  // (model::TrialJobOf), hidden from jobs.get and jobs.list.
  // The jobs of tuning job `key`'s trials, any state.
  std::vector<model::Job> TrialJobsOf(const scheduler::JobKey& key) const;
  // The attempt of the job (a trial's too) that runs now or ran last
  // (model::AttemptsMade); 1 for a job not known.
  int AttemptOf(const scheduler::JobKey& key) const;
  // Creates `trials` (QUEUED) and sets the tuning job's trainingOutput, in
  // one write, then queues the trials. FAILED_PRECONDITION when the tuning
  // job has ended or is being cancelled (nothing is written).
  void StartTrials(const scheduler::JobKey& key, std::vector<model::Job> trials, model::TrainingOutput output,
                   StatusCallback done);
  // Sets the tuning job's trainingOutput (durably; errors are logged).
  void SetTrainingOutput(const scheduler::JobKey& key, model::TrainingOutput output);
  // Stops a trial's job: CANCELLING with `reason` as its errorMessage, then
  // the scheduler stops it. Nothing when it has ended.
  void StopTrial(const scheduler::JobKey& trial, const std::string& reason);

 private:
  using Key = scheduler::JobKey;

  model::Project NewProject(const std::string& id) const;
  void AddProject(const model::Project& p);  // mu_ held (exclusive)
  // CreateJob once its images are pinned: the rest of its checks and the
  // durable write.
  void Accept(const std::string& project, model::Job job, JobCallback done, std::vector<db::Mutation> with_job,
              bool validate_only);
  // The job's TPU service account set up, and actAs on its serviceAccount.
  absl::Status CheckAccess(const std::string& project, const model::Job& job, const iam::Principal& caller) const;
  // resumePreviousJobId names a finished tuning job of the same parameters
  // (mu_ held, shared).
  absl::Status CheckResume(const std::string& project, const model::Job& job) const;
  // Fills in derived, read-time fields (jobPosition).
  model::Job Present(model::Job job) const;
  // The subscriber's part of `job`'s change from `from`: its writes added to
  // `writes`, and the change to tell it of once committed (none when no
  // subscriber wants it). mu_ may be held.
  std::optional<JobStateChange> Publish(const model::Job& job, model::JobState from, absl::Time now,
                                        std::vector<db::Mutation>* writes) const;
  void MarkUnsaved(const Key& key);
  // What a job used up to `now` (model::UsageOf).
  model::Usage UsageOfJob(const model::Job& job, absl::Time now, const model::Period& period = {}) const;
  // The ML units of tuning job `key`'s trials that ended (mu_ held).
  double TrialUnits(const Key& key) const;

  db::Store& store_;
  common::Clock& clock_;
  const validate::Config validation_;
  scheduler::Scheduler* scheduler_ = nullptr;
  iam::IamService* iam_ = nullptr;
  const containers::ImageResolver* images_ = nullptr;
  TuningCoordinator* tuning_ = nullptr;
  const StudyService* studies_ = nullptr;
  JobSubscriber* subscriber_ = nullptr;
  const DiskWatch* disk_ = nullptr;
  // Guarded by mu_ (SetAccounting may come while jobs end).
  model::ResourceTable accounting_resources_ = model::ResourceTable::Defaults();
  model::UsageRates accounting_rates_ = model::UsageRates::Defaults();

  mutable std::shared_mutex mu_;
  std::map<std::string, model::Project> projects_;
  // Project numbers (getConfig's serviceAccountProject, the default account's
  // email) to ids: looked up on each call that names a project by number and
  // each authentication of a project's default account.
  std::map<int64_t, std::string> project_by_number_;
  std::map<Key, model::Job> jobs_;
  // Newest first per project: sequence descending.
  std::map<std::string, std::map<int64_t, std::string, std::greater<>>> by_sequence_;
  // Jobs whose create is being made durable: reserved ids.
  std::map<Key, int64_t> pending_creates_;
  // Jobs whose last change the store refused (SaveUnsaved writes them).
  std::set<Key> unsaved_;
  bool saving_unsaved_ = false;
  int64_t next_sequence_ = 1;
  // Admission that waits on another server (an image registry's answer, up
  // to its timeout): a slow registry holds up the creates that need it, not
  // the HTTP threads every other call is served on. Last: stopped first.
  common::WorkerPool admission_{4, common::WorkerPool::OnStop::kDiscard};
};

}  // namespace mle::service
