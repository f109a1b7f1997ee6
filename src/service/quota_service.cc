#include "service/quota_service.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace mle::service {
namespace {

using nlohmann::json;

constexpr char kKind[] = "scheduler.quotas";
constexpr char kKey[] = "current";

absl::Status Bad(const std::string& field, const std::string& description) {
  return common::InvalidArgumentWithViolations("Invalid quota settings.", {{field, description}});
}

absl::StatusOr<std::map<std::string, int64_t>> Amounts(const json& value, const std::string& field) {
  if (!value.is_object()) return Bad(field, "must be a map of names to whole numbers");
  std::map<std::string, int64_t> out;
  for (const auto& [name, n] : value.items()) {
    if (!n.is_number_integer()) return Bad(absl::StrCat(field, ".", name), "must be a whole number");
    out[name] = n.get<int64_t>();
  }
  return out;
}

}  // namespace

json EncodeQuotaSettings(const QuotaSettings& s) {
  json projects = json::object();
  for (const auto& [project, regions] : s.quotas.projects) {
    for (const auto& [region, amounts] : regions) projects[project][region] = amounts;
  }
  return {{"quotas", {{"defaults", s.quotas.defaults}, {"projects", projects}}}, {"shares", s.shares}};
}

absl::StatusOr<QuotaSettings> DecodeQuotaSettings(const json& body, QuotaSections* present) {
  if (!body.is_object()) return Bad("", "the body must be an object with quotas and shares");
  QuotaSections has;
  QuotaSettings s;
  for (const auto& [key, value] : body.items()) {
    if (key == "shares") {
      has.shares = true;
      auto shares = Amounts(value, "shares");
      if (!shares.ok()) return shares.status();
      s.shares = *std::move(shares);
    } else if (key == "quotas") {
      if (!value.is_object()) return Bad("quotas", "must be an object with defaults and projects");
      for (const auto& [qkey, qvalue] : value.items()) {
        if (qkey == "defaults") {
          has.defaults = true;
          auto defaults = Amounts(qvalue, "quotas.defaults");
          if (!defaults.ok()) return defaults.status();
          s.quotas.defaults = *std::move(defaults);
        } else if (qkey == "projects") {
          has.projects = true;
          if (!qvalue.is_object()) return Bad("quotas.projects", "must be a map of projects to regions");
          for (const auto& [project, regions] : qvalue.items()) {
            if (!regions.is_object()) {
              return Bad("quotas.projects." + project, "must be a map of regions to quotas");
            }
            for (const auto& [region, amounts] : regions.items()) {
              auto a = Amounts(amounts, absl::StrCat("quotas.projects.", project, ".", region));
              if (!a.ok()) return a.status();
              s.quotas.projects[project][region] = *std::move(a);
            }
          }
        } else {
          return Bad("quotas." + qkey, "unknown field; known: defaults, projects");
        }
      }
    } else {
      return Bad(key, "unknown field; known: quotas, shares");
    }
  }
  if (present != nullptr) *present = has;
  return s;
}

QuotaService::QuotaService(db::Store& store, scheduler::Scheduler& scheduler, QuotaSettings from_file,
                           scheduler::QuotaMirror* mirror)
    : store_(store), scheduler_(scheduler), from_file_(std::move(from_file)), mirror_(mirror),
      current_{from_file_, true}, requested_(from_file_) {}

absl::Status QuotaService::Mirror(const scheduler::QuotaSpec& spec) {
  if (mirror_ == nullptr) return absl::OkStatus();
  auto quotas = scheduler::Quotas::Compile(spec);
  absl::Status s = quotas.ok() ? mirror_->MirrorQuotas(*quotas) : quotas.status();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("the quotas are in force in mlengined, but Slurm's account limits "
                                             "could not all be set (set them again to retry): ",
                                             s.message()));
}

absl::Status QuotaService::Apply(const QuotaSettings& settings) {
  if (auto s = scheduler_.SetQuotas(settings.quotas); !s.ok()) return s;
  return scheduler_.SetShares(settings.shares);
}

absl::Status QuotaService::Recover() {
  auto records = store_.LoadRecords(kKind);
  if (!records.ok()) return records.status();
  if (records->empty()) return Mirror(FromFile().quotas);
  const json body = json::parse(records->front().body, nullptr, false);
  auto settings = DecodeQuotaSettings(body);
  if (!settings.ok()) {
    return absl::DataLossError(absl::StrCat("the stored quota settings are unreadable: ", settings.status().message()));
  }
  settings->quotas.set_by_admin = true;  // only `admin quotas set` stores them
  if (auto s = Apply(*settings); !s.ok()) {
    return absl::DataLossError(absl::StrCat("the stored quota settings are refused: ", s.message()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = {*settings, false};
    requested_ = *settings;
  }
  return Mirror(settings->quotas);
}

QuotaService::Current QuotaService::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void QuotaService::Set(QuotaSettings update, QuotaSections present, std::function<void(absl::Status)> done) {
  QuotaSettings settings;
  absl::Status checked;
  {
    // Merged, checked and recorded at once: the next Set merges into this
    // one even before it is stored (the store commits in order); a refused
    // commit goes back to what is in force.
    std::lock_guard<std::mutex> lock(mu_);
    settings = requested_;
    if (present.defaults) settings.quotas.defaults = std::move(update.quotas.defaults);
    if (present.projects) settings.quotas.projects = std::move(update.quotas.projects);
    if (present.shares) settings.shares = std::move(update.shares);
    settings.quotas.set_by_admin = true;
    checked = scheduler::Quotas::Compile(settings.quotas).status();
    if (checked.ok()) checked = scheduler::Shares::Compile(settings.shares).status();
    if (checked.ok()) requested_ = settings;
  }
  if (!checked.ok()) return done(std::move(checked));
  db::Record record{kKind, kKey, EncodeQuotaSettings(settings).dump()};
  store_.Commit({db::PutRecord{std::move(record)}}, [this, settings, done = std::move(done)](absl::Status s) {
    if (s.ok()) s = Apply(settings);  // checked above: it applies
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) {
        current_ = {settings, false};
      } else if (requested_ == settings) {
        requested_ = current_.settings;
      }
    }
    Answer(std::move(s), settings.quotas, std::move(done));
  });
}

void QuotaService::Answer(absl::Status s, scheduler::QuotaSpec quotas, std::function<void(absl::Status)> done) {
  if (!s.ok() || mirror_ == nullptr) return done(s);
  // Off the store's thread: mirroring runs cluster commands (sacctmgr).
  mirror_worker_.Post([this, quotas = std::move(quotas), done = std::move(done)] { done(Mirror(quotas)); });
}

void QuotaService::Reset(std::function<void(absl::Status)> done) {
  store_.Commit({db::DeleteRecord{kKind, kKey}}, [this, done = std::move(done)](absl::Status s) {
    const QuotaSettings file = FromFile();
    if (s.ok()) s = Apply(file);
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = {file, true};
      requested_ = file;
    }
    Answer(std::move(s), file.quotas, std::move(done));
  });
}

QuotaSettings QuotaService::FromFile() const {
  std::lock_guard<std::mutex> lock(mu_);
  return from_file_;
}

absl::Status QuotaService::ReloadFile(QuotaSettings from_file) {
  bool in_force = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_force = current_.from_file;
  }
  if (in_force) {
    if (auto s = Apply(from_file); !s.ok()) return absl::InvalidArgumentError(s.message());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    from_file_ = from_file;
    if (current_.from_file) {
      current_ = {from_file, true};
      requested_ = from_file;
    }
  }
  return in_force ? Mirror(from_file.quotas) : absl::OkStatus();
}

}  // namespace mle::service
