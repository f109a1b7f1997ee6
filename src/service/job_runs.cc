#include "service/job_runs.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "common/status.h"
#include "model/job_state.h"
#include "rundir/slurm_files.h"

namespace mle::service {
namespace {

namespace fs = std::filesystem;

// Trial ids are decimal numbers: "2" before "10".
bool TrialBefore(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// What a run directory holds; absent files are simply absent.
absl::StatusOr<RunFiles> ReadRun(const std::string& run_dir, const std::string& trial_id) {
  RunFiles run;
  run.trial_id = trial_id;
  auto manifest = rundir::ReadManifest(run_dir);
  if (!manifest.ok()) return manifest.status();
  run.manifest = *std::move(manifest);
  std::vector<std::string> tasks;
  if (run.manifest) {
    for (const auto& r : run.manifest->replicas) tasks.push_back(r.task);
  } else {
    auto slurm_tasks = rundir::ReadSlurmTasks(run_dir);
    if (slurm_tasks.ok()) {
      run.slurm_tasks = *std::move(slurm_tasks);
      auto placement = rundir::ReadSlurmPlacement(run_dir);
      if (placement.ok()) {
        run.slurm_placement = *std::move(placement);
      } else if (!absl::IsNotFound(placement.status())) {
        return placement.status();
      }
    } else if (!absl::IsNotFound(slurm_tasks.status())) {
      return slurm_tasks.status();
    }
    tasks = run.slurm_tasks;
  }
  for (const auto& task : tasks) {
    auto exit = rundir::ReadExit(common::ReplicaExitPath(run_dir, task));
    if (!exit.ok()) return exit.status();
    if (*exit) run.exits[task] = **exit;
  }
  return run;
}

ReplicaStatus StatusOf(const std::string& task, const RunFiles& run, bool placed, bool started, bool job_ended) {
  ReplicaStatus r;
  r.task = task;
  r.trial_id = run.trial_id;
  if (auto exit = run.exits.find(task); exit != run.exits.end()) {
    if (exit->second.signaled) {
      r.state = ReplicaState::kKilled;
      r.signal = exit->second.value;
    } else {
      r.state = exit->second.value == 0 ? ReplicaState::kSucceeded : ReplicaState::kFailed;
      r.exit_code = exit->second.value;
    }
  } else if (job_ended) {
    r.state = ReplicaState::kKilled;
  } else {
    r.state = placed && started ? ReplicaState::kRunning : ReplicaState::kStarting;
  }
  return r;
}

}  // namespace

const char* ReplicaStateName(ReplicaState state) {
  switch (state) {
    case ReplicaState::kStarting: return "STARTING";
    case ReplicaState::kRunning: return "RUNNING";
    case ReplicaState::kSucceeded: return "SUCCEEDED";
    case ReplicaState::kFailed: return "FAILED";
    case ReplicaState::kKilled: return "KILLED";
  }
  return "STARTING";
}

JobReplicas DescribeReplicas(const std::vector<RunFiles>& runs, bool job_ended) {
  JobReplicas out;
  auto add_tpu_host = [&out](const std::string& host) {
    if (std::find(out.tpu_hosts.begin(), out.tpu_hosts.end(), host) == out.tpu_hosts.end()) {
      out.tpu_hosts.push_back(host);
    }
  };
  for (const RunFiles& run : runs) {
    if (run.manifest) {
      const bool started = run.manifest->stage == rundir::RunManifest::Stage::kStarted;
      for (const auto& m : run.manifest->replicas) {
        ReplicaStatus r = StatusOf(m.task, run, /*placed=*/true, started, job_ended);
        r.host = m.host;
        r.gpus = m.gpus;
        out.replicas.push_back(std::move(r));
      }
      for (const auto& host : run.manifest->tpu_hosts) add_tpu_host(host);
      out.tpu_simulated = out.tpu_simulated || (run.manifest->tpu_simulated && !run.manifest->tpu_hosts.empty());
      continue;
    }
    for (const auto& task : run.slurm_tasks) {
      auto node = run.slurm_placement.find(task);
      const bool placed = node != run.slurm_placement.end();
      ReplicaStatus r = StatusOf(task, run, placed, /*started=*/placed, job_ended);
      if (placed) r.host = node->second;
      out.replicas.push_back(std::move(r));
    }
  }
  return out;
}

absl::StatusOr<std::vector<logs::LogSource>> RunSourcesOf(const JobService& jobs, const std::string& project,
                                                          const model::Job& job, const std::string& trial_id) {
  std::vector<logs::LogSource> sources;
  if (!model::IsTuningJob(job)) {
    if (!trial_id.empty()) {
      return common::InvalidArgumentWithViolations(
          "Invalid request.", {{"trialId", absl::StrCat("job ", job.job_id, " is not a hyperparameter tuning job")}});
    }
    for (int a = 1; a <= model::AttemptsMade(job); ++a) sources.push_back({job.job_id, "", a});
    return sources;
  }
  for (const auto& trial : jobs.TrialJobsOf({project, job.job_id})) {
    if (trial_id.empty() || trial_id == trial.trial_id) {
      for (int a = 1; a <= model::AttemptsMade(trial); ++a) sources.push_back({trial.job_id, trial.trial_id, a});
    }
  }
  if (!trial_id.empty() && sources.empty()) {
    const bool known = job.training_output &&
                       std::any_of(job.training_output->trials.begin(), job.training_output->trials.end(),
                                   [&](const auto& t) { return t.trial_id == trial_id; });
    if (!known) {
      return absl::NotFoundError(
          absl::StrCat("Job projects/", project, "/jobs/", job.job_id, " has no trial ", trial_id, "."));
    }
  }
  std::stable_sort(sources.begin(), sources.end(), [](const logs::LogSource& a, const logs::LogSource& b) {
    return TrialBefore(a.trial_id, b.trial_id);
  });
  return sources;
}

absl::StatusOr<JobReplicas> JobRuns::Replicas(const std::string& project, const std::string& job_id) const {
  // The state first: if the job is final now, every exit it will record is on disk.
  auto job = jobs_.GetJob(project, job_id);
  if (!job.ok()) return job.status();
  auto sources = RunSourcesOf(jobs_, project, *job, "");
  if (!sources.ok()) return sources.status();
  std::vector<RunFiles> runs;
  for (size_t i = 0; i < sources->size(); ++i) {
    const logs::LogSource& source = (*sources)[i];
    // A run's replicas are those of its latest attempt.
    if (i + 1 < sources->size() && (*sources)[i + 1].job_id == source.job_id) continue;
    auto run = ReadRun(common::JobRunDir(runs_dir_, project, source.job_id, source.attempt), source.trial_id);
    if (!run.ok()) return run.status();
    runs.push_back(*std::move(run));
  }
  return DescribeReplicas(runs, model::IsTerminal(job->state));
}

absl::StatusOr<std::vector<MetricSeries>> JobRuns::Metrics(const std::string& project, const std::string& job_id,
                                                           const std::string& trial_id) const {
  auto job = jobs_.GetJob(project, job_id);
  if (!job.ok()) return job.status();
  auto sources = RunSourcesOf(jobs_, project, *job, trial_id);
  if (!sources.ok()) return sources.status();
  std::vector<MetricSeries> out;
  for (const auto& source : *sources) {
    const std::string run_dir = common::JobRunDir(runs_dir_, project, source.job_id, source.attempt);
    // Each replica's directory that holds a metric file, by task name.
    std::vector<std::string> tasks;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
      std::error_code file_ec;
      const std::string task = entry.path().filename().string();
      if (entry.is_directory(file_ec) && fs::is_regular_file(common::ReplicaMetricPath(run_dir, task), file_ec)) {
        tasks.push_back(task);
      }
    }
    std::sort(tasks.begin(), tasks.end());
    for (const auto& task : tasks) {
      auto reports = rundir::ReadAllMetricReports(common::ReplicaMetricPath(run_dir, task));
      if (!reports.ok()) return reports.status();
      for (auto& series : *reports) {
        const std::string& tag = series.first;  // (named: clang 14 captures no structured binding)
        auto& points = series.second;
        // A later attempt continues its replica's series: what it reports
        // for a step replaces what an earlier attempt did.
        auto same = std::find_if(out.begin(), out.end(), [&](const MetricSeries& m) {
          return m.tag == tag && m.task == task && m.trial_id == source.trial_id;
        });
        std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
        if (same == out.end()) {
          out.push_back({tag, task, source.trial_id, std::move(points)});
        } else if (!points.empty()) {
          std::erase_if(same->points, [&](const auto& p) { return p.step >= points.front().step; });
          same->points.insert(same->points.end(), points.begin(), points.end());
        }
      }
    }
  }
  return out;
}

}  // namespace mle::service
