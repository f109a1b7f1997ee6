// The scheduler's pass when one slot frees: 10,000 queued jobs in 100
// projects (weights 1 to 4, quotas on CPUs and jobs, three job shapes, mixed
// priorities) on a cluster that is full, then one running job ends: the
// time from its end to the freed slot's placement (the event handled, the
// plan made and carried out). Beside it, the same queue in one project
// without quotas or shares: priority and age alone. Prints both and the
// ratio; exits 1 when the median with quotas and fair share is 1 ms or more.
//
// Usage: schedule_pass [rounds]   (bench/run.sh runs it)
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "scheduler/scheduler.h"

namespace mle::scheduler {
namespace {

constexpr int kQueued = 10'000;
constexpr int kProjects = 100;
constexpr int kCpus = 200;  // all held by 1-CPU jobs when the measurement starts

// Records nothing durable: every update is on disk at once.
class InstantRecorder final : public StateRecorder {
 public:
  void Record(const JobKey&, const JobUpdate&, Done done) override {
    ++records;
    if (done) done(absl::OkStatus());
  }
  int64_t records = 0;
};

class CountingExecutor final : public executor::Executor {
 public:
  absl::Status CheckRunnable(const model::Job&) const override { return absl::OkStatus(); }
  void Launch(const model::Job& job, const model::JobDemand&, const model::Placement&) override {
    launched.push_back({job.project, job.job_id});
  }
  void Cancel(const executor::JobRef&, const std::string&) override {}
  std::optional<model::Placement> Recover(const model::Job&) override { return std::nullopt; }
  std::vector<JobKey> launched;
};

model::Job MakeJob(const std::string& project, const std::string& id, int64_t sequence, int replicas,
                   int32_t priority, absl::Time now) {
  model::Job j;
  j.project = project;
  j.job_id = id;
  j.sequence = sequence;
  j.state = model::JobState::kQueued;
  j.create_time = now;
  model::TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = t.worker_type = "n1-standard-4";
  t.worker_count = replicas - 1;
  t.region = "us-central1";
  t.scheduling = model::Scheduling{"3600s", "", priority};
  j.training_input = t;
  return j;
}

struct Result {
  std::vector<double> micros;  // per freed slot
  int64_t started = 0;
  int64_t records = 0;  // state and reason updates for the store while measured
};

// Fills the cluster, queues the jobs (in `projects` projects), then frees one
// slot `rounds` times and times each.
Result Measure(int projects, bool policies, int rounds) {
  common::FakeClock clock;
  InstantRecorder recorder;
  CountingExecutor executor;
  SchedulerOptions options;
  model::Host host;
  host.name = "localhost";
  host.cpu_milli = kCpus * 1000;
  options.inventory.hosts.push_back(host);
  options.resources.fallback = {1000, 0};
  if (policies) {
    QuotaSpec spec;
    std::map<std::string, int64_t> weights;
    for (int p = 0; p < projects; ++p) {
      const std::string name = absl::StrCat("project-", p);
      spec.projects[name]["us-central1"] = {{"CPUS", 8 + p % 5 * 4}, {"JOBS", 6 + p % 3}};
      weights[name] = 1 + p % 4;
    }
    options.quotas = *Quotas::Compile(spec);
    options.shares = *Shares::Compile(weights);
  }
  Scheduler scheduler(clock, recorder, &executor, options);

  int64_t sequence = 0;
  for (int i = 0; i < kCpus; ++i) {
    scheduler.Submit(MakeJob("filler", absl::StrCat("filler_", i), ++sequence, 1, 1000, clock.Now()));
  }
  scheduler.RunPending();
  std::vector<JobKey> running = executor.launched;
  for (const auto& key : running) scheduler.JobStarted({key.project, key.job_id});
  std::mt19937 random(42);
  for (int i = 0; i < kQueued; ++i) {
    const std::string project = absl::StrCat("project-", i % projects);
    const int replicas = std::array{1, 1, 2, 4}[random() % 4];
    const int32_t priority = static_cast<int32_t>(random() % 3) * 100;
    scheduler.Submit(MakeJob(project, absl::StrCat("job_", i), ++sequence, replicas, priority, clock.Now()));
  }
  clock.Advance(absl::Seconds(1));
  scheduler.RunPending();  // the first pass says why each of the 10,000 waits
  executor.launched.clear();

  Result result;
  const int64_t records_before = recorder.records;
  for (int round = 0; round < rounds && !running.empty(); ++round) {
    clock.Advance(absl::Seconds(1));
    // The oldest filler ends: one CPU frees.
    const JobKey ended = running.front();
    running.erase(running.begin());
    const auto start = std::chrono::steady_clock::now();
    scheduler.JobEnded({ended.project, ended.job_id}, executor::Outcome::kSucceeded, "");
    scheduler.RunPending();
    const auto end = std::chrono::steady_clock::now();
    result.micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    // What started holds its slot from now on; the next filler frees the next.
    for (const auto& key : executor.launched) scheduler.JobStarted({key.project, key.job_id});
    result.started += static_cast<int64_t>(executor.launched.size());
    executor.launched.clear();
    scheduler.RunPending();
  }
  result.records = recorder.records - records_before;
  std::sort(result.micros.begin(), result.micros.end());
  return result;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))];
}

}  // namespace
}  // namespace mle::scheduler

int main(int argc, char** argv) {
  using mle::scheduler::Measure;
  using mle::scheduler::Percentile;
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 150;
  const auto with = Measure(mle::scheduler::kProjects, true, rounds);
  const auto without = Measure(1, false, rounds);
  std::printf("one freed slot, %d queued jobs, %d CPUs held by %d jobs, %zu rounds\n", mle::scheduler::kQueued,
              mle::scheduler::kCpus, mle::scheduler::kCpus, with.micros.size());
  auto print = [](const char* what, const mle::scheduler::Result& r) {
    std::printf("  %-50s median %7.1f us  p90 %7.1f us  max %7.1f us  (%lld started, %.1f updates a slot)\n", what,
                Percentile(r.micros, 0.5), Percentile(r.micros, 0.9), r.micros.empty() ? 0 : r.micros.back(),
                static_cast<long long>(r.started),
                r.micros.empty() ? 0.0 : static_cast<double>(r.records) / static_cast<double>(r.micros.size()));
  };
  print("100 projects, quotas and fair share (weights 1-4):", with);
  print("one project, no quotas or shares (priority, age):", without);
  const double ratio = Percentile(with.micros, 0.5) / std::max(1e-9, Percentile(without.micros, 0.5));
  std::printf("  ratio (median): %.2f\n", ratio);
  const bool ok = Percentile(with.micros, 0.5) < 1000;
  std::printf("%s: the freed slot is placed in %s 1 ms\n", ok ? "PASS" : "FAIL", ok ? "under" : "over");
  return ok ? 0 : 1;
}
