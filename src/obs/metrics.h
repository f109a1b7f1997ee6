// Metrics: every metric mlengined exports, in one Prometheus registry
// (prometheus-cpp core), rendered in the text exposition format for the
// /metrics endpoint (api/metrics_endpoint.h). Names and meanings are listed
// in docs/operations.md ("Logs and metrics").
//
// Code that measures something calls the accessor of its metric, e.g.
//   obs::ScopedTimer timer(obs::Metrics::Default().SchedulingPass());
// Metrics::Default() is the process's (what /metrics serves); tests of this
// class construct their own.
//
// Thread-safe: every method may be called from any thread; the references
// returned live as long as the Metrics object.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mle::obs {

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The process's metrics; never destroyed.
  static Metrics& Default();

  // Every metric in the text format (version 0.0.4).
  std::string Render() const;

  // ---- HTTP API ----
  // One answered request: its HTTP method, the route that answered it (e.g.
  // "ml.projects.jobs.create"; "" for none), the HTTP status, how long it took.
  void ObserveRequest(absl::string_view http_method, absl::string_view route, int code, absl::Duration took);

  // ---- jobs (set when /metrics is read, from the service's counts) ----
  void SetJobCount(absl::string_view state, int64_t count);
  void SetQueue(absl::string_view project, int64_t length, absl::Duration oldest_wait);
  // How long a job of `project` waited from its creation to its start.
  void ObserveQueueWait(absl::string_view project, absl::Duration waited);

  // ---- scheduler ----
  // One scheduling pass over the queue (placing or handing over jobs).
  prometheus::Histogram& SchedulingPass();
  // The plan of one pass (scheduler::PlanPass), placing jobs as gangs.
  prometheus::Histogram& Placement();

  // ---- store ----
  // One group commit (transaction) and how many commits it grouped.
  prometheus::Histogram& StoreCommit();
  prometheus::Histogram& StoreBatchSize();
  // Transactions flushed to disk (db::Sync::kDurable in them): the others
  // were committed without a flush.
  prometheus::Counter& StoreFlushes();

  // ---- executors ("local", "slurm") ----
  // One round of the executor's watcher or poller.
  prometheus::Histogram& ExecutorPoll(absl::string_view executor);
  prometheus::Counter& ReplicaStarts(absl::string_view executor);
  // Replicas whose failure ended their job.
  prometheus::Counter& ReplicaFailures(absl::string_view executor);
  // Running jobs found stalled (no log line, no CPU for local.stall_after_seconds).
  prometheus::Counter& Stalls(absl::string_view executor);
  // Attempts that ended, by how (model::AttemptEndName: PREEMPTED, ...).
  prometheus::Counter& AttemptsEnded(absl::string_view end);
  // Attempts run again: after a preemption, or retried after a failure.
  prometheus::Counter& Requeues(absl::string_view why);

  // ---- usage (model/usage.h), as each attempt of a job ends ----
  // What the attempt of a job of `project` used: ML units, and CPU, GPU
  // and TPU-core hours.
  void AddUsage(absl::string_view project, double ml_units, double cpu_hours, double gpu_hours,
                double tpu_core_hours);

  // ---- the data directory's disk (service/disk_watch.h) ----
  void SetDataDisk(double size_bytes, double free_bytes, bool full);

  // ---- retention (service/retention.h) ----
  // `count` run directories' `kind` ("run_files", "logs") removed, `bytes` freed.
  void RetentionRemoved(absl::string_view kind, int64_t count, int64_t bytes);

  // ---- webhooks (service/webhook_service.h) ----
  // Delivery attempts by result: delivered, failed (to be tried again),
  // given_up (too old), dropped (too many waiting).
  prometheus::Counter& WebhookDeliveries(absl::string_view result);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& requests_;
  // Distinguishes instances in the per-thread cache of ObserveRequest.
  const uint64_t instance_ = NextInstance();
  static uint64_t NextInstance() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& queue_length_;
  prometheus::Family<prometheus::Gauge>& queue_oldest_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Histogram& scheduling_pass_;
  prometheus::Histogram& placement_;
  prometheus::Histogram& store_commit_;
  prometheus::Histogram& store_batch_;
  prometheus::Counter& store_flushes_;
  prometheus::Family<prometheus::Histogram>& executor_poll_;
  prometheus::Family<prometheus::Counter>& replica_starts_;
  prometheus::Family<prometheus::Counter>& replica_failures_;
  prometheus::Family<prometheus::Counter>& stalls_;
  prometheus::Family<prometheus::Counter>& attempts_ended_;
  prometheus::Family<prometheus::Counter>& requeues_;
  prometheus::Family<prometheus::Counter>& usage_ml_units_;
  prometheus::Family<prometheus::Counter>& usage_cpu_hours_;
  prometheus::Family<prometheus::Counter>& usage_gpu_hours_;
  prometheus::Family<prometheus::Counter>& usage_tpu_core_hours_;
  prometheus::Family<prometheus::Counter>& webhook_deliveries_;
  prometheus::Gauge& data_disk_size_;
  prometheus::Gauge& data_disk_free_;
  prometheus::Gauge& data_disk_full_;
  prometheus::Family<prometheus::Counter>& retention_removed_;
  prometheus::Family<prometheus::Counter>& retention_freed_;
};

// Observes the time from its construction to its destruction (monotonic
// clock) into a histogram, in seconds.
class ScopedTimer {
 public:
  explicit ScopedTimer(prometheus::Histogram& histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    histogram_.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  prometheus::Histogram& histogram_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace mle::obs
