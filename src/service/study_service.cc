#include "service/study_service.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codec/study_codec.h"
#include "common/status.h"
#include "model/catalog.h"
#include "obs/log.h"
#include "tuning/stopping.h"
#include "tuning/suggest.h"

namespace mle::service {
namespace {

using tuning::Study;
using tuning::StudyOperation;
using tuning::StudyTrial;
using tuning::TrialStatus;

// ---- the stored records (db::Record); bodies are codec/study_codec.h's ----
constexpr char kStudyKind[] = "study.study";
constexpr char kTrialKind[] = "study.trial";
constexpr char kOperationKind[] = "study.operation";

constexpr size_t kMaxStudyIdLength = 128;

std::string StudyKey(const std::string& project, const std::string& location, const std::string& id) {
  return absl::StrCat(project, "/", location, "/", id);
}
std::string TrialKey(const Study& s, int64_t id) {
  return absl::StrFormat("%s/%s/%s/%010d", s.project, s.location, s.study_id, id);
}

db::Mutation PutTrial(const Study& s, const StudyTrial& t) {
  return db::PutRecord{{kTrialKind, TrialKey(s, t.id), codec::SerializeTrialForStorage(t)}};
}

const char* StateName(TrialStatus s) {
  switch (s) {
    case TrialStatus::kRequested:
      return "REQUESTED";
    case TrialStatus::kActive:
      return "ACTIVE";
    case TrialStatus::kStopping:
      return "STOPPING";
    case TrialStatus::kCompleted:
      return "COMPLETED";
  }
  return "?";
}

// FNV-1a: a hash that is the same in every build (std::hash is not).
uint64_t StableHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::Status StudyNotFound(const std::string& name) {
  return absl::NotFoundError(absl::StrCat("Study ", name, " not found."));
}

bool ValidStudyId(const std::string& id) {
  if (id.empty() || id.size() > kMaxStudyIdLength || !absl::ascii_isalpha(static_cast<unsigned char>(id[0]))) {
    return false;
  }
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string RefName(const StudyService::StudyRef& ref) {
  return absl::StrCat("projects/", ref.project, "/locations/", ref.location, "/studies/", ref.study_id);
}

absl::Status JobOwned(const StudyService::StudyRef& ref) {
  return absl::FailedPreconditionError(absl::StrCat("study ", ref.study_id, " belongs to tuning job ", ref.study_id,
                                                    "; its trials are run by the job"));
}

// A measurement that completes a trial reports every metric of the study.
std::vector<common::FieldViolation> CheckFinalMetrics(const tuning::StudyConfig& config,
                                                      const tuning::TrialMeasurement& m, const std::string& field) {
  std::vector<std::string> missing;
  for (const auto& metric : config.metrics) {
    auto it = std::find_if(m.metrics.begin(), m.metrics.end(),
                           [&](const tuning::TrialMetric& x) { return x.metric == metric.metric; });
    if (it == m.metrics.end()) missing.push_back(metric.metric);
  }
  if (missing.empty()) return {};
  return {{field + ".metrics",
           absl::StrCat("a final measurement reports every metric of the study; missing: ",
                        absl::StrJoin(missing, ", "))}};
}

// Measurements stay ordered by (step, elapsed time).
void InsertMeasurement(std::vector<tuning::TrialMeasurement>* ms, tuning::TrialMeasurement m) {
  auto at = std::upper_bound(ms->begin(), ms->end(), m, [](const auto& a, const auto& b) {
    return std::tie(a.step_count, a.elapsed_time) < std::tie(b.step_count, b.elapsed_time);
  });
  ms->insert(at, std::move(m));
}

std::vector<tuning::Trial> OptimizerTrials(const std::vector<StudyTrial>& trials, bool elapsed_as_step) {
  std::vector<tuning::Trial> out;
  out.reserve(trials.size());
  for (const auto& t : trials) out.push_back(tuning::ToOptimizerTrial(t, elapsed_as_step));
  return out;
}

}  // namespace

StudyService::StudyService(db::Store& store, common::Clock& clock, std::vector<std::string> regions,
                           std::vector<std::string> tpu_regions)
    : store_(store), clock_(clock), regions_(std::move(regions)), tpu_regions_(std::move(tpu_regions)) {}

absl::Status StudyService::Recover() {
  auto records = store_.LoadRecords("study.");
  if (!records.ok()) return records.status();
  absl::MutexLock lock(&mu_);
  std::vector<StudyTrial> trials;
  for (const db::Record& r : *records) {
    if (r.kind == kStudyKind) {
      auto stored = codec::ParseStoredStudy(r.body);
      if (!stored.ok()) return stored.status();
      const Study& s = stored->study;
      studies_[{s.project, s.location, s.study_id}] = Entry{s, stored->next_trial_id, {}};
    } else if (r.kind == kTrialKind) {
      auto t = codec::ParseStoredTrial(r.body);
      if (!t.ok()) return t.status();
      trials.push_back(*std::move(t));
    } else if (r.kind == kOperationKind) {
      auto op = codec::ParseStoredOperation(r.body);
      if (!op.ok()) return op.status();
      operations_[{op->project, op->location, op->id}] = *std::move(op);
    }
  }
  std::map<std::string, Entry*> by_name;
  for (auto& [key, entry] : studies_) by_name[entry.study.Name()] = &entry;
  for (auto& t : trials) {
    auto it = by_name.find(t.study);
    if (it == by_name.end()) {
      return absl::DataLossError(absl::StrCat("stored trial ", t.Name(), " belongs to no stored study"));
    }
    Entry& e = *it->second;
    e.next_trial_id = std::max(e.next_trial_id, t.id + 1);  // never reuse an id, whatever was stored
    e.trials[t.id] = std::move(t);
  }
  return absl::OkStatus();
}

// ---- helpers ----

absl::Status StudyService::CheckLocation(const std::string& location, const char* field) const {
  if (std::find(regions_.begin(), regions_.end(), location) != regions_.end()) return absl::OkStatus();
  return common::InvalidArgumentWithViolations(
      "Invalid location.", {{field, absl::StrCat("location \"", location, "\" is not served; the locations are: ",
                                                 absl::StrJoin(regions_, ", "))}});
}

std::string StudyService::NewOperationId() const {
  std::random_device rd;
  const uint64_t n = (static_cast<uint64_t>(rd()) << 32 | rd()) % 9000000000000000000ull + 1000000000000000000ull;
  return std::to_string(n);
}

db::Mutation StudyService::PutStudy(const Entry& entry, int64_t next_trial_id) const {
  const Study& s = entry.study;
  return db::PutRecord{{kStudyKind, StudyKey(s.project, s.location, s.study_id),
                        codec::SerializeStudyForStorage(s, next_trial_id)}};
}

absl::StatusOr<const StudyService::Entry*> StudyService::Writable(const StudyRef& ref) const {
  auto it = studies_.find({ref.project, ref.location, ref.study_id});
  if (it == studies_.end()) return StudyNotFound(RefName(ref));
  return &it->second;
}

absl::StatusOr<const StudyTrial*> StudyService::WritableTrial(const StudyRef& ref, const std::string& trial_id,
                                                              const Entry** entry) const {
  auto e = Writable(ref);
  if (!e.ok()) return e.status();
  *entry = *e;
  int64_t id = 0;
  auto it = absl::SimpleAtoi(trial_id, &id) ? (*e)->trials.find(id) : (*e)->trials.end();
  if (it == (*e)->trials.end()) {
    return absl::NotFoundError(absl::StrCat("Trial ", RefName(ref), "/trials/", trial_id, " not found."));
  }
  return &it->second;
}

absl::StatusOr<std::pair<Study, std::vector<StudyTrial>>> StudyService::Read(const StudyRef& ref) const {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = studies_.find({ref.project, ref.location, ref.study_id});
    if (it != studies_.end()) {
      std::vector<StudyTrial> trials;
      for (const auto& [id, t] : it->second.trials) trials.push_back(t);
      return std::pair{it->second.study, std::move(trials)};
    }
  }
  if (job_studies_ != nullptr) {
    if (auto s = job_studies_->Find(ref.project, ref.study_id); s && s->location == ref.location) {
      return std::pair{*s, job_studies_->Trials(ref.project, ref.study_id)};
    }
  }
  return StudyNotFound(RefName(ref));
}

// ---- locations ----

absl::StatusOr<tuning::Location> StudyService::GetLocation(const std::string& project,
                                                           const std::string& location) const {
  if (std::find(regions_.begin(), regions_.end(), location) == regions_.end()) {
    return absl::NotFoundError(absl::StrCat("Location projects/", project, "/locations/", location,
                                            " not found; the locations are: ", absl::StrJoin(regions_, ", ")));
  }
  tuning::Location out{project, location, {}};
  const bool tpus = std::find(tpu_regions_.begin(), tpu_regions_.end(), location) != tpu_regions_.end();
  for (const auto& a : model::AcceleratorTypes()) {
    if (a.kind == model::AcceleratorKind::kGpu || tpus) out.accelerators.emplace_back(a.name);
  }
  return out;
}

absl::StatusOr<StudyService::LocationPage> StudyService::ListLocations(const std::string& project, int page_size,
                                                                       const std::string& page_token) const {
  size_t start = 0;
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &start) || start > regions_.size())) {
    return common::InvalidArgumentWithViolations("Invalid page token.",
                                                 {{"pageToken", "not a token a previous list returned"}});
  }
  if (page_size < 0) {
    return common::InvalidArgumentWithViolations("Invalid page size.", {{"pageSize", "must not be negative"}});
  }
  LocationPage page;
  const size_t end = page_size == 0 ? regions_.size() : std::min(regions_.size(), start + page_size);
  for (size_t i = start; i < end; ++i) page.locations.push_back(*GetLocation(project, regions_[i]));
  if (end < regions_.size()) page.next_page_token = std::to_string(end);
  return page;
}

// ---- studies ----

void StudyService::CreateStudy(const std::string& project, const std::string& location, const std::string& study_id,
                               tuning::StudyConfig config, Callback<Study> done) {
  std::vector<common::FieldViolation> v;
  if (study_id.empty()) {
    v.push_back({"studyId", "studyId is required: the id of the new study"});
  } else if (!ValidStudyId(study_id)) {
    v.push_back({"studyId", absl::StrFormat("studyId \"%s\" must be 1 to %d letters, digits, underscores and "
                                            "hyphens, starting with a letter",
                                            study_id, kMaxStudyIdLength)});
  }
  if (auto st = CheckLocation(location, "parent"); !st.ok()) {
    auto more = common::GetFieldViolations(st);
    v.insert(v.end(), more.begin(), more.end());
  }
  auto config_violations = tuning::ValidateStudyConfig(config);
  v.insert(v.end(), config_violations.begin(), config_violations.end());
  if (!v.empty()) return done(common::InvalidArgumentWithViolations("Invalid study.", v));
  if (job_studies_ != nullptr) {
    if (auto job = job_studies_->Find(project, study_id)) {
      return done(absl::AlreadyExistsError(absl::StrCat("Study ", study_id, " already exists in project ", project,
                                                        ": it is the study of tuning job ", study_id, " (",
                                                        job->Name(), ")")));
    }
  }
  Study study;
  study.project = project;
  study.location = location;
  study.study_id = study_id;
  study.config = std::move(config);
  Write([this, study = std::move(study), done = std::move(done)]() mutable -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    if (studies_.count({study.project, study.location, study.study_id})) {
      done(absl::AlreadyExistsError(absl::StrCat("Study ", study.Name(), " already exists.")));
      return std::nullopt;
    }
    study.create_time = clock_.Now();
    Entry entry{study, 1, {}};
    Change c;
    c.writes.push_back(PutStudy(entry, 1));
    c.apply = [this, entry]() {
      mu_.AssertHeld();  // apply runs under mu_
      studies_[{entry.study.project, entry.study.location, entry.study.study_id}] = entry;
    };
    c.finish = [study, done](absl::Status s) {
      if (!s.ok()) return done(s);
      done(study);
    };
    return c;
  });
}

absl::StatusOr<Study> StudyService::GetStudy(const std::string& project, const std::string& location,
                                             const std::string& study_id) const {
  auto r = Read({project, location, study_id});
  if (!r.ok()) return r.status();
  return r->first;
}

absl::StatusOr<std::vector<Study>> StudyService::ListStudies(const std::string& project,
                                                             const std::string& location) const {
  if (auto st = CheckLocation(location, "parent"); !st.ok()) return st;
  std::vector<Study> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (auto it = studies_.lower_bound({project, location, ""});
         it != studies_.end() && std::get<0>(it->first) == project && std::get<1>(it->first) == location; ++it) {
      out.push_back(it->second.study);
    }
  }
  if (job_studies_ != nullptr) {
    for (auto& s : job_studies_->List(project, location)) out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const Study& a, const Study& b) { return a.study_id < b.study_id; });
  return out;
}

bool StudyService::HasUserStudy(const std::string& project, const std::string& study_id) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [key, entry] : studies_) {
    if (std::get<0>(key) == project && std::get<2>(key) == study_id) return true;
  }
  return false;
}

void StudyService::DeleteStudy(const std::string& project, const std::string& location, const std::string& study_id,
                               StatusCallback done) {
  const StudyRef ref{project, location, study_id};
  Write([this, ref, done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    auto e = Writable(ref);
    if (!e.ok()) {
      done(std::move(e).status());
      return std::nullopt;
    }
    Change c;
    const Study& s = (*e)->study;
    c.writes.emplace_back(std::in_place_type<db::DeleteRecord>, db::DeleteRecord{kStudyKind, StudyKey(s.project, s.location, s.study_id)});
    for (const auto& [id, t] : (*e)->trials) {
      c.writes.emplace_back(std::in_place_type<db::DeleteRecord>, db::DeleteRecord{kTrialKind, TrialKey(s, id)});
    }
    c.apply = [this, ref]() {
      mu_.AssertHeld();  // apply runs under mu_
      studies_.erase({ref.project, ref.location, ref.study_id});
    };
    c.finish = done;
    return c;
  });
}

// ---- trials ----

absl::StatusOr<StudyTrial> StudyService::GetTrial(const StudyRef& study, const std::string& trial_id) const {
  auto r = Read(study);
  if (!r.ok()) return r.status();
  int64_t id = 0;
  if (absl::SimpleAtoi(trial_id, &id)) {
    for (const auto& t : r->second) {
      if (t.id == id) return t;
    }
  }
  return absl::NotFoundError(absl::StrCat("Trial ", r->first.Name(), "/trials/", trial_id, " not found."));
}

absl::StatusOr<std::vector<StudyTrial>> StudyService::ListTrials(const StudyRef& study) const {
  auto r = Read(study);
  if (!r.ok()) return r.status();
  return std::move(r->second);
}

void StudyService::CreateTrial(const StudyRef& ref, NewTrial trial, Callback<StudyTrial> done) {
  if (job_studies_ != nullptr && job_studies_->Find(ref.project, ref.study_id)) return done(JobOwned(ref));
  Write([this, ref, trial = std::move(trial), done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    auto e = Writable(ref);
    if (!e.ok()) {
      done(std::move(e).status());
      return std::nullopt;
    }
    const Entry& entry = **e;
    auto v = tuning::CheckTrialParameters(entry.study.config, trial.parameters);
    const TrialStatus state = trial.state.value_or(TrialStatus::kActive);
    if (state == TrialStatus::kCompleted) {
      if (!trial.final_measurement) {
        v.push_back({"finalMeasurement", "finalMeasurement is required for a COMPLETED trial"});
      } else {
        auto more = CheckFinalMetrics(entry.study.config, *trial.final_measurement, "finalMeasurement");
        v.insert(v.end(), more.begin(), more.end());
      }
    } else if (trial.final_measurement) {
      v.push_back({"finalMeasurement", "finalMeasurement is only for a COMPLETED trial (or use trials.complete)"});
    }
    if (!v.empty()) {
      done(common::InvalidArgumentWithViolations("Invalid trial.", v));
      return std::nullopt;
    }
    const absl::Time now = clock_.Now();
    StudyTrial t;
    t.study = entry.study.Name();
    t.id = entry.next_trial_id;
    t.state = state;
    t.parameters = trial.parameters;
    for (auto m : trial.measurements) InsertMeasurement(&t.measurements, std::move(m));
    t.final_measurement = trial.final_measurement;
    if (state != TrialStatus::kRequested) t.start_time = now;
    if (state == TrialStatus::kCompleted) t.end_time = now;
    Change c;
    c.writes.push_back(PutStudy(entry, t.id + 1));
    c.writes.push_back(PutTrial(entry.study, t));
    c.apply = [this, ref, t]() {
      mu_.AssertHeld();  // apply runs under mu_
      Entry& e = studies_.at({ref.project, ref.location, ref.study_id});
      e.next_trial_id = t.id + 1;
      e.trials[t.id] = t;
    };
    c.finish = [t, done](absl::Status s) {
      if (!s.ok()) return done(s);
      done(t);
    };
    return c;
  });
}

void StudyService::DeleteTrial(const StudyRef& ref, const std::string& trial_id, StatusCallback done) {
  if (job_studies_ != nullptr && job_studies_->Find(ref.project, ref.study_id)) return done(JobOwned(ref));
  Write([this, ref, trial_id, done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    const Entry* entry = nullptr;
    auto t = WritableTrial(ref, trial_id, &entry);
    if (!t.ok()) {
      done(std::move(t).status());
      return std::nullopt;
    }
    const int64_t id = (*t)->id;
    Change c;
    c.writes.push_back(db::DeleteRecord{kTrialKind, TrialKey(entry->study, id)});
    c.apply = [this, ref, id]() {
      mu_.AssertHeld();  // apply runs under mu_
      studies_.at({ref.project, ref.location, ref.study_id}).trials.erase(id);
    };
    c.finish = done;
    return c;
  });
}

StudyService::Change StudyService::TrialChange(const Study& study, const StudyRef& ref, const StudyTrial& updated,
                                               Callback<StudyTrial> done) {
  Change c;
  c.writes.push_back(PutTrial(study, updated));
  c.apply = [this, ref, updated]() {
    mu_.AssertHeld();  // apply runs under mu_
    studies_.at({ref.project, ref.location, ref.study_id}).trials[updated.id] = updated;
  };
  c.finish = [updated, done = std::move(done)](absl::Status s) {
    if (!s.ok()) return done(s);
    done(updated);
  };
  return c;
}

void StudyService::EditTrial(const StudyRef& ref, const std::string& trial_id, TrialEdit edit,
                             Callback<StudyTrial> done) {
  if (job_studies_ != nullptr && job_studies_->Find(ref.project, ref.study_id)) return done(JobOwned(ref));
  Write([this, ref, trial_id, edit = std::move(edit), done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    const Entry* entry = nullptr;
    auto t = WritableTrial(ref, trial_id, &entry);
    if (!t.ok()) {
      done(std::move(t).status());
      return std::nullopt;
    }
    StudyTrial updated = **t;
    absl::StatusOr<bool> changed = edit(*entry, updated);
    if (!changed.ok() || !*changed) {
      done(changed.ok() ? absl::StatusOr<StudyTrial>(**t) : absl::StatusOr<StudyTrial>(std::move(changed).status()));
      return std::nullopt;
    }
    return TrialChange(entry->study, ref, updated, done);
  });
}

void StudyService::AddMeasurement(const StudyRef& ref, const std::string& trial_id,
                                  tuning::TrialMeasurement measurement, bool elapsed_given,
                                  Callback<StudyTrial> done) {
  EditTrial(ref, trial_id,
            [this, measurement = std::move(measurement), elapsed_given](const Entry&,
                                                                        StudyTrial& t) -> absl::StatusOr<bool> {
              if (t.state != TrialStatus::kActive) {
                return absl::FailedPreconditionError(absl::StrCat("Trial ", t.Name(), " is ", StateName(t.state),
                                                                  ": measurements may be added to ACTIVE trials only."));
              }
              tuning::TrialMeasurement m = measurement;
              if (!elapsed_given) {
                m.elapsed_time =
                    t.start_time ? std::max(absl::ZeroDuration(), clock_.Now() - *t.start_time) : absl::ZeroDuration();
              }
              InsertMeasurement(&t.measurements, std::move(m));
              return true;
            },
            std::move(done));
}

void StudyService::CompleteTrial(const StudyRef& ref, const std::string& trial_id, Completion completion,
                                 Callback<StudyTrial> done) {
  EditTrial(ref, trial_id,
            [this, completion = std::move(completion)](const Entry& entry, StudyTrial& t) -> absl::StatusOr<bool> {
              if (t.state == TrialStatus::kCompleted) {
                return absl::FailedPreconditionError(absl::StrCat("Trial ", t.Name(), " is already COMPLETED."));
              }
              std::vector<common::FieldViolation> v;
              if (completion.infeasible) {
                t.infeasible = true;
                t.infeasible_reason = completion.infeasible_reason;
                t.final_measurement.reset();
              } else {
                if (!completion.infeasible_reason.empty()) {
                  v.push_back(
                      {"infeasibleReason", "infeasibleReason is only for a trial completed with trialInfeasible"});
                }
                if (completion.final_measurement) {
                  t.final_measurement = completion.final_measurement;
                } else if (!t.measurements.empty()) {
                  t.final_measurement = t.measurements.back();  // the latest reported
                } else {
                  v.push_back({"finalMeasurement", "finalMeasurement is required: the trial reported no measurement "
                                                   "to complete with (or set trialInfeasible)"});
                }
                if (t.final_measurement) {
                  auto more = CheckFinalMetrics(entry.study.config, *t.final_measurement, "finalMeasurement");
                  v.insert(v.end(), more.begin(), more.end());
                }
              }
              if (!v.empty()) return common::InvalidArgumentWithViolations("Invalid completion.", v);
              const absl::Time now = clock_.Now();
              t.state = TrialStatus::kCompleted;
              if (!t.start_time) t.start_time = now;
              t.end_time = now;
              return true;
            },
            std::move(done));
}

void StudyService::StopTrial(const StudyRef& ref, const std::string& trial_id, Callback<StudyTrial> done) {
  EditTrial(ref, trial_id,
            [](const Entry&, StudyTrial& t) -> absl::StatusOr<bool> {
              if (t.state == TrialStatus::kCompleted) {
                return absl::FailedPreconditionError(absl::StrCat("Trial ", t.Name(), " is already COMPLETED."));
              }
              if (t.state == TrialStatus::kStopping) return false;  // asked already: nothing changes
              t.state = TrialStatus::kStopping;
              return true;
            },
            std::move(done));
}

void StudyService::SuggestTrials(const StudyRef& ref, int32_t suggestion_count, const std::string& client_id,
                                 Callback<StudyOperation> done) {
  if (suggestion_count < 1 || suggestion_count > kMaxSuggestionCount) {
    return done(common::InvalidArgumentWithViolations(
        "Invalid suggest request.", {{"suggestionCount", absl::StrFormat("suggestionCount must be 1 to %d (got %d)",
                                                                          kMaxSuggestionCount, suggestion_count)}}));
  }
  if (job_studies_ != nullptr && job_studies_->Find(ref.project, ref.study_id)) return done(JobOwned(ref));
  Write([this, ref, suggestion_count, client_id, done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    auto e = Writable(ref);
    if (!e.ok()) {
      done(std::move(e).status());
      return std::nullopt;
    }
    const Entry& entry = **e;
    const absl::Time now = clock_.Now();
    StudyOperation op;
    op.project = ref.project;
    op.location = ref.location;
    op.id = NewOperationId();
    op.kind = tuning::OperationKind::kSuggestTrials;
    op.study = entry.study.Name();
    op.create_time = op.start_time = now;
    op.client_id = client_id;
    op.suggestion_count = suggestion_count;
    std::vector<StudyTrial> changed;  // trials to write: handed out REQUESTED ones and new ones
    // The client's pending trials first, then REQUESTED ones.
    if (!client_id.empty()) {
      for (const auto& [id, t] : entry.trials) {
        if (static_cast<int32_t>(op.trials.size()) == suggestion_count) break;
        if (t.state == TrialStatus::kActive && t.client_id == client_id) op.trials.push_back(t);
      }
    }
    for (const auto& [id, t] : entry.trials) {
      if (static_cast<int32_t>(op.trials.size()) == suggestion_count) break;
      if (t.state != TrialStatus::kRequested) continue;
      StudyTrial handed = t;
      handed.state = TrialStatus::kActive;
      handed.client_id = client_id;
      handed.start_time = now;
      changed.push_back(handed);
      op.trials.push_back(std::move(handed));
    }
    Study study = entry.study;
    int64_t next_id = entry.next_trial_id;
    const int remaining = suggestion_count - static_cast<int>(op.trials.size());
    if (remaining > 0 && study.state == tuning::StudyState::kActive) {
      std::vector<StudyTrial> all;
      for (const auto& [id, t] : entry.trials) all.push_back(t);
      for (auto& t : changed) all[std::distance(entry.trials.begin(), entry.trials.find(t.id))] = t;
      const tuning::StudySpec spec = tuning::ToSpec(study.config);
      const uint64_t seed = StableHash(absl::StrCat(study.Name(), "#", next_id - 1));
      auto points = tuning::Suggest(spec, OptimizerTrials(all, false), remaining, seed);
      if (!points.ok()) {
        done(absl::Status(points.status().code(),
                          absl::StrCat("cannot suggest trials for ", study.Name(), ": ", points.status().message())));
        return std::nullopt;
      }
      for (const auto& a : *points) {
        StudyTrial t;
        t.study = study.Name();
        t.id = next_id++;
        t.state = TrialStatus::kActive;
        t.parameters = tuning::ToTrialParameters(study.config, a);
        t.client_id = client_id;
        t.start_time = now;
        changed.push_back(t);
        op.trials.push_back(std::move(t));
      }
      if (spec.algorithm == tuning::Algorithm::kGrid && static_cast<int>(points->size()) < remaining) {
        study.state = tuning::StudyState::kCompleted;  // the grid is exhausted
      }
    }
    op.study_state = study.state;
    op.end_time = now;
    op.done = true;
    Change c;
    if (next_id != entry.next_trial_id || study.state != entry.study.state) {
      Entry updated{study, next_id, {}};
      c.writes.push_back(PutStudy(updated, next_id));
    }
    for (const auto& t : changed) c.writes.push_back(PutTrial(study, t));
    c.writes.push_back(db::PutRecord{
        {kOperationKind, StudyKey(op.project, op.location, op.id), codec::SerializeOperationForStorage(op)}});
    c.apply = [this, ref, study, next_id, changed, op]() {
      mu_.AssertHeld();  // apply runs under mu_
      Entry& e = studies_.at({ref.project, ref.location, ref.study_id});
      e.study = study;
      e.next_trial_id = next_id;
      for (const auto& t : changed) e.trials[t.id] = t;
      operations_[{op.project, op.location, op.id}] = op;
    };
    c.finish = [op, done](absl::Status s) {
      if (!s.ok()) return done(s);
      done(op);
    };
    return c;
  });
}

void StudyService::CheckEarlyStoppingState(const StudyRef& ref, const std::string& trial_id,
                                           Callback<StudyOperation> done) {
  if (job_studies_ != nullptr && job_studies_->Find(ref.project, ref.study_id)) return done(JobOwned(ref));
  Write([this, ref, trial_id, done = std::move(done)]() -> std::optional<Change> {
    absl::ReaderMutexLock lock(&mu_);
    const Entry* entry = nullptr;
    auto t = WritableTrial(ref, trial_id, &entry);
    if (!t.ok()) {
      done(std::move(t).status());
      return std::nullopt;
    }
    const absl::Time now = clock_.Now();
    StudyOperation op;
    op.project = ref.project;
    op.location = ref.location;
    op.id = NewOperationId();
    op.kind = tuning::OperationKind::kCheckEarlyStoppingState;
    op.study = entry->study.Name();
    op.trial = (*t)->Name();
    op.create_time = op.start_time = op.end_time = now;
    op.done = true;
    const auto& stopping = entry->study.config.automated_stopping;
    StudyTrial updated = **t;
    if (stopping && stopping->rule != tuning::StoppingRule::kNone && updated.state == TrialStatus::kActive) {
      std::vector<StudyTrial> all;
      for (const auto& [id, x] : entry->trials) all.push_back(x);
      const tuning::StudySpec spec = tuning::ToSpec(entry->study.config);
      op.should_stop =
          tuning::ShouldStopMedian(spec.metrics.front(), tuning::ToOptimizerTrial(updated, stopping->use_elapsed_time),
                                   OptimizerTrials(all, stopping->use_elapsed_time));
      if (op.should_stop) updated.state = TrialStatus::kStopping;  // Vizier: the trial is told to stop
    }
    Change c;
    if (updated.state != (*t)->state) c.writes.push_back(PutTrial(entry->study, updated));
    c.writes.push_back(db::PutRecord{
        {kOperationKind, StudyKey(op.project, op.location, op.id), codec::SerializeOperationForStorage(op)}});
    c.apply = [this, ref, updated, op]() {
      mu_.AssertHeld();  // apply runs under mu_
      studies_.at({ref.project, ref.location, ref.study_id}).trials[updated.id] = updated;
      operations_[{op.project, op.location, op.id}] = op;
    };
    c.finish = [op, done](absl::Status s) {
      if (!s.ok()) return done(s);
      done(op);
    };
    return c;
  });
}

absl::StatusOr<std::vector<StudyTrial>> StudyService::ListOptimalTrials(const StudyRef& ref) const {
  auto r = Read(ref);
  if (!r.ok()) return r.status();
  const auto& trials = r->second;
  const tuning::StudySpec spec = tuning::ToSpec(r->first.config);
  std::vector<StudyTrial> out;
  for (size_t i : tuning::ParetoOptimal(spec.metrics, OptimizerTrials(trials, false))) out.push_back(trials[i]);
  return out;
}

// ---- operations ----

absl::StatusOr<StudyOperation> StudyService::GetOperation(const std::string& project, const std::string& location,
                                                          const std::string& operation_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = operations_.find({project, location, operation_id});
  if (it == operations_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Operation projects/", project, "/locations/", location, "/operations/", operation_id,
                     " not found."));
  }
  return it->second;
}

absl::Status StudyService::CancelOperation(const std::string& project, const std::string& location,
                                           const std::string& operation_id) const {
  auto op = GetOperation(project, location, operation_id);
  if (!op.ok()) return op.status();
  if (op->done) {
    return absl::FailedPreconditionError(
        absl::StrCat("Operation ", op->Name(), " is already done; there is nothing to cancel."));
  }
  return absl::OkStatus();
}

}  // namespace mle::service
