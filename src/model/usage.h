// Usage accounting (docs/operations.md, "Usage accounting"): what a job used,
// from what it asked for (JobDemand: its replicas' machine types and
// accelerators, its TPU cores) and the time its attempts ran. It fills
// trainingOutput.consumedMLUnits as AI Platform did, and the operator's
// reports (`mlengine admin usage`) and /metrics.
//
// ML units: one ML unit is one hour of scale tier BASIC (one `standard`
// machine: 4 vCPUs, 15 GiB), as AI Platform counted them (a BASIC job that
// ran 27 minutes reported 0.45). A replica's rate per hour is its machine
// type's (vCPUs and memory) plus each accelerator's; the defaults weigh
// vCPUs, memory, GPUs and TPU cores by Compute Engine's list prices against
// BASIC's, and the operator may set any rate (server config `accounting`).
//
// Pure: no I/O, no clock (the caller says what "now" is). Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "model/job.h"
#include "model/resources.h"

namespace mle::model {

struct UsageRates {
  // ML units per hour of one replica of a machine type, accelerators aside.
  // A type not listed: (vCPUs x kUnitsPerVcpuHour + GiB x
  // kUnitsPerGibHour) from the catalog; an unknown type, `standard`'s.
  std::map<std::string, double, std::less<>> machine_types;
  // ML units per hour of one GPU, or of one TPU core, by AcceleratorConfig
  // type (TPU_V2_POD and TPU_V3_POD are TPU_V2's and TPU_V3's cores).
  std::map<std::string, double, std::less<>> accelerators;

  static constexpr double kUnitsPerVcpuHour = 0.031611 / 0.19;
  static constexpr double kUnitsPerGibHour = 0.004237 / 0.19;

  static UsageRates Defaults();
  double MachineRate(std::string_view machine_type) const;
  double AcceleratorRate(std::string_view accelerator_type) const;
};

// What was used; hours of wall-clock time times what was held.
struct Usage {
  double ml_units = 0;
  double cpu_hours = 0;       // CPUs the cluster set aside for the replicas (JobDemand's cpu_milli)
  double gpu_hours = 0;
  double tpu_core_hours = 0;
  double run_hours = 0;       // wall-clock hours the job's attempts ran
  double queue_hours = 0;     // from its creation to its first start (or its end, or now)
  Usage& operator+=(const Usage& other);
};

// A half-open interval of time [start, end); an unset bound is open.
struct Period {
  std::optional<absl::Time> start;
  std::optional<absl::Time> end;
};

// The rates of a whole job per hour of running: ML units, CPUs, GPUs, TPU
// cores (run_hours and queue_hours are 1 and 0).
Usage HourlyUsage(const JobDemand& demand, const UsageRates& rates);

// What one attempt used (none if it never ran).
Usage AttemptUsage(const Attempt& attempt, const JobDemand& demand, const UsageRates& rates);

// What `job` used within `period`: every attempt that ran (an attempt that
// ended, from its start to its end; the one running now, from when the job
// started or its previous attempt ended, to `now`), and its wait in the
// queue. A tuning job's own entry is its wait alone: its trials are jobs of
// their own and hold its usage.
Usage UsageOf(const Job& job, const JobDemand& demand, const UsageRates& rates, absl::Time now,
              const Period& period = {});

}  // namespace mle::model
