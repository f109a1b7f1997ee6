// Usage accounting (model/usage.h): ML units per machine type and
// accelerator, what a job used over its attempts, within a period.
#include "model/usage.h"

#include <gtest/gtest.h>

#include "model/demand.h"

namespace mle::model {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

Job CustomJob(const std::string& master, std::optional<AcceleratorConfig> gpu = std::nullopt,
              const std::string& worker = "", int64_t workers = 0) {
  Job job;
  job.project = "p";
  job.job_id = "j";
  TrainingInput t;
  t.scale_tier = "CUSTOM";
  t.master_type = master;
  if (gpu) {
    t.master_config.emplace();
    t.master_config->accelerator_config = gpu;
  }
  t.worker_type = worker;
  if (workers > 0) t.worker_count = workers;
  job.training_input = t;
  return job;
}

Job TierJob(const std::string& tier) {
  Job job;
  job.training_input.emplace();
  job.training_input->scale_tier = tier;
  return job;
}

Job TpuJob(const std::string& type, int64_t cores) {
  Job job = CustomJob("n1-standard-8");
  job.training_input->worker_type = "cloud_tpu";
  job.training_input->worker_count = 1;
  job.training_input->worker_config.emplace();
  job.training_input->worker_config->accelerator_config = AcceleratorConfig{cores, type};
  return job;
}

TEST(UsageRates, BasicIsOneMlUnitAnHour) {
  const UsageRates rates = UsageRates::Defaults();
  // AI Platform: a BASIC job that ran 27 minutes reported 0.45 ML units.
  EXPECT_NEAR(rates.MachineRate("standard"), 1.0, 1e-3);
  EXPECT_NEAR(rates.MachineRate("n1-standard-4"), 1.0, 1e-3);
  EXPECT_NEAR(rates.MachineRate("no-such-type"), 1.0, 1e-3);
  EXPECT_GT(rates.MachineRate("n1-highmem-8"), rates.MachineRate("n1-standard-8"));
  EXPECT_EQ(rates.AcceleratorRate("NO_SUCH_GPU"), 0.0);
}

TEST(UsageRates, OperatorRatesReplaceTheDefaults) {
  UsageRates rates = UsageRates::Defaults();
  rates.machine_types["n1-standard-4"] = 2.5;
  rates.accelerators["NVIDIA_TESLA_T4"] = 4;
  EXPECT_EQ(rates.MachineRate("n1-standard-4"), 2.5);
  EXPECT_EQ(rates.AcceleratorRate("NVIDIA_TESLA_T4"), 4);
  EXPECT_NEAR(rates.MachineRate("standard"), 1.0, 1e-3);
}

struct HourlyCase {
  std::string name;
  Job job;
  double ml_units;  // per hour
  double cpus;
  double gpus;
  double tpu_cores;
};

TEST(HourlyUsage, FromMachineTypesAcceleratorsAndTpuCores) {
  UsageRates rates = UsageRates::Defaults();
  rates.machine_types = {{"standard", 1}, {"n1-standard-8", 2}, {"standard_gpu", 2}, {"complex_model_m", 3}};
  rates.accelerators = {{"NVIDIA_TESLA_T4", 1.5}, {"NVIDIA_TESLA_K80", 2}, {"TPU_V2", 0.25}, {"TPU_V3_POD", 0.5}};
  ResourceTable table = ResourceTable::Defaults();
  table.machine_types["n1-standard-8"] = {8000, 0};
  const std::vector<HourlyCase> cases = {
      {"BASIC", TierJob("BASIC"), 1, 1, 0, 0},
      {"BASIC_GPU: standard_gpu and its K80", TierJob("BASIC_GPU"), 2 + 2, 1, 1, 0},
      {"BASIC_TPU: a master and one TPU host", TierJob("BASIC_TPU"), 1 + 8 * 0.25, 1, 0, 8},
      {"STANDARD_1: 1 + 4 workers + 3 ps", TierJob("STANDARD_1"), 8, 8, 0, 0},
      {"CUSTOM with 2 T4s", CustomJob("n1-standard-8", AcceleratorConfig{2, "NVIDIA_TESLA_T4"}), 2 + 3, 8, 2, 0},
      {"CUSTOM with workers", CustomJob("n1-standard-8", std::nullopt, "complex_model_m", 2), 2 + 6, 10, 0, 0},
      {"TPU pod slice of 32 cores", TpuJob("TPU_V3_POD", 32), 2 + 16, 8, 0, 32},
  };
  for (const auto& c : cases) {
    const Usage u = HourlyUsage(DemandOf(c.job, table), rates);
    EXPECT_NEAR(u.ml_units, c.ml_units, 1e-9) << c.name;
    EXPECT_NEAR(u.cpu_hours, c.cpus, 1e-9) << c.name;
    EXPECT_NEAR(u.gpu_hours, c.gpus, 1e-9) << c.name;
    EXPECT_NEAR(u.tpu_core_hours, c.tpu_cores, 1e-9) << c.name;
  }
}

Attempt Ran(absl::Time start, absl::Duration took, AttemptEnd end = AttemptEnd::kSucceeded) {
  Attempt a;
  a.start_time = start;
  a.end_time = start + took;
  a.end = end;
  return a;
}

TEST(UsageOf, AddsEveryAttemptThatRanAndTheWait) {
  Job job = TierJob("BASIC");
  job.create_time = kT0;
  job.start_time = kT0 + absl::Minutes(6);
  job.state = JobState::kSucceeded;
  // Preempted after 10 minutes; queued 5; ran 27 more.
  job.attempts.push_back(Ran(kT0 + absl::Minutes(6), absl::Minutes(10), AttemptEnd::kPreempted));
  Attempt never;  // placed, stopped before it ran
  never.end_time = kT0 + absl::Minutes(20);
  job.attempts.push_back(never);
  job.attempts.push_back(Ran(kT0 + absl::Minutes(21), absl::Minutes(27)));
  job.end_time = kT0 + absl::Minutes(48);
  const UsageRates rates = UsageRates::Defaults();
  const JobDemand demand = DemandOf(job, ResourceTable::Defaults());
  const Usage u = UsageOf(job, demand, rates, kT0 + absl::Hours(10));
  EXPECT_NEAR(u.run_hours, 37.0 / 60, 1e-9);
  EXPECT_NEAR(u.ml_units, 37.0 / 60 * rates.MachineRate("standard"), 1e-9);
  EXPECT_NEAR(u.cpu_hours, 37.0 / 60, 1e-9);
  EXPECT_NEAR(u.queue_hours, 0.1, 1e-9);
  // The same as its attempts', one by one.
  double units = 0;
  for (const auto& a : job.attempts) units += AttemptUsage(a, demand, rates).ml_units;
  EXPECT_NEAR(units, u.ml_units, 1e-9);
}

TEST(UsageOf, ARunningJobCountsToNowFromItsCurrentAttempt) {
  Job job = TierJob("BASIC");
  job.create_time = kT0;
  job.start_time = kT0 + absl::Minutes(1);
  job.attempts.push_back(Ran(kT0 + absl::Minutes(1), absl::Minutes(9), AttemptEnd::kPreempted));
  job.state = JobState::kRunning;  // again since minute 10 (the previous attempt's end)
  const Usage u = UsageOf(job, DemandOf(job, ResourceTable::Defaults()), UsageRates::Defaults(),
                          kT0 + absl::Minutes(40));
  EXPECT_NEAR(u.run_hours, (9.0 + 30.0) / 60, 1e-9);
  job.state = JobState::kQueued;  // queued again: nothing runs now
  EXPECT_NEAR(UsageOf(job, DemandOf(job, ResourceTable::Defaults()), UsageRates::Defaults(), kT0 + absl::Minutes(40))
                  .run_hours,
              9.0 / 60, 1e-9);
}

TEST(UsageOf, ClipsToThePeriod) {
  Job job = TierJob("BASIC");
  job.create_time = kT0;
  job.start_time = kT0 + absl::Hours(1);
  job.state = JobState::kFailed;
  job.attempts.push_back(Ran(kT0 + absl::Hours(1), absl::Hours(2), AttemptEnd::kFailed));
  job.end_time = kT0 + absl::Hours(3);
  const JobDemand demand = DemandOf(job, ResourceTable::Defaults());
  struct Case {
    Period period;
    double run;
    double queue;
  };
  const std::vector<Case> cases = {
      {{}, 2, 1},
      {{kT0 + absl::Minutes(30), kT0 + absl::Hours(2)}, 1, 0.5},
      {{kT0 + absl::Hours(2), std::nullopt}, 1, 0},
      {{std::nullopt, kT0}, 0, 0},
      {{kT0 + absl::Hours(5), kT0 + absl::Hours(4)}, 0, 0},  // empty
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Usage u = UsageOf(job, demand, UsageRates::Defaults(), kT0 + absl::Hours(10), cases[i].period);
    EXPECT_NEAR(u.run_hours, cases[i].run, 1e-9) << i;
    EXPECT_NEAR(u.queue_hours, cases[i].queue, 1e-9) << i;
  }
}

TEST(UsageOf, ATuningJobHoldsOnlyItsWaitItsTrialsTheRest) {
  Job job = TierJob("BASIC");
  job.training_input->hyperparameters.emplace();
  job.create_time = kT0;
  job.start_time = kT0 + absl::Minutes(6);
  job.state = JobState::kRunning;
  const Usage u = UsageOf(job, DemandOf(job, ResourceTable::Defaults()), UsageRates::Defaults(), kT0 + absl::Hours(1));
  EXPECT_EQ(u.run_hours, 0);
  EXPECT_EQ(u.ml_units, 0);
  EXPECT_NEAR(u.queue_hours, 0.1, 1e-9);
}

TEST(UsageOf, AJobNeverStartedWaitedUntilItEndedOrNow) {
  Job job = TierJob("BASIC");
  job.create_time = kT0;
  job.state = JobState::kQueued;
  const JobDemand demand = DemandOf(job, ResourceTable::Defaults());
  EXPECT_NEAR(UsageOf(job, demand, UsageRates::Defaults(), kT0 + absl::Hours(2)).queue_hours, 2, 1e-9);
  job.state = JobState::kCancelled;
  job.end_time = kT0 + absl::Hours(1);
  const Usage u = UsageOf(job, demand, UsageRates::Defaults(), kT0 + absl::Hours(2));
  EXPECT_NEAR(u.queue_hours, 1, 1e-9);
  EXPECT_EQ(u.ml_units, 0);
}

}  // namespace
}  // namespace mle::model
