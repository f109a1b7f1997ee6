#include "cli/vertex_flags.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/job_flags.h"

namespace mle::cli {
namespace {

using nlohmann::json;

// The keys of gcloud's --worker-pool-spec that mlengine takes; the rest are
// refused, saying what to do instead.
const std::vector<std::string>& WorkerPoolKeys() {
  static const auto* keys = new std::vector<std::string>{
      "machine-type",       "replica-count", "accelerator-type", "accelerator-count", "container-image-uri",
      "executor-image-uri", "python-module", "script",           "local-package-path"};
  return *keys;
}

const std::map<std::string, std::string>& UnsupportedWorkerPoolKeys() {
  static const auto* keys = new std::map<std::string, std::string>{
      {"output-image-uri",
       "mlengine builds no images: local-package-path is built into a Python package, staged, and run with "
       "executor-image-uri's runtime"},
      {"requirements",
       "the server installs packages offline: give the archives of what the trainer needs with "
       "--python-package-uris"},
      {"extra-packages", "stage the archives (mlengine storage cp) and give them with --python-package-uris"},
      {"extra-dirs", "put the directories inside local-package-path"},
  };
  return *keys;
}

std::vector<std::string> VertexChoices(const std::string& schema, const std::string& field, const std::string& skip) {
  std::vector<std::string> out;
  for (const auto& v : VertexSchema().EnumValues(schema, field)) {
    if (v != skip) out.push_back(FlagSpelling(v));
  }
  return out;
}

absl::StatusOr<int64_t> PositiveInteger(const std::string& flag, const std::string& key, const std::string& value) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", flag, ": ", key, " must be a positive integer, got \"", value, "\""));
  }
  return n;
}

absl::StatusOr<json> PoolSpec(const WorkerPoolFlag& pool, size_t index,
                              const std::optional<std::vector<std::string>>& package_uris,
                              const std::map<size_t, StagedPackage>& staged) {
  if (pool.empty) return json::object();
  json spec = {{"machineSpec", {{"machineType", pool.machine_type}}},
               {"replicaCount", std::to_string(pool.replica_count)}};
  if (pool.accelerator_type) {
    spec["machineSpec"]["acceleratorType"] = *pool.accelerator_type;
    spec["machineSpec"]["acceleratorCount"] = pool.accelerator_count.value_or(1);
  }
  if (pool.container_image_uri) {
    spec["containerSpec"] = {{"imageUri", *pool.container_image_uri}};
    return spec;
  }
  std::vector<std::string> uris;
  std::string module = pool.python_module.value_or("");
  if (pool.local_package_path) {
    auto it = staged.find(index);
    if (it == staged.end()) {
      return absl::InternalError(absl::StrCat("the package of workerPoolSpecs[", index, "] was not built"));
    }
    uris = it->second.uris;
    module = it->second.python_module;
  }
  if (package_uris) uris.insert(uris.end(), package_uris->begin(), package_uris->end());
  if (uris.empty() && !pool.local_package_path) {
    return absl::InvalidArgumentError(absl::StrCat(
        "argument --worker-pool-spec (workerPoolSpecs[", index, "]): python-module ", module,
        " runs from Python packages: give their gs:// URIs with --python-package-uris, or local-package-path=DIR "
        "to build one from a local directory"));
  }
  spec["pythonPackageSpec"] = {
      {"executorImageUri", *pool.executor_image_uri}, {"pythonModule", module}, {"packageUris", uris}};
  return spec;
}

}  // namespace

const Schema& VertexSchema() {
  static const Schema* schema = new Schema(json::parse(kAiplatformDocument.begin(), kAiplatformDocument.end()));
  return *schema;
}

std::vector<std::string> SplitListFlag(const std::string& value) {
  std::string delimiter = ",";
  absl::string_view rest = value;
  if (rest.size() > 2 && rest[0] == '^') {
    if (const size_t close = rest.find('^', 1); close != absl::string_view::npos && close > 1) {
      delimiter = std::string(rest.substr(1, close - 1));
      rest.remove_prefix(close + 1);
    }
  }
  if (rest.empty()) return {};
  return absl::StrSplit(rest, delimiter);
}

absl::StatusOr<WorkerPoolFlag> ParseWorkerPoolSpec(const std::string& value, size_t index) {
  const std::string flag = absl::StrCat("--worker-pool-spec (workerPoolSpecs[", index, "])");
  auto bad = [&flag](const auto&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": ", parts...));
  };
  WorkerPoolFlag pool;
  const std::vector<std::string> items = SplitListFlag(std::string(absl::StripAsciiWhitespace(value)));
  if (items.empty()) {
    if (index == 0) return bad("the first pool (the chief's) cannot be empty");
    pool.empty = true;
    return pool;
  }
  std::map<std::string, std::string> dict;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return bad("\"", item,
                 "\" is not KEY=VALUE, e.g. machine-type=n1-standard-4,replica-count=1,"
                 "container-image-uri=IMAGE");
    }
    const std::string key(absl::StripAsciiWhitespace(item.substr(0, eq)));
    const std::string v(absl::StripAsciiWhitespace(item.substr(eq + 1)));
    if (auto why = UnsupportedWorkerPoolKeys().find(key); why != UnsupportedWorkerPoolKeys().end()) {
      return bad("key ", key, " is not supported here: ", why->second);
    }
    const auto& keys = WorkerPoolKeys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return bad("unknown key \"", key, "\"; the keys are ", absl::StrJoin(keys, ", "));
    }
    if (v.empty()) return bad("key ", key, " has no value");
    if (!dict.emplace(key, v).second) return bad("key ", key, " is given twice");
  }
  auto take = [&dict](const char* key) -> std::optional<std::string> {
    auto it = dict.find(key);
    if (it == dict.end()) return std::nullopt;
    return it->second;
  };
  if (auto machine = take("machine-type")) {
    pool.machine_type = *machine;
  } else {
    return bad("machine-type is required, e.g. machine-type=n1-standard-4");
  }
  if (auto count = take("replica-count")) {
    auto n = PositiveInteger(flag, "replica-count", *count);
    if (!n.ok()) return n.status();
    pool.replica_count = *n;
  }
  if (auto type = take("accelerator-type")) {
    auto e = EnumFromFlag(
        absl::StrCat(flag, " accelerator-type"), *type,
        VertexChoices("GoogleCloudAiplatformV1MachineSpec", "acceleratorType", "ACCELERATOR_TYPE_UNSPECIFIED"));
    if (!e.ok()) return e.status();
    pool.accelerator_type = *e;
  }
  if (auto count = take("accelerator-count")) {
    if (!pool.accelerator_type)
      return bad("accelerator-count needs accelerator-type, e.g. accelerator-type=nvidia-tesla-t4");
    auto n = PositiveInteger(flag, "accelerator-count", *count);
    if (!n.ok()) return n.status();
    pool.accelerator_count = *n;
  }
  pool.container_image_uri = take("container-image-uri");
  pool.executor_image_uri = take("executor-image-uri");
  pool.python_module = take("python-module");
  pool.script = take("script");
  pool.local_package_path = take("local-package-path");

  if (pool.container_image_uri) {
    if (pool.executor_image_uri) return bad("give one of container-image-uri and executor-image-uri, not both");
    for (const char* key : {"python-module", "script", "local-package-path"}) {
      if (dict.count(key)) {
        return bad(key,
                   " goes with executor-image-uri (a Python package run in a prebuilt image), not with "
                   "container-image-uri (a container that runs its own entrypoint)");
      }
    }
    return pool;
  }
  if (!pool.executor_image_uri) {
    return bad(
        "give container-image-uri=IMAGE (a custom container), or executor-image-uri=IMAGE with "
        "python-module=MODULE or local-package-path=DIR,script=PATH (a Python trainer)");
  }
  if (pool.python_module && pool.script) return bad("give one of python-module and script, not both");
  if (!pool.python_module && !pool.script) {
    return bad(
        "executor-image-uri needs python-module=MODULE (e.g. trainer.task) or script=PATH (with "
        "local-package-path)");
  }
  if (pool.script && !pool.local_package_path) {
    return bad("script=", *pool.script, " is a path inside local-package-path=DIR: give that too");
  }
  return pool;
}

absl::StatusOr<json> BuildJobSpec(const json& base, const JobSpecFlags& f,
                                  const std::map<size_t, StagedPackage>& staged, const std::string& where) {
  json spec = base.is_object() ? base : json::object();
  if (!f.worker_pools.empty()) {
    json pools = json::array();
    for (size_t i = 0; i < f.worker_pools.size(); ++i) {
      auto pool = PoolSpec(f.worker_pools[i], i, f.python_package_uris, staged);
      if (!pool.ok()) return pool.status();
      pools.push_back(*std::move(pool));
    }
    spec["workerPoolSpecs"] = std::move(pools);
  } else if (f.python_package_uris && spec.contains("workerPoolSpecs") && spec["workerPoolSpecs"].is_array()) {
    for (json& pool : spec["workerPoolSpecs"]) {
      if (pool.is_object() && pool.contains("pythonPackageSpec") && pool["pythonPackageSpec"].is_object()) {
        pool["pythonPackageSpec"]["packageUris"] = *f.python_package_uris;
      }
    }
  }
  if (!spec.contains("workerPoolSpecs") || !spec["workerPoolSpecs"].is_array() || spec["workerPoolSpecs"].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job has no worker pool: give --worker-pool-spec, or ", where, "workerPoolSpecs in --config"));
  }
  bool has_container = false;
  for (json& pool : spec["workerPoolSpecs"]) {
    if (!pool.is_object()) continue;
    for (const char* key : {"containerSpec", "pythonPackageSpec"}) {
      if (!pool.contains(key) || !pool[key].is_object()) continue;
      json& software = pool[key];
      if (!f.args.empty()) {
        if (!software.contains("args") || !software["args"].is_array()) software["args"] = json::array();
        for (const auto& a : f.args) software["args"].push_back(a);
      }
      if (std::string(key) == "containerSpec") {
        has_container = true;
        if (f.command) software["command"] = *f.command;
      }
    }
  }
  if (f.command && !has_container) {
    return absl::InvalidArgumentError(
        "argument --command: sets the command of container pools (container-image-uri), and this job has none");
  }
  if (f.service_account) spec["serviceAccount"] = *f.service_account;
  if (f.network) spec["network"] = *f.network;
  if (f.enable_web_access) spec["enableWebAccess"] = true;
  if (f.enable_dashboard_access) spec["enableDashboardAccess"] = true;
  return spec;
}

absl::StatusOr<json> ParseVertexConfig(const std::string& text, const std::string& path, const std::string& schema) {
  const bool custom = schema == kCustomJobSpecSchema;
  auto loaded = LoadConfigFile(text, path);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  if (root.IsNull()) return json::object();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config ", path, ": the file must hold ",
                     custom ? "a CustomJobSpec (a mapping with workerPoolSpecs, baseOutputDirectory, ...), e.g.\n"
                              "  workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n    replicaCount: 1\n"
                              "    containerSpec: {imageUri: IMAGE}"
                            : "a HyperparameterTuningJob (a mapping with studySpec, maxTrialCount, parallelTrialCount, "
                              "trialJobSpec), e.g.\n"
                              "  studySpec:\n    metrics: [{metricId: accuracy, goal: MAXIMIZE}]\n"
                              "    parameters: [{parameterId: lr, doubleValueSpec: {minValue: 0.001, maxValue: 0.1}}]\n"
                              "  trialJobSpec:\n    workerPoolSpecs: [...]"));
  }
  json config = VertexSchema().FromYaml(root, schema);
  if (custom && (config.contains("jobSpec") || config.contains("displayName"))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config ", path,
                     " holds a CustomJob, and --config takes its jobSpec (a CustomJobSpec): move jobSpec's "
                     "fields (workerPoolSpecs, baseOutputDirectory, ...) to the top of the file and give the name with "
                     "--display-name"));
  }
  return config;
}

absl::StatusOr<json> BuildCustomJob(const json& config_spec, const VertexJobFlags& flags,
                                    const std::map<size_t, StagedPackage>& staged) {
  auto spec = BuildJobSpec(config_spec, flags.spec, staged, "");
  if (!spec.ok()) return spec.status();
  json job = {{"displayName", flags.display_name}, {"jobSpec", *std::move(spec)}};
  if (flags.labels) {
    auto labels = ParseLabels("--labels", *flags.labels);
    if (!labels.ok()) return labels.status();
    job["labels"] = *labels;
  }
  return job;
}

absl::StatusOr<json> BuildTuningJob(const json& config, const VertexJobFlags& flags, const TuningFlags& tuning,
                                    const std::map<size_t, StagedPackage>& staged) {
  json job = config.is_object() ? config : json::object();
  auto spec = BuildJobSpec(job.value("trialJobSpec", json::object()), flags.spec, staged, "trialJobSpec.");
  if (!spec.ok()) return spec.status();
  job["trialJobSpec"] = *std::move(spec);
  job["displayName"] = flags.display_name;
  if (flags.labels) {
    auto labels = ParseLabels("--labels", *flags.labels);
    if (!labels.ok()) return labels.status();
    if (!job["labels"].is_object()) job["labels"] = json::object();
    for (const auto& [k, v] : *labels) job["labels"][k] = v;
  }
  // The counts are int32 on the wire; gcloud's defaults are 1.
  if (tuning.max_trial_count) {
    job["maxTrialCount"] = *tuning.max_trial_count;
  } else if (!job.contains("maxTrialCount")) {
    job["maxTrialCount"] = 1;
  }
  if (tuning.parallel_trial_count) {
    job["parallelTrialCount"] = *tuning.parallel_trial_count;
  } else if (!job.contains("parallelTrialCount")) {
    job["parallelTrialCount"] = 1;
  }
  if (tuning.max_failed_trial_count) job["maxFailedTrialCount"] = *tuning.max_failed_trial_count;
  if (tuning.algorithm) {
    auto algorithm = EnumFromFlag("--algorithm", *tuning.algorithm,
                                  VertexChoices("GoogleCloudAiplatformV1StudySpec", "algorithm", ""));
    if (!algorithm.ok()) return algorithm.status();
    if (!job["studySpec"].is_object()) job["studySpec"] = json::object();
    job["studySpec"]["algorithm"] = *algorithm;
  }
  return job;
}

absl::StatusOr<GcsPath> VertexStagingLocation(const std::optional<std::string>& staging_bucket, const json& spec,
                                              const std::string& display_name, const std::string& where) {
  if (staging_bucket && !staging_bucket->empty()) {
    auto bucket = ParseGcsPath(*staging_bucket);
    if (!bucket.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument --staging-bucket: must be a bucket URI like gs://my-bucket, got \"", *staging_bucket, "\""));
    }
    std::string name;
    for (char c : display_name) name.push_back(absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ? c : '-');
    if (name.size() > 100) name.resize(100);
    if (name.empty() || name == "." || name == "..") name = "job";
    return bucket->Child(name);
  }
  const json* prefix = nullptr;
  if (spec.contains("baseOutputDirectory") && spec["baseOutputDirectory"].is_object()) {
    auto it = spec["baseOutputDirectory"].find("outputUriPrefix");
    if (it != spec["baseOutputDirectory"].end() && it->is_string()) prefix = &*it;
  }
  if (prefix == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("local-package-path needs a gs:// place to stage the package it builds: give --staging-bucket "
                     "gs://BUCKET, or ",
                     where, "baseOutputDirectory.outputUriPrefix (gs://BUCKET/DIR) in --config"));
  }
  auto base = ParseGcsPath(prefix->get<std::string>());
  if (!base.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local-package-path needs a gs:// place to stage the package it builds: ", where,
                     "baseOutputDirectory.outputUriPrefix \"", prefix->get<std::string>(),
                     "\" is not a gs:// path, so give --staging-bucket gs://BUCKET"));
  }
  return base->Child("packages");
}

absl::StatusOr<VertexJobRef> ParseVertexJobRef(const std::string& arg, const std::string& collection) {
  VertexJobRef ref;
  if (!arg.empty() && arg.find('/') == std::string::npos) {
    ref.id = arg;
    return ref;
  }
  const std::vector<std::string> parts = absl::StrSplit(arg, '/');
  const bool named = parts.size() == 6 && parts[0] == "projects" && parts[2] == "locations" && parts[4] == collection &&
                     std::none_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  if (!named) {
    return absl::InvalidArgumentError(absl::StrCat("JOB must be a job's id (e.g. 1234567890123456789) or its name ",
                                                   "projects/PROJECT/locations/REGION/", collection, "/ID; got \"", arg,
                                                   "\""));
  }
  ref.project = parts[1];
  ref.location = parts[3];
  ref.id = parts[5];
  return ref;
}

absl::StatusOr<std::vector<SortKey>> ParseSortBy(const std::string& value) {
  std::vector<SortKey> keys;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    SortKey key;
    key.descending = absl::ConsumePrefix(&part, "~");
    for (absl::string_view segment : absl::StrSplit(part, '.')) {
      std::string camel;
      bool upper = false;
      for (char c : segment) {
        if (c == '_') {
          upper = true;
          continue;
        }
        camel.push_back(upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c);
        upper = false;
      }
      if (camel.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument --sort-by: \"", part, "\" is not a field, e.g. --sort-by=~createTime,displayName"));
      }
      key.path.push_back(std::move(camel));
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

void SortResources(std::vector<json>& resources, const std::vector<SortKey>& keys) {
  auto find = [](const json& resource, const SortKey& key) -> const json* {
    json::json_pointer pointer;
    for (const auto& segment : key.path) pointer /= segment;
    return resource.contains(pointer) ? &resource.at(pointer) : nullptr;
  };
  // -1, 0 or 1 as a sorts before, with or after b (ascending).
  auto compare = [](const json* a, const json* b) {
    if (a == nullptr || b == nullptr) return a == b ? 0 : (a == nullptr ? -1 : 1);
    if (a->is_number() && b->is_number()) {
      const double x = a->get<double>(), y = b->get<double>();
      return x < y ? -1 : (y < x ? 1 : 0);
    }
    const std::string x = a->is_string() ? a->get<std::string>() : a->dump();
    const std::string y = b->is_string() ? b->get<std::string>() : b->dump();
    return x.compare(y) < 0 ? -1 : (x == y ? 0 : 1);
  };
  std::stable_sort(resources.begin(), resources.end(), [&](const json& a, const json& b) {
    for (const SortKey& key : keys) {
      const int c = compare(find(a, key), find(b, key));
      if (c != 0) return key.descending ? c > 0 : c < 0;
    }
    return false;
  });
}

}  // namespace mle::cli
