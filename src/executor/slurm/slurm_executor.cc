#include "executor/slurm/slurm_executor.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/run_layout.h"
#include "common/time_format.h"
#include "executor/job_prep.h"
#include "executor/slurm/slurm_parsers.h"
#include "rundir/file_io.h"
#include "rundir/slurm_files.h"

namespace mle::executor::slurm {

namespace {

// How long a NODE_FAIL/PREEMPTED job of a requeueing cluster may take to be
// PENDING again before mlengine calls it ended.
constexpr absl::Duration kRequeueWait = absl::Seconds(20);

// A replica has started once its log exists. One that cannot be inspected
// counts as not started yet: the job stays PREPARING until it can be.
bool ReplicaLogExists(const std::string& run_dir, const std::string& task) {
  return rundir::FileExists(common::ReplicaLogPath(run_dir, task)).value_or(false);
}

bool IsFinal(const std::string& state) {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "NODE_FAIL" || state == "OUT_OF_MEMORY" || state == "PREEMPTED" || state == "BOOT_FAIL" ||
         state == "DEADLINE";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlurmExecutor>> SlurmExecutor::Create(SlurmExecutorOptions options,
                                                                     runtime::RuntimeCatalog runtimes,
                                                                     runtime::PackageCache& cache,
                                                                     CommandRunner& runner) {
  auto out = runner.Run({"sinfo", "--json"});
  if (!out.ok()) return absl::UnavailableError(absl::StrCat("Slurm did not answer `sinfo --json`: ", out.status().message()));
  if (out->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("`sinfo --json` failed (is SLURM_CONF right and slurmctld up?): ",
                                               absl::StripAsciiWhitespace(out->output)));
  }
  auto nodes = ParseNodesJson(out->output);
  if (!nodes.ok()) return nodes.status();
  if (nodes->empty()) return absl::UnavailableError("the Slurm cluster has no nodes (`sinfo --json` lists none)");
  return std::unique_ptr<SlurmExecutor>(
      new SlurmExecutor(std::move(options), std::move(runtimes), cache, runner, *std::move(nodes)));
}

SlurmExecutor::SlurmExecutor(SlurmExecutorOptions options, runtime::RuntimeCatalog runtimes,
                             runtime::PackageCache& cache, CommandRunner& runner, std::vector<SlurmNode> nodes)
    : options_(std::move(options)), runtimes_(std::move(runtimes)), cache_(cache), runner_(runner),
      nodes_(std::move(nodes)) {
  poller_ = std::thread([this] { PollLoop(); });
}

SlurmExecutor::~SlurmExecutor() {
  submitter_.Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  poller_.join();
  // Slurm jobs keep running: a restarted server finds them again (Recover).
}

absl::Status SlurmExecutor::CheckRunnable(const model::Job& job) const {
  if (auto s = CheckJobRunnable(job, runtimes_); !s.ok()) return s;
  const model::JobDemand demand = model::DemandOf(job, options_.resources);
  return CheckComponentsFit(PlanComponents(demand, options_.settings), demand, nodes_);
}

void SlurmExecutor::Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement&) {
  const JobRef ref{job.project, job.job_id};
  const std::string key = Key(ref);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tracked& t = jobs_[key];
    t = Tracked{};
    t.ref = ref;
    t.dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id);
    t.tasks = TasksOf(PlanComponents(demand, options_.settings));
  }
  submitter_.Post([this, key, job, demand] { Submit(key, job, demand); });
}

void SlurmExecutor::Submit(const std::string& key, const model::Job& job, const model::JobDemand& demand) {
  Tracked snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    snapshot = it->second;
  }
  // Already in Slurm (a restart after sbatch)? Then never submit again.
  std::optional<int64_t> existing;
  auto recorded = rundir::ReadSlurmJobId(snapshot.dir);
  auto submitting = rundir::HasSubmittingMarker(snapshot.dir);
  if (recorded.ok() && recorded->has_value()) {
    existing = **recorded;
  } else if (submitting.ok() && *submitting) {
    existing = FindByName(SlurmJobName(job.project, job.job_id));
  }
  if (!existing && snapshot.cancel_requested) return Finish(key, Outcome::kStopped, snapshot.cancel_reason);
  absl::StatusOr<int64_t> submitted = existing ? absl::StatusOr<int64_t>(*existing) : SubmitToSlurm(snapshot, job, demand);
  if (!submitted.ok()) return Finish(key, Outcome::kFailed, std::string(submitted.status().message()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    it->second.slurm_id = *submitted;
    it->second.phase = Phase::kWaiting;
  }
  events_->JobWaiting(snapshot.ref, "Submitted to Slurm; waiting for it to schedule the job");
  Wake();
}

absl::StatusOr<int64_t> SlurmExecutor::SubmitToSlurm(const Tracked& t, const model::Job& job,
                                                     const model::JobDemand& demand) {
  auto env = PrepareJobEnvironment(job, runtimes_, cache_, options_.gcs_root);
  if (!env.ok()) return env.status();

  const auto components = PlanComponents(demand, options_.settings);
  if (auto s = rundir::ClearRunDirectory(t.dir); !s.ok()) return s;
  codec::LaunchJob launch{job.project, job.job_id, job.training_input.value_or(model::TrainingInput{}),
                          ToLaunchComponents(components)};
  if (auto s = rundir::WriteLaunchJob(t.dir, launch); !s.ok()) return s;
  if (auto s = rundir::WriteSlurmTasks(t.dir, t.tasks); !s.ok()) return s;

  BatchScriptInput in;
  in.project = job.project;
  in.job_id = job.job_id;
  in.run_dir = t.dir;
  in.labels = job.labels;
  in.launcher_argv = {options_.launcher,  "--run-dir",  t.dir,
                      "--python",         env->python,  "--shim",
                      options_.shim,      "--gcs-root", options_.gcs_root,
                      "--python-path",    options_.python_path};
  if (options_.settings.tpu_simulated) in.launcher_argv.push_back("--tpu-simulated");
  for (const auto& n : nodes_) {
    if (n.address != n.name) {
      in.launcher_argv.push_back("--node-address");
      in.launcher_argv.push_back(absl::StrCat(n.name, "=", n.address));
    }
  }
  // Time limit: maxRunningTime (default 7 days), plus a minute so that
  // mlengine's own limit, with its clearer message, acts first.
  absl::Duration max_running = absl::Hours(24 * 7);
  int32_t priority = 0;
  if (job.training_input && job.training_input->scheduling) {
    const auto& s = *job.training_input->scheduling;
    if (!s.max_running_time.empty()) {
      if (auto d = common::ParseDuration(s.max_running_time); d) max_running = *d;
    }
    priority = s.priority.value_or(0);
  }
  in.time_limit_minutes = absl::ToInt64Minutes(max_running + absl::Minutes(1) + absl::Seconds(59));
  // scheduling.priority 0..1000 (higher first) -> nice 1000..0: never below
  // Slurm's default, so no privilege is needed.
  in.nice = 1000 - std::clamp<int32_t>(priority, 0, 1000);
  if (auto s = rundir::WriteBatchScript(t.dir, BuildBatchScript(in, components, options_.settings)); !s.ok()) {
    return s;
  }
  if (auto s = rundir::WriteSubmittingMarker(t.dir); !s.ok()) return s;
  auto out = runner_.Run({"sbatch", "--parsable", rundir::BatchScriptPath(t.dir)});
  if (!out.ok()) return absl::UnavailableError(absl::StrCat("Slurm did not accept the job: ", out.status().message()));
  if (out->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Slurm refused the job: ", absl::StripAsciiWhitespace(out->output)));
  }
  auto parsed = ParseSbatchParsable(out->output);
  if (!parsed.ok()) return parsed.status();
  if (auto s = rundir::WriteSlurmJobId(t.dir, parsed->job_id); !s.ok()) {
    // Slurm has the job: track it all the same. A restart finds it by name
    // (the submitting marker is on disk).
    std::cerr << "mlengined: Slurm accepted " << t.ref.project << "/" << t.ref.job_id << " as job "
              << parsed->job_id << ", but its id could not be recorded (a restart will look it up by name): "
              << s.message() << "\n";
  }
  return parsed->job_id;
}

std::optional<int64_t> SlurmExecutor::FindByName(const std::string& name) {
  auto out = runner_.Run({"squeue", "--json"});
  if (!out.ok() || out->exit_code != 0) return std::nullopt;
  auto jobs = ParseJobsJson(out->output);
  if (!jobs.ok()) return std::nullopt;
  for (const auto& j : *jobs) {
    if (j.name == name && j.het_job_offset == 0) return j.job_id;
  }
  return std::nullopt;
}

void SlurmExecutor::Cancel(const JobRef& ref, const std::string& reason) {
  const std::string key = Key(ref);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  it->second.cancel_requested = true;
  it->second.cancel_reason = reason;
  poll_soon_ = true;
  poll_cv_.notify_all();
}

std::optional<model::Placement> SlurmExecutor::Recover(const model::Job& job) {
  const JobRef ref{job.project, job.job_id};
  const std::string dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id);
  int64_t id = 0;
  auto recorded = rundir::ReadSlurmJobId(dir);
  if (recorded.ok() && recorded->has_value()) {
    id = **recorded;
  } else {
    auto submitting = rundir::HasSubmittingMarker(dir);
    if (!submitting.ok() || !*submitting) return std::nullopt;
    auto found = FindByName(SlurmJobName(job.project, job.job_id));
    if (!found) return std::nullopt;
    id = *found;
    if (auto s = rundir::WriteSlurmJobId(dir, id); !s.ok()) {
      std::cerr << "mlengined: found " << job.project << "/" << job.job_id << " in Slurm as job " << id
                << ", but could not record its id (will look it up by name again after a restart): "
                << s.message() << "\n";
    }
  }
  std::vector<std::string> tasks;
  if (auto read = rundir::ReadSlurmTasks(dir); read.ok()) {
    tasks = *std::move(read);
  } else {
    tasks = TasksOf(PlanComponents(model::DemandOf(job, options_.resources), options_.settings));
    std::cerr << "mlengined: " << read.status().message() << "; using the tasks its job plans\n";
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tracked& t = jobs_[Key(ref)];
    t = Tracked{};
    t.ref = ref;
    t.dir = dir;
    t.slurm_id = id;
    t.tasks = std::move(tasks);
    t.phase = job.state == model::JobState::kRunning     ? Phase::kRunning
              : job.state == model::JobState::kPreparing ? Phase::kPreparing
                                                         : Phase::kWaiting;
    if (job.state == model::JobState::kCancelling) {
      t.cancel_requested = true;
      t.cancel_reason = job.error_message;
    }
    poll_soon_ = true;
  }
  poll_cv_.notify_all();
  return model::Placement{};
}

void SlurmExecutor::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  poll_soon_ = true;
  poll_cv_.notify_all();
}

std::optional<std::pair<Outcome, std::string>> SlurmExecutor::ReadOutcome(const Tracked& t) const {
  auto outcome = rundir::ReadRunOutcome(t.dir);
  if (!outcome.ok()) {
    // Judged from Slurm's state instead; say why the launcher's word was not taken.
    std::cerr << "mlengined: " << t.ref.project << "/" << t.ref.job_id << ": " << outcome.status().message()
              << "\n";
    return std::nullopt;
  }
  if (!outcome->has_value()) return std::nullopt;
  return std::make_pair((*outcome)->succeeded ? Outcome::kSucceeded : Outcome::kFailed, (*outcome)->message);
}

void SlurmExecutor::End(const std::string& key, Tracked& t, const SlurmJob& sj, const std::vector<std::string>& nodes) {
  CatchUp(key, t);
  const auto outcome = ReadOutcome(t);
  if (t.cancel_requested) {
    // A master that finished before the cancel landed still succeeded.
    if (outcome && outcome->first == Outcome::kSucceeded) return Finish(key, outcome->first, outcome->second);
    return Finish(key, Outcome::kStopped, t.cancel_reason);
  }
  if (outcome) return Finish(key, outcome->first, outcome->second);
  if (sj.state == "COMPLETED" && t.phase == Phase::kRunning) return Finish(key, Outcome::kSucceeded, "");
  if (sj.state == "COMPLETED") {
    return Finish(key, Outcome::kFailed,
                  absl::StrCat("The Slurm job ", t.slurm_id, " completed without starting any replica; see ",
                               rundir::SlurmOutputPath(t.dir, t.slurm_id), "."));
  }
  if (sj.state == "CANCELLED") {
    return Finish(key, Outcome::kFailed,
                  absl::StrCat("The Slurm job ", t.slurm_id, " was cancelled outside mlengine (scancel)."));
  }
  const MappedState m = MapSlurmState(sj.state, sj.state_reason);
  std::string message =
      absl::StrCat(m.message, " (Slurm job ", t.slurm_id, ", ", sj.state,
                   nodes.empty() ? "" : absl::StrCat(", nodes ", absl::StrJoin(nodes, ",")), ").");
  if (sj.state == "NODE_FAIL") return Finish(key, Outcome::kLost, ExplainNodeFailure(t, nodes, message));
  Finish(key, Outcome::kFailed, message);
}

void SlurmExecutor::CatchUp(const std::string& key, Tracked& t) {
  // A job can start and end between two polls: if any replica ran, say it
  // started (QUEUED -> PREPARING -> RUNNING) before it ends.
  if (t.phase == Phase::kRunning || t.cancel_requested) return;
  bool ran = false;
  for (const auto& task : t.tasks) ran = ran || ReplicaLogExists(t.dir, task);
  if (!ran) return;
  if (t.phase != Phase::kPreparing) events_->JobPreparing(t.ref);
  events_->JobStarted(t.ref);
  t.phase = Phase::kRunning;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto jt = jobs_.find(key); jt != jobs_.end()) jt->second.phase = Phase::kRunning;
}

std::string SlurmExecutor::ExplainNodeFailure(const Tracked& t, const std::vector<std::string>& nodes,
                                              const std::string& fallback) {
  // Which of the job's nodes does Slurm now see as lost, and what ran there?
  auto out = runner_.Run({"sinfo", "--json"});
  absl::StatusOr<std::vector<SlurmNode>> now =
      !out.ok()               ? out.status()
      : out->exit_code != 0   ? absl::UnavailableError(absl::StrCat("sinfo exited with ", out->exit_code, ": ",
                                                                    absl::StripAsciiWhitespace(out->output)))
                              : ParseNodesJson(out->output);
  if (!now.ok()) {
    std::cerr << "mlengined: cannot tell which node of Slurm job " << t.slurm_id << " failed: "
              << now.status().message() << "\n";
    return fallback;
  }
  std::map<std::string, std::vector<std::string>> tasks_on;
  if (auto placement = rundir::ReadSlurmPlacement(t.dir); placement.ok()) {
    for (const auto& [task, node] : *placement) tasks_on[node].push_back(task);
  } else if (!absl::IsNotFound(placement.status())) {
    std::cerr << "mlengined: " << placement.status().message() << "\n";
  }
  std::vector<std::string> lost;
  for (const auto& n : *now) {
    if (!n.Lost() || std::find(nodes.begin(), nodes.end(), n.name) == nodes.end()) continue;
    auto it = tasks_on.find(n.name);
    lost.push_back(it == tasks_on.end() ? n.name
                                        : absl::StrCat(n.name, " (", absl::StrJoin(it->second, ", "), ")"));
  }
  if (lost.empty()) return fallback;
  return absl::StrCat("Slurm node", lost.size() > 1 ? "s " : " ", absl::StrJoin(lost, ", "),
                      " stopped responding, so Slurm ended the job (NODE_FAIL, Slurm job ", t.slurm_id,
                      "). Resubmit it, or set slurm.requeue for Slurm to requeue such jobs.");
}

void SlurmExecutor::Finish(const std::string& key, Outcome outcome, const std::string& message) {
  JobRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    ref = it->second.ref;
    jobs_.erase(it);
  }
  events_->JobEnded(ref, outcome, message);
}

bool SlurmExecutor::ChangeOnDisk() {
  std::vector<std::pair<std::string, std::string>> paths;  // outcome file, first-start log ("" if running)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, t] : jobs_) {
      if (t.slurm_id == 0) continue;
      const bool started = t.phase == Phase::kRunning || t.tasks.empty();
      paths.emplace_back(rundir::OutcomePath(t.dir), started ? "" : common::ReplicaLogPath(t.dir, t.tasks.back()));
    }
  }
  // Outside the lock: on NFS a stat may take a while. A stat that fails
  // counts as a change: the poll that follows reads the files and reports.
  for (const auto& [outcome, log] : paths) {
    if (rundir::FileExists(outcome).value_or(true) || (!log.empty() && rundir::FileExists(log).value_or(true))) {
      return true;
    }
  }
  return false;
}

void SlurmExecutor::PollLoop() {
  const auto tick = absl::ToChronoMilliseconds(options_.min_poll);
  absl::Duration interval = options_.min_poll;
  for (;;) {
    // At most one round per min_poll; otherwise wait for `interval` to pass,
    // a request (submission, cancel), or a sign on disk that a job just
    // started (its replica log) or ended (its outcome file).
    const absl::Time due = absl::Now() + interval;
    for (bool first = true;; first = false) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        poll_cv_.wait_for(lock, tick, [&] { return stopping_ || (!first && poll_soon_); });
        if (stopping_) return;
        if (poll_soon_) {
          poll_soon_ = false;
          break;
        }
      }
      if (absl::Now() >= due || ChangeOnDisk()) break;
    }
    Poll();
    // Back off while nothing is in motion; come back quickly when something is.
    bool moving = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [key, t] : jobs_) {
        moving = moving || t.phase == Phase::kSubmitting || t.phase == Phase::kPreparing ||
                 (t.cancel_requested && !t.scancel_sent);
      }
    }
    interval = moving ? options_.min_poll : std::min(options_.max_poll, interval * 2);
  }
}

void SlurmExecutor::Poll() {
  struct Todo {
    std::string key;
    Tracked t;
  };
  std::vector<Todo> todo;
  std::vector<int64_t> to_cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, t] : jobs_) {
      if (t.slurm_id == 0) continue;
      if (t.cancel_requested && !t.scancel_sent) {
        t.scancel_sent = true;
        to_cancel.push_back(t.slurm_id);
      }
      todo.push_back({key, t});
    }
  }
  if (todo.empty()) return;
  if (!to_cancel.empty()) {
    std::vector<std::string> argv = {"scancel"};
    for (int64_t id : to_cancel) argv.push_back(std::to_string(id));
    auto cancelled = runner_.Run(argv);  // one call for every cancel of this round
    if (!cancelled.ok() || cancelled->exit_code != 0) {
      // Not delivered (slurmctld down?): ask again next round.
      std::cerr << "mlengined: scancel failed (will retry): "
                << (cancelled.ok() ? cancelled->output : std::string(cancelled.status().message())) << "\n";
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, t] : jobs_) {
        if (std::find(to_cancel.begin(), to_cancel.end(), t.slurm_id) != to_cancel.end()) t.scancel_sent = false;
      }
    }
  }
  auto out = runner_.Run({"squeue", "--json"});
  absl::Status problem = !out.ok()               ? out.status()
                         : out->exit_code != 0   ? absl::UnavailableError(absl::StrCat(
                                                     "squeue exited with ", out->exit_code, ": ",
                                                     absl::StripAsciiWhitespace(out->output.substr(0, 500))))
                                                 : absl::OkStatus();
  absl::StatusOr<std::vector<SlurmJob>> jobs = problem.ok() ? ParseJobsJson(out->output) : problem;
  if (!jobs.ok()) {
    // slurmctld busy or down, or output we cannot read: try again next
    // round, and say so once per distinct problem.
    const std::string text(jobs.status().message());
    if (text != last_poll_problem_) std::cerr << "mlengined: cannot read Slurm's jobs (will retry): " << text << "\n";
    last_poll_problem_ = text;
    return;
  }
  last_poll_problem_.clear();
  std::map<int64_t, const SlurmJob*> by_id;
  std::map<int64_t, std::vector<std::string>> nodes_of;  // every component's nodes, by leader id
  for (const auto& j : *jobs) {
    if (j.het_job_offset == 0) by_id[j.job_id] = &j;
    auto& n = nodes_of[j.het_job_id > 0 ? j.het_job_id : j.job_id];
    n.insert(n.end(), j.nodes.begin(), j.nodes.end());
  }
  for (auto& [key, t] : todo) {
    auto it = by_id.find(t.slurm_id);
    if (it == by_id.end()) {
      // Not listed: Slurm forgot it (MinJobAge passed) or lost it. Give it a
      // few polls (a fresh submission can lag), then decide from the files.
      int missing = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto jt = jobs_.find(key);
        if (jt == jobs_.end()) continue;
        missing = ++jt->second.missing_polls;
      }
      if (missing < 3) continue;
      CatchUp(key, t);
      if (auto o = ReadOutcome(t)) {
        Finish(key, o->first, o->second);
      } else if (t.cancel_requested) {
        Finish(key, Outcome::kStopped, t.cancel_reason);
      } else {
        Finish(key, Outcome::kLost,
               absl::StrCat("Slurm no longer knows its job ", t.slurm_id, " and the job left no outcome; see ",
                            rundir::SlurmOutputPath(t.dir, t.slurm_id)));
      }
      continue;
    }
    const SlurmJob& sj = *it->second;
    if (std::getenv("MLENGINE_SLURM_TRACE") != nullptr) {
      std::cerr << "mlengined: Slurm job " << t.slurm_id << " (" << key << "): " << sj.state << " "
                << sj.state_reason << "\n";
    }
    // With --requeue, Slurm shows NODE_FAIL/PREEMPTED for a moment before
    // the job is PENDING again: give it time before calling it final.
    // (The launcher may have written an outcome as the node went: it does
    // not count while Slurm can still run the job again.)
    const bool may_requeue = options_.settings.requeue && !t.cancel_requested &&
                             (sj.state == "NODE_FAIL" || sj.state == "PREEMPTED");
    if (may_requeue) {
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(key);
      if (jt == jobs_.end()) continue;
      if (jt->second.final_seen == absl::InfinitePast()) jt->second.final_seen = absl::Now();
      if (absl::Now() - jt->second.final_seen < kRequeueWait) continue;
    }
    if (IsFinal(sj.state)) {
      End(key, t, sj, nodes_of[t.slurm_id]);
      continue;
    }
    MappedState m = MapSlurmState(sj.state, sj.state_reason);
    Phase next = t.phase;
    if (m.state == model::JobState::kQueued) next = Phase::kWaiting;
    if (m.state == model::JobState::kPreparing) next = Phase::kPreparing;
    if (m.state == model::JobState::kRunning) {
      // Running once every replica has started (its log exists).
      bool all = !t.tasks.empty();
      for (const auto& task : t.tasks) all = all && ReplicaLogExists(t.dir, task);
      next = all ? Phase::kRunning : Phase::kPreparing;
    }
    const bool requeued = next == Phase::kWaiting && (t.phase == Phase::kPreparing || t.phase == Phase::kRunning);
    if (requeued) {
      ++t.requeues;
      // The earlier run's outcome must not decide the next run.
      if (auto s = rundir::SetOutcomeAside(t.dir, t.requeues); !s.ok()) {
        std::cerr << "mlengined: " << key << " was requeued by Slurm, but its earlier outcome stays: " << s.message()
                  << "\n";
      }
    }
    if (next == Phase::kWaiting && t.requeues > 0) {
      m.message = absl::StrCat("Slurm requeued the job (", t.requeues == 1 ? "once" : absl::StrCat(t.requeues, " times"),
                               ": a node failed or it was preempted). ", m.message);
    }
    const bool reason_changed = next == Phase::kWaiting && m.message != t.reason;
    if (next == t.phase && !reason_changed && !requeued) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto jt = jobs_.find(key);
      if (jt == jobs_.end()) continue;
      jt->second.phase = next;
      jt->second.final_seen = absl::InfinitePast();
      jt->second.reason = m.message;
      jt->second.requeues = t.requeues;
      jt->second.missing_polls = 0;
    }
    if (t.cancel_requested) continue;
    switch (next) {
      case Phase::kWaiting:
        events_->JobWaiting(t.ref, m.message);
        break;
      case Phase::kPreparing:
        events_->JobPreparing(t.ref);
        break;
      case Phase::kRunning:
        if (t.phase == Phase::kWaiting) events_->JobPreparing(t.ref);
        events_->JobStarted(t.ref);
        break;
      case Phase::kSubmitting:
        break;
    }
  }
}

}  // namespace mle::executor::slurm
