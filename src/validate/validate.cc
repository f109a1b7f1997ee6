// Validation of jobs.create bodies; see validate.h.
//
// Layout: BuildContext gathers what several rules need (the scale tier, the
// four replica roles with their machine types and effective images, the
// runtime), then one Check* function per rule family appends violations.
// Allowed values, per-role fields, accelerator placement and the
// per-parameter-type field matrix are tables; the functions walk them.
#include "validate/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "common/time_format.h"

namespace mle::validate {
namespace {

using model::AcceleratorConfig;
using model::AcceleratorKind;
using model::AcceleratorType;
using model::HyperparameterSpec;
using model::MachineFamily;
using model::MachineType;
using model::ParameterSpec;
using model::ReplicaConfig;
using model::RuntimeVersion;
using model::TrainingInput;

// ---------------------------------------------------------------------------
// Limits and allowed values.

constexpr size_t kMaxJobIdLength = 128;
constexpr size_t kMaxLabels = 64;
constexpr size_t kMaxLabelKeyLength = 63;
constexpr size_t kMaxLabelValueLength = 63;
constexpr int64_t kMaxReplicaCount = 1000;
constexpr size_t kMaxPackageUris = 100;
constexpr size_t kMaxDiscreteValues = 1000;
constexpr int32_t kMinPriority = 0;
constexpr int32_t kMaxPriority = 1000;
constexpr int64_t kMinMaxWaitSeconds = 1800;
constexpr int32_t kMaxBootDiskSizeGb = 65536;

constexpr std::string_view kCustomTier = "CUSTOM";
constexpr std::string_view kBasicTier = "BASIC";
constexpr std::string_view kBasicTpuTier = "BASIC_TPU";
constexpr std::string_view kAcceleratorUnspecified = "ACCELERATOR_TYPE_UNSPECIFIED";

constexpr std::string_view kGoals[] = {"GOAL_TYPE_UNSPECIFIED", "MAXIMIZE", "MINIMIZE"};
constexpr std::string_view kAlgorithms[] = {"ALGORITHM_UNSPECIFIED", "GRID_SEARCH",
                                            "RANDOM_SEARCH"};
constexpr std::string_view kGridSearch = "GRID_SEARCH";
constexpr std::string_view kScaleTypes[] = {"NONE", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE",
                                            "UNIT_REVERSE_LOG_SCALE"};
// Scale types whose search space must be strictly positive.
constexpr std::string_view kLogScaleTypes[] = {"UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"};
constexpr std::string_view kBootDiskTypes[] = {"pd-ssd", "pd-standard"};

// ---------------------------------------------------------------------------
// Small helpers.

class Violations {
 public:
  void Add(std::string field, std::string description) {
    list_.push_back({std::move(field), std::move(description)});
  }
  void Append(std::vector<FieldViolation> more) {
    for (auto& v : more) list_.push_back(std::move(v));
  }
  std::vector<FieldViolation> Take() { return std::move(list_); }

 private:
  std::vector<FieldViolation> list_;
};

// Text helpers over std::string_view. Debian's Abseil keeps its own
// absl::string_view type, which std::string_view does not convert to, so
// absl::StrCat/StrJoin/StrSplit are not used on the catalog's string_views.
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// Joins strings or integers with sep.
template <typename Range>
std::string Join(const Range& range, std::string_view sep) {
  std::string out;
  for (const auto& item : range) {
    if (!out.empty()) out.append(sep);
    if constexpr (std::is_integral_v<std::decay_t<decltype(item)>>) {
      out.append(std::to_string(item));
    } else {
      out.append(std::string_view(item));
    }
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(sep, start)) != std::string_view::npos; start = pos + 1) {
    out.push_back(s.substr(start, pos - start));
  }
  out.push_back(s.substr(start));
  return out;
}

std::string Ti(std::string_view field) { return Cat("trainingInput.", field); }

template <typename Range>
bool Contains(const Range& range, std::string_view value) {
  return std::any_of(std::begin(range), std::end(range),
                     [&](const auto& item) { return std::string_view(item) == value; });
}

template <typename Range>
std::string JoinNames(const Range& range) {
  return Join(range, ", ");
}

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsLetter(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWordChar(char c) { return IsLetter(c) || IsDigit(c) || c == '_'; }
bool IsLabelChar(char c) { return IsLower(c) || IsDigit(c) || c == '_' || c == '-'; }

template <typename Pred>
bool AllChars(std::string_view s, Pred pred) {
  return std::all_of(s.begin(), s.end(), pred);
}

// A job id: letters, digits and underscores, starting with a letter.
bool IsJobId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxJobIdLength && IsLetter(id[0]) && AllChars(id, IsWordChar);
}

// gs://bucket[/object]
bool IsGcsUri(std::string_view uri) {
  return uri.starts_with("gs://") && uri.size() > 5 && uri[5] != '/';
}

// A Python module path: dotted identifiers ("trainer.task").
bool IsPythonModule(std::string_view module) {
  if (module.empty()) return false;
  for (std::string_view part : Split(module, '.')) {
    if (part.empty() || IsDigit(part[0]) || !AllChars(part, IsWordChar)) return false;
  }
  return true;
}

// Matches "a/*/b/*" style patterns: literal segments, '*' = one non-empty segment.
bool MatchesResourceName(std::string_view name, std::string_view pattern) {
  std::vector<std::string_view> got = Split(name, '/');
  std::vector<std::string_view> want = Split(pattern, '/');
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (want[i] == "*" ? got[i].empty() : got[i] != want[i]) return false;
  }
  return true;
}

std::string FormatNumber(double d) { return absl::StrFormat("%g", d); }

std::string CountText(const std::optional<int64_t>& count) {
  return count.has_value() ? absl::StrFormat("%d", *count) : "unset";
}

bool IsEmpty(const ReplicaConfig& c) {
  return !c.accelerator_config.has_value() && c.image_uri.empty() && c.container_command.empty() &&
         c.container_args.empty() && c.tpu_tf_version.empty() && !c.disk_config.has_value();
}

// The image repository without its tag or digest, for comparing against
// the pytorch-xla table: "gcr.io/x/y:tag" -> "gcr.io/x/y".
std::string_view ImageRepository(std::string_view image) {
  if (auto at = image.find('@'); at != std::string_view::npos) image = image.substr(0, at);
  auto slash = image.rfind('/');
  auto colon = image.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    image = image.substr(0, colon);
  }
  return image;
}

const model::PytorchXlaImage* FindPytorchXlaImage(std::string_view image) {
  const std::string_view repo = ImageRepository(image);
  for (const auto& p : model::PytorchXlaImages()) {
    if (p.image == repo) return &p;
  }
  return nullptr;
}

const RuntimeVersion* FindRuntime(const Config& config, std::string_view name) {
  for (const auto& r : config.runtime_versions) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string RuntimeNames(const Config& config, bool tpu_only) {
  std::vector<std::string_view> names;
  for (const auto& r : config.runtime_versions) {
    if (tpu_only && !r.tpu_capable) continue;
    if (!config.installed_runtimes.empty() && !Contains(config.installed_runtimes, r.name)) continue;
    names.emplace_back(r.name);
  }
  if (names.empty()) return "none (this cluster has no runtime installed for it)";
  return Join(names, ", ");
}

std::string MachineTypeNames() {
  std::vector<std::string_view> names;
  for (const auto& m : model::MachineTypes()) names.push_back(m.name);
  return Join(names, ", ");
}

std::string AcceleratorNames() {
  std::vector<std::string_view> names;
  for (const auto& a : model::AcceleratorTypes()) names.push_back(a.name);
  return Join(names, ", ");
}

// ---------------------------------------------------------------------------
// Replica roles: the four (type, count, config) triples of TrainingInput.

struct Role {
  std::string_view type_field;
  std::string_view count_field;  // empty for the master: there is always one
  std::string_view config_field;
  std::string TrainingInput::*type;
  std::optional<int64_t> TrainingInput::*count;  // nullptr for the master
  std::optional<ReplicaConfig> TrainingInput::*config;
};

constexpr Role kRoles[] = {
    {"masterType", "", "masterConfig", &TrainingInput::master_type, nullptr,
     &TrainingInput::master_config},
    {"workerType", "workerCount", "workerConfig", &TrainingInput::worker_type,
     &TrainingInput::worker_count, &TrainingInput::worker_config},
    {"parameterServerType", "parameterServerCount", "parameterServerConfig",
     &TrainingInput::parameter_server_type, &TrainingInput::parameter_server_count,
     &TrainingInput::parameter_server_config},
    {"evaluatorType", "evaluatorCount", "evaluatorConfig", &TrainingInput::evaluator_type,
     &TrainingInput::evaluator_count, &TrainingInput::evaluator_config},
};
constexpr size_t kMasterIndex = 0;
constexpr size_t kWorkerIndex = 1;
constexpr size_t kParameterServerIndex = 2;

struct Replica {
  const Role* role = nullptr;
  std::string_view type;
  std::optional<int64_t> count_opt;  // always unset for the master
  int64_t count = 0;                 // unset reads as 0 (proto3)
  const ReplicaConfig* config = nullptr;
  const MachineType* machine = nullptr;  // nullptr when the type is empty or unknown
  std::string_view image;                // own imageUri, else the master's
  bool is_master() const { return role->count == nullptr; }
  std::string ConfigField(std::string_view sub) const {
    return Ti(Cat(role->config_field, ".", sub));
  }
};

// Machine families: display names and which accelerators each takes.
struct FamilyRule {
  MachineFamily family;
  std::string_view name;
  std::vector<AcceleratorKind> accelerator_kinds;
  std::string_view accelerators_allowed;  // for messages
};

const std::vector<FamilyRule>& FamilyRules() {
  static const std::vector<FamilyRule>* rules = new std::vector<FamilyRule>{
      {MachineFamily::kLegacy,
       "legacy",
       {},
       "a legacy machine type takes no acceleratorConfig (legacy GPU types such as "
       "standard_gpu carry their GPUs implicitly; use a Compute Engine type such as "
       "n1-standard-8 to attach accelerators)"},
      {MachineFamily::kComputeEngine,
       "Compute Engine",
       {AcceleratorKind::kGpu},
       "a Compute Engine machine type takes GPUs (NVIDIA_TESLA_*); TPU accelerators go on a "
       "cloud_tpu worker"},
      {MachineFamily::kCloudTpu,
       "Cloud TPU",
       {AcceleratorKind::kTpu, AcceleratorKind::kTpuPod},
       "a cloud_tpu worker takes TPU_V2, TPU_V3, TPU_V2_POD or TPU_V3_POD"},
  };
  return *rules;
}

const FamilyRule& RuleFor(MachineFamily family) {
  for (const auto& r : FamilyRules()) {
    if (r.family == family) return r;
  }
  return FamilyRules().front();
}

// GPUs that only come with a dedicated machine family (A100 on a2-highgpu-*).
std::vector<std::string_view> MachinesRequiring(std::string_view accelerator) {
  std::vector<std::string_view> out;
  for (const auto& m : model::MachineTypes()) {
    if (m.required_gpu == accelerator) out.push_back(m.name);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Context shared by the rules.

struct Context {
  Context(const TrainingInput& in_arg, const Config& config_arg) : in(in_arg), config(config_arg) {}

  const TrainingInput& in;
  const Config& config;
  std::string tier;  // BASIC when unset
  bool tier_known = false;
  bool custom = false;                      // scaleTier CUSTOM
  bool custom_container = false;            // masterConfig.imageUri set
  bool tpu_job = false;                     // BASIC_TPU, or workerType cloud_tpu
  std::vector<Replica> replicas;            // in kRoles order
  const RuntimeVersion* runtime = nullptr;  // nullptr when unset or unknown

  const Replica& master() const { return replicas[kMasterIndex]; }
  const Replica& worker() const { return replicas[kWorkerIndex]; }
  bool worker_is_cloud_tpu() const { return worker().type == model::kCloudTpuMachine; }
};

Context BuildContext(const TrainingInput& in, const Config& config) {
  Context c(in, config);
  c.tier = in.scale_tier.empty() ? std::string(kBasicTier) : in.scale_tier;
  c.tier_known = Contains(model::kScaleTiers, c.tier);
  c.custom = c.tier == kCustomTier;
  c.custom_container = model::UsesCustomContainer(in);
  const std::string_view master_image =
      c.custom_container ? std::string_view(in.master_config->image_uri) : std::string_view();
  for (const Role& role : kRoles) {
    Replica r;
    r.role = &role;
    r.type = in.*role.type;
    if (role.count != nullptr) {
      r.count_opt = in.*role.count;
      r.count = r.count_opt.value_or(0);
    }
    const auto& config_opt = in.*role.config;
    r.config = config_opt.has_value() ? &*config_opt : nullptr;
    r.machine = r.type.empty() ? nullptr : model::FindMachineType(r.type);
    r.image = (r.config != nullptr && !r.config->image_uri.empty())
                  ? std::string_view(r.config->image_uri)
                  : master_image;
    c.replicas.push_back(r);
  }
  c.tpu_job = c.tier == kBasicTpuTier || c.worker_is_cloud_tpu();
  if (!in.runtime_version.empty()) c.runtime = FindRuntime(config, in.runtime_version);
  return c;
}

// ---------------------------------------------------------------------------
// Rules.

void CheckJobId(const std::string& job_id, Violations& v) {
  if (job_id.empty()) {
    v.Add("jobId",
          "jobId is required: letters, digits and underscores, starting with a letter, at "
          "most 128 characters");
  } else if (job_id.size() > kMaxJobIdLength) {
    v.Add("jobId", absl::StrFormat("jobId must be at most %d characters (got %d)", kMaxJobIdLength,
                                   job_id.size()));
  } else if (!IsLetter(job_id[0])) {
    v.Add("jobId", absl::StrFormat("jobId must start with a letter (got \"%s\")", job_id));
  } else if (!AllChars(job_id, IsWordChar)) {
    v.Add("jobId",
          absl::StrFormat("jobId may contain only letters, digits and underscores (got \"%s\")",
                          job_id));
  }
}

void CheckRegion(const Context& c, Violations& v) {
  const std::string& region = c.in.region;
  if (region.empty()) {
    v.Add(Ti("region"), Cat("region is required; allowed: ", JoinNames(c.config.regions)));
  } else if (!Contains(c.config.regions, region)) {
    v.Add(Ti("region"), absl::StrFormat("region %s is not supported; allowed: %s", region,
                                        JoinNames(c.config.regions)));
  } else if (c.tpu_job && !Contains(c.config.tpu_regions, region)) {
    v.Add(Ti("region"), absl::StrFormat("region %s has no TPUs; a TPU job must run in one of: %s",
                                        region, JoinNames(c.config.tpu_regions)));
  } else if (!c.config.served_regions.empty() && !Contains(c.config.served_regions, region)) {
    // A region is a place: a job for one this cluster does not serve would
    // run on the same machines under another region's quota.
    v.Add(Ti("region"),
          absl::StrFormat("region %s is not served by this cluster; it serves: %s (its operator lists them under "
                          "regions: in mlengined's configuration)",
                          region, JoinNames(c.config.served_regions)));
  }
}

void CheckScaleTier(const Context& c, Violations& v) {
  if (!c.tier_known) {
    v.Add(Ti("scaleTier"), absl::StrFormat("scaleTier %s is not supported; allowed: %s", c.tier,
                                           JoinNames(model::kScaleTiers)));
    return;
  }
  if (c.custom) {
    if (c.in.master_type.empty()) {
      v.Add(Ti("masterType"),
            "masterType is required when scaleTier is CUSTOM; name a machine type such as "
            "n1-standard-8 or complex_model_m");
    }
    return;
  }
  // Outside CUSTOM the tier decides the machines.
  const auto only_custom = [&](std::string_view field) {
    return absl::StrFormat(
        "%s is only allowed when scaleTier is CUSTOM (scaleTier is %s, which decides the "
        "machines)",
        field, c.tier);
  };
  for (const Replica& r : c.replicas) {
    if (!r.type.empty()) v.Add(Ti(r.role->type_field), only_custom(r.role->type_field));
    if (r.count != 0) v.Add(Ti(r.role->count_field), only_custom(r.role->count_field));
    if (r.config == nullptr) continue;
    if (r.is_master()) {
      // A custom container (imageUri, containerCommand, ...) works with any tier.
      if (r.config->accelerator_config.has_value()) {
        v.Add(r.ConfigField("acceleratorConfig"),
              only_custom(Cat(r.role->config_field, ".acceleratorConfig")));
      }
    } else if (!IsEmpty(*r.config)) {
      v.Add(Ti(r.role->config_field), only_custom(r.role->config_field));
    }
  }
}

// CUSTOM: counts against types.
void CheckReplicaCounts(const Context& c, Violations& v) {
  for (const Replica& r : c.replicas) {
    if (r.is_master()) continue;
    const Role& role = *r.role;
    const std::string count_field = Ti(role.count_field);
    if (r.count < 0) {
      v.Add(count_field,
            absl::StrFormat("%s must be 0 or more (got %d)", role.count_field, r.count));
      continue;
    }
    if (r.count > kMaxReplicaCount) {
      v.Add(count_field, absl::StrFormat("%s must be at most %d (got %d)", role.count_field,
                                         kMaxReplicaCount, r.count));
      continue;
    }
    if (r.type.empty()) {
      if (r.count > 0) {
        v.Add(Ti(role.type_field), absl::StrFormat("%s is required when %s is %d", role.type_field,
                                                   role.count_field, r.count));
      }
      if (r.config != nullptr && !IsEmpty(*r.config)) {
        v.Add(
            Ti(role.config_field),
            absl::StrFormat("%s is set but %s is not; set %s and %s for these replicas",
                            role.config_field, role.type_field, role.type_field, role.count_field));
      }
      continue;
    }
    if (&r == &c.worker() && c.worker_is_cloud_tpu()) {
      if (r.count != 1) {
        v.Add(count_field,
              absl::StrFormat("workerCount must be 1 when workerType is cloud_tpu (got %s): a "
                              "TPU job has exactly one TPU worker",
                              CountText(r.count_opt)));
      }
    } else if (r.count == 0) {
      v.Add(count_field,
            absl::StrFormat("%s must be at least 1 when %s is set (got %s)", role.count_field,
                            role.type_field, CountText(r.count_opt)));
    }
  }
}

// CUSTOM: machine types exist, cloud_tpu only as the worker, one family.
void CheckMachineTypes(const Context& c, Violations& v) {
  for (const Replica& r : c.replicas) {
    if (r.type.empty()) continue;
    const std::string field = Ti(r.role->type_field);
    if (r.machine == nullptr) {
      v.Add(field, absl::StrFormat("%s %s is not a known machine type; allowed: %s",
                                   r.role->type_field, r.type, MachineTypeNames()));
    } else if (r.machine->family == MachineFamily::kCloudTpu && &r != &c.worker()) {
      v.Add(field, absl::StrFormat("%s cannot be cloud_tpu: cloud_tpu is only allowed as "
                                   "workerType (the TPU worker)",
                                   r.role->type_field));
    }
  }
  const MachineType* master = c.master().machine;
  if (master == nullptr || master->family == MachineFamily::kCloudTpu) return;
  for (const Replica& r : c.replicas) {
    if (r.is_master() || r.machine == nullptr) continue;
    const MachineFamily family = r.machine->family;
    if (family == MachineFamily::kCloudTpu || family == master->family) continue;
    v.Add(Ti(r.role->type_field),
          absl::StrFormat("%s %s is a %s machine type but masterType %s is a %s type; all "
                          "roles must use the master's family (only cloud_tpu pairs with "
                          "either)",
                          r.role->type_field, r.type, RuleFor(family).name, c.master().type,
                          RuleFor(master->family).name));
  }
}

// CUSTOM with a cloud_tpu worker: no parameter servers.
void CheckTpuWorker(const Context& c, Violations& v) {
  if (!c.worker_is_cloud_tpu()) return;
  const Replica& ps = c.replicas[kParameterServerIndex];
  if (ps.count > 0) {
    v.Add(Ti(ps.role->count_field),
          absl::StrFormat("parameterServerCount must be 0 when workerType is cloud_tpu (got "
                          "%d): a TPU job has no parameter servers",
                          ps.count));
  }
}

struct AcceleratorCheck {
  const AcceleratorType* type = nullptr;  // nullptr when missing or unknown
  bool count_ok = false;
};

// type and count of one acceleratorConfig, on their own.
AcceleratorCheck CheckAcceleratorConfig(const AcceleratorConfig& a, const Replica& r,
                                        Violations& v) {
  AcceleratorCheck out;
  const std::string type_field = r.ConfigField("acceleratorConfig.type");
  const std::string count_field = r.ConfigField("acceleratorConfig.count");
  if (a.type.empty() || a.type == kAcceleratorUnspecified) {
    v.Add(type_field, Cat("acceleratorConfig.type is required; allowed: ", AcceleratorNames()));
  } else if ((out.type = model::FindAcceleratorType(a.type)) == nullptr) {
    v.Add(type_field, absl::StrFormat("acceleratorConfig.type %s is not a known accelerator; "
                                      "allowed: %s",
                                      a.type, AcceleratorNames()));
  }
  if (!a.count.has_value()) {
    v.Add(count_field, "acceleratorConfig.count is required (the number of accelerators)");
  } else if (*a.count <= 0) {
    v.Add(count_field,
          absl::StrFormat("acceleratorConfig.count must be greater than 0 (got %d)", *a.count));
  } else if (out.type != nullptr) {
    const auto& allowed = out.type->allowed_counts;
    if (std::find(allowed.begin(), allowed.end(), *a.count) == allowed.end()) {
      v.Add(count_field,
            allowed.size() == 1
                ? absl::StrFormat("acceleratorConfig.count for %s must be %d (got %d)",
                                  out.type->name, allowed[0], *a.count)
                : absl::StrFormat("acceleratorConfig.count for %s must be one of %s (got %d)",
                                  out.type->name, Join(allowed, ", "), *a.count));
    } else {
      out.count_ok = true;
    }
  }
  return out;
}

// Whether this accelerator may go on this replica's machine.
void CheckAcceleratorPlacement(const Replica& r, const AcceleratorConfig& a,
                               const AcceleratorCheck& check, Violations& v) {
  const MachineType& machine = *r.machine;
  const AcceleratorType& accel = *check.type;
  const FamilyRule& family = RuleFor(machine.family);
  if (family.accelerator_kinds.empty()) {
    v.Add(r.ConfigField("acceleratorConfig"),
          absl::StrFormat("acceleratorConfig is not allowed with %s %s: %s", r.role->type_field,
                          r.type, family.accelerators_allowed));
    return;
  }
  const std::string type_field = r.ConfigField("acceleratorConfig.type");
  if (std::find(family.accelerator_kinds.begin(), family.accelerator_kinds.end(), accel.kind) ==
      family.accelerator_kinds.end()) {
    v.Add(type_field, absl::StrFormat("%s cannot be attached to %s %s: %s", accel.name,
                                      r.role->type_field, r.type, family.accelerators_allowed));
    return;
  }
  if (!machine.required_gpu.empty()) {
    if (accel.name != machine.required_gpu) {
      v.Add(type_field, absl::StrFormat("%s %s takes only %s (got %s)", r.role->type_field, r.type,
                                        machine.required_gpu, accel.name));
    } else if (check.count_ok && *a.count != machine.required_gpu_count) {
      v.Add(r.ConfigField("acceleratorConfig.count"),
            absl::StrFormat("%s %s carries exactly %d %s (got %d)", r.role->type_field, r.type,
                            machine.required_gpu_count, machine.required_gpu, *a.count));
    }
    return;
  }
  if (auto dedicated = MachinesRequiring(accel.name); !dedicated.empty()) {
    v.Add(type_field,
          absl::StrFormat("%s is only available on the machine types %s (%s is %s)", accel.name,
                          Join(dedicated, ", "), r.role->type_field, r.type));
  }
}

// CUSTOM: acceleratorConfig of every replica.
void CheckAccelerators(const Context& c, Violations& v) {
  for (const Replica& r : c.replicas) {
    const bool has_accel = r.config != nullptr && r.config->accelerator_config.has_value();
    if (!has_accel) {
      if (r.machine != nullptr && !r.machine->required_gpu.empty()) {
        v.Add(r.ConfigField("acceleratorConfig"),
              absl::StrFormat("%s %s needs acceleratorConfig {type: %s, count: %d}",
                              r.role->type_field, r.type, r.machine->required_gpu,
                              r.machine->required_gpu_count));
      }
      continue;
    }
    const AcceleratorConfig& a = *r.config->accelerator_config;
    const AcceleratorCheck check = CheckAcceleratorConfig(a, r, v);
    if (r.machine != nullptr && check.type != nullptr) CheckAcceleratorPlacement(r, a, check, v);
  }
}

// runtimeVersion xor masterConfig.imageUri; pythonVersion; TPU runtimes.
void CheckRuntime(const Context& c, Violations& v) {
  const std::string& runtime = c.in.runtime_version;
  const std::string& python = c.in.python_version;
  if (!runtime.empty() && c.custom_container) {
    v.Add(Ti("runtimeVersion"),
          "set either runtimeVersion (a prebuilt runtime) or masterConfig.imageUri (a custom "
          "container), not both");
  } else if (runtime.empty() && !c.custom_container) {
    v.Add(Ti("runtimeVersion"),
          absl::StrFormat("runtimeVersion is required unless masterConfig.imageUri names a "
                          "custom container; allowed: %s",
                          RuntimeNames(c.config, c.tpu_job)));
  }
  if (!runtime.empty()) {
    if (c.runtime == nullptr) {
      v.Add(Ti("runtimeVersion"),
            c.tpu_job ? absl::StrFormat("runtimeVersion %s is not offered; a TPU job needs one "
                                        "of: %s",
                                        runtime, RuntimeNames(c.config, true))
                      : absl::StrFormat("runtimeVersion %s is not offered; allowed: %s", runtime,
                                        RuntimeNames(c.config, false)));
    } else if (c.tpu_job && !c.runtime->tpu_capable) {
      v.Add(Ti("runtimeVersion"),
            absl::StrFormat("runtimeVersion %s does not support TPUs; a TPU job needs one of: %s",
                            runtime, RuntimeNames(c.config, true)));
    }
  }
  if (python.empty()) return;
  if (runtime.empty()) {
    if (c.custom_container) {
      v.Add(Ti("pythonVersion"),
            "pythonVersion applies only with runtimeVersion; a custom container brings its "
            "own Python, so leave pythonVersion unset");
    }
  } else if (c.runtime != nullptr && !Contains(c.runtime->python_versions, python)) {
    v.Add(Ti("pythonVersion"),
          absl::StrFormat("pythonVersion %s is not available with runtimeVersion %s; allowed: %s",
                          python, runtime, JoinNames(c.runtime->python_versions)));
  }
}

// tpuTfVersion: only on a cloud_tpu worker running a custom container, where
// it is required and names a TPU runtime (or the pytorch-xla image's value).
void CheckTpuTfVersion(const Context& c, Violations& v) {
  for (const Replica& r : c.replicas) {
    if (r.config == nullptr || r.config->tpu_tf_version.empty()) continue;
    if (&r == &c.worker() && c.worker_is_cloud_tpu()) continue;
    v.Add(r.ConfigField("tpuTfVersion"),
          absl::StrFormat("tpuTfVersion is only allowed in workerConfig when workerType is "
                          "cloud_tpu (found in %s)",
                          r.role->config_field));
  }
  if (c.tier == kBasicTpuTier && c.custom_container) {
    v.Add(Ti("masterConfig.imageUri"),
          "scaleTier BASIC_TPU cannot run a custom container (its TPU worker would need "
          "workerConfig.tpuTfVersion); use scaleTier CUSTOM with workerType cloud_tpu");
  }
  if (!c.custom || !c.worker_is_cloud_tpu()) return;
  const Replica& w = c.worker();
  const std::string field = w.ConfigField("tpuTfVersion");
  const std::string_view version =
      w.config != nullptr ? std::string_view(w.config->tpu_tf_version) : std::string_view();
  if (w.image.empty()) {
    if (!version.empty()) {
      v.Add(field,
            "tpuTfVersion is only for a cloud_tpu worker that runs a custom container "
            "(workerConfig.imageUri or masterConfig.imageUri); with runtimeVersion the "
            "TPU uses that runtime, so leave tpuTfVersion unset");
    }
    return;
  }
  const model::PytorchXlaImage* pytorch = FindPytorchXlaImage(w.image);
  if (version.empty()) {
    v.Add(field, pytorch != nullptr
                     ? absl::StrFormat("tpuTfVersion is required when the cloud_tpu worker runs "
                                       "a custom container; image %s needs tpuTfVersion %s",
                                       w.image, pytorch->tpu_tf_version)
                     : absl::StrFormat("tpuTfVersion is required when the cloud_tpu worker runs "
                                       "a custom container; set it to the TPU runtime version "
                                       "matching the container's TensorFlow, one of: %s",
                                       RuntimeNames(c.config, true)));
    return;
  }
  if (pytorch != nullptr) {
    if (version != pytorch->tpu_tf_version) {
      v.Add(field, absl::StrFormat("tpuTfVersion must be %s for image %s (got %s)",
                                   pytorch->tpu_tf_version, w.image, version));
    }
    return;
  }
  const RuntimeVersion* runtime = FindRuntime(c.config, version);
  const bool is_pytorch_value =
      std::any_of(model::PytorchXlaImages().begin(), model::PytorchXlaImages().end(),
                  [&](const auto& p) { return p.tpu_tf_version == version; });
  if ((runtime == nullptr || !runtime->tpu_capable) && !is_pytorch_value) {
    std::vector<std::string_view> pytorch_values;
    for (const auto& p : model::PytorchXlaImages()) pytorch_values.push_back(p.tpu_tf_version);
    v.Add(field,
          absl::StrFormat("tpuTfVersion %s is not a TPU runtime version; allowed: %s, "
                          "or for pytorch-xla containers: %s",
                          version, RuntimeNames(c.config, true), Join(pytorch_values, ", ")));
  }
}

// packageUris, pythonModule, jobDir.
void CheckPackages(const Context& c, Violations& v) {
  const auto& uris = c.in.package_uris;
  if (uris.empty() && !c.custom_container) {
    v.Add(Ti("packageUris"),
          "packageUris is required unless masterConfig.imageUri names a custom container: "
          "list the gs:// URIs of the trainer package and its dependencies");
  }
  if (uris.size() > kMaxPackageUris) {
    v.Add(Ti("packageUris"), absl::StrFormat("packageUris can list at most %d packages (got %d)",
                                             kMaxPackageUris, uris.size()));
  }
  for (size_t i = 0; i < uris.size(); ++i) {
    if (!IsGcsUri(uris[i])) {
      v.Add(Ti(absl::StrFormat("packageUris[%d]", i)),
            absl::StrFormat("package URI \"%s\" must be a Cloud Storage URI (gs://bucket/path)",
                            uris[i]));
    }
  }
  const std::string& module = c.in.python_module;
  if (module.empty()) {
    if (!c.custom_container) {
      v.Add(Ti("pythonModule"),
            "pythonModule is required unless masterConfig.imageUri names a custom container: "
            "the module to run, e.g. trainer.task");
    }
  } else if (!IsPythonModule(module)) {
    v.Add(Ti("pythonModule"),
          absl::StrFormat("pythonModule \"%s\" must be a dotted Python module name such as "
                          "trainer.task",
                          module));
  }
  if (!c.in.job_dir.empty() && !IsGcsUri(c.in.job_dir)) {
    v.Add(Ti("jobDir"), absl::StrFormat("jobDir \"%s\" must be a Cloud Storage URI "
                                        "(gs://bucket/path)",
                                        c.in.job_dir));
  }
}

// containerCommand/containerArgs: need a custom image; exclusive with args.
void CheckContainerOverrides(const Context& c, Violations& v) {
  struct Override {
    std::string_view field;
    std::vector<std::string> ReplicaConfig::*value;
  };
  static constexpr Override kOverrides[] = {
      {"containerCommand", &ReplicaConfig::container_command},
      {"containerArgs", &ReplicaConfig::container_args},
  };
  std::vector<std::string> used;  // "workerConfig.containerArgs", ...
  for (const Replica& r : c.replicas) {
    if (r.config == nullptr) continue;
    for (const Override& o : kOverrides) {
      if ((r.config->*o.value).empty()) continue;
      used.push_back(Cat(r.role->config_field, ".", o.field));
      if (r.image.empty()) {
        v.Add(r.ConfigField(o.field),
              absl::StrFormat("%s is only valid with a custom container image (%s.imageUri or "
                              "masterConfig.imageUri)",
                              o.field, r.role->config_field));
      }
    }
  }
  if (!c.in.args.empty() && !used.empty()) {
    v.Add(Ti("args"), absl::StrFormat("args cannot be combined with containerCommand or "
                                      "containerArgs (set: %s); pass the arguments in "
                                      "containerArgs instead",
                                      Join(used, ", ")));
  }
}

void CheckScheduling(const Context& c, Violations& v) {
  if (!c.in.scheduling.has_value()) return;
  const model::Scheduling& s = *c.in.scheduling;
  struct DurationRule {
    std::string_view field;
    const std::string model::Scheduling::*value;
    int64_t min_seconds;  // 0: anything above zero
  };
  static constexpr DurationRule kDurations[] = {
      {"maxRunningTime", &model::Scheduling::max_running_time, 0},
      {"maxWaitTime", &model::Scheduling::max_wait_time, kMinMaxWaitSeconds},
  };
  for (const DurationRule& rule : kDurations) {
    const std::string& text = s.*rule.value;
    if (text.empty()) continue;
    const std::string field = Ti(Cat("scheduling.", rule.field));
    const std::optional<absl::Duration> d = common::ParseDuration(text);
    if (!d.has_value()) {
      v.Add(field, absl::StrFormat("%s \"%s\" is not a duration; write seconds with an s "
                                   "suffix, e.g. \"7200s\"",
                                   rule.field, text));
    } else if (*d <= absl::ZeroDuration()) {
      v.Add(field, absl::StrFormat("%s must be greater than 0s (got %s)", rule.field, text));
    } else if (*d < absl::Seconds(rule.min_seconds)) {
      v.Add(field, absl::StrFormat("%s must be at least %ds (got %s)", rule.field, rule.min_seconds,
                                   text));
    }
  }
  if (s.priority.has_value() && (*s.priority < kMinPriority || *s.priority > kMaxPriority)) {
    v.Add(Ti("scheduling.priority"), absl::StrFormat("priority must be between %d and %d (got %d)",
                                                     kMinPriority, kMaxPriority, *s.priority));
  }
}

// --- Hyperparameters -------------------------------------------------------

enum class Need { kForbidden, kOptional, kRequired };

// Which ParameterSpec fields each parameter type takes.
struct ParamTypeRule {
  std::string_view type;
  Need min_max;
  Need categorical;
  Need discrete;
  Need scale;
  bool integral;         // minValue/maxValue must be whole numbers
  bool grid_searchable;  // allowed with GRID_SEARCH
};

constexpr ParamTypeRule kParamTypes[] = {
    {"DOUBLE", Need::kRequired, Need::kForbidden, Need::kForbidden, Need::kOptional, false, false},
    {"INTEGER", Need::kRequired, Need::kForbidden, Need::kForbidden, Need::kOptional, true, true},
    {"CATEGORICAL", Need::kForbidden, Need::kRequired, Need::kForbidden, Need::kForbidden, false,
     true},
    {"DISCRETE", Need::kForbidden, Need::kForbidden, Need::kRequired, Need::kOptional, false, true},
};

bool HasScaleType(const ParameterSpec& p) {
  return !p.scale_type.empty() && p.scale_type != "NONE";
}

struct ParamField {
  std::string_view name;
  Need ParamTypeRule::*need;
  bool (*present)(const ParameterSpec&);
};

constexpr ParamField kParamFields[] = {
    {"minValue", &ParamTypeRule::min_max,
     [](const ParameterSpec& p) { return p.min_value.has_value(); }},
    {"maxValue", &ParamTypeRule::min_max,
     [](const ParameterSpec& p) { return p.max_value.has_value(); }},
    {"categoricalValues", &ParamTypeRule::categorical,
     [](const ParameterSpec& p) { return !p.categorical_values.empty(); }},
    {"discreteValues", &ParamTypeRule::discrete,
     [](const ParameterSpec& p) { return !p.discrete_values.empty(); }},
    {"scaleType", &ParamTypeRule::scale, HasScaleType},
};

const ParamTypeRule* FindParamType(std::string_view type) {
  for (const auto& r : kParamTypes) {
    if (r.type == type) return &r;
  }
  return nullptr;
}

// A tag as a trainer reports it to cloudml-hypertune: AI Platform took any
// string ("Taxi Model Accuracy"); one line of text, so that it shows as one.
bool IsMetricTag(std::string_view tag) {
  return AllChars(tag, [](char ch) { return static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f; });
}

bool IsParameterName(std::string_view name) {
  return !name.empty() && (IsLetter(name[0]) || name[0] == '_') &&
         AllChars(name, [](char ch) { return IsWordChar(ch) || ch == '-'; });
}

void CheckParameter(const ParameterSpec& p, const std::string& prefix, bool grid_search,
                    Violations& v) {
  const auto field = [&](std::string_view name) { return Cat(prefix, ".", name); };
  std::vector<std::string_view> type_names;
  for (const auto& r : kParamTypes) type_names.push_back(r.type);
  const ParamTypeRule* rule = FindParamType(p.type);
  if (rule == nullptr) {
    v.Add(field("type"),
          p.type.empty() || p.type == "PARAMETER_TYPE_UNSPECIFIED"
              ? absl::StrFormat("type is required; allowed: %s", Join(type_names, ", "))
              : absl::StrFormat("type %s is not a parameter type; allowed: %s", p.type,
                                Join(type_names, ", ")));
    return;
  }
  bool fields_ok = true;
  for (const ParamField& f : kParamFields) {
    const Need need = (*rule).*f.need;
    const bool present = f.present(p);
    if (need == Need::kRequired && !present) {
      v.Add(field(f.name),
            absl::StrFormat("%s is required for a %s parameter", f.name, rule->type));
      fields_ok = false;
    } else if (need == Need::kForbidden && present) {
      v.Add(field(f.name),
            absl::StrFormat("%s is not allowed for a %s parameter", f.name, rule->type));
      fields_ok = false;
    }
  }
  if (grid_search && !rule->grid_searchable) {
    v.Add(field("type"), absl::StrFormat("GRID_SEARCH cannot search a %s parameter; use "
                                         "INTEGER, CATEGORICAL or DISCRETE, or another "
                                         "algorithm",
                                         rule->type));
  }
  // Values of the fields that are present and allowed.
  if (rule->min_max == Need::kRequired) {
    bool bounds_ok = true;
    const std::pair<std::string_view, std::optional<double>> bounds[] = {{"minValue", p.min_value},
                                                                         {"maxValue", p.max_value}};
    for (const auto& [name, value] : bounds) {
      if (!value.has_value()) continue;
      if (!std::isfinite(*value)) {
        v.Add(field(name), absl::StrFormat("%s must be a finite number", name));
        bounds_ok = false;
      } else if (rule->integral && std::floor(*value) != *value) {
        v.Add(field(name), absl::StrFormat("%s must be a whole number for an INTEGER parameter "
                                           "(got %s)",
                                           name, FormatNumber(*value)));
        bounds_ok = false;
      }
    }
    if (bounds_ok && p.min_value && p.max_value && *p.min_value >= *p.max_value) {
      v.Add(field("maxValue"),
            absl::StrFormat("maxValue (%s) must be greater than minValue (%s)",
                            FormatNumber(*p.max_value), FormatNumber(*p.min_value)));
    }
  }
  if (rule->categorical == Need::kRequired) {
    const auto& values = p.categorical_values;
    for (size_t i = 0; i < values.size(); ++i) {
      auto first = std::find(values.begin(), values.end(), values[i]);
      if (static_cast<size_t>(first - values.begin()) != i) {
        v.Add(field(absl::StrFormat("categoricalValues[%d]", i)),
              absl::StrFormat("categorical value \"%s\" is listed twice; values must be unique",
                              values[i]));
      }
    }
  }
  if (rule->discrete == Need::kRequired) {
    const auto& values = p.discrete_values;
    if (values.size() > kMaxDiscreteValues) {
      v.Add(field("discreteValues"),
            absl::StrFormat("discreteValues can hold at most %d values (got %d)",
                            kMaxDiscreteValues, values.size()));
    }
    for (size_t i = 1; i < values.size(); ++i) {
      if (!(values[i] > values[i - 1])) {
        v.Add(field(absl::StrFormat("discreteValues[%d]", i)),
              absl::StrFormat("discreteValues must be strictly increasing (%s follows %s)",
                              FormatNumber(values[i]), FormatNumber(values[i - 1])));
      }
    }
  }
  if (HasScaleType(p) && rule->scale != Need::kForbidden) {
    if (!Contains(kScaleTypes, p.scale_type)) {
      v.Add(field("scaleType"), absl::StrFormat("scaleType %s is not supported; allowed: %s",
                                                p.scale_type, JoinNames(kScaleTypes)));
    } else if (Contains(kLogScaleTypes, p.scale_type) && fields_ok) {
      if (rule->discrete == Need::kRequired) {
        if (!p.discrete_values.empty() && !(p.discrete_values[0] > 0)) {
          v.Add(field("discreteValues[0]"),
                absl::StrFormat("%s needs values greater than 0 (got %s)", p.scale_type,
                                FormatNumber(p.discrete_values[0])));
        }
      } else if (p.min_value.has_value() && !(*p.min_value > 0)) {
        v.Add(field("minValue"), absl::StrFormat("%s needs minValue greater than 0 (got %s)",
                                                 p.scale_type, FormatNumber(*p.min_value)));
      }
    }
  }
}

void CheckHyperparameters(const Context& c, Violations& v) {
  if (!c.in.hyperparameters.has_value()) return;
  const HyperparameterSpec& h = *c.in.hyperparameters;
  const auto field = [](std::string_view name) { return Ti(Cat("hyperparameters.", name)); };
  if (h.goal.empty()) {
    v.Add(field("goal"), Cat("goal is required; allowed: ", JoinNames(kGoals)));
  } else if (!Contains(kGoals, h.goal)) {
    v.Add(field("goal"),
          absl::StrFormat("goal %s is not supported; allowed: %s", h.goal, JoinNames(kGoals)));
  }
  if (!h.algorithm.empty() && !Contains(kAlgorithms, h.algorithm)) {
    v.Add(field("algorithm"), absl::StrFormat("algorithm %s is not supported; allowed: %s",
                                              h.algorithm, JoinNames(kAlgorithms)));
  }
  if (h.max_trials.has_value() && *h.max_trials < 1) {
    v.Add(field("maxTrials"),
          absl::StrFormat("maxTrials must be at least 1 (got %d)", *h.max_trials));
  }
  if (h.max_parallel_trials.has_value()) {
    if (*h.max_parallel_trials < 1) {
      v.Add(
          field("maxParallelTrials"),
          absl::StrFormat("maxParallelTrials must be at least 1 (got %d)", *h.max_parallel_trials));
    } else if (h.max_trials.has_value() && *h.max_trials >= 1 &&
               *h.max_parallel_trials > *h.max_trials) {
      v.Add(field("maxParallelTrials"),
            absl::StrFormat("maxParallelTrials (%d) must not exceed maxTrials (%d)",
                            *h.max_parallel_trials, *h.max_trials));
    }
  }
  if (h.max_failed_trials.has_value() && *h.max_failed_trials < 0) {
    v.Add(field("maxFailedTrials"),
          absl::StrFormat("maxFailedTrials must be 0 or more (got %d); 0 lets the service "
                          "decide",
                          *h.max_failed_trials));
  }
  if (!h.hyperparameter_metric_tag.empty() && !IsMetricTag(h.hyperparameter_metric_tag)) {
    v.Add(field("hyperparameterMetricTag"),
          absl::StrFormat("hyperparameterMetricTag \"%s\" holds a control character (a newline or a tab): give the "
                          "tag on one line, as the trainer reports it (e.g. accuracy or training/hptuning/metric)",
                          absl::CEscape(h.hyperparameter_metric_tag)));
  }
  if (!h.resume_previous_job_id.empty() && !IsJobId(h.resume_previous_job_id)) {
    v.Add(field("resumePreviousJobId"),
          absl::StrFormat("resumePreviousJobId \"%s\" is not a job id (letters, digits and "
                          "underscores, starting with a letter)",
                          h.resume_previous_job_id));
  }
  if (h.params.empty()) {
    v.Add(field("params"), "params is required: list at least one parameter to tune");
    return;
  }
  const bool grid_search = h.algorithm == kGridSearch;
  std::map<std::string, size_t> seen;  // name -> first index
  for (size_t i = 0; i < h.params.size(); ++i) {
    const ParameterSpec& p = h.params[i];
    const std::string prefix = field(absl::StrFormat("params[%d]", i));
    const std::string name_field = Cat(prefix, ".parameterName");
    if (p.parameter_name.empty()) {
      v.Add(name_field,
            "parameterName is required (the flag the trial receives, e.g. "
            "learning_rate)");
    } else if (!IsParameterName(p.parameter_name)) {
      v.Add(name_field, absl::StrFormat("parameterName \"%s\" may contain only letters, digits, "
                                        "underscores and hyphens, starting with a letter or "
                                        "underscore",
                                        p.parameter_name));
    } else if (auto [it, inserted] = seen.emplace(p.parameter_name, i); !inserted) {
      v.Add(name_field, absl::StrFormat("parameterName %s is already used by params[%d]; names "
                                        "must be unique",
                                        p.parameter_name, it->second));
    }
    CheckParameter(p, prefix, grid_search, v);
  }
}

// --- Other fields ----------------------------------------------------------

constexpr std::string_view kKmsKeyPattern = "projects/*/locations/*/keyRings/*/cryptoKeys/*";

void CheckOtherFields(const Context& c, Violations& v) {
  struct NameRule {
    std::string_view field;
    const std::string* value;
    std::string_view pattern;
  };
  const NameRule kNames[] = {
      {"network", &c.in.network, "projects/*/global/networks/*"},
      {"encryptionConfig.kmsKeyName", &c.in.kms_key_name, kKmsKeyPattern},
  };
  for (const NameRule& rule : kNames) {
    if (rule.value->empty() || MatchesResourceName(*rule.value, rule.pattern)) continue;
    v.Add(Ti(rule.field), absl::StrFormat("%s \"%s\" must have the form %s", rule.field,
                                          *rule.value, rule.pattern));
  }
  if (c.in.has_encryption_config && c.in.kms_key_name.empty()) {
    v.Add(Ti("encryptionConfig.kmsKeyName"),
          Cat("encryptionConfig.kmsKeyName is required when encryptionConfig is set: ", kKmsKeyPattern));
  }
  // What AI Platform did with these, this server cannot: it says so rather
  // than run the job without (docs/security.md says how data is kept).
  if (!c.in.kms_key_name.empty() && MatchesResourceName(c.in.kms_key_name, kKmsKeyPattern)) {
    v.Add(Ti("encryptionConfig.kmsKeyName"),
          "encryptionConfig: this server has no Cloud KMS, so it cannot encrypt the job's data with the key "
          "given; remove encryptionConfig (gcloud: --kms-key) to run the job, its data kept as every job's is");
  }
  if (c.in.enable_web_access.value_or(false)) {
    v.Add(Ti("enableWebAccess"),
          "enableWebAccess: interactive shells into a job's replicas are not served by this server; remove it "
          "(gcloud: --enable-web-access) and follow the job with `mlengine jobs stream-logs`");
  }
  const std::string& account = c.in.service_account;
  if (!account.empty()) {
    const auto at = account.find('@');
    if (at == std::string::npos || at == 0 || at + 1 == account.size()) {
      v.Add(Ti("serviceAccount"),
            absl::StrFormat("serviceAccount \"%s\" must be a service account email address",
                            account));
    }
  }
  for (const Replica& r : c.replicas) {
    if (r.config == nullptr || !r.config->disk_config.has_value()) continue;
    const model::DiskConfig& d = *r.config->disk_config;
    if (!d.boot_disk_type.empty() && !Contains(kBootDiskTypes, d.boot_disk_type)) {
      v.Add(r.ConfigField("diskConfig.bootDiskType"),
            absl::StrFormat("bootDiskType %s is not supported; allowed: %s", d.boot_disk_type,
                            JoinNames(kBootDiskTypes)));
    }
    if (d.boot_disk_size_gb.has_value() &&
        (*d.boot_disk_size_gb <= 0 || *d.boot_disk_size_gb > kMaxBootDiskSizeGb)) {
      v.Add(r.ConfigField("diskConfig.bootDiskSizeGb"),
            absl::StrFormat("bootDiskSizeGb must be between 1 and %d (got %d)", kMaxBootDiskSizeGb,
                            *d.boot_disk_size_gb));
    }
  }
}

void CheckTrainingInput(const TrainingInput& in, const Config& config, Violations& v) {
  const Context c = BuildContext(in, config);
  CheckRegion(c, v);
  CheckScaleTier(c, v);
  if (c.custom) {
    CheckReplicaCounts(c, v);
    CheckMachineTypes(c, v);
    CheckTpuWorker(c, v);
    CheckAccelerators(c, v);
  }
  CheckRuntime(c, v);
  CheckTpuTfVersion(c, v);
  CheckPackages(c, v);
  CheckContainerOverrides(c, v);
  CheckScheduling(c, v);
  CheckHyperparameters(c, v);
  CheckOtherFields(c, v);
}

}  // namespace

Config Config::Defaults() {
  Config config;
  for (std::string_view r : model::DefaultRegions()) config.regions.emplace_back(r);
  for (std::string_view r : model::DefaultTpuRegions()) config.tpu_regions.emplace_back(r);
  config.runtime_versions = model::AiPlatformRuntimeVersions();
  return config;
}

// A Vertex AI job's own rules (model/vertex.h): what its spec must say
// beyond what its trainingInput is checked for, with Vertex's field paths.
// A tuning job's study and trial counts (model::VertexStudy): what Vertex
// requires and what mlengine's tuning serves; the rest of the rules are ml
// v1's, on the hyperparameters made from it.
void CheckVertexStudy(const model::VertexStudy& study, Violations& v) {
  if (study.metrics.empty()) {
    v.Add("studySpec.metrics", "studySpec.metrics is required: the metric to optimize (its metricId is the tag the "
                               "trainer reports, e.g. with cloudml-hypertune) and its goal");
  } else if (study.metrics.size() > 1) {
    v.Add("studySpec.metrics", absl::StrFormat("mlengine tunes one metric; got %d (multi-objective studies are not "
                                               "served)", study.metrics.size()));
  }
  if (!study.metrics.empty() && study.metrics[0].id.empty()) {
    v.Add("studySpec.metrics[0].metricId", "metricId is required: the tag the trainer reports its metric under");
  }
  if (!study.metrics.empty() && study.metrics[0].goal != "MAXIMIZE" && study.metrics[0].goal != "MINIMIZE") {
    v.Add("studySpec.metrics[0].goal", "goal is required: MAXIMIZE or MINIMIZE the metric");
  }
  if (study.parameters.empty()) {
    v.Add("studySpec.parameters", "studySpec.parameters is required: at least one parameter to tune");
  }
  for (size_t i = 0; i < study.parameters.size(); ++i) {
    const model::VertexParameter& p = study.parameters[i];
    const std::string path = absl::StrFormat("studySpec.parameters[%d]", i);
    if (p.id.empty()) v.Add(path + ".parameterId", "parameterId is required: the flag the trainer is given (--ID=VALUE)");
    if (p.value_specs != 1) {
      v.Add(path, absl::StrFormat("give exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec and "
                                  "discreteValueSpec (got %d)", p.value_specs));
    }
  }
  if (study.max_trial_count <= 0) {
    v.Add("maxTrialCount", absl::StrFormat("maxTrialCount is required: the number of trials, at least 1 (got %d)",
                                           study.max_trial_count));
  }
  if (study.parallel_trial_count <= 0) {
    v.Add("parallelTrialCount",
          absl::StrFormat("parallelTrialCount is required: how many trials run at once, at least 1 (got %d)",
                          study.parallel_trial_count));
  }
  if (study.max_failed_trial_count < 0) {
    v.Add("maxFailedTrialCount", absl::StrFormat("maxFailedTrialCount cannot be negative (got %d)",
                                                 study.max_failed_trial_count));
  }
  if (study.measurement_selection_type == "BEST_MEASUREMENT") {
    v.Add("studySpec.measurementSelectionType",
          "mlengine takes a trial's last measurement as its final one; BEST_MEASUREMENT is not served (leave it unset "
          "or LAST_MEASUREMENT)");
  }
}

void CheckVertexJob(const model::VertexJob& vx, const Config& config, Violations& v) {
  const std::string spec_field = vx.SpecField();
  if (vx.study) CheckVertexStudy(*vx.study, v);
  if (vx.display_name.empty()) {
    v.Add("displayName", "displayName is required: a name for people, up to 128 characters");
  } else if (vx.display_name.size() > 128) {
    v.Add("displayName", absl::StrFormat("displayName must be at most 128 characters (got %d)",
                                         vx.display_name.size()));
  }
  for (const std::string& field : vx.unserved) {
    v.Add(field, "mlengine does not serve this field (docs/vertex.md lists what is served); leave it unset");
  }
  if (vx.enable_web_access) {
    v.Add(Cat(spec_field, ".enableWebAccess"),
          "interactive shells into replicas cannot be served by mlengine; use the job's logs "
          "(mlengine ai custom-jobs stream-logs) instead");
  }
  if (vx.enable_dashboard_access) {
    v.Add(Cat(spec_field, ".enableDashboardAccess"), "dashboards of replicas cannot be served by mlengine; leave it unset");
  }
  if (vx.pools.empty()) {
    v.Add(Cat(spec_field, ".workerPoolSpecs"), "workerPoolSpecs is required: at least the first pool, the chief");
    return;
  }
  if (vx.pools.size() > 4) {
    v.Add(Cat(spec_field, ".workerPoolSpecs"),
          absl::StrFormat("at most 4 worker pools (chief, workers, parameter servers, evaluators); got %d",
                          vx.pools.size()));
  }
  const model::VertexWorkerPool* package = nullptr;  // the first pool with a package spec
  for (size_t i = 0; i < vx.pools.size() && i < 4; ++i) {
    const model::VertexWorkerPool& pool = vx.pools[i];
    const std::string path = absl::StrFormat("%s.workerPoolSpecs[%d]", spec_field, i);
    if (pool.Empty()) {
      if (i == 0) v.Add(path, "the first worker pool (the chief) is required");
      continue;
    }
    if (pool.machine_type.empty()) {
      v.Add(path + ".machineSpec.machineType", "machineType is required for every worker pool that is not empty");
    }
    if (i == 0 && pool.replica_count != 1) {
      v.Add(path + ".replicaCount", absl::StrFormat("the first worker pool (the chief) has exactly 1 replica; got %d",
                                                    pool.replica_count));
    } else if (pool.replica_count < 1) {
      v.Add(path + ".replicaCount", absl::StrFormat("replicaCount must be at least 1; got %d", pool.replica_count));
    }
    if (pool.has_container == pool.has_python_package) {
      v.Add(path, "give exactly one of containerSpec and pythonPackageSpec");
      continue;
    }
    for (size_t e = 0; e < pool.env.size(); ++e) {
      const std::string& name = pool.env[e].name;
      const std::string field =
          absl::StrFormat("%s.%s.env[%d].name", path, pool.has_container ? "containerSpec" : "pythonPackageSpec", e);
      if (name.empty()) {
        v.Add(field, "an environment variable needs a name");
      } else if (common::IsLoaderVariable(name) || std::string_view(name).starts_with("MLENGINE_")) {
        v.Add(field, absl::StrFormat("%s cannot be set: mlengine sets MLENGINE_* itself, and variables the dynamic "
                                     "loader or libc act on (LD_*, GLIBC_TUNABLES, TMPDIR...) never reach a job",
                                     name));
      }
    }
    if (pool.has_container && pool.image_uri.empty()) {
      v.Add(path + ".containerSpec.imageUri", "imageUri is required: the container image the pool runs");
    }
    if (!pool.has_python_package) continue;
    const std::string spec = path + ".pythonPackageSpec";
    if (pool.executor_image_uri.empty()) {
      v.Add(spec + ".executorImageUri", "executorImageUri is required: the prebuilt training image to run in");
    } else if (RuntimeForExecutorImage(config, pool.executor_image_uri).empty()) {
      std::vector<std::string> known;
      for (const auto& [pattern, runtime] : config.executor_images) known.push_back(Cat(pattern, " (", runtime, ")"));
      v.Add(spec + ".executorImageUri",
            absl::StrFormat("%s is not a training image this cluster runs packages in; it runs Vertex AI's prebuilt "
                            "training images (us-docker.pkg.dev/vertex-ai/training/...)%s",
                            pool.executor_image_uri, known.empty() ? "" : " and " + Join(known, ", ")));
    }
    if (pool.package_uris.empty()) v.Add(spec + ".packageUris", "packageUris is required: the package to install");
    if (pool.python_module.empty()) v.Add(spec + ".pythonModule", "pythonModule is required: the module to run");
    if (package == nullptr) {
      package = &pool;
    } else if (pool.package_uris != package->package_uris || pool.python_module != package->python_module ||
               pool.args != package->args || pool.executor_image_uri != package->executor_image_uri) {
      v.Add(spec, "mlengine runs one package, module, executor image and args for every worker pool; give every "
                  "pool the same pythonPackageSpec (use CLUSTER_SPEC's task type to tell them apart)");
    }
  }
}

std::string TpuRuntimeForImage(const Config& config, const std::string& image) {
  if (const model::PytorchXlaImage* pytorch = FindPytorchXlaImage(image)) return std::string(pytorch->tpu_tf_version);
  for (const auto& r : config.runtime_versions) {
    if (!r.tpu_capable) continue;
    if (config.installed_runtimes.empty() || Contains(config.installed_runtimes, r.name)) return r.name;
  }
  return "";
}

std::string RuntimeForExecutorImage(const Config& config, const std::string& executor_image) {
  for (const auto& [pattern, runtime] : config.executor_images) {
    const bool match = !pattern.empty() && pattern.back() == '*'
                           ? std::string_view(executor_image).starts_with(std::string_view(pattern).substr(0, pattern.size() - 1))
                           : executor_image == pattern;
    if (match) return runtime;
  }
  // LOCATION-docker.pkg.dev/vertex-ai/training/IMAGE[:TAG]
  const size_t host_end = executor_image.find('/');
  const std::string_view host = std::string_view(executor_image).substr(0, host_end);
  const bool prebuilt = host_end != std::string::npos && host.ends_with("-docker.pkg.dev") &&
                        std::string_view(executor_image).substr(host_end).starts_with("/vertex-ai/training/");
  if (!prebuilt) return "";
  for (const auto& r : config.runtime_versions) {
    if (config.installed_runtimes.empty() || Contains(config.installed_runtimes, r.name)) return r.name;
  }
  return "";
}

std::vector<FieldViolation> ValidateJob(const model::Job& job, const Config& config) {
  Violations v;
  if (job.vertex) {
    // Its id is the server's; its spec is checked as Vertex does, and its
    // trainingInput's violations carry the spec's paths.
    CheckVertexJob(*job.vertex, config, v);
    v.Append(ValidateLabels(job.labels, "labels"));
    std::vector<FieldViolation> out = v.Take();
    if (job.training_input) {
      Violations ml;
      CheckTrainingInput(*job.training_input, config, ml);
      for (auto& each : ml.Take()) {
        // One complaint a field: the spec's own rule said it already.
        each.field = model::VertexFieldOf(each.field, *job.vertex);
        const bool said = std::any_of(out.begin(), out.end(), [&](const FieldViolation& o) {
          return o.field == each.field || each.field.starts_with(o.field + ".") ||
                 each.field.starts_with(o.field + "[");
        });
        if (!said) out.push_back(std::move(each));
      }
    }
    return out;
  }
  CheckJobId(job.job_id, v);
  v.Append(ValidateLabels(job.labels, "labels"));
  if (job.has_prediction_input) {
    v.Add("predictionInput",
          "batch prediction is not supported by mlengine; submit a "
          "training job (trainingInput) instead");
  }
  if (!job.training_input.has_value()) {
    v.Add("trainingInput", "trainingInput is required: it describes the training job");
  } else {
    CheckTrainingInput(*job.training_input, config, v);
  }
  return v.Take();
}

std::vector<FieldViolation> ValidateLabels(const std::map<std::string, std::string>& labels,
                                           const std::string& path) {
  Violations v;
  if (labels.size() > kMaxLabels) {
    v.Add(path,
          absl::StrFormat("a job can have at most %d labels (got %d)", kMaxLabels, labels.size()));
  }
  for (const auto& [key, value] : labels) {
    const std::string field = Cat(path, ".", key);
    if (key.empty() || key.size() > kMaxLabelKeyLength || !IsLower(key[0]) ||
        !AllChars(key, IsLabelChar)) {
      v.Add(field, absl::StrFormat("label key \"%s\" is invalid: keys are 1 to %d characters "
                                   "of lowercase letters, digits, underscores and hyphens, "
                                   "starting with a lowercase letter",
                                   key, kMaxLabelKeyLength));
    }
    if (value.size() > kMaxLabelValueLength || !AllChars(value, IsLabelChar)) {
      v.Add(field, absl::StrFormat("label value \"%s\" of key \"%s\" is invalid: values are 0 "
                                   "to %d characters of lowercase letters, digits, "
                                   "underscores and hyphens",
                                   value, key, kMaxLabelValueLength));
    }
  }
  // mlengine's own settings (model/job.h): a number in a range, or one of two words.
  auto number = [&](const char* key, int64_t max, const std::string& what) {
    auto it = labels.find(key);
    int64_t n = 0;
    if (it != labels.end() && (!absl::SimpleAtoi(it->second, &n) || n < 0 || n > max)) {
      v.Add(Cat(path, ".", key), absl::StrFormat("\"%s\" is not %s", it->second, what));
    }
  };
  auto either = [&](const char* key, const char* a, const char* b, const std::string& what) {
    auto it = labels.find(key);
    if (it != labels.end() && it->second != a && it->second != b) {
      v.Add(Cat(path, ".", key), absl::StrFormat("\"%s\" is neither %s", it->second, what));
    }
  };
  number(model::kRetriesLabel, model::kMaxRetries,
         absl::StrFormat("a number of retries from 0 to %d (how often an attempt lost to the infrastructure is run "
                         "again)",
                         model::kMaxRetries));
  number(model::kStallAfterLabel, model::kMaxStallAfterSeconds,
         absl::StrFormat("a number of seconds from 0 (never) to %d (a week): how long the job's replicas may write "
                         "no log line and use no CPU before it counts as stalled",
                         model::kMaxStallAfterSeconds));
  either(model::kStallActionLabel, "flag", "fail",
         "flag (say so in the job's errorMessage) nor fail (end the job)");
  either(model::kRetryFailuresLabel, "true", "false",
         "true nor false (whether a failure of the trainer itself is retried too)");
  return v.Take();
}

}  // namespace mle::validate
