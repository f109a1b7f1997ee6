#include "model/usage.h"

#include <algorithm>

#include "model/catalog.h"

namespace mle::model {
namespace {

// Compute Engine's on-demand list prices in us-central1 (USD per hour) when
// AI Platform Training closed, over BASIC's $0.19 an hour: one ML unit.
constexpr double kBasicPerHour = 0.19;

struct AcceleratorPrice {
  std::string_view type;
  double per_hour;  // one GPU, or one TPU core
};
constexpr AcceleratorPrice kAcceleratorPrices[] = {
    {"NVIDIA_TESLA_K80", 0.45},  {"NVIDIA_TESLA_P4", 0.60},    {"NVIDIA_TESLA_T4", 0.35},
    {"NVIDIA_TESLA_P100", 1.46}, {"NVIDIA_TESLA_V100", 2.48},  {"NVIDIA_TESLA_A100", 2.934},
    {"TPU_V2", 4.50 / 8},        {"TPU_V2_POD", 24.0 / 32},    {"TPU_V3", 8.00 / 8},
    {"TPU_V3_POD", 32.0 / 32},
};

double Hours(absl::Duration d) { return std::max(0.0, absl::ToDoubleHours(d)); }

// The hours of [from, to) that fall in `period`.
double HoursWithin(absl::Time from, absl::Time to, const Period& period) {
  if (period.start) from = std::max(from, *period.start);
  if (period.end) to = std::min(to, *period.end);
  return to > from ? Hours(to - from) : 0.0;
}

bool IsTpu(std::string_view accelerator) {
  const AcceleratorType* t = FindAcceleratorType(accelerator);
  return t != nullptr && (t->kind == AcceleratorKind::kTpu || t->kind == AcceleratorKind::kTpuPod);
}

Usage Scaled(const Usage& hourly, double hours) {
  Usage u;
  u.ml_units = hourly.ml_units * hours;
  u.cpu_hours = hourly.cpu_hours * hours;
  u.gpu_hours = hourly.gpu_hours * hours;
  u.tpu_core_hours = hourly.tpu_core_hours * hours;
  u.run_hours = hours;
  return u;
}

}  // namespace

UsageRates UsageRates::Defaults() {
  UsageRates r;
  for (const auto& p : kAcceleratorPrices) r.accelerators.emplace(std::string(p.type), p.per_hour / kBasicPerHour);
  return r;
}

double UsageRates::MachineRate(std::string_view machine_type) const {
  if (auto it = machine_types.find(machine_type); it != machine_types.end()) return it->second;
  const MachineType* m = FindMachineType(machine_type);
  if (m == nullptr) m = FindMachineType("standard");
  if (m == nullptr) return 1.0;
  return m->vcpus * kUnitsPerVcpuHour + static_cast<double>(m->memory_mib) / 1024.0 * kUnitsPerGibHour;
}

double UsageRates::AcceleratorRate(std::string_view accelerator_type) const {
  if (auto it = accelerators.find(accelerator_type); it != accelerators.end()) return it->second;
  return 0.0;
}

Usage& Usage::operator+=(const Usage& o) {
  ml_units += o.ml_units;
  cpu_hours += o.cpu_hours;
  gpu_hours += o.gpu_hours;
  tpu_core_hours += o.tpu_core_hours;
  run_hours += o.run_hours;
  queue_hours += o.queue_hours;
  return *this;
}

Usage HourlyUsage(const JobDemand& demand, const UsageRates& rates) {
  Usage u;
  for (const ReplicaDemand& r : demand.replicas) {
    u.ml_units += rates.MachineRate(r.machine_type);
    u.cpu_hours += static_cast<double>(r.cpu_milli) / 1000.0;
    if (r.gpu_count > 0 && !r.gpu_type.empty()) {
      u.ml_units += r.gpu_count * rates.AcceleratorRate(r.gpu_type);
      (IsTpu(r.gpu_type) ? u.tpu_core_hours : u.gpu_hours) += r.gpu_count;
    }
  }
  if (demand.tpu_cores > 0) {
    const std::string& type = demand.tpu_accelerator.empty() ? demand.tpu_type : demand.tpu_accelerator;
    u.ml_units += static_cast<double>(demand.tpu_cores) * rates.AcceleratorRate(type);
    u.tpu_core_hours += static_cast<double>(demand.tpu_cores);
  }
  u.run_hours = 1;
  return u;
}

Usage AttemptUsage(const Attempt& attempt, const JobDemand& demand, const UsageRates& rates) {
  if (!attempt.start_time) return {};
  return Scaled(HourlyUsage(demand, rates), Hours(attempt.end_time - *attempt.start_time));
}

Usage UsageOf(const Job& job, const JobDemand& demand, const UsageRates& rates, absl::Time now,
              const Period& period) {
  Usage total;
  if (job.create_time) {
    const absl::Time waited_until = job.start_time ? *job.start_time : job.end_time ? *job.end_time : now;
    total.queue_hours = HoursWithin(*job.create_time, waited_until, period);
  }
  if (IsTuningJob(job)) return total;
  const Usage hourly = HourlyUsage(demand, rates);
  for (const Attempt& a : job.attempts) {
    if (a.start_time) total += Scaled(hourly, HoursWithin(*a.start_time, a.end_time, period));
  }
  const bool running_now = job.state == JobState::kRunning || job.state == JobState::kCancelling;
  if (running_now && job.start_time) {
    absl::Time since = *job.start_time;
    if (!job.attempts.empty()) since = std::max(since, job.attempts.back().end_time);
    total += Scaled(hourly, HoursWithin(since, now, period));
  }
  return total;
}

}  // namespace mle::model
