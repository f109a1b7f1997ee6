#include "obs/metrics.h"

#include <sstream>

#include <prometheus/text_serializer.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace mle::obs {
namespace {

using prometheus::Histogram;

// Bucket bounds, in seconds unless said otherwise.
const Histogram::BucketBoundaries kRequestBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,   0.5,   1,      2.5,   5,    10,    30};
const Histogram::BucketBoundaries kFastBuckets = {0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005,
                                                  0.01,    0.05,    0.1,    0.5,    1};
const Histogram::BucketBoundaries kCommitBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                    0.05,   0.1,   0.25,   0.5,   1,    5};
const Histogram::BucketBoundaries kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};  // commits
const Histogram::BucketBoundaries kPollBuckets = {0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60};
const Histogram::BucketBoundaries kWaitBuckets = {0.1,  0.5,   1,     5,     15,    30,    60,     300,
                                                  900, 1800, 3600, 10800, 43200, 86400, 259200};

std::string Text(absl::string_view s) { return std::string(s); }

// A client may send any method name: label the standard ones only, so no
// client can make series without bound.
std::string MethodLabel(absl::string_view method) {
  for (absl::string_view known : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (method == known) return Text(method);
  }
  return "other";
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildHistogram()
                    .Name("mlengine_http_request_duration_seconds")
                    .Help("Time from a whole request read to its response, by HTTP method, route (API method) and "
                          "HTTP status")
                    .Register(*registry_)),
      jobs_(prometheus::BuildGauge()
                .Name("mlengine_jobs")
                .Help("Jobs by state, all projects")
                .Register(*registry_)),
      queue_length_(prometheus::BuildGauge()
                        .Name("mlengine_queue_length")
                        .Help("Jobs waiting to start (QUEUED), per project")
                        .Register(*registry_)),
      queue_oldest_(prometheus::BuildGauge()
                        .Name("mlengine_queue_oldest_wait_seconds")
                        .Help("How long the oldest QUEUED job of the project has waited (0 when none)")
                        .Register(*registry_)),
      queue_wait_(prometheus::BuildHistogram()
                      .Name("mlengine_queue_wait_seconds")
                      .Help("Time from a job's creation to its start (PREPARING or RUNNING), per project")
                      .Register(*registry_)),
      scheduling_pass_(prometheus::BuildHistogram()
                           .Name("mlengine_scheduling_pass_seconds")
                           .Help("One pass of the scheduler over its queue, placing or handing over jobs")
                           .Register(*registry_)
                           .Add({}, kFastBuckets)),
      placement_(prometheus::BuildHistogram()
                     .Name("mlengine_placement_seconds")
                     .Help("The plan of one pass: quotas, fair share, gang placement and why jobs wait (local executor)")
                     .Register(*registry_)
                     .Add({}, kFastBuckets)),
      store_commit_(prometheus::BuildHistogram()
                        .Name("mlengine_store_commit_seconds")
                        .Help("One group commit of the store: a transaction made durable")
                        .Register(*registry_)
                        .Add({}, kCommitBuckets)),
      store_batch_(prometheus::BuildHistogram()
                       .Name("mlengine_store_commit_batch_size")
                       .Help("Commits grouped into one transaction")
                       .Register(*registry_)
                       .Add({}, kBatchBuckets)),
      store_flushes_(prometheus::BuildCounter()
                         .Name("mlengine_store_flushes_total")
                         .Help("Store transactions flushed to disk (the others were committed without a flush)")
                         .Register(*registry_)
                         .Add({})),
      executor_poll_(prometheus::BuildHistogram()
                         .Name("mlengine_executor_poll_seconds")
                         .Help("One round of the executor's watcher (local) or poller (slurm)")
                         .Register(*registry_)),
      replica_starts_(prometheus::BuildCounter()
                          .Name("mlengine_replica_starts_total")
                          .Help("Replicas started (local: each replica process; slurm: each replica of a job "
                                "that began running)")
                          .Register(*registry_)),
      replica_failures_(prometheus::BuildCounter()
                            .Name("mlengine_replica_failures_total")
                            .Help("Replicas whose failure ended their job")
                            .Register(*registry_)),
      stalls_(prometheus::BuildCounter()
                  .Name("mlengine_stalls_total")
                  .Help("Running jobs found stalled: no log line and no CPU for local.stall_after_seconds")
                  .Register(*registry_)),
      attempts_ended_(prometheus::BuildCounter()
                          .Name("mlengine_attempts_ended_total")
                          .Help("Attempts of jobs that ended, by how (end: SUCCEEDED, FAILED, OUT_OF_MEMORY, "
                                "PREEMPTED, INFRASTRUCTURE, TIMED_OUT, CANCELLED, STALLED, NOT_JOINED)")
                          .Register(*registry_)),
      requeues_(prometheus::BuildCounter()
                    .Name("mlengine_requeues_total")
                    .Help("Jobs queued again to run another attempt (why: preempted, retried)")
                    .Register(*registry_)),
      usage_ml_units_(prometheus::BuildCounter()
                          .Name("mlengine_usage_ml_units_total")
                          .Help("ML units used by jobs' attempts that ended, by project (docs/operations.md)")
                          .Register(*registry_)),
      usage_cpu_hours_(prometheus::BuildCounter()
                           .Name("mlengine_usage_cpu_hours_total")
                           .Help("CPU hours set aside for jobs' attempts that ended, by project")
                           .Register(*registry_)),
      usage_gpu_hours_(prometheus::BuildCounter()
                           .Name("mlengine_usage_gpu_hours_total")
                           .Help("GPU hours of jobs' attempts that ended, by project")
                           .Register(*registry_)),
      usage_tpu_core_hours_(prometheus::BuildCounter()
                                .Name("mlengine_usage_tpu_core_hours_total")
                                .Help("TPU core hours of jobs' attempts that ended, by project")
                                .Register(*registry_)),
      webhook_deliveries_(prometheus::BuildCounter()
                              .Name("mlengine_webhook_deliveries_total")
                              .Help("Webhook delivery attempts by result: delivered, failed (tried again), given_up "
                                    "(too old), dropped (too many waiting)")
                              .Register(*registry_)),
      data_disk_size_(prometheus::BuildGauge()
                          .Name("mlengine_data_disk_size_bytes")
                          .Help("Size of the file system holding mlengine's data directory")
                          .Register(*registry_)
                          .Add({})),
      data_disk_free_(prometheus::BuildGauge()
                          .Name("mlengine_data_disk_free_bytes")
                          .Help("Bytes mlengined may still write on the data directory's file system")
                          .Register(*registry_)
                          .Add({})),
      data_disk_full_(prometheus::BuildGauge()
                          .Name("mlengine_data_disk_full")
                          .Help("1 while the data directory's disk has less free than the reserve kept for running "
                                "jobs: new jobs and uploads are refused")
                          .Register(*registry_)
                          .Add({})),
      retention_removed_(prometheus::BuildCounter()
                             .Name("mlengine_retention_removed_total")
                             .Help("Ended jobs' run directories retention removed, by kind: run_files (the replicas' "
                                   "work/ and tmp/), logs (the whole directory)")
                             .Register(*registry_)),
      retention_freed_(prometheus::BuildCounter()
                           .Name("mlengine_retention_freed_bytes_total")
                           .Help("Bytes retention freed, by kind (run_files, logs)")
                           .Register(*registry_)) {}

Metrics& Metrics::Default() {
  static Metrics* metrics = new Metrics;  // never destroyed: threads may observe during exit
  return *metrics;
}

std::string Metrics::Render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

void Metrics::ObserveRequest(absl::string_view http_method, absl::string_view route, int code,
                             absl::Duration took) {
  // Family::Add builds a label map and takes the family's lock: once per
  // (method, route, code) and thread, not once per request. Histograms live
  // as long as the registry, so the cached pointers stay valid.
  thread_local absl::flat_hash_map<std::string, std::pair<uint64_t, prometheus::Histogram*>> cache;
  std::string key = absl::StrCat(http_method, "\t", route, "\t", code);
  auto& slot = cache[key];
  if (slot.first != instance_) {
    slot = {instance_, &requests_.Add({{"method", MethodLabel(http_method)},
                                  {"route", route.empty() ? "none" : Text(route)},
                                  {"code", absl::StrCat(code)}},
                                 kRequestBuckets)};
  }
  slot.second->Observe(absl::ToDoubleSeconds(took));
}

void Metrics::SetJobCount(absl::string_view state, int64_t count) {
  jobs_.Add({{"state", Text(state)}}).Set(static_cast<double>(count));
}

void Metrics::SetQueue(absl::string_view project, int64_t length, absl::Duration oldest_wait) {
  queue_length_.Add({{"project", Text(project)}}).Set(static_cast<double>(length));
  queue_oldest_.Add({{"project", Text(project)}}).Set(absl::ToDoubleSeconds(oldest_wait));
}

void Metrics::ObserveQueueWait(absl::string_view project, absl::Duration waited) {
  queue_wait_.Add({{"project", Text(project)}}, kWaitBuckets).Observe(absl::ToDoubleSeconds(waited));
}

prometheus::Histogram& Metrics::SchedulingPass() { return scheduling_pass_; }
prometheus::Histogram& Metrics::Placement() { return placement_; }
prometheus::Histogram& Metrics::StoreCommit() { return store_commit_; }
prometheus::Histogram& Metrics::StoreBatchSize() { return store_batch_; }
prometheus::Counter& Metrics::StoreFlushes() { return store_flushes_; }

prometheus::Histogram& Metrics::ExecutorPoll(absl::string_view executor) {
  return executor_poll_.Add({{"executor", Text(executor)}}, kPollBuckets);
}

prometheus::Counter& Metrics::ReplicaStarts(absl::string_view executor) {
  return replica_starts_.Add({{"executor", Text(executor)}});
}

prometheus::Counter& Metrics::ReplicaFailures(absl::string_view executor) {
  return replica_failures_.Add({{"executor", Text(executor)}});
}

prometheus::Counter& Metrics::Stalls(absl::string_view executor) {
  return stalls_.Add({{"executor", Text(executor)}});
}

prometheus::Counter& Metrics::AttemptsEnded(absl::string_view end) {
  return attempts_ended_.Add({{"end", Text(end)}});
}

prometheus::Counter& Metrics::Requeues(absl::string_view why) { return requeues_.Add({{"why", Text(why)}}); }

void Metrics::RetentionRemoved(absl::string_view kind, int64_t count, int64_t bytes) {
  retention_removed_.Add({{"kind", Text(kind)}}).Increment(static_cast<double>(count));
  retention_freed_.Add({{"kind", Text(kind)}}).Increment(static_cast<double>(bytes));
}

void Metrics::SetDataDisk(double size_bytes, double free_bytes, bool full) {
  data_disk_size_.Set(size_bytes);
  data_disk_free_.Set(free_bytes);
  data_disk_full_.Set(full ? 1 : 0);
}

prometheus::Counter& Metrics::WebhookDeliveries(absl::string_view result) {
  return webhook_deliveries_.Add({{"result", Text(result)}});
}

void Metrics::AddUsage(absl::string_view project, double ml_units, double cpu_hours, double gpu_hours,
                       double tpu_core_hours) {
  const std::map<std::string, std::string> labels = {{"project", Text(project)}};
  usage_ml_units_.Add(labels).Increment(ml_units);
  usage_cpu_hours_.Add(labels).Increment(cpu_hours);
  if (gpu_hours > 0) usage_gpu_hours_.Add(labels).Increment(gpu_hours);
  if (tpu_core_hours > 0) usage_tpu_core_hours_.Add(labels).Increment(tpu_core_hours);
}

}  // namespace mle::obs
