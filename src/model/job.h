// The Job resource of the `ml` v1 API as plain C++ values: what a user asks
// for (TrainingInput) and what the service reports (state, times, output).
// No I/O and no JSON here; api/codec maps these to and from the wire.
//
// Optional scalars are std::optional so validation can tell "unset" from
// "set to zero". Enum-valued spec fields (scaleTier, accelerator type, ...)
// are kept as the wire's strings: the codec has already checked them against
// the discovery document's enum lists, and validation compares names.
// Plain values: not thread-safe, copy freely.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "model/job_state.h"
#include "model/shared_value.h"
#include "model/vertex.h"

namespace mle::model {

struct AcceleratorConfig {
  std::optional<int64_t> count;
  std::string type;  // e.g. "TPU_V2", "NVIDIA_TESLA_T4"; empty = unset
};

struct DiskConfig {
  std::string boot_disk_type;
  std::optional<int32_t> boot_disk_size_gb;
};

struct ReplicaConfig {
  std::optional<AcceleratorConfig> accelerator_config;
  std::string image_uri;
  std::vector<std::string> container_command;
  std::vector<std::string> container_args;
  std::string tpu_tf_version;
  std::optional<DiskConfig> disk_config;
};

struct ParameterSpec {
  std::string parameter_name;
  std::string type;        // DOUBLE, INTEGER, CATEGORICAL, DISCRETE
  std::optional<double> min_value;
  std::optional<double> max_value;
  std::vector<std::string> categorical_values;
  std::vector<double> discrete_values;
  std::string scale_type;  // NONE, UNIT_LINEAR_SCALE, ...
};

struct HyperparameterSpec {
  std::string goal;
  std::vector<ParameterSpec> params;
  std::optional<int32_t> max_trials;
  std::optional<int32_t> max_parallel_trials;
  std::optional<int32_t> max_failed_trials;
  std::string hyperparameter_metric_tag;
  std::string algorithm;
  std::optional<bool> enable_trial_early_stopping;
  std::string resume_previous_job_id;
};

struct Scheduling {
  std::string max_running_time;  // protobuf duration text, e.g. "7200s"
  std::string max_wait_time;
  std::optional<int32_t> priority;
};

struct TrainingInput {
  std::string scale_tier;
  std::string master_type;
  std::optional<ReplicaConfig> master_config;
  std::string worker_type;
  std::optional<int64_t> worker_count;
  std::optional<ReplicaConfig> worker_config;
  std::string parameter_server_type;
  std::optional<int64_t> parameter_server_count;
  std::optional<ReplicaConfig> parameter_server_config;
  std::string evaluator_type;
  std::optional<int64_t> evaluator_count;
  std::optional<ReplicaConfig> evaluator_config;
  std::vector<std::string> package_uris;
  std::string python_module;
  std::vector<std::string> args;
  std::optional<HyperparameterSpec> hyperparameters;
  std::string region;
  std::string job_dir;
  std::string runtime_version;
  std::string python_version;
  std::optional<Scheduling> scheduling;
  std::string network;
  std::string service_account;
  std::optional<bool> use_chief_in_tf_config;
  std::optional<bool> enable_web_access;
  std::string kms_key_name;  // encryptionConfig.kmsKeyName
  bool has_encryption_config = false;
};

struct HyperparameterMetric {
  std::optional<int64_t> training_step;
  std::optional<double> objective_value;
};

struct HyperparameterOutput {
  std::string trial_id;
  std::map<std::string, std::string> hyperparameters;
  std::optional<HyperparameterMetric> final_metric;
  // Every value the trial reported for the metric tag, in step order (the
  // intermediate ones early stopping judges, the last one final).
  std::vector<HyperparameterMetric> all_metrics;
  JobState state = JobState::kUnspecified;
  std::optional<absl::Time> start_time;
  std::optional<absl::Time> end_time;
  bool is_trial_stopped_early = false;
};

struct TrainingOutput {
  int64_t completed_trial_count = 0;
  std::vector<HyperparameterOutput> trials;
  double consumed_ml_units = 0;
  std::string hyperparameter_metric_tag;
  bool is_hyperparameter_tuning_job = false;
  std::map<std::string, std::string> web_access_uris;
};

// Why an attempt of a job ended (docs/interruptions.md).
enum class AttemptEnd {
  kSucceeded,       // the master exited 0
  kFailed,          // the trainer failed: an exit status, a signal, a traceback
  kOutOfMemory,     // a replica went past its memory limit
  kPreempted,       // stopped for a job of higher priority; queued again
  kInfrastructure,  // lost to mlengine or the cluster (a node, the shim); retried if the job allows
  kTimedOut,        // past scheduling.maxRunningTime or maxWaitTime
  kCancelled,       // cancelled by a user
  kStalled,         // no log line and no CPU for the stall limit (local.stall_action: fail)
  kNotJoined,       // its replicas did not all start or connect within the join deadline
};
std::string_view AttemptEndName(AttemptEnd e);  // "PREEMPTED"
std::optional<AttemptEnd> ParseAttemptEnd(std::string_view name);

// A job's own retry settings, as labels (the ml v1 Job has no field for
// them): mlengine-retries "0".."10" replaces the operator's limit on
// retries; mlengine-retry-failures "true" retries a failure of the trainer
// itself too (scheduler/interruption.h).
inline constexpr char kRetriesLabel[] = "mlengine-retries";
inline constexpr char kRetryFailuresLabel[] = "mlengine-retry-failures";
inline constexpr int kMaxRetries = 10;
// And the stall watch's, per job (the operator's local.stall_after_seconds
// and local.stall_action otherwise): mlengine-stall-after "0" (never) or
// seconds up to a week; mlengine-stall-action "flag" or "fail".
inline constexpr char kStallAfterLabel[] = "mlengine-stall-after";
inline constexpr char kStallActionLabel[] = "mlengine-stall-action";
inline constexpr int64_t kMaxStallAfterSeconds = 7 * 24 * 3600;

// One run of a job from placement to its end. A job runs once unless it is
// preempted or lost to the infrastructure; then it is queued again and runs
// from the start of its program as attempt 2, 3, ... (same id, job dir and
// environment, plus MLENGINE_ATTEMPT and AIP_CHECKPOINT_DIR).
struct Attempt {
  int32_t number = 1;  // 1-based
  std::optional<absl::Time> start_time;  // its replicas all started (unset: it never ran)
  absl::Time end_time;
  std::vector<std::string> hosts;  // where its replicas ran
  AttemptEnd end = AttemptEnd::kFailed;
  std::string message;  // the cause in words: which replica, exit status, by which job
  bool operator==(const Attempt&) const = default;
};

struct Job {
  // Identity.
  std::string project;  // the {p} of projects/{p}/jobs/{j}
  std::string job_id;
  // Spec (user-settable).
  std::optional<TrainingInput> training_input;
  bool has_prediction_input = false;  // batch prediction is not offered
  std::map<std::string, std::string> labels;
  // Server-internal: who created the job ("user:alice@example.com",
  // "serviceAccount:...", "operator"; a trial, its tuning job's creator),
  // for usage reports. Empty for jobs created before mlengine kept it.
  std::string creator;
  // Status (output only).
  JobState state = JobState::kUnspecified;
  std::optional<absl::Time> create_time;
  std::optional<absl::Time> start_time;
  std::optional<absl::Time> end_time;
  std::string error_message;
  std::optional<int64_t> job_position;
  std::optional<TrainingOutput> training_output;
  // mlengine's own: every attempt that ended, in order (the wire's
  // "attempts"; Google's clients ignore it).
  std::vector<Attempt> attempts;
  // Concurrency: bumped on every change; the wire etag is derived from it.
  int64_t version = 0;
  // Creation order within the server, for newest-first listing.
  int64_t sequence = 0;
  // Server-internal: every imageUri of a container job pinned at submission
  // (imageUri -> "REGISTRY/REPO@sha256:..." or a node-store image id), so
  // the job runs exactly the image that was checked.
  std::map<std::string, std::string> resolved_images;
  // Server-internal: a trial of a hyperparameter tuning job is run as a job
  // of its own, hidden from jobs.list and jobs.get: its id is
  // "<parent>.<trial id>" (no user job id has a '.'), trial_of names the
  // tuning job and trial_id the trial ("1", "2", ...).
  std::string trial_of;
  std::string trial_id;
  // Server-internal: while the job is being stopped for a preemption, the
  // job it is stopped for ("PROJECT/JOB"); a restart of mlengined then
  // still queues it again once it stopped. Cleared when it is queued or ends.
  std::string preempted_by;
  // A job created through Vertex AI's API (aiplatform v1 customJobs): its
  // spec as given (model/vertex.h); training_input is made from it. Its
  // job_id is the numeric id the server gave it. Each API shows only its
  // own jobs; the queue, quotas and the cluster count both. Shared by the
  // job's copies (model/shared_value.h).
  SharedValue<VertexJob> vertex;
};

inline bool IsVertexJob(const Job& job) { return job.vertex.has_value(); }

// The id of the job that runs trial `trial_id` of tuning job `parent`.
inline std::string TrialJobId(const std::string& parent, const std::string& trial_id) {
  return parent + "." + trial_id;
}
// The tuning job and trial a trial's job id names ("JOB.3" -> {"JOB", "3"});
// nullopt for the id of a job of its own.
inline std::optional<std::pair<std::string, std::string>> SplitTrialJobId(const std::string& job_id) {
  const size_t dot = job_id.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == job_id.size()) return std::nullopt;
  return std::make_pair(job_id.substr(0, dot), job_id.substr(dot + 1));
}
// A trial's job, run for a tuning job.
inline bool IsTrialJob(const Job& job) { return !job.trial_of.empty(); }
// A hyperparameter tuning job: its trials run, it does not itself.
inline bool IsTuningJob(const Job& job) {
  return job.trial_of.empty() && job.training_input.has_value() && job.training_input->hyperparameters.has_value();
}

// "projects/{project}/jobs/{job_id}"
std::string JobName(const Job& job);

// The number of the attempt that runs or will run next (of a job not ended):
// 1 + the attempts that ended.
inline int32_t CurrentAttempt(const Job& job) { return static_cast<int32_t>(job.attempts.size()) + 1; }
// How many attempts have run or run now (at least 1): a job that ended
// ended with its last recorded attempt.
inline int32_t AttemptsMade(const Job& job) {
  if (IsTerminal(job.state)) return std::max<int32_t>(1, static_cast<int32_t>(job.attempts.size()));
  return CurrentAttempt(job);
}

// A custom container job: masterConfig.imageUri is set (AI Platform's test).
inline bool UsesCustomContainer(const TrainingInput& t) {
  return t.master_config.has_value() && !t.master_config->image_uri.empty();
}

}  // namespace mle::model
