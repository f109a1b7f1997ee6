// TuningCoordinator: runs hyperparameter tuning jobs. A tuning job never
// runs itself: its trials do, each as a job of its own (model::TrialJobOf),
// queued, placed and run by the scheduler and the executor like any job, so
// they share the queue and the project's quota, and a waiting trial says
// why. The coordinator asks the optimizer (src/tuning) for trials, at most
// maxParallelTrials unfinished at once; follows each trial's job; reads the
// metric its master reports (cloudml-hypertune's file, see
// rundir::ReadMetricReports) while it runs and when it ends; stops trials
// early by the median rule when the job asks for it; and ends the tuning job
// when maxTrials are done, maxFailedTrials have failed, or it is cancelled.
// The policy is pure (tuning_job.h); this is the shell.
//
// Durability: a trial's job and the tuning job's trainingOutput naming it
// are written in one transaction (JobService::StartTrials), so a crash
// never loses a trial and a restart never reuses a trial id. After a
// restart, Adopt rebuilds everything from the tuning job and its trials'
// jobs.
//
// Threading: one thread (Start) handles posted events in order; tests call
// RunPending instead. Every public method may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "model/job.h"
#include "scheduler/job_key.h"

namespace mle::service {

class JobService;

struct TuningOptions {
  std::string runs_dir;  // DATA_DIR/runs: where the trials' metric files are
  // How often running trials' metrics are read (thread mode).
  absl::Duration poll = absl::Seconds(1);
};

class TuningCoordinator {
 public:
  using Key = scheduler::JobKey;
  TuningCoordinator(JobService& jobs, TuningOptions options);
  ~TuningCoordinator();
  TuningCoordinator(const TuningCoordinator&) = delete;
  TuningCoordinator& operator=(const TuningCoordinator&) = delete;

  void Start();
  void Stop();

  // Events.
  void Submit(const model::Job& tuning_job);  // just created (QUEUED)
  void Adopt(const model::Job& tuning_job);   // unfinished, after a restart
  void Cancel(const Key& tuning_job);         // it is CANCELLING now
  void TrialChanged(const model::Job& trial);  // a trial's job changed (state or message)
  void Tick();                                 // read running trials' metrics

  // Processes every posted event now, on the calling thread (tests).
  void RunPending();
  // Blocks until every event posted before the call has been handled.
  void Drain();

 private:
  struct SubmitEvent { model::Job job; bool adopted; };
  struct CancelEvent { Key key; };
  struct TrialEvent { model::Job trial; };
  struct TickEvent {};
  struct StartedEvent { Key key; absl::Status status; };
  struct BarrierEvent { std::function<void()> reached; };
  using Event = std::variant<SubmitEvent, CancelEvent, TrialEvent, TickEvent, StartedEvent, BarrierEvent>;

  struct Tuning {
    model::Job job;                // the tuning job (its spec)
    model::TrainingOutput output;  // its trials, as recorded
    int32_t inherited = 0;
    bool cancelling = false;
    bool exhausted = false;
    std::vector<std::string> starting;  // trial ids whose StartTrials write is in flight
    int64_t next_trial = 1;
    std::string last_failure, last_failed_trial;
    std::set<std::string> stop_requested;  // trial ids
    std::map<std::string, size_t> reports_seen;  // trial id -> metric reports read
  };

  void Post(Event e);
  void Loop();
  void Handle(Event& e);
  void OnSubmit(model::Job job, bool adopted);
  void OnTrial(const model::Job& trial);
  void OnTick();
  // Applies a trial job's state to its output entry; true when it changed.
  bool ApplyTrial(Tuning& t, const model::Job& trial);
  // Reads the trial's metric reports into its entry; true when they changed.
  bool ReadMetrics(Tuning& t, model::HyperparameterOutput& trial);
  void Step(const Key& key);
  void Persist(const Key& key, const Tuning& t);
  void Finish(const Key& key, Tuning& t, model::JobState state, const std::string& message);
  void MirrorState(const Key& key, const model::Job& trial);
  std::string MetricPath(const Key& key, const std::string& trial_id) const;

  JobService& jobs_;
  const TuningOptions options_;

  std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::deque<Event> events_;
  bool stopping_ = false;
  std::thread thread_;

  // Owned by the event-handling thread.
  std::map<Key, Tuning> tunings_;
};

}  // namespace mle::service
