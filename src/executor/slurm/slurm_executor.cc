#include "executor/slurm/slurm_executor.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/run_layout.h"
#include "common/time_format.h"
#include "executor/job_prep.h"
#include "executor/slurm/slurm_accounts.h"
#include "executor/slurm/slurm_parsers.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "rundir/file_io.h"
#include "rundir/slurm_files.h"

namespace mle::executor::slurm {

absl::StatusOr<std::unique_ptr<SlurmExecutor>> SlurmExecutor::Create(SlurmExecutorOptions options,
                                                                     runtime::RuntimeCatalog runtimes,
                                                                     runtime::PackageCache& cache,
                                                                     CommandRunner& runner, common::Clock& clock) {
  auto out = runner.Run({"sinfo", "--json"});
  if (!out.ok()) return absl::UnavailableError(absl::StrCat("Slurm did not answer `sinfo --json`: ", out.status().message()));
  if (out->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("`sinfo --json` failed (is SLURM_CONF right and slurmctld up?): ",
                                               absl::StripAsciiWhitespace(out->output)));
  }
  auto nodes = ParseNodesJson(out->output);
  if (!nodes.ok()) return nodes.status();
  if (nodes->empty()) return absl::UnavailableError("the Slurm cluster has no nodes (`sinfo --json` lists none)");
  if (options.settings.accounts == AccountMode::kPerProject) {
    auto assoc = runner.Run(ShowAssociationsArgv());
    if (!assoc.ok() || assoc->exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "slurm.accounts: per_project needs Slurm's accounting (slurmdbd, AccountingStorageType="
          "accounting_storage/slurmdbd; see docs/operations.md), but `sacctmgr show assoc` failed: ",
          assoc.ok() ? absl::StripAsciiWhitespace(assoc->output) : assoc.status().message()));
    }
  }
  return std::unique_ptr<SlurmExecutor>(
      new SlurmExecutor(std::move(options), std::move(runtimes), cache, runner, clock, *std::move(nodes)));
}

SlurmExecutor::SlurmExecutor(SlurmExecutorOptions options, runtime::RuntimeCatalog runtimes,
                             runtime::PackageCache& cache, CommandRunner& runner, common::Clock& clock,
                             std::vector<SlurmNode> nodes)
    : options_(std::move(options)), runtimes_(std::move(runtimes)), cache_(cache), runner_(runner), clock_(clock),
      nodes_(std::move(nodes)) {
  if (options_.background_threads) {
    for (int i = 0; i < std::max(1, options_.submit_concurrency); ++i) {
      submitters_.push_back(std::make_unique<common::SerialWorker>());
    }
    poller_ = std::thread([this] { PollLoop(); });
  }
}

SlurmExecutor::~SlurmExecutor() {
  for (auto& submitter : submitters_) submitter->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  // Slurm jobs keep running: a restarted server finds them again (Recover).
}

absl::Status SlurmExecutor::CheckRunnable(const model::Job& job) const {
  if (auto s = CheckJobRunnable(job, runtimes_, options_.podman != nullptr); !s.ok()) return s;
  const model::JobDemand demand = model::DemandOf(job, options_.resources);
  return CheckComponentsFit(PlanComponents(demand, options_.settings), demand, nodes_);
}

void SlurmExecutor::Launch(const model::Job& job, const model::JobDemand& demand, const model::Placement&) {
  const JobRef ref{job.project, job.job_id};
  const std::string key = Key(ref);
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = jobs_[key];
    e = Entry{};
    e.generation = generation = next_generation_++;
    e.job.ref = ref;
    e.job.dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id, model::CurrentAttempt(job));
    e.job.tasks = TasksOf(PlanComponents(demand, options_.settings));
    e.spec = job;
    e.demand = demand;
    e.stall_policy = StallPolicyOf(job, options_.stall_after, options_.stall_fails);
    e.watch_joins = WatchesJoins(job, demand);
  }
  if (common::SerialWorker* submitter = SubmitterFor(key)) {
    submitter->Post([this, key, generation, job, demand] { Submit(key, generation, job, demand); });
  } else {
    Submit(key, generation, job, demand);
  }
}

common::SerialWorker* SlurmExecutor::SubmitterFor(const std::string& key) const {
  if (submitters_.empty()) return nullptr;
  return submitters_[std::hash<std::string>{}(key) % submitters_.size()].get();
}

void SlurmExecutor::Submit(const std::string& key, uint64_t generation, const model::Job& job,
                           const model::JobDemand& demand) {
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    dir = it->second.job.dir;
  }
  // Already in Slurm (a restart after sbatch)? Then never submit again.
  const EarlierSubmission earlier = FindEarlierSubmission(dir);
  if (earlier.slurm_id != 0) return Adopt(key, generation, earlier.slurm_id);
  if (earlier.look_up) return LookUpByName(key, generation, earlier.why);
  SubmitNew(key, generation, job, demand);
}

void SlurmExecutor::SubmitNew(const std::string& key, uint64_t generation, const model::Job& job,
                              const model::JobDemand& demand) {
  TrackedJob snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    snapshot = it->second.job;
  }
  if (snapshot.cancel_requested) return Finish(key, generation, Outcome::kStopped, snapshot.cancel_reason);
  absl::StatusOr<int64_t> submitted = SubmitToSlurm(snapshot, job, demand);
  if (absl::IsUnknown(submitted.status())) {
    // Slurm may have it: find out by name before saying it failed.
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(key);
      if (it == jobs_.end() || it->second.generation != generation) return;
      it->second.job.submit_error = std::string(submitted.status().message());
    }
    return LookUpByName(key, generation, absl::StrCat("sbatch's answer was lost: ", submitted.status().message()));
  }
  if (!submitted.ok()) return Finish(key, generation, Outcome::kFailed, std::string(submitted.status().message()));
  Adopt(key, generation, *submitted);
}

void SlurmExecutor::Adopt(const std::string& key, uint64_t generation, int64_t slurm_id) {
  JobRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    it->second.job.slurm_id = slurm_id;
    it->second.job.phase = TrackPhase::kWaiting;
    it->second.job.reason = kSubmittedReason;
    ref = it->second.job.ref;
  }
  events_->JobWaiting(ref, kSubmittedReason);
  Wake();
}

void SlurmExecutor::LookUpByName(const std::string& key, uint64_t generation, const std::string& why) {
  JobRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    it->second.job.find_by_name = true;
    it->second.job.slurm_id = 0;
    ref = it->second.job.ref;
  }
  obs::Log("slurm").warn(
      "{} may already be in Slurm ({}); the next polls look it up by its name {}, and it is not submitted again "
      "while Slurm cannot answer",
      key, why, SlurmJobName(ref.project, ref.job_id));
  Wake();
}

SlurmExecutor::EarlierSubmission SlurmExecutor::FindEarlierSubmission(const std::string& dir) {
  auto recorded = rundir::ReadSlurmJobId(dir);
  if (!recorded.ok()) return {0, true, std::string(recorded.status().message())};
  if (recorded->has_value()) return {**recorded, false, ""};
  auto submitting = rundir::HasSubmittingMarker(dir);
  if (!submitting.ok()) return {0, true, std::string(submitting.status().message())};
  if (*submitting) {
    return {0, true,
            absl::StrCat(rundir::SubmittingPath(dir), " is there but no ", rundir::SlurmJobIdPath(dir),
                         ": mlengined stopped between sbatch and recording the Slurm job id")};
  }
  return {};
}

absl::StatusOr<int64_t> SlurmExecutor::SubmitToSlurm(const TrackedJob& t, const model::Job& job,
                                                     const model::JobDemand& demand) {
  // A container job brings its own environment; the launcher's Python then
  // only runs mlengine's own helpers (the simulated TPU worker).
  const bool containers = IsContainerJob(job);
  std::string python = runtimes_.runtimes().empty() ? "/usr/bin/python3" : runtimes_.runtimes().front().python;
  std::string environment;  // the package environment's directory, if it has one
  if (!containers) {
    auto env = PrepareJobEnvironment(job, runtimes_, cache_, options_.buckets);
    if (!env.ok()) return env.status();
    python = env->python;
    environment = env->dir;
  }

  const auto components = PlanComponents(demand, options_.settings);
  if (auto s = rundir::ClearRunDirectory(t.dir); !s.ok()) return s;
  // Its package environment is kept while the job runs (retention).
  if (!environment.empty()) {
    if (auto s = rundir::WriteRunEnvironment(t.dir, environment); !s.ok()) return s;
  }
  codec::LaunchJob launch;
  launch.project = job.project;
  launch.job_id = job.job_id;
  launch.trial_of = job.trial_of;
  launch.attempt = model::CurrentAttempt(job);
  if (const absl::Duration every = WatchEvery(StallPolicyOf(job, options_.stall_after, options_.stall_fails),
                                              WatchesJoins(job, demand) ? options_.join_timeout : absl::ZeroDuration());
      every > absl::ZeroDuration()) {
    launch.progress_every_ms = static_cast<int>(absl::ToInt64Milliseconds(every));
    launch.watch_joins = WatchesJoins(job, demand);
  }
  launch.trial_id = job.trial_id;
  launch.training_input = job.training_input.value_or(model::TrainingInput{});
  launch.vertex = job.vertex.Copy();
  launch.components = ToLaunchComponents(components);
  if (options_.credentials != nullptr) {
    auto credential = options_.credentials->IssueFor(job, /*outlives_machine=*/true);
    if (!credential.ok()) {
      return absl::Status(credential.status().code(),
                          absl::StrCat("mlengined could not issue the job's credential: ", credential.status().message()));
    }
    launch.service_account = credential->account;
    launch.access_token = credential->token;
    launch.api_endpoint = options_.api_endpoint;
  }
  if (containers) {
    if (options_.podman == nullptr) {
      return absl::FailedPreconditionError("This server runs no containers (no `containers:` in its configuration).");
    }
    // The nodes run podman with mlengine's configuration, kept with the run.
    const containers::ContainerSettings& cs = options_.podman->settings();
    codec::LaunchContainers lc{job.resolved_images, cs.podman,           cs.init, cs.runtime, cs.gpu_devices,
                               cs.registry_insecure, t.dir + "/containers.conf", SimulatedImageNotes(cs, job)};
    if (auto s = rundir::WriteFileAtomically(lc.containers_conf, containers::ContainersConf(cs)); !s.ok()) return s;
    launch.containers = std::move(lc);
  }
  if (options_.sandbox != nullptr) {
    // One identity for the job's whole life, resubmissions included.
    auto begun = options_.sandbox->BeginJob(job);
    if (!begun.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("The job could not be started in its sandbox: ", begun.status().message()));
    }
    codec::LaunchSandbox ls;
    ls.uid = begun->uid;
    for (const auto& b : begun->buckets) ls.buckets[b.bucket] = b.writable;
    ls.read_only = options_.sandbox_read_only;
    // The job's package environment (the interpreter is its bin/python).
    ls.read_only.push_back(environment.empty() ? std::filesystem::path(python).parent_path().parent_path().string()
                                               : environment);
    ls.pids_limit = options_.sandbox->pids_limit();
    for (const auto& r : demand.replicas) ls.limits[r.TaskName()] = {r.cpu_milli, r.memory_mib};
    launch.sandbox = std::move(ls);
  }
  if (auto s = rundir::WriteLaunchJob(t.dir, launch); !s.ok()) return s;
  if (auto s = rundir::WriteSlurmTasks(t.dir, t.tasks); !s.ok()) return s;

  auto account = AccountFor(job.project);
  if (!account.ok()) return account.status();
  BatchScriptInput in;
  in.account = *account;
  in.project = job.project;
  in.job_id = job.job_id;
  in.run_dir = t.dir;
  in.labels = job.labels;
  in.launcher_argv = {options_.launcher,  "--run-dir",  t.dir,
                      "--python",         python,       "--shim",
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
  // sbatch that did not finish (timed out) or printed no job id may still
  // have queued the job: its answer is lost, not a refusal.
  if (!out.ok()) return absl::UnknownError(absl::StrCat("Slurm did not accept the job: ", out.status().message()));
  if (out->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Slurm refused the job: ", absl::StripAsciiWhitespace(out->output)));
  }
  auto parsed = ParseSbatchParsable(out->output);
  if (!parsed.ok()) {
    return absl::UnknownError(absl::StrCat("sbatch printed no job id: ", parsed.status().message()));
  }
  if (auto s = rundir::WriteSlurmJobId(t.dir, parsed->job_id); !s.ok()) {
    // Slurm has the job: track it all the same. A restart finds it by name
    // (the submitting marker is on disk).
    obs::Log("slurm").warn(
        "Slurm accepted {}/{} as job {}, but its id could not be recorded (a restart will look it up by name): {}",
        t.ref.project, t.ref.job_id, parsed->job_id, std::string(s.message()));
  }
  return parsed->job_id;
}

absl::Status SlurmExecutor::MirrorQuotas(const scheduler::Quotas& quotas) {
  if (options_.settings.accounts != AccountMode::kPerProject) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(accounts_mu_);
  quotas_ = quotas;
  for (const auto& [project, regions] : quotas.spec().projects) known_projects_.insert(project);
  return PrepareAccounts();
}

absl::StatusOr<std::string> SlurmExecutor::AccountFor(const std::string& project) {
  if (options_.settings.accounts != AccountMode::kPerProject) return std::string();
  const std::string account = SlurmAccountOf(project);
  std::lock_guard<std::mutex> lock(accounts_mu_);
  if (known_projects_.count(project)) return account;
  known_projects_.insert(project);
  if (auto s = PrepareAccounts(); !s.ok()) {
    known_projects_.erase(project);  // the next submission tries again
    return absl::Status(s.code(), absl::StrCat("the project's Slurm account ", account, " is not ready: ", s.message()));
  }
  return account;
}

absl::Status SlurmExecutor::PrepareAccounts() {
  auto run = [this](const std::vector<std::string>& argv) -> absl::StatusOr<std::string> {
    auto out = runner_.Run(argv);
    if (!out.ok()) return out.status();
    if (out->exit_code != 0) {
      return absl::FailedPreconditionError(absl::StrCat("`", absl::StrJoin(argv, " "), "` exited with ",
                                                        out->exit_code, ": ", absl::StripAsciiWhitespace(out->output)));
    }
    return out->output;
  };
  auto shown = run(ShowAssociationsArgv());
  if (!shown.ok()) return shown.status();
  auto existing = ParseAssociations(*shown);
  if (!existing.ok()) return existing.status();
  AccountPlan plan = PlanAccounts(quotas_, options_.settings.region, known_projects_, options_.user, *existing,
                                  options_.settings);
  for (const auto& argv : plan.commands) {
    if (auto done = run(argv); !done.ok()) return done.status();
    obs::Log("slurm").info("{}", absl::StrJoin(argv, " "));
  }
  std::lock_guard<std::mutex> lock(mu_);
  account_limits_ = std::move(plan.limits);
  return absl::OkStatus();
}

void SlurmExecutor::Cancel(const JobRef& ref, const std::string& reason) {
  const std::string key = Key(ref);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  it->second.job.cancel_requested = true;
  it->second.job.cancel_reason = reason;
  it->second.job.cancel_outcome = Outcome::kStopped;
  poll_soon_ = true;
  poll_cv_.notify_all();
}

std::optional<model::Placement> SlurmExecutor::Recover(const model::Job& job) {
  const JobRef ref{job.project, job.job_id};
  const std::string key = Key(ref);
  const std::string dir = common::JobRunDir(options_.runs_dir, job.project, job.job_id, model::CurrentAttempt(job));
  const EarlierSubmission earlier = FindEarlierSubmission(dir);
  if (earlier.slurm_id == 0 && !earlier.look_up) return std::nullopt;  // never submitted
  const model::JobDemand demand = model::DemandOf(job, options_.resources);
  std::vector<std::string> tasks;
  if (auto read = rundir::ReadSlurmTasks(dir); read.ok()) {
    tasks = *std::move(read);
  } else {
    tasks = TasksOf(PlanComponents(demand, options_.settings));
    obs::Log("slurm").warn("{}; using the tasks its job plans", std::string(read.status().message()));
  }
  uint64_t generation = 0;
  // Its identity, held again (the launch document says which it was given).
  if (auto launch = rundir::ReadLaunchJob(dir); options_.sandbox != nullptr && launch.ok() && launch->sandbox) {
    options_.sandbox->runtime().identities->Hold(launch->sandbox->uid, JobCgroup(job.project, job.job_id));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = jobs_[key];
    e = Entry{};
    e.generation = generation = next_generation_++;
    e.spec = job;
    e.demand = demand;
    e.stall_policy = StallPolicyOf(job, options_.stall_after, options_.stall_fails);
    e.watch_joins = WatchesJoins(job, demand);
    TrackedJob& t = e.job;
    t.ref = ref;
    t.dir = dir;
    t.slurm_id = earlier.slurm_id;
    t.tasks = std::move(tasks);
    t.phase = job.state == model::JobState::kRunning     ? TrackPhase::kRunning
              : job.state == model::JobState::kPreparing ? TrackPhase::kPreparing
                                                         : TrackPhase::kWaiting;
    if (job.state == model::JobState::kCancelling) {
      t.cancel_requested = true;
      t.cancel_reason = job.error_message;
    }
  }
  if (earlier.look_up) {
    LookUpByName(key, generation, earlier.why);
  } else {
    Wake();
  }
  return model::Placement{};
}

void SlurmExecutor::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  poll_soon_ = true;
  poll_cv_.notify_all();
}

void SlurmExecutor::Finish(const std::string& key, uint64_t generation, Outcome outcome, const std::string& message) {
  JobRef ref;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    ref = it->second.job.ref;
    jobs_.erase(it);
  }
  EndSandbox(ref);
  events_->JobEnded(ref, outcome, message);
}

void SlurmExecutor::EndSandbox(const JobRef& ref) {
  if (options_.sandbox == nullptr) return;
  // Its processes and cgroups are the nodes' (Slurm ends the steps, each
  // node's launcher removes its cgroups): here only the identity goes back.
  sandbox::IdentityPool& identities = *options_.sandbox->runtime().identities;
  const std::string owner = JobCgroup(ref.project, ref.job_id);
  if (auto uid = identities.HeldBy(owner)) identities.Release(*uid, owner);
}

bool SlurmExecutor::ChangeOnDisk() {
  std::vector<std::pair<std::string, std::string>> paths;  // outcome file, first-start log ("" if running)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : jobs_) {
      const TrackedJob& t = e.job;
      if (t.slurm_id == 0) continue;
      const bool started = t.phase == TrackPhase::kRunning || t.tasks.empty();
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
    const absl::Time due = clock_.Now() + interval;
    // Where squeue is dear (many jobs known), rounds are further apart: at
    // least RoundGap between the end of one and the start of the next.
    if (const absl::Duration extra = RoundGap(options_.min_poll, last_squeue_) - options_.min_poll;
        extra > absl::ZeroDuration()) {
      std::unique_lock<std::mutex> lock(mu_);
      if (poll_cv_.wait_for(lock, absl::ToChronoMilliseconds(extra), [&] { return stopping_; })) return;
    }
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
      if (clock_.Now() >= due || ChangeOnDisk()) break;
    }
    PollOnce();
    // Back off while nothing is in motion; come back quickly when something is.
    bool moving = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [key, e] : jobs_) moving = moving || InMotion(e.job);
    }
    interval = moving ? options_.min_poll : std::min(options_.max_poll, interval * 2);
  }
}

void SlurmExecutor::SendCancels(const std::vector<int64_t>& slurm_ids) {
  if (slurm_ids.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  for (int64_t id : slurm_ids) argv.push_back(std::to_string(id));
  auto cancelled = runner_.Run(argv);
  if (cancelled.ok() && cancelled->exit_code == 0) return;
  // Not delivered (slurmctld down?): ask again next round.
  obs::Log("slurm").warn("scancel failed (will retry): {}",
                         cancelled.ok() ? cancelled->output : std::string(cancelled.status().message()));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, e] : jobs_) {
    if (std::find(slurm_ids.begin(), slurm_ids.end(), e.job.slurm_id) != slurm_ids.end()) e.job.scancel_sent = false;
  }
}

absl::StatusOr<std::map<int64_t, SlurmView>> SlurmExecutor::ReadSlurmJobs(const std::set<std::string>& names) {
  const absl::Time asked = absl::Now();  // real time (what squeue costs the host), whatever clock_ says
  auto list = [&](bool named) -> absl::StatusOr<std::vector<SlurmJob>> {
    std::vector<std::string> argv = {"squeue", "-h", "-t", "all", "-O", named ? kSqueueNamedFields : kSqueueFields};
    // Only the jobs of mlengined's own user, which submits every job of
    // its own: on a shared cluster another user may name a job as
    // mlengine names one, and a lookup by name must never adopt that job
    // (its state would become the mlengine job's).
    if (!options_.user.empty()) argv.push_back("--user=" + options_.user);
    if (named) argv.push_back(absl::StrCat("--name=", absl::StrJoin(names, ",")));
    auto out = runner_.Run(argv);
    last_squeue_ = absl::Now() - asked;
    if (!out.ok()) return out.status();
    if (out->exit_code != 0) {
      return absl::UnavailableError(absl::StrCat("squeue exited with ", out->exit_code, ": ",
                                                 absl::StripAsciiWhitespace(out->output.substr(0, 500))));
    }
    return ParseJobsTable(out->output, named);
  };
  // Every job Slurm knows; then, while some job is looked up by name, the
  // jobs of those names (the only listing that shows names: see
  // kSqueueFields), their names given to the jobs listed (or the job added,
  // submitted between the two).
  auto jobs = list(false);
  if (!jobs.ok()) return jobs.status();
  if (!names.empty()) {
    auto named = list(true);
    if (!named.ok()) return named.status();
    for (auto& n : *named) {
      auto it = std::find_if(jobs->begin(), jobs->end(), [&](const SlurmJob& j) { return j.job_id == n.job_id; });
      if (it == jobs->end()) {
        jobs->push_back(std::move(n));
      } else {
        it->name = std::move(n.name);
      }
    }
  }
  std::map<int64_t, SlurmView> views;
  std::map<int64_t, std::vector<std::string>> nodes_of;  // every component's nodes, by leader id
  for (const auto& j : *jobs) {
    if (j.het_job_offset == 0) views[j.job_id] = SlurmView::Listed(j, {});
    auto& n = nodes_of[j.het_job_id > 0 ? j.het_job_id : j.job_id];
    n.insert(n.end(), j.nodes.begin(), j.nodes.end());
  }
  for (auto& [id, view] : views) view.nodes = std::move(nodes_of[id]);
  return views;
}

FilesSeen SlurmExecutor::LookAtFiles(const std::string& key, const TrackedJob& t, FilesWanted wanted) {
  FilesSeen files;
  if (wanted == FilesWanted{}) return files;
  std::string problem;
  if (wanted.outcome) {
    if (auto outcome = rundir::ReadRunOutcome(t.dir); outcome.ok()) {
      files.outcome = *std::move(outcome);
    } else {
      // Judged without it (from Slurm's state); say why the launcher's word was not taken.
      problem = std::string(outcome.status().message());
    }
  }
  if (wanted.started_tasks) {
    for (const auto& task : t.tasks) {
      // A log that cannot be inspected counts as not there yet.
      auto exists = rundir::FileExists(common::ReplicaLogPath(t.dir, task));
      if (exists.ok() && *exists) files.started_tasks.insert(task);
      if (!exists.ok() && problem.empty()) problem = std::string(exists.status().message());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key);
  if (it != jobs_.end() && it->second.files_problem != problem) {
    if (!problem.empty()) obs::Log("slurm").warn("{}: {}", key, problem);
    it->second.files_problem = problem;
  }
  return files;
}

std::string SlurmExecutor::ExplainLostNodes(const TrackedJob& t, const std::vector<std::string>& nodes,
                                            const std::string& fallback) {
  // Which of the job's nodes does Slurm now see as lost, and what ran there?
  auto out = runner_.Run({"sinfo", "--json"});
  absl::StatusOr<std::vector<SlurmNode>> now =
      !out.ok()               ? out.status()
      : out->exit_code != 0   ? absl::UnavailableError(absl::StrCat("sinfo exited with ", out->exit_code, ": ",
                                                                    absl::StripAsciiWhitespace(out->output)))
                              : ParseNodesJson(out->output);
  if (!now.ok()) {
    obs::Log("slurm").warn("cannot tell which node of Slurm job {} failed: {}", t.slurm_id,
                           std::string(now.status().message()));
    return fallback;
  }
  auto placement = rundir::ReadSlurmPlacement(t.dir);
  if (!placement.ok() && !absl::IsNotFound(placement.status())) {
    obs::Log("slurm").warn("{}", std::string(placement.status().message()));
  }
  return ExplainNodeFailure(t.slurm_id, nodes, *now, placement.value_or(std::map<std::string, std::string>{}),
                            fallback);
}

void SlurmExecutor::CarryOut(const std::string& key, uint64_t generation, Step step) {
  if (step.record_slurm_id) {
    if (auto s = rundir::WriteSlurmJobId(step.next.dir, step.next.slurm_id); !s.ok()) {
      obs::Log("slurm").warn(
          "found {} in Slurm as job {}, but could not record its id (after a restart it is looked up by name again): "
          "{}",
          key, step.next.slurm_id, std::string(s.message()));
    }
  }
  if (step.set_outcome_aside) {
    if (auto s = rundir::SetOutcomeAside(step.next.dir, step.next.requeues); !s.ok()) {
      obs::Log("slurm").warn("{} was requeued by Slurm, but its earlier outcome stays: {}", key,
                             std::string(s.message()));
    }
  }
  if (step.Ended() && step.explain_node_failure) {
    step.reports.back().message = ExplainLostNodes(step.next, step.nodes, step.reports.back().message);
  }
  model::Job spec;
  model::JobDemand demand;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || it->second.generation != generation) return;
    AdoptDecisions(step.next, &it->second.job);
    if (step.submit) {
      spec = it->second.spec;
      demand = it->second.demand;
    }
    if (step.Ended()) jobs_.erase(it);
  }
  for (const Report& r : step.reports) {
    switch (r.kind) {
      case Report::Kind::kWaiting:
        events_->JobWaiting(step.next.ref, r.message);
        events_->JobStarved(step.next.ref, r.for_resources);
        break;
      case Report::Kind::kPreparing:
        events_->JobPreparing(step.next.ref);
        break;
      case Report::Kind::kStarted:
        events_->JobStarted(step.next.ref);
        obs::Metrics::Default().ReplicaStarts("slurm").Increment(static_cast<double>(step.next.tasks.size()));
        break;
      case Report::Kind::kEnded:
        if (r.outcome == Outcome::kFailed || r.outcome == Outcome::kLost) {
          obs::Metrics::Default().ReplicaFailures("slurm").Increment();
        }
        EndSandbox(step.next.ref);
        if (auto placed = rundir::ReadSlurmPlacement(step.next.dir); placed.ok() && !placed->empty()) {
          std::set<std::string> hosts;
          for (const auto& [task, node] : *placed) hosts.insert(node);
          events_->JobHosts(step.next.ref, {hosts.begin(), hosts.end()});
        }
        events_->JobEnded(step.next.ref, r.outcome, r.message);
        break;
    }
  }
  if (step.submit) {
    if (common::SerialWorker* submitter = SubmitterFor(key)) {
      submitter->Post([this, key, generation, spec, demand] { SubmitNew(key, generation, spec, demand); });
    } else {
      SubmitNew(key, generation, spec, demand);
    }
  }
}

void SlurmExecutor::PollOnce() {
  struct Todo {
    std::string key;
    uint64_t generation;
    TrackedJob job;
  };
  std::vector<Todo> todo;
  std::vector<int64_t> to_cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, e] : jobs_) {
      if (e.job.slurm_id == 0 && !e.job.find_by_name) continue;  // being submitted
      if (ScancelDue(e.job)) {
        e.job.scancel_sent = true;
        to_cancel.push_back(e.job.slurm_id);
      }
      todo.push_back({key, e.generation, e.job});
    }
  }
  if (todo.empty()) return;
  obs::ScopedTimer round_timer(obs::Metrics::Default().ExecutorPoll("slurm"));
  SendCancels(to_cancel);  // before squeue, so that this round sees them
  std::set<std::string> names;  // of the jobs looked up by name
  for (const auto& todo_job : todo) {
    if (todo_job.job.find_by_name) names.insert(SlurmJobName(todo_job.job.ref.project, todo_job.job.ref.job_id));
  }
  auto views = ReadSlurmJobs(names);
  if (!views.ok()) {
    // slurmctld busy or down, or output we cannot read: try again next
    // round, and say so once per distinct problem.
    const std::string text(views.status().message());
    if (text != last_poll_problem_) obs::Log("slurm").warn("cannot read Slurm's jobs (will retry): {}", text);
    last_poll_problem_ = text;
    return;
  }
  last_poll_problem_.clear();
  TrackingOptions tracking;
  tracking.requeue = options_.settings.requeue;
  tracking.requeue_wait = options_.requeue_wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tracking.account_limits = account_limits_;
  }
  const bool trace = std::getenv("MLENGINE_SLURM_TRACE") != nullptr;
  for (auto& [key, generation, t] : todo) {
    const SlurmView view = ViewOf(t, *views);
    if (trace && view.kind == SlurmView::Kind::kListed) {
      obs::Log("slurm").info("Slurm job {} ({}): {} {}", view.job.job_id, key, view.job.state,
                             view.job.state_reason);
    }
    const FilesSeen files = LookAtFiles(key, t, FilesNeeded(t, view));
    CarryOut(key, generation, NextStep(t, view, files, clock_.Now(), tracking));
  }
  LookForStalls();
}

bool SlurmExecutor::WatchesJoins(const model::Job& job, const model::JobDemand& demand) const {
  const bool containers = job.training_input && model::UsesCustomContainer(*job.training_input);
  return options_.join_timeout > absl::ZeroDuration() && demand.replicas.size() > 1 && !containers;
}

void SlurmExecutor::LookForStalls() {
  struct Look {
    std::string key;
    uint64_t generation;
    JobRef ref;
    std::string dir;
    std::vector<std::string> tasks;
  };
  std::vector<Look> looks;
  const absl::Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, e] : jobs_) {
      const absl::Duration join = e.watch_joins && !e.joined ? options_.join_timeout : absl::ZeroDuration();
      const absl::Duration every = WatchEvery(e.stall_policy, join);
      if (every <= absl::ZeroDuration() || e.job.phase != TrackPhase::kRunning || e.job.cancel_requested) continue;
      if (e.running_since == absl::InfinitePast()) e.running_since = now;
      if (now < e.next_stall_look) continue;
      e.next_stall_look = now + every;
      looks.push_back({key, e.generation, e.job.ref, e.job.dir, e.job.tasks});
    }
  }
  for (const Look& look : looks) {
    // What each replica's shim last recorded, and its log's last write.
    int64_t ticks = 0;
    absl::Time newest = absl::InfinitePast();
    std::vector<std::string> not_joined;
    for (const std::string& task : look.tasks) {
      const ReplicaProgress progress =
          ParseReplicaProgress(ReadFileOrEmpty(common::ReplicaProgressPath(look.dir, task)));
      ticks += progress.cpu_ticks.value_or(0);
      // No record yet, or "joined 0"; a shim given no ports to watch (a TPU
      // host's worker) writes no "joined" line and is not waited for.
      if (!progress.cpu_ticks || progress.joined == false) not_joined.push_back(task);
      struct stat st;
      if (::stat(common::ReplicaLogPath(look.dir, task).c_str(), &st) == 0) {
        newest = std::max(newest, absl::TimeFromTimespec(st.st_mtim));
      }
    }
    StallVerdict verdict;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(look.key);
      if (it == jobs_.end() || it->second.generation != look.generation || it->second.job.cancel_requested) continue;
      Entry& e = it->second;
      // Ends the job (the next round's scancel) as `outcome`, saying `message`.
      auto end = [&](std::string message, Outcome outcome) {
        obs::Log("slurm").warn("{}: {}", look.key, message);
        e.job.cancel_requested = true;
        e.job.cancel_reason = std::move(message);
        e.job.cancel_outcome = outcome;
        poll_soon_ = true;
        poll_cv_.notify_all();
      };
      if (e.watch_joins && !e.joined) {
        if (not_joined.empty()) {
          e.joined = true;
        } else if (now - e.running_since >= options_.join_timeout) {
          end(NotJoinedFailure(not_joined, options_.join_timeout,
                               "the job's ports, as their shims saw it on their nodes", "slurm.join_timeout_seconds"),
              Outcome::kNotJoined);
          continue;
        }
      }
      verdict = JudgeStall(e.stall, ticks, newest, now, e.stall_policy, "slurm.stall_action");
      if (verdict.stalled) obs::Metrics::Default().Stalls("slurm").Increment();
      if (verdict.kind == StallVerdict::Kind::kFail) end(std::move(verdict.text), Outcome::kStalled);
    }
    if (verdict.kind == StallVerdict::Kind::kNote && events_ != nullptr) {
      if (verdict.stalled) obs::Log("slurm").warn("{}: {}", look.key, verdict.text);
      events_->JobNote(look.ref, verdict.text);
    }
  }
}

}  // namespace mle::executor::slurm
