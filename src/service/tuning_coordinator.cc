#include "service/tuning_coordinator.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "common/sha256.h"
#include "obs/log.h"
#include "rundir/replica_files.h"
#include "service/job_service.h"
#include "service/tuning_job.h"
#include "tuning/stopping.h"
#include "tuning/suggest.h"

namespace mle::service {
namespace {

using model::HyperparameterOutput;
using model::JobState;

std::string NameOf(const scheduler::JobKey& key) { return absl::StrCat("projects/", key.project, "/jobs/", key.job_id); }

// The optimizer's seed for the next suggestions of a job: the same job with
// the same trials gets the same points, after a restart too.
uint64_t SeedFor(const scheduler::JobKey& key, size_t trials) {
  const std::string digest = common::Sha256Hex(absl::StrCat(key.project, "/", key.job_id, "/", trials));
  uint64_t seed = 0;
  return absl::SimpleHexAtoi(digest.substr(0, 16), &seed) ? seed : 0;
}

HyperparameterOutput* FindTrial(model::TrainingOutput& output, const std::string& trial_id) {
  for (auto& t : output.trials) {
    if (t.trial_id == trial_id) return &t;
  }
  return nullptr;
}

}  // namespace

TuningCoordinator::TuningCoordinator(JobService& jobs, TuningOptions options)
    : jobs_(jobs), options_(std::move(options)) {}

TuningCoordinator::~TuningCoordinator() { Stop(); }

void TuningCoordinator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void TuningCoordinator::Stop() {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    stopping_ = true;
  }
  events_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TuningCoordinator::Post(Event e) {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    events_.push_back(std::move(e));
  }
  events_cv_.notify_one();
}

void TuningCoordinator::Submit(const model::Job& tuning_job) { Post(SubmitEvent{tuning_job, false}); }
void TuningCoordinator::Adopt(const model::Job& tuning_job) { Post(SubmitEvent{tuning_job, true}); }
void TuningCoordinator::Cancel(const Key& tuning_job) { Post(CancelEvent{tuning_job}); }
void TuningCoordinator::TrialChanged(const model::Job& trial) { Post(TrialEvent{trial}); }
void TuningCoordinator::Tick() { Post(TickEvent{}); }

void TuningCoordinator::Drain() {
  std::promise<void> reached;
  Post(BarrierEvent{[&reached] { reached.set_value(); }});
  reached.get_future().wait();
}

void TuningCoordinator::RunPending() {
  for (;;) {
    std::deque<Event> batch;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      batch.swap(events_);
    }
    if (batch.empty()) return;
    for (auto& e : batch) Handle(e);
  }
}

void TuningCoordinator::Loop() {
  absl::Time next_tick = absl::Now() + options_.poll;
  for (;;) {
    std::deque<Event> batch;
    {
      std::unique_lock<std::mutex> lock(events_mu_);
      events_cv_.wait_for(lock, absl::ToChronoNanoseconds(std::max(absl::ZeroDuration(), next_tick - absl::Now())),
                          [&] { return stopping_ || !events_.empty(); });
      if (stopping_) return;
      batch.swap(events_);
    }
    for (auto& e : batch) Handle(e);
    if (absl::Now() >= next_tick) {
      OnTick();
      next_tick = absl::Now() + options_.poll;
    }
  }
}

void TuningCoordinator::Handle(Event& e) {
  if (auto* s = std::get_if<SubmitEvent>(&e)) {
    OnSubmit(std::move(s->job), s->adopted);
  } else if (auto* c = std::get_if<CancelEvent>(&e)) {
    auto it = tunings_.find(c->key);
    if (it == tunings_.end()) return;
    it->second.cancelling = true;
    Step(c->key);
  } else if (auto* t = std::get_if<TrialEvent>(&e)) {
    OnTrial(t->trial);
  } else if (std::holds_alternative<TickEvent>(e)) {
    OnTick();
  } else if (auto* st = std::get_if<StartedEvent>(&e)) {
    auto it = tunings_.find(st->key);
    if (it == tunings_.end()) return;
    Tuning& t = it->second;
    const std::vector<std::string> started = std::exchange(t.starting, {});
    if (!st->status.ok()) {
      // The store refused the write: nothing of those trials exists. Their
      // entries go; the job ends rather than retry blindly.
      std::erase_if(t.output.trials, [&](const HyperparameterOutput& h) {
        return std::find(started.begin(), started.end(), h.trial_id) != started.end();
      });
      Finish(st->key, t, JobState::kFailed,
             absl::StrCat("mlengine could not record the job's next trials: ", st->status.message()));
      return;
    }
    Step(st->key);
  } else if (auto* b = std::get_if<BarrierEvent>(&e)) {
    b->reached();
  }
}

void TuningCoordinator::OnSubmit(model::Job job, bool adopted) {
  const Key key{job.project, job.job_id};
  if (!model::IsTuningJob(job) || model::IsTerminal(job.state)) return;
  Tuning t;
  t.output = job.training_output.value_or(model::TrainingOutput{});
  t.output.is_hyperparameter_tuning_job = true;
  t.output.hyperparameter_metric_tag = MetricTagOf(*job.training_input->hyperparameters);
  t.cancelling = job.state == JobState::kCancelling;
  const std::string& previous = job.training_input->hyperparameters->resume_previous_job_id;
  if (!previous.empty()) {
    // The resumed job's trials count and inform the optimizer (checked at
    // submission: it is a finished tuning job of the same parameters).
    auto prev = jobs_.GetJob(job.project, previous);
    if (prev.ok() && prev->training_output) {
      t.inherited = static_cast<int32_t>(prev->training_output->trials.size());
      if (!adopted) {
        for (const auto& trial : prev->training_output->trials) t.output.trials.push_back(trial);
      }
    }
  }
  for (const auto& trial : t.output.trials) t.next_trial = std::max(t.next_trial, TrialNumber(trial.trial_id) + 1);
  t.job = std::move(job);
  Tuning& stored = tunings_[key] = std::move(t);
  if (adopted) {
    // Whatever the trials' jobs did while no one was looking.
    for (const auto& trial : jobs_.TrialJobsOf(key)) {
      stored.next_trial = std::max(stored.next_trial, TrialNumber(trial.trial_id) + 1);
      if (FindTrial(stored.output, trial.trial_id) == nullptr) {
        HyperparameterOutput h;  // cannot happen (one transaction), but never lose a trial
        h.trial_id = trial.trial_id;
        stored.output.trials.push_back(std::move(h));
      }
      ApplyTrial(stored, trial);
    }
  }
  Persist(key, stored);
  Step(key);
}

void TuningCoordinator::OnTrial(const model::Job& trial) {
  const Key key{trial.project, trial.trial_of};
  auto it = tunings_.find(key);
  if (it == tunings_.end()) return;
  if (ApplyTrial(it->second, trial)) Persist(key, it->second);
  MirrorState(key, trial);
  if (model::IsTerminal(trial.state)) Step(key);
}

bool TuningCoordinator::ApplyTrial(Tuning& t, const model::Job& trial) {
  HyperparameterOutput* h = FindTrial(t.output, trial.trial_id);
  if (h == nullptr) return false;
  const HyperparameterOutput before = *h;
  const bool stopped_early = h->is_trial_stopped_early;
  // A trial stopped early ended as it was asked to: it succeeded, with the
  // last value it reported.
  h->state = stopped_early && trial.state == JobState::kCancelled ? JobState::kSucceeded : trial.state;
  h->start_time = trial.start_time;
  h->end_time = trial.end_time;
  if (model::IsTerminal(trial.state)) {
    ReadMetrics(t, *h);
    h->final_metric.reset();
    if (h->state == JobState::kSucceeded && !h->all_metrics.empty()) h->final_metric = h->all_metrics.back();
    if (trial.state == JobState::kFailed) {
      t.last_failure = trial.error_message;
      t.last_failed_trial = trial.trial_id;
    }
    t.stop_requested.erase(trial.trial_id);
  }
  t.output.completed_trial_count = std::count_if(t.output.trials.begin(), t.output.trials.end(),
                                                 [](const HyperparameterOutput& x) { return x.state == JobState::kSucceeded; });
  return h->state != before.state || h->start_time != before.start_time || h->end_time != before.end_time ||
         h->all_metrics.size() != before.all_metrics.size() || h->final_metric.has_value() != before.final_metric.has_value();
}

std::string TuningCoordinator::MetricPath(const Key& key, const std::string& trial_id) const {
  // The master's reports: as on AI Platform, the primary replica's count.
  const std::string trial_job = model::TrialJobId(key.job_id, trial_id);
  return common::ReplicaMetricPath(
      common::JobRunDir(options_.runs_dir, key.project, trial_job, jobs_.AttemptOf({key.project, trial_job})),
      "master-replica-0");
}

bool TuningCoordinator::ReadMetrics(Tuning& t, HyperparameterOutput& trial) {
  const Key key{t.job.project, t.job.job_id};
  auto reports = rundir::ReadMetricReports(MetricPath(key, trial.trial_id), t.output.hyperparameter_metric_tag);
  if (!reports.ok()) {
    obs::Log("tuning").warn("{} trial {}: cannot read its metrics: {}", NameOf(key), trial.trial_id,
                            reports.status().ToString());
    return false;
  }
  // The file keeps the last 100 reports; values already taken stay.
  std::vector<model::HyperparameterMetric> merged = trial.all_metrics;
  for (const auto& r : *reports) {
    const bool known = std::any_of(merged.begin(), merged.end(), [&](const model::HyperparameterMetric& m) {
      return m.training_step == r.step && m.objective_value == r.value;
    });
    if (!known) merged.push_back({r.step, r.value});
  }
  if (merged.size() == trial.all_metrics.size()) return false;
  trial.all_metrics = std::move(merged);
  return true;
}

void TuningCoordinator::MirrorState(const Key& key, const model::Job& trial) {
  auto parent = jobs_.GetJob(key.project, key.job_id);
  if (!parent.ok() || model::IsTerminal(parent->state) || parent->state == JobState::kCancelling) return;
  // The tuning job is as far along as its furthest trial.
  if (parent->state == JobState::kQueued) {
    if (trial.state == JobState::kPreparing || trial.state == JobState::kRunning) {
      jobs_.Record(key, {JobState::kPreparing, "", /*replace_message=*/true});
    } else if (trial.state == JobState::kQueued) {
      // Why it waits: its first waiting trial's reason.
      for (const auto& t : jobs_.TrialJobsOf(key)) {
        if (t.state != JobState::kQueued || t.error_message.empty()) continue;
        jobs_.Record(key, {JobState::kQueued, absl::StrCat("Trial ", t.trial_id, ": ", t.error_message), true});
        break;
      }
    }
  }
  if (trial.state == JobState::kRunning) {
    auto now = jobs_.GetJob(key.project, key.job_id);
    if (now.ok() && now->state == JobState::kPreparing) jobs_.Record(key, {JobState::kRunning, "", true});
  }
}

void TuningCoordinator::OnTick() {
  for (auto& [key, t] : tunings_) {
    const model::HyperparameterSpec& h = *t.job.training_input->hyperparameters;
    bool changed = false;
    for (auto& trial : t.output.trials) {
      if (trial.state != JobState::kRunning) continue;
      changed |= ReadMetrics(t, trial);
    }
    if (h.enable_trial_early_stopping.value_or(false) && !t.cancelling) {
      const tuning::StudySpec spec = StudySpecOf(h);
      const std::vector<tuning::Trial> trials = StudyTrialsOf(h, t.output.trials);
      for (size_t i = 0; i < t.output.trials.size(); ++i) {
        HyperparameterOutput& trial = t.output.trials[i];
        if (trial.state != JobState::kRunning || trial.is_trial_stopped_early || trial.all_metrics.empty()) continue;
        if (!tuning::ShouldStopMedian(spec.metrics.front(), trials[i], trials)) continue;
        trial.is_trial_stopped_early = true;
        changed = true;
        const auto& last = trial.all_metrics.back();
        obs::Log("tuning").info("{} trial {}: stopped early at step {}", NameOf(key), trial.trial_id,
                                last.training_step.value_or(0));
        t.stop_requested.insert(trial.trial_id);
        jobs_.StopTrial({key.project, model::TrialJobId(key.job_id, trial.trial_id)},
                        absl::StrCat("Stopped early: its ", t.output.hyperparameter_metric_tag, " at step ",
                                     last.training_step.value_or(0),
                                     " was worse than the median of the completed trials at that step."));
      }
    }
    if (changed) Persist(key, t);
  }
}

void TuningCoordinator::Persist(const Key& key, const Tuning& t) { jobs_.SetTrainingOutput(key, t.output); }

void TuningCoordinator::Step(const Key& key) {
  auto it = tunings_.find(key);
  if (it == tunings_.end()) return;
  Tuning& t = it->second;
  if (!t.starting.empty()) return;  // again once the trials being started are recorded
  const model::HyperparameterSpec& h = *t.job.training_input->hyperparameters;
  TuningState state{t.output.trials, t.inherited, t.cancelling, t.exhausted, t.last_failure, t.last_failed_trial};
  TuningStep step = PlanTuning(h, state);
  for (const auto& id : step.stop) {
    if (!t.stop_requested.insert(id).second) continue;
    jobs_.StopTrial({key.project, model::TrialJobId(key.job_id, id)},
                    t.cancelling ? "Cancelled with its hyperparameter tuning job."
                                 : "Stopped: the hyperparameter tuning job failed (maxFailedTrials).");
  }
  if (step.finish) return Finish(key, t, *step.finish, step.message);
  if (step.start <= 0) return;

  auto suggested = tuning::Suggest(StudySpecOf(h), StudyTrialsOf(h, t.output.trials), step.start,
                                   SeedFor(key, t.output.trials.size()));
  if (!suggested.ok()) {
    return Finish(key, t, JobState::kFailed,
                  absl::StrCat("Hyperparameter tuning cannot search this space: ", suggested.status().message()));
  }
  if (static_cast<int32_t>(suggested->size()) < step.start) t.exhausted = true;
  if (suggested->empty()) return Step(key);
  std::vector<model::Job> trials;
  for (const auto& a : *suggested) {
    const std::string id = absl::StrCat(t.next_trial++);
    HyperparameterOutput h_out;
    h_out.trial_id = id;
    h_out.hyperparameters = HyperparametersOf(a);
    h_out.state = JobState::kQueued;
    trials.push_back(TrialJobOf(t.job, id, h_out.hyperparameters));
    t.output.trials.push_back(std::move(h_out));
    t.starting.push_back(id);
  }
  jobs_.StartTrials(key, std::move(trials), t.output, [this, key](absl::Status s) { Post(StartedEvent{key, s}); });
}

void TuningCoordinator::Finish(const Key& key, Tuning& t, JobState state, const std::string& message) {
  const model::HyperparameterSpec& h = *t.job.training_input->hyperparameters;
  t.output.trials = SortedBestFirst(h, t.output.trials);
  jobs_.SetTrainingOutput(key, t.output);
  // Through the states a job passes (the state machine allows no shortcut).
  auto parent = jobs_.GetJob(key.project, key.job_id);
  if (parent.ok()) {
    JobState now = parent->state;
    if (state == JobState::kSucceeded) {
      for (JobState next : {JobState::kPreparing, JobState::kRunning}) {
        if (model::CanTransition(now, next) && !model::CanTransition(now, state)) {
          jobs_.Record(key, {next, "", true});
          now = next;
        }
      }
    }
    jobs_.Record(key, {state, message, !message.empty()});
  }
  obs::Log("tuning").info("{}: {} after {} trials", NameOf(key), model::JobStateName(state), t.output.trials.size());
  tunings_.erase(key);
}

}  // namespace mle::service
