#include "service/job_service.h"

#include <algorithm>
#include <mutex>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codec/job_codec.h"
#include "model/demand.h"
#include "common/status.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/request_id.h"
#include "service/job_filter.h"
#include "service/study_service.h"
#include "service/tuning_coordinator.h"
#include "service/tuning_job.h"

namespace mle::service {
namespace {

using model::Job;
using model::JobState;

// A job as the store keeps it: its keys in columns, itself in the service's
// stored encoding (codec::SerializeJobForStorage), made by the store's
// writer: callers commit holding mu_, and encoding is the costly part.
db::PutJob Stored(const Job& job) {
  return db::PutJob{{job.project, job.job_id, job.sequence, std::string(model::JobStateName(job.state)), ""},
                    [job] { return codec::SerializeJobForStorage(job); }};
}

// The same, encoded now by a caller that holds no lock: the store has one
// writer, and a burst of creates each encoded there made it their
// bottleneck (bench/vertex_throughput.sh); request threads encode side by
// side.
db::PutJob StoredNow(const Job& job) {
  return db::PutJob{{job.project, job.job_id, job.sequence, std::string(model::JobStateName(job.state)),
                     codec::SerializeJobForStorage(job)}};
}

constexpr int32_t kDefaultPageSize = 20;
constexpr int32_t kMaxPageSize = 100;

std::string JobNameOf(const std::string& project, const std::string& job_id) {
  return absl::StrCat("projects/", project, "/jobs/", job_id);
}

absl::Status JobNotFound(const std::string& project, const std::string& job_id) {
  return absl::NotFoundError(absl::StrCat("Job ", JobNameOf(project, job_id), " not found."));
}

// Page tokens are opaque to clients: "<sequence>:<filter>" in web-safe base64,
// so a token only continues the listing it came from.
std::string MakePageToken(int64_t after_sequence, const std::string& filter) {
  return absl::WebSafeBase64Escape(absl::StrCat(after_sequence, ":", filter));
}

absl::StatusOr<int64_t> ParsePageToken(const std::string& token, const std::string& filter) {
  std::string raw;
  int64_t seq = 0;
  auto colon = std::string::npos;
  if (absl::WebSafeBase64Unescape(token, &raw)) colon = raw.find(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(raw.substr(0, colon), &seq)) {
    return common::InvalidArgumentWithViolations(
        "Invalid page token.", {{"pageToken", "is not a token returned by jobs.list; start again without it"}});
  }
  if (raw.substr(colon + 1) != filter) {
    return common::InvalidArgumentWithViolations(
        "Invalid page token.", {{"pageToken", "was returned for a different filter; use the same filter to continue"}});
  }
  return seq;
}

}  // namespace

JobService::JobService(db::Store& store, common::Clock& clock, validate::Config validation)
    : store_(store), clock_(clock), validation_(std::move(validation)) {}

model::Project JobService::NewProject(const std::string& id) const {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> dist(100000000000LL, 999999999999LL);
  model::Project p;
  p.id = id;
  p.number = dist(rng);
  p.service_account = iam::DefaultAccountEmail(p.number);
  p.tpu_service_account = iam::TpuAccountEmail(p.number);
  p.create_time = clock_.Now();
  return p;
}

absl::Status JobService::Recover() {
  auto snapshot = store_.Load();
  if (!snapshot.ok()) return snapshot.status();
  std::vector<Job> unfinished;
  {
    std::unique_lock lock(mu_);
    for (auto& p : snapshot->projects) AddProject(p);
    for (const db::StoredJob& stored : snapshot->jobs) {
      auto parsed = codec::ParseStoredJob(stored.body);
      if (!parsed.ok()) {
        return absl::DataLossError(absl::StrCat("the stored job ", stored.project, "/", stored.job_id,
                                                " cannot be read: ", parsed.status().message()));
      }
      Job j = *std::move(parsed);
      next_sequence_ = std::max(next_sequence_, j.sequence + 1);
      by_sequence_[j.project][j.sequence] = j.job_id;
      if (!model::IsTerminal(j.state)) unfinished.push_back(j);
      jobs_[{j.project, j.job_id}] = std::move(j);
    }
  }
  // Every unfinished job, QUEUED ones too: the executor may hold a run of
  // it that the database does not know about yet. A tuning job never runs
  // itself: its coordinator takes it back (its trials are jobs, adopted).
  for (const auto& j : unfinished) {
    if (model::IsTuningJob(j)) {
      if (tuning_ != nullptr) tuning_->Adopt(j);
    } else if (scheduler_ != nullptr) {
      scheduler_->Adopt(j);
    }
  }
  return absl::OkStatus();
}

void JobService::GetConfig(const std::string& project,
                           std::function<void(absl::StatusOr<model::Project>)> done) {
  model::Project p;
  {
    std::unique_lock lock(mu_);
    if (auto it = projects_.find(project); it != projects_.end()) {
      p = it->second;
      lock.unlock();
      done(p);
      return;
    }
    p = NewProject(project);
    AddProject(p);
  }
  store_.Commit({db::PutProject{p}}, [p, done = std::move(done)](absl::Status s) {
    if (!s.ok()) return done(s);
    done(p);
  });
}

std::vector<model::Project> JobService::ListProjects() const {
  std::shared_lock lock(mu_);
  std::vector<model::Project> out;
  out.reserve(projects_.size());
  for (const auto& [id, project] : projects_) out.push_back(project);
  return out;
}

std::optional<model::Project> JobService::FindProject(const std::string& id) const {
  std::shared_lock lock(mu_);
  auto it = projects_.find(id);
  if (it == projects_.end()) return std::nullopt;
  return it->second;
}

std::optional<model::Project> JobService::FindProjectByNumber(int64_t number) const {
  std::shared_lock lock(mu_);
  auto it = project_by_number_.find(number);
  if (it == project_by_number_.end()) return std::nullopt;
  return projects_.at(it->second);
}

void JobService::AddProject(const model::Project& p) {
  projects_[p.id] = p;
  project_by_number_[p.number] = p.id;
}

absl::Status JobService::CheckAccess(const std::string& project, const Job& job, const iam::Principal& caller) const {
  if (iam_ == nullptr) return absl::OkStatus();
  const bool uses_tpu = model::DemandOf(job, model::ResourceTable{}).tpu_hosts > 0;
  const std::string& account = job.training_input ? job.training_input->service_account : std::string();
  if (!uses_tpu && account.empty()) return absl::OkStatus();
  const std::optional<model::Project> p = FindProject(project);
  if (!p) {
    if (account.empty() || uses_tpu) {
      return absl::FailedPreconditionError(absl::StrCat(
          "This job uses TPUs, but project ", project,
          " is new to mlengine and has no TPU service account yet. Set up access as the TPU guide says: "
          "projects.getConfig, then mlengine services identity create --service=tpu.googleapis.com --project=",
          project, ", then grant the identity it prints roles/ml.serviceAgent: mlengine projects "
          "add-iam-policy-binding ", project, " --member=serviceAccount:IDENTITY --role=roles/ml.serviceAgent"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "Field: job.training_input.service_account Error: service account ", account, " does not exist."));
  }
  if (!account.empty()) {
    if (auto s = iam_->CheckActAs(caller, *p, account); !s.ok()) return s;
  }
  if (uses_tpu) return iam_->CheckTpuServiceAgent(*p);
  return absl::OkStatus();
}

void JobService::CreateJob(const std::string& project, Job job, JobCallback done,
                           std::vector<common::FieldViolation> wire_violations, const iam::Principal& caller,
                           std::vector<db::Mutation> with_job, bool validate_only) {
  job.project = project;
  job.creator = caller.Member();
  if (job.vertex && job.training_input) {
    // A Vertex package runs with the runtime its executor image stands for.
    for (const auto& pool : job.vertex->pools) {
      if (!pool.has_python_package || pool.executor_image_uri.empty()) continue;
      job.training_input->runtime_version = validate::RuntimeForExecutorImage(validation_, pool.executor_image_uri);
      break;
    }
    // A cloud-tpu pool's container: the TPU runtime its image goes with
    // (Vertex has no tpuTfVersion).
    model::TrainingInput& t = *job.training_input;
    if (t.worker_type == "cloud_tpu" && t.worker_config && !t.worker_config->image_uri.empty() &&
        t.worker_config->tpu_tf_version.empty()) {
      t.worker_config->tpu_tf_version = validate::TpuRuntimeForImage(validation_, t.worker_config->image_uri);
    }
  }
  auto violations = std::move(wire_violations);
  // A semantic complaint about a value the codec already refused (or dropped)
  // would only repeat it: keep the wire one.
  auto covered = [&](const std::string& field) {
    for (const auto& w : violations) {
      if (field == w.field || absl::StartsWith(field, w.field + ".") || absl::StartsWith(field, w.field + "[")) {
        return true;
      }
    }
    return false;
  };
  std::vector<common::FieldViolation> semantic;
  for (auto& v : validate::ValidateJob(job, validation_)) {
    if (!covered(v.field)) semantic.push_back(std::move(v));
  }
  violations.insert(violations.end(), semantic.begin(), semantic.end());
  if (!violations.empty()) {
    done(common::InvalidArgumentWithViolations("The job is invalid.", violations));
    return;
  }
  if (scheduler_ != nullptr) {
    if (auto s = scheduler_->Admit(job); !s.ok()) return done(s);
  }
  if (auto s = CheckAccess(project, job, caller); !s.ok()) return done(s);
  // Its images exist and are pinned before the job is accepted: on an
  // admission thread (a registry may take its time to answer).
  if (images_ != nullptr && job.training_input && !containers::JobImages(*job.training_input).empty()) {
    auto done_here = std::make_shared<JobCallback>(std::move(done));
    const bool posted = admission_.Post(obs::BindRequestId(
        [this, project, job = std::move(job), done_here, with_job = std::move(with_job), validate_only]() mutable {
          auto pinned = images_->Resolve(*job.training_input);
          if (!pinned.ok()) return (*done_here)(std::move(pinned).status());
          job.resolved_images = *std::move(pinned);
          Accept(project, std::move(job), std::move(*done_here), std::move(with_job), validate_only);
        }));
    if (!posted) (*done_here)(absl::UnavailableError("mlengined is shutting down; the job was not created"));
    return;
  }
  Accept(project, std::move(job), std::move(done), std::move(with_job), validate_only);
}

void JobService::StopAdmission() { admission_.Stop(); }

void JobService::Accept(const std::string& project, Job job, JobCallback done, std::vector<db::Mutation> with_job,
                        bool validate_only) {
  const bool tuning = model::IsTuningJob(job);
  if (tuning && studies_ != nullptr && studies_->HasUserStudy(project, job.job_id)) {
    return done(absl::AlreadyExistsError(absl::StrCat(
        "A study named ", job.job_id, " already exists in project ", project,
        ". A hyperparameter tuning job is also a study named by its job id; choose another jobId.")));
  }
  if (tuning) {
    model::TrainingOutput out;
    out.is_hyperparameter_tuning_job = true;
    out.hyperparameter_metric_tag = MetricTagOf(*job.training_input->hyperparameters);
    job.training_output = std::move(out);
  }
  std::vector<db::Mutation> writes;
  const Key key{project, job.job_id};
  {
    std::unique_lock lock(mu_);
    if (tuning) {
      if (auto s = CheckResume(project, job); !s.ok()) {
        lock.unlock();
        return done(s);
      }
    }
    if (jobs_.count(key) || pending_creates_.count(key)) {
      lock.unlock();
      done(absl::AlreadyExistsError(absl::StrCat("Job ", JobNameOf(project, job.job_id),
                                                 " already exists. Job ids are unique within a project; "
                                                 "choose another jobId.")));
      return;
    }
    if (validate_only) {
      lock.unlock();
      return done(job);
    }
    if (disk_ != nullptr) {
      if (auto s = disk_->CheckRoom("the job was not created"); !s.ok()) {
        lock.unlock();
        return done(s);
      }
    }
    if (!projects_.count(project)) {
      model::Project p = NewProject(project);
      AddProject(p);
      writes.push_back(db::PutProject{p});
    }
    job.sequence = next_sequence_++;
    job.state = JobState::kQueued;
    job.create_time = clock_.Now();
    job.version = 1;
    pending_creates_[key] = job.sequence;
  }
  writes.push_back(StoredNow(job));
  for (auto& w : with_job) writes.push_back(std::move(w));
  auto change = Publish(job, JobState::kUnspecified, *job.create_time, &writes);
  store_.Commit(std::move(writes), [this, key, job = std::move(job), change = std::move(change),
                                     done = std::move(done)](absl::Status s) mutable {
    if (change) subscriber_->Committed(*change, s);
    {
      std::unique_lock lock(mu_);
      pending_creates_.erase(key);
      if (s.ok()) {
        jobs_[key] = job;
        by_sequence_[key.project][job.sequence] = key.job_id;
      }
    }
    if (!s.ok()) return done(s);
    obs::Log("service").info("created {}", JobNameOf(key.project, key.job_id));
    if (model::IsTuningJob(job)) {
      if (tuning_ != nullptr) tuning_->Submit(job);
    } else if (scheduler_ != nullptr) {
      scheduler_->Submit(job);
    }
    // The caller's copy is this one, with its queue position.
    done(Present(std::move(job)));
  });
}

model::Job JobService::Present(Job job) const {
  if (job.state == JobState::kQueued && scheduler_ != nullptr) {
    job.job_position = scheduler_->QueuePosition({job.project, job.job_id});
  }
  return job;
}

absl::StatusOr<Job> JobService::GetJob(const std::string& project, const std::string& job_id) const {
  std::shared_lock lock(mu_);
  auto it = jobs_.find({project, job_id});
  if (it == jobs_.end() || model::IsTrialJob(it->second)) return JobNotFound(project, job_id);
  return Present(it->second);
}

int JobService::AttemptOf(const Key& key) const {
  std::shared_lock lock(mu_);
  auto it = jobs_.find(key);
  return it == jobs_.end() ? 1 : model::AttemptsMade(it->second);
}

JobService::JobApi JobService::ApiOf(const std::string& project, const std::string& job_id) const {
  std::shared_lock lock(mu_);
  auto it = jobs_.find({project, job_id});
  if (it == jobs_.end()) return JobApi::kNone;
  const Job& job = it->second;
  if (!job.vertex) return JobApi::kMl;
  return job.vertex->IsTuningJob() ? JobApi::kTuningJob : JobApi::kCustomJob;
}

absl::StatusOr<ListJobsResult> JobService::ListJobs(const std::string& project,
                                                    const ListJobsRequest& request) const {
  if (request.page_size < 0) {
    return common::InvalidArgumentWithViolations("Invalid page size.", {{"pageSize", "must not be negative"}});
  }
  if (request.vertex_location) {
    // A location no job can be created in: say so, as a create would,
    // rather than answer an empty list.
    const auto& served = validation_.served_regions.empty() ? validation_.regions : validation_.served_regions;
    if (std::find(served.begin(), served.end(), *request.vertex_location) == served.end()) {
      return absl::InvalidArgumentError(absl::StrCat("Location ", *request.vertex_location,
                                                     " is not served by this cluster; it serves: ",
                                                     absl::StrJoin(served, ", "),
                                                     " (its operator lists them under regions: in mlengined's "
                                                     "configuration)."));
    }
  }
  const int32_t page_size =
      request.page_size == 0 ? kDefaultPageSize : std::min(request.page_size, kMaxPageSize);
  auto filter = request.vertex_location ? JobFilter::ParseVertex(request.filter) : JobFilter::Parse(request.filter);
  if (!filter.ok()) return filter.status();
  std::optional<int64_t> after;
  if (!request.page_token.empty()) {
    auto seq = ParsePageToken(request.page_token, request.filter);
    if (!seq.ok()) return seq.status();
    after = *seq;
  }
  ListJobsResult result;
  std::shared_lock lock(mu_);
  auto project_it = by_sequence_.find(project);
  if (project_it == by_sequence_.end()) return result;
  const auto& index = project_it->second;
  auto it = after ? index.upper_bound(*after) : index.begin();
  for (; it != index.end(); ++it) {
    const Job& job = jobs_.at({project, it->second});
    if (model::IsTrialJob(job) || !filter->Matches(job)) continue;
    if (request.vertex_location.has_value() != model::IsVertexJob(job)) continue;
    if (request.vertex_location &&
        (job.vertex->location != *request.vertex_location || job.vertex->IsTuningJob() != request.vertex_tuning)) {
      continue;
    }
    if (static_cast<int32_t>(result.jobs.size()) == page_size) {
      result.next_page_token = MakePageToken(result.jobs.back().sequence, request.filter);
      break;
    }
    result.jobs.push_back(Present(job));
  }
  return result;
}

JobService::JobCounts JobService::CountJobs() const {
  JobCounts counts;
  for (JobState s : {JobState::kQueued, JobState::kPreparing, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelling, JobState::kCancelled}) {
    counts.by_state[s] = 0;
  }
  const absl::Time now = clock_.Now();
  std::shared_lock lock(mu_);
  for (const auto& [id, project] : projects_) counts.queues[id];
  for (const auto& [key, job] : jobs_) {
    ++counts.by_state[job.state];
    if (job.state != JobState::kQueued) continue;
    auto& queue = counts.queues[key.project];
    ++queue.length;
    if (job.create_time) queue.oldest_wait = std::max(queue.oldest_wait, now - *job.create_time);
  }
  return counts;
}

std::optional<JobStateChange> JobService::Publish(const Job& job, JobState from, absl::Time now,
                                                 std::vector<db::Mutation>* writes) const {
  if (subscriber_ == nullptr || model::IsTrialJob(job) || !subscriber_->Wants(job.project)) return std::nullopt;
  JobStateChange change{job, from, now};
  for (auto& w : subscriber_->Writes(change)) writes->push_back(std::move(w));
  return change;
}

model::Usage JobService::UsageOfJob(const Job& job, absl::Time now, const model::Period& period) const {
  return model::UsageOf(job, model::DemandOf(job, accounting_resources_), accounting_rates_, now, period);
}

double JobService::TrialUnits(const Key& key) const {
  double units = 0;
  const std::string prefix = key.job_id + ".";
  for (auto it = jobs_.lower_bound({key.project, prefix});
       it != jobs_.end() && it->first.project == key.project && absl::StartsWith(it->first.job_id, prefix); ++it) {
    const Job& trial = it->second;
    if (trial.trial_of == key.job_id && trial.training_output) units += trial.training_output->consumed_ml_units;
  }
  return units;
}

JobService::Uses JobService::RetentionUses() const {
  Uses uses;
  std::shared_lock lock(mu_);
  for (const auto& [key, job] : jobs_) {
    const bool ended = model::IsTerminal(job.state);
    const std::optional<absl::Time> end =
        ended ? std::optional<absl::Time>(job.end_time.value_or(absl::InfinitePast())) : std::nullopt;
    uses.ends.emplace_hint(uses.ends.end(), key, end);
    for (const auto& [uri, pinned] : job.resolved_images) {
      auto [it, first] = uses.images.emplace(pinned, end);
      if (!first && it->second) it->second = end ? std::max(*it->second, *end) : end;
    }
    if (!ended && job.training_input && !job.training_input->package_uris.empty()) uses.packaged.insert(key);
    if (!ended && job.state != JobState::kRunning && job.state != JobState::kCancelling &&
        (!uses.oldest_not_running || job.create_time.value_or(absl::InfinitePast()) < *uses.oldest_not_running)) {
      uses.oldest_not_running = job.create_time.value_or(absl::InfinitePast());
    }
  }
  return uses;
}

bool JobService::PinnedByUnfinishedJob(const std::vector<std::string>& images) const {
  std::shared_lock lock(mu_);
  for (const auto& [key, job] : jobs_) {
    if (model::IsTerminal(job.state)) continue;
    for (const auto& [uri, pinned] : job.resolved_images) {
      if (std::find(images.begin(), images.end(), pinned) != images.end()) return true;
    }
  }
  return false;
}

std::vector<UsageRow> JobService::ReportUsage(const UsageQuery& query) const {
  UsageReport report(query);
  const absl::Time now = clock_.Now();
  std::shared_lock lock(mu_);
  auto add = [&](const Job& job) { report.Add(job, UsageOfJob(job, now, query.period), now); };
  if (query.project.empty()) {
    for (const auto& [key, job] : jobs_) add(job);
  } else {
    for (auto it = jobs_.lower_bound({query.project, ""}); it != jobs_.end() && it->first.project == query.project;
         ++it) {
      add(it->second);
    }
  }
  return report.Rows();
}

void JobService::PatchJob(const std::string& project, const std::string& job_id, PatchJobRequest request,
                          JobCallback done) {
  std::vector<common::FieldViolation> violations;
  bool check_etag = !request.etag.empty();
  bool set_labels = false;
  if (request.update_mask.empty()) {
    violations.push_back({"updateMask", "is required; jobs.patch can update only \"labels\" (and check \"etag\")"});
  }
  for (const auto& path : request.update_mask) {
    if (path == "labels") {
      set_labels = true;
    } else if (path == "etag") {
      check_etag = true;
    } else {
      violations.push_back({"updateMask", absl::StrCat("\"", path, "\" cannot be updated; only \"labels\" and \"etag\" can")});
    }
  }
  for (auto& v : validate::ValidateLabels(request.labels, "labels")) violations.push_back(std::move(v));
  if (!violations.empty()) {
    done(common::InvalidArgumentWithViolations("Invalid patch request.", violations));
    return;
  }
  Job updated;
  {
    std::unique_lock lock(mu_);
    auto it = jobs_.find({project, job_id});
    if (it == jobs_.end() || model::IsTrialJob(it->second)) {
      lock.unlock();
      return done(JobNotFound(project, job_id));
    }
    if (check_etag && request.etag != codec::EtagForVersion(it->second.version)) {
      lock.unlock();
      return done(absl::AbortedError(absl::StrCat(
          "The etag does not match the job's current etag: ", JobNameOf(project, job_id),
          " was changed after you read it. Get the job again and retry with its new etag.")));
    }
    if (set_labels) it->second.labels = request.labels;
    ++it->second.version;
    updated = it->second;
    // Enqueued under the lock so the store sees changes in memory order.
    store_.Commit({Stored(updated)}, [this, updated, done = std::move(done)](absl::Status s) {
      if (!s.ok()) return done(s);
      done(Present(updated));
    });
  }
}

void JobService::DeleteJob(const std::string& project, const std::string& job_id, StatusCallback done) {
  {
    std::shared_lock lock(mu_);
    auto it = jobs_.find({project, job_id});
    if (it == jobs_.end() || model::IsTrialJob(it->second)) return done(JobNotFound(project, job_id));
    if (!model::IsTerminal(it->second.state)) {
      const std::string state(model::JobStateName(it->second.state));
      return done(absl::FailedPreconditionError(
          absl::StrCat("Job ", JobNameOf(project, job_id), " is ", state,
                       "; only a job that ended can be deleted. Cancel it first, then delete it once it is "
                       "CANCELLED.")));
    }
  }
  const Key key{project, job_id};
  store_.Commit(
      {db::DeleteJob{project, job_id}},
      [this, key, done = std::move(done)](absl::Status s) {
        if (s.ok()) {
          std::unique_lock lock(mu_);
          if (auto it = jobs_.find(key); it != jobs_.end()) {
            if (auto p = by_sequence_.find(key.project); p != by_sequence_.end()) p->second.erase(it->second.sequence);
            jobs_.erase(it);
          }
          lock.unlock();
          obs::Log("service").info("deleted {}", JobNameOf(key.project, key.job_id));
        }
        done(std::move(s));
      },
      db::Sync::kDurable);
}

void JobService::CancelJob(const std::string& project, const std::string& job_id, StatusCallback done,
                           const iam::Principal& caller) {
  std::unique_lock lock(mu_);
  auto it = jobs_.find({project, job_id});
  if (it == jobs_.end() || model::IsTrialJob(it->second)) {
    lock.unlock();
    return done(JobNotFound(project, job_id));
  }
  Job& job = it->second;
  if (job.state == JobState::kCancelling) {
    lock.unlock();
    return done(absl::OkStatus());
  }
  if (!model::IsCancellable(job.state)) {
    const std::string state(model::JobStateName(job.state));
    lock.unlock();
    return done(absl::FailedPreconditionError(absl::StrCat(
        "Job ", JobNameOf(project, job_id), " is ", state,
        " and cannot be cancelled; only QUEUED, PREPARING or RUNNING jobs can be.")));
  }
  const JobState from = job.state;
  Job before = job;  // put back if the cancel cannot be stored (a full disk)
  job.state = JobState::kCancelling;
  job.error_message = absl::StrCat("Cancelled by a user request (",
                                   caller.IsOperator() ? "the operator" : caller.Member(), ").");
  ++job.version;
  const Key key{project, job_id};
  const bool tuning = model::IsTuningJob(job);
  std::vector<db::Mutation> writes{Stored(job)};
  auto change = Publish(job, from, clock_.Now(), &writes);
  store_.Commit(std::move(writes), [this, key, tuning, change = std::move(change), reason = job.error_message,
                                    before = std::move(before), version = job.version,
                                    done = std::move(done)](absl::Status s) {
    if (change) subscriber_->Committed(*change, s);
    if (!s.ok()) {
      // Not stored, so not done: the job is as it was (unless it changed
      // meanwhile), and a cancel asked again is carried out.
      std::unique_lock lock(mu_);
      auto it = jobs_.find(key);
      if (it != jobs_.end() && it->second.version == version) it->second = before;
    }
    if (s.ok()) obs::Log("service").info("cancel requested for {}: {}", JobNameOf(key.project, key.job_id), reason);
    if (s.ok() && tuning && tuning_ != nullptr) tuning_->Cancel(key);
    if (s.ok() && !tuning && scheduler_ != nullptr) scheduler_->Cancel(key, reason);
    done(s);
  });
}

void JobService::Record(const Key& key, const scheduler::JobUpdate& update, Done done) {
  auto finish = [&done](absl::Status s) {
    if (done) done(std::move(s));
  };
  std::unique_lock lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) {
    lock.unlock();
    return finish(absl::NotFoundError(absl::StrCat("Job ", JobNameOf(key.project, key.job_id), " not found.")));
  }
  Job& job = it->second;
  if (job.state == update.state) {
    // A note on the current state (why a job still waits), or nothing.
    if ((!update.replace_message || job.error_message == update.error_message) && !update.attempt &&
        !update.preempted_by) {
      lock.unlock();
      return finish(absl::OkStatus());
    }
  } else if (!model::CanTransition(job.state, update.state)) {
    // The scheduler and the executors only ask for legal moves; one that is
    // not is a bug, and says so where operators look.
    const std::string message =
        absl::StrCat("refused to move ", JobNameOf(key.project, key.job_id), " from ", std::string(model::JobStateName(job.state)),
                     " to ", std::string(model::JobStateName(update.state)), ": the job state machine does not allow it");
    lock.unlock();
    obs::Log("service").error("{}", message);
    return finish(absl::FailedPreconditionError(message));
  }
  if (job.state != update.state) {
    obs::Log("service").info("{}: {} -> {}{}{}", JobNameOf(key.project, key.job_id), model::JobStateName(job.state),
                             model::JobStateName(update.state), update.error_message.empty() ? "" : ": ",
                             update.error_message);
  }
  const JobState from = job.state;
  job.state = update.state;
  if (update.replace_message || !update.error_message.empty()) job.error_message = update.error_message;
  const absl::Time now = clock_.Now();
  if ((update.state == JobState::kPreparing || update.state == JobState::kRunning) && !job.start_time) {
    job.start_time = now;
    if (job.create_time) obs::Metrics::Default().ObserveQueueWait(key.project, now - *job.create_time);
  }
  if (model::IsTerminal(update.state)) job.end_time = now;
  const bool attempt_ended = update.attempt && model::CurrentAttempt(job) == update.attempt->number;
  if (attempt_ended) job.attempts.push_back(*update.attempt);
  // What the ended attempt used (/metrics), and at the job's end
  // trainingOutput.consumedMLUnits, as AI Platform reported it; a tuning
  // job's are its trials'.
  std::optional<model::JobDemand> demand;
  if (attempt_ended || (model::IsTerminal(update.state) && !model::IsTuningJob(job))) {
    demand = model::DemandOf(job, accounting_resources_);
  }
  if (attempt_ended) {
    const model::Usage used = model::AttemptUsage(*update.attempt, *demand, accounting_rates_);
    if (used.run_hours > 0) {
      obs::Metrics::Default().AddUsage(key.project, used.ml_units, used.cpu_hours, used.gpu_hours, used.tpu_core_hours);
    }
  }
  if (model::IsTerminal(update.state)) {
    const double units = model::IsTuningJob(job) ? TrialUnits(key)
                                                 : model::UsageOf(job, *demand, accounting_rates_, now).ml_units;
    if (units > 0 || (job.training_output && job.training_output->consumed_ml_units != 0)) {
      if (!job.training_output) job.training_output.emplace();
      job.training_output->consumed_ml_units = units;
    }
  }
  if (update.preempted_by) job.preempted_by = *update.preempted_by;
  if (update.state == JobState::kQueued || model::IsTerminal(update.state)) job.preempted_by.clear();
  ++job.version;
  // The change is already visible in memory; a failed write (disk full, I/O
  // error) cannot be undone here, so it is reported where operators look,
  // and to the caller, who must not act on an update that is not durable.
  // A job's end is flushed whatever the caller says (clients were told).
  const db::Sync sync = update.flush || model::IsTerminal(update.state) ? db::Sync::kDurable : db::Sync::kLazy;
  std::vector<db::Mutation> writes{Stored(job)};
  auto change = from != job.state ? Publish(job, from, now, &writes) : std::nullopt;
  store_.Commit(
      std::move(writes),
      [this, key, change = std::move(change), name = JobNameOf(key.project, key.job_id),
       state = std::string(model::JobStateName(update.state)), done = std::move(done)](absl::Status s) {
        if (change) subscriber_->Committed(*change, s);
        if (!s.ok()) {
          obs::Log("service").error("could not record {} -> {}: {}; written again once the store takes it", name,
                                    state, s.ToString());
          MarkUnsaved(key);
        }
        if (done) done(std::move(s));
      },
      sync);
  const std::optional<Job> trial = model::IsTrialJob(job) ? std::optional<Job>(job) : std::nullopt;
  lock.unlock();  // IamService may look projects up (mu_) while it holds its own lock
  if (trial && tuning_ != nullptr) tuning_->TrialChanged(*trial);
  // The replicas' credential dies with the job, and with an attempt that is
  // queued again (the next attempt is given a token of its own).
  const bool requeued = update.state == JobState::kQueued && update.attempt.has_value();
  if ((model::IsTerminal(update.state) || requeued) && iam_ != nullptr) {
    iam_->RevokeTokens(iam::JobTokenPurpose(key.project, key.job_id),
                       [name = JobNameOf(key.project, key.job_id)](absl::Status s) {
                         if (!s.ok()) obs::Log("service").error("could not revoke the token of {}: {}", name, s.ToString());
                       });
  }
}

absl::Status JobService::CheckResume(const std::string& project, const Job& job) const {
  const model::HyperparameterSpec& h = *job.training_input->hyperparameters;
  if (h.resume_previous_job_id.empty()) return absl::OkStatus();
  const std::string field = "trainingInput.hyperparameters.resumePreviousJobId";
  auto it = jobs_.find({project, h.resume_previous_job_id});
  if (it == jobs_.end() || model::IsTrialJob(it->second)) {
    return common::InvalidArgumentWithViolations(
        "The job is invalid.", {{field, absl::StrCat("job ", h.resume_previous_job_id, " does not exist in project ",
                                                     project, "; name a hyperparameter tuning job of this project")}});
  }
  const Job& previous = it->second;
  if (!model::IsTuningJob(previous)) {
    return common::InvalidArgumentWithViolations(
        "The job is invalid.",
        {{field, absl::StrCat("job ", h.resume_previous_job_id, " is not a hyperparameter tuning job")}});
  }
  if (!model::IsTerminal(previous.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Job ", JobNameOf(project, previous.job_id), " is ", std::string(model::JobStateName(previous.state)),
        "; a tuning job can resume it only once it has ended. Wait for it, or cancel it first."));
  }
  const auto& before = previous.training_input->hyperparameters->params;
  auto signature = [](const std::vector<model::ParameterSpec>& params) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : params) out.emplace_back(p.parameter_name, p.type);
    return out;
  };
  if (signature(before) != signature(h.params) || previous.training_input->hyperparameters->goal != h.goal ||
      MetricTagOf(*previous.training_input->hyperparameters) != MetricTagOf(h)) {
    return common::InvalidArgumentWithViolations(
        "The job is invalid.",
        {{field, absl::StrCat("job ", h.resume_previous_job_id,
                              " tuned other parameters, another goal or another metric; a resumed study keeps the "
                              "same params (names and types), goal and hyperparameterMetricTag")}});
  }
  return absl::OkStatus();
}

std::vector<Job> JobService::TrialJobsOf(const Key& key) const {
  std::vector<Job> out;
  const std::string prefix = key.job_id + ".";
  std::shared_lock lock(mu_);
  for (auto it = jobs_.lower_bound({key.project, prefix});
       it != jobs_.end() && it->first.project == key.project && absl::StartsWith(it->first.job_id, prefix); ++it) {
    if (it->second.trial_of == key.job_id) out.push_back(it->second);
  }
  std::sort(out.begin(), out.end(),
            [](const Job& a, const Job& b) { return TrialNumber(a.trial_id) < TrialNumber(b.trial_id); });
  return out;
}

void JobService::StartTrials(const Key& key, std::vector<Job> trials, model::TrainingOutput output,
                             StatusCallback done) {
  std::vector<db::Mutation> writes;
  {
    std::unique_lock lock(mu_);
    auto it = jobs_.find(key);
    if (it == jobs_.end() || model::IsTerminal(it->second.state) || it->second.state == JobState::kCancelling) {
      lock.unlock();
      return done(absl::FailedPreconditionError(
          absl::StrCat("Job ", JobNameOf(key.project, key.job_id), " has ended or is being cancelled.")));
    }
    Job& parent = it->second;
    output.consumed_ml_units = TrialUnits(key);
    parent.training_output = std::move(output);
    ++parent.version;
    writes.push_back(Stored(parent));
    const absl::Time now = clock_.Now();
    for (auto& t : trials) {
      t.sequence = next_sequence_++;
      t.state = JobState::kQueued;
      t.create_time = now;
      t.version = 1;
      pending_creates_[{key.project, t.job_id}] = t.sequence;
      writes.push_back(Stored(t));
    }
    // Enqueued under the lock so the store sees changes in memory order.
    store_.Commit(std::move(writes), [this, key, trials = std::move(trials), done = std::move(done)](absl::Status s) {
      {
        std::unique_lock lock(mu_);
        for (const auto& t : trials) {
          pending_creates_.erase({key.project, t.job_id});
          if (s.ok()) {
            jobs_[{key.project, t.job_id}] = t;
            by_sequence_[key.project][t.sequence] = t.job_id;
          }
        }
      }
      if (s.ok()) {
        for (const auto& t : trials) {
          obs::Log("service").info("{}: trial {} queued as {}", JobNameOf(key.project, key.job_id), t.trial_id, t.job_id);
          if (scheduler_ != nullptr) scheduler_->Submit(t);
        }
      }
      done(s);
    });
  }
}

void JobService::SetTrainingOutput(const Key& key, model::TrainingOutput output) {
  std::unique_lock lock(mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return;
  output.consumed_ml_units = TrialUnits(key);
  it->second.training_output = std::move(output);
  ++it->second.version;
  store_.Commit({Stored(it->second)}, [this, key, name = JobNameOf(key.project, key.job_id)](absl::Status s) {
    if (!s.ok()) {
      obs::Log("service").error("could not record the trials of {}: {}; written again once the store takes it",
                                name, s.ToString());
      MarkUnsaved(key);
    }
  });
}

void JobService::MarkUnsaved(const Key& key) {
  std::unique_lock lock(mu_);
  unsaved_.insert(key);
}

void JobService::SaveUnsaved() {
  std::vector<db::Mutation> writes;
  std::vector<Key> keys;
  {
    std::unique_lock lock(mu_);
    if (unsaved_.empty() || saving_unsaved_) return;
    for (const Key& key : unsaved_) {
      auto it = jobs_.find(key);
      if (it == jobs_.end()) continue;
      writes.push_back(Stored(it->second));
      keys.push_back(key);
    }
    unsaved_.clear();
    if (writes.empty()) return;
    saving_unsaved_ = true;
    // Under the lock: the store sees them in memory order, after any change already committed.
    store_.Commit(std::move(writes), [this, keys](absl::Status s) {
      std::unique_lock lock(mu_);
      saving_unsaved_ = false;
      if (s.ok()) {
        obs::Log("service").info("wrote {} job changes the store had refused before", keys.size());
      } else {
        unsaved_.insert(keys.begin(), keys.end());
      }
    });
  }
}

void JobService::StopTrial(const Key& trial, const std::string& reason) {
  std::unique_lock lock(mu_);
  auto it = jobs_.find(trial);
  if (it == jobs_.end() || !model::IsCancellable(it->second.state)) return;
  Job& job = it->second;
  job.state = JobState::kCancelling;
  job.error_message = reason;
  ++job.version;
  const Job copy = job;
  store_.Commit({Stored(job)}, [this, trial](absl::Status s) {
    if (!s.ok()) {
      obs::Log("service").error("could not record the stop of {}: {}", JobNameOf(trial.project, trial.job_id),
                                s.ToString());
      return;
    }
    if (scheduler_ != nullptr) scheduler_->Cancel(trial);
  });
  lock.unlock();
  if (tuning_ != nullptr) tuning_->TrialChanged(copy);
}

}  // namespace mle::service
