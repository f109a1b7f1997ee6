// StudyService: the application logic of the ml v1 study API (AI Platform
// Vizier), with no HTTP types. Studies and their trials live in memory and
// are written through db::Store records (kinds "study.study", "study.trial",
// "study.operation") before a change is visible or answered; Recover() loads
// them back, including each study's next trial id, so trial ids are never
// reused, not even after a delete or a restart.
//
// Suggestions come from tuning::Suggest, seeded from the study's name and
// its trial count (the same state asks the same question); early stopping
// from tuning::ShouldStopMedian; optimal trials from tuning::ParetoOptimal.
// suggest and checkEarlyStoppingState answer with an Operation that is done
// when it is returned; operations.get reads it back.
//
// Tuning jobs are studies too: JobStudies (implemented by the job side)
// lists them; they are readable here and read-only (writes are
// FAILED_PRECONDITION), and a user study may not take a tuning job's id.
//
// Thread-safe: any method from any thread. Changes run one at a time, in
// order (check, make durable, apply, answer, then the next); callbacks run
// on the store's thread, or the caller's when refused at once. Reads never
// block on disk.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "db/change_queue.h"
#include "db/store.h"
#include "tuning/study.h"

namespace mle::service {

// The studies of tuning jobs, as the job side keeps them. A job's study has
// the job id as its study id and the job's region as its location.
// Implementations are thread-safe; StudyService calls them without holding
// its own lock.
class JobStudies {
 public:
  virtual ~JobStudies() = default;
  // The study of tuning job `study_id` of `project`, in whatever location.
  virtual std::optional<tuning::Study> Find(const std::string& project, const std::string& study_id) const = 0;
  // The studies of the project's tuning jobs in `location`.
  virtual std::vector<tuning::Study> List(const std::string& project, const std::string& location) const = 0;
  // The trials of a job's study, by id.
  virtual std::vector<tuning::StudyTrial> Trials(const std::string& project, const std::string& study_id) const = 0;
};

class StudyService {
 public:
  template <class T>
  using Callback = std::function<void(absl::StatusOr<T>)>;
  using StatusCallback = std::function<void(absl::Status)>;

  // `regions`: the locations served (the validator's region list);
  // `tpu_regions`: those with TPUs.
  StudyService(db::Store& store, common::Clock& clock, std::vector<std::string> regions,
               std::vector<std::string> tpu_regions);
  // Waits for the change in flight (its store callback still runs our code).
  ~StudyService() = default;

  // Connects the tuning jobs' studies (null: none).
  void AttachJobStudies(const JobStudies* jobs) { job_studies_ = jobs; }
  // Loads every study, trial and operation. Call once, before serving.
  absl::Status Recover();

  // ---- projects.locations ----
  absl::StatusOr<tuning::Location> GetLocation(const std::string& project, const std::string& location) const;
  struct LocationPage {
    std::vector<tuning::Location> locations;
    std::string next_page_token;
  };
  // page_size 0: all.
  absl::StatusOr<LocationPage> ListLocations(const std::string& project, int page_size,
                                             const std::string& page_token) const;

  // ---- studies ----
  void CreateStudy(const std::string& project, const std::string& location, const std::string& study_id,
                   tuning::StudyConfig config, Callback<tuning::Study> done);
  absl::StatusOr<tuning::Study> GetStudy(const std::string& project, const std::string& location,
                                         const std::string& study_id) const;
  absl::StatusOr<std::vector<tuning::Study>> ListStudies(const std::string& project,
                                                          const std::string& location) const;
  // Deletes the study and its trials.
  void DeleteStudy(const std::string& project, const std::string& location, const std::string& study_id,
                   StatusCallback done);
  // Whether `project` has a user study named `study_id` (a tuning job may
  // not take its id).
  bool HasUserStudy(const std::string& project, const std::string& study_id) const;

  // ---- trials ----
  struct StudyRef {
    std::string project, location, study_id;
  };
  struct NewTrial {
    std::vector<tuning::TrialParameter> parameters;
    std::optional<tuning::TrialStatus> state;  // REQUESTED, ACTIVE (unset) or COMPLETED
    std::vector<tuning::TrialMeasurement> measurements;
    std::optional<tuning::TrialMeasurement> final_measurement;
  };
  void CreateTrial(const StudyRef& study, NewTrial trial, Callback<tuning::StudyTrial> done);
  absl::StatusOr<tuning::StudyTrial> GetTrial(const StudyRef& study, const std::string& trial_id) const;
  absl::StatusOr<std::vector<tuning::StudyTrial>> ListTrials(const StudyRef& study) const;
  void DeleteTrial(const StudyRef& study, const std::string& trial_id, StatusCallback done);
  // `elapsed_given` false: the elapsed time is the trial's time since it started.
  void AddMeasurement(const StudyRef& study, const std::string& trial_id, tuning::TrialMeasurement measurement,
                      bool elapsed_given, Callback<tuning::StudyTrial> done);
  struct Completion {
    std::optional<tuning::TrialMeasurement> final_measurement;
    bool infeasible = false;
    std::string infeasible_reason;
  };
  void CompleteTrial(const StudyRef& study, const std::string& trial_id, Completion completion,
                     Callback<tuning::StudyTrial> done);
  void StopTrial(const StudyRef& study, const std::string& trial_id, Callback<tuning::StudyTrial> done);
  // The client's ACTIVE trials first (as many as asked for), then REQUESTED
  // ones, then new suggestions. A done Operation.
  void SuggestTrials(const StudyRef& study, int32_t suggestion_count, const std::string& client_id,
                     Callback<tuning::StudyOperation> done);
  void CheckEarlyStoppingState(const StudyRef& study, const std::string& trial_id,
                               Callback<tuning::StudyOperation> done);
  absl::StatusOr<std::vector<tuning::StudyTrial>> ListOptimalTrials(const StudyRef& study) const;

  // ---- projects.locations.operations ----
  absl::StatusOr<tuning::StudyOperation> GetOperation(const std::string& project, const std::string& location,
                                                      const std::string& operation_id) const;
  // Every operation here is done when created: FAILED_PRECONDITION for a
  // known one, NOT_FOUND otherwise.
  absl::Status CancelOperation(const std::string& project, const std::string& location,
                               const std::string& operation_id) const;

  // Most trials a suggest may ask for at once.
  static constexpr int32_t kMaxSuggestionCount = 1000;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // project, location, id
  struct Entry {
    tuning::Study study;
    int64_t next_trial_id = 1;
    std::map<int64_t, tuning::StudyTrial> trials;
  };

  // A change, prepared under mu_ from the state at its turn and applied
  // under mu_ once durable (db/change_queue.h).
  using Change = db::ChangeQueue::Change;
  using Prepare = db::ChangeQueue::Prepare;
  void Write(Prepare prepare) { changes_.Write(std::move(prepare)); }
  // Changes one trial of a user study: `edit` checks the trial and edits it
  // (its copy); an error answers the caller, false answers with the trial
  // unchanged, true stores and answers with the edited trial.
  using TrialEdit = std::function<absl::StatusOr<bool>(const Entry& entry, tuning::StudyTrial& trial)>;
  void EditTrial(const StudyRef& ref, const std::string& trial_id, TrialEdit edit,
                 Callback<tuning::StudyTrial> done);
  // The change that stores `updated` (a trial of `study`) and answers with it.
  Change TrialChange(const tuning::Study& study, const StudyRef& ref, const tuning::StudyTrial& updated,
                     Callback<tuning::StudyTrial> done);

  // A user study that may be changed: NOT_FOUND, or FAILED_PRECONDITION for
  // a tuning job's. mu_ held.
  absl::StatusOr<const Entry*> Writable(const StudyRef& ref) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const tuning::StudyTrial*> WritableTrial(const StudyRef& ref, const std::string& trial_id,
                                                          const Entry** entry) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The study and its trials, user's or job's, for reading.
  absl::StatusOr<std::pair<tuning::Study, std::vector<tuning::StudyTrial>>> Read(const StudyRef& ref) const;
  absl::Status CheckLocation(const std::string& location, const char* field) const;
  std::string NewOperationId() const;
  db::Mutation PutStudy(const Entry& entry, int64_t next_trial_id) const;

  db::Store& store_;
  common::Clock& clock_;
  const std::vector<std::string> regions_;
  const std::vector<std::string> tpu_regions_;
  const JobStudies* job_studies_ = nullptr;

  mutable absl::Mutex mu_;
  std::map<Key, Entry> studies_ ABSL_GUARDED_BY(mu_);
  std::map<Key, tuning::StudyOperation> operations_ ABSL_GUARDED_BY(mu_);

  // Last: destroyed first, once every queued change has finished.
  db::ChangeQueue changes_{store_, [this](const std::function<void()>& apply) {
                             absl::MutexLock lock(&mu_);
                             apply();
                           }};
};

}  // namespace mle::service
