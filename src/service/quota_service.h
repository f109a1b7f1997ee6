// QuotaService: the operator's quotas and fair-share weights while mlengined
// runs. They come from the configuration file (`quotas:`, `shares:`) until an
// operator sets others through the admin API; those are stored, survive
// restarts and replace the file's until reset. Every setting is checked
// whole (scheduler::Quotas::Compile, Shares::Compile) before it is stored,
// and a refused one changes nothing.
//
// The settings' JSON form is the admin API's and the stored record's alike:
//   {"quotas": {"defaults": {NAME: n}, "projects": {P: {REGION: {NAME: n}}}},
//    "shares": {P: weight}}
// (names and units as in config/mlengined.yaml).
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/worker_pool.h"
#include "db/store.h"
#include "scheduler/scheduler.h"

namespace mle::service {

struct QuotaSettings {
  scheduler::QuotaSpec quotas;
  std::map<std::string, int64_t> shares;
  bool operator==(const QuotaSettings&) const = default;
};

// Which sections a settings body has: each one it has replaces the one in
// force, the others are kept (a file for one project keeps the defaults).
struct QuotaSections {
  bool defaults = false;  // quotas.defaults
  bool projects = false;  // quotas.projects
  bool shares = false;
};

nlohmann::json EncodeQuotaSettings(const QuotaSettings& settings);
// INVALID_ARGUMENT naming the field for a body of another shape; `present`
// (may be null) gets the sections the body has.
absl::StatusOr<QuotaSettings> DecodeQuotaSettings(const nlohmann::json& body, QuotaSections* present = nullptr);

class QuotaService {
 public:
  // `mirror` (may be null; must outlive the service) is told the quotas in
  // force at Recover and after every change (the Slurm executor's accounts).
  QuotaService(db::Store& store, scheduler::Scheduler& scheduler, QuotaSettings from_file,
               scheduler::QuotaMirror* mirror = nullptr);

  // Applies the stored settings, if any (else the file's stay), and tells
  // the mirror the quotas in force. Call once, before the scheduler adopts
  // jobs.
  absl::Status Recover();

  struct Current {
    QuotaSettings settings;
    bool from_file = true;  // false: set through the admin API
  };
  Current Get() const;
  // The sections `present` of `update` replace those of the settings last
  // set (in force, or being stored by an earlier Set: sets merge in the
  // order they are made); then checks, stores and applies the result;
  // `done` once durable (or refused). A mirror that fails does not undo the
  // change (it is stored and in force in mlengined): `done` gets its error,
  // saying so.
  void Set(QuotaSettings update, QuotaSections present, std::function<void(absl::Status)> done);
  // Back to the configuration file's settings.
  void Reset(std::function<void(absl::Status)> done);
  // The configuration file read again (mlengined's reload): its settings
  // replace the file's; in force at once unless the admin API's are.
  // INVALID_ARGUMENT (nothing changed) when the scheduler refuses them.
  absl::Status ReloadFile(QuotaSettings from_file);

 private:
  absl::Status Apply(const QuotaSettings& settings);
  QuotaSettings FromFile() const;
  // Tells the mirror, if any; an error says the change is in force all the same.
  absl::Status Mirror(const scheduler::QuotaSpec& quotas);
  // Set/Reset answer through here: after the mirror, on its own thread.
  void Answer(absl::Status s, scheduler::QuotaSpec quotas, std::function<void(absl::Status)> done);

  db::Store& store_;
  scheduler::Scheduler& scheduler_;
  QuotaSettings from_file_;  // guarded by mu_ (a reload replaces it)
  scheduler::QuotaMirror* const mirror_;
  mutable std::mutex mu_;
  Current current_;
  QuotaSettings requested_;  // guarded by mu_: what the last Set (or Reset) asked for; Set merges into it
  common::SerialWorker mirror_worker_;  // mirrors changes in the order stored; last: stops first
};

}  // namespace mle::service
