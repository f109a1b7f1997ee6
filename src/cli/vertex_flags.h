// The flags of `mlengine ai custom-jobs` and `ai hp-tuning-jobs`, following
// gcloud ai's, and how they become the bodies sent to Vertex's aiplatform v1
// API (docs/vertex.md): the --config file is the base (a CustomJobSpec, or a
// HyperparameterTuningJob), each flag given overrides or extends it.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/gcs_path.h"
#include "cli/schema.h"

namespace mle::cli {

// The aiplatform v1 discovery document compiled into this binary
// (api/aiplatform.v1.json), and its schemas.
extern const absl::string_view kAiplatformDocument;
const Schema& VertexSchema();

inline constexpr char kCustomJobSpecSchema[] = "GoogleCloudAiplatformV1CustomJobSpec";
inline constexpr char kTuningJobSchema[] = "GoogleCloudAiplatformV1HyperparameterTuningJob";

// A gcloud list flag's items: "a,b,c", or split at another delimiter where
// the value starts with ^DELIM^ ("^:^a,1:b" -> "a,1", "b"; `gcloud topic
// escaping`). Items are kept as given (empty ones too); "" is no item.
std::vector<std::string> SplitListFlag(const std::string& value);

// One --worker-pool-spec: gcloud's keys, as given.
struct WorkerPoolFlag {
  bool empty = false;  // "": an empty pool ({}), none of that role
  std::string machine_type;
  int64_t replica_count = 1;
  std::optional<std::string> accelerator_type;  // the enum, e.g. NVIDIA_TESLA_T4
  std::optional<int64_t> accelerator_count;
  std::optional<std::string> container_image_uri;
  std::optional<std::string> executor_image_uri;
  std::optional<std::string> python_module;
  std::optional<std::string> script;              // relative to local_package_path
  std::optional<std::string> local_package_path;  // built into a package and staged
};

// Parses the `index`th --worker-pool-spec ("machine-type=n1-standard-4,
// replica-count=2,container-image-uri=IMAGE"), refusing what gcloud refuses
// (an unknown key, a missing machine-type, both or neither of
// container-image-uri and executor-image-uri, ...) with a message naming the
// flag and the pool (workerPoolSpecs[index]).
absl::StatusOr<WorkerPoolFlag> ParseWorkerPoolSpec(const std::string& value, size_t index);

// What a pool's local package became: the URIs it was staged at and the
// module that runs it.
struct StagedPackage {
  std::vector<std::string> uris;
  std::string python_module;
};

// The flags that shape a CustomJobSpec (a custom job's jobSpec, a tuning
// job's trialJobSpec).
struct JobSpecFlags {
  std::vector<WorkerPoolFlag> worker_pools;         // given: they replace the config's pools
  std::vector<std::string> args;                    // appended to every pool's args
  std::optional<std::vector<std::string>> command;  // every container pool's command
  std::optional<std::vector<std::string>> python_package_uris;
  std::optional<std::string> service_account;
  std::optional<std::string> network;
  bool enable_web_access = false;  // the server refuses them, saying so
  bool enable_dashboard_access = false;
};

// The CustomJobSpec: `base` (from the config file, or {}) with the flags
// applied. `staged` gives each pool with a local-package-path (by index) its
// package; --python-package-uris follow its URIs. `where` is the spec's path
// in the config, for messages ("" or "trialJobSpec.").
absl::StatusOr<nlohmann::json> BuildJobSpec(const nlohmann::json& base, const JobSpecFlags& flags,
                                            const std::map<size_t, StagedPackage>& staged, const std::string& where);

// The flags every create takes beside the spec's.
struct VertexJobFlags {
  std::string display_name;
  std::optional<std::string> labels;  // "k=v,k2=v2": added to the config's
  JobSpecFlags spec;
};

// A HyperparameterTuningJob's own flags.
struct TuningFlags {
  std::optional<int64_t> max_trial_count;       // neither flag nor config: 1, as gcloud's default
  std::optional<int64_t> parallel_trial_count;  // likewise
  std::optional<int64_t> max_failed_trial_count;
  std::optional<std::string> algorithm;  // grid-search, random-search, algorithm-unspecified
};

// Reads a --config file (YAML or JSON) as `schema` (kCustomJobSpecSchema or
// kTuningJobSchema), typed by it (`args: [--lr, 0.1]` stays strings).
// Refuses a file that is not a mapping, and a custom job's file that holds a
// whole CustomJob (jobSpec:) where gcloud takes only its spec.
absl::StatusOr<nlohmann::json> ParseVertexConfig(const std::string& text, const std::string& path,
                                                 const std::string& schema);

// The CustomJob to create: {displayName, labels, jobSpec}.
absl::StatusOr<nlohmann::json> BuildCustomJob(const nlohmann::json& config_spec, const VertexJobFlags& flags,
                                              const std::map<size_t, StagedPackage>& staged);

// The HyperparameterTuningJob to create: the config with the flags applied,
// its trialJobSpec built as BuildJobSpec builds a spec.
absl::StatusOr<nlohmann::json> BuildTuningJob(const nlohmann::json& config, const VertexJobFlags& flags,
                                              const TuningFlags& tuning, const std::map<size_t, StagedPackage>& staged);

// Where local packages are staged: --staging-bucket's gs://BUCKET/NAME (NAME
// the display name made safe for a path), else the spec's
// baseOutputDirectory.outputUriPrefix + "/packages"; INVALID_ARGUMENT saying
// how to give one when there is neither (`where` as for BuildJobSpec).
absl::StatusOr<GcsPath> VertexStagingLocation(const std::optional<std::string>& staging_bucket,
                                              const nlohmann::json& spec, const std::string& display_name,
                                              const std::string& where);

// A job named on the command line: its id, or its whole name
// projects/P/locations/L/COLLECTION/ID (then project and location are set).
struct VertexJobRef {
  std::string project;
  std::string location;
  std::string id;
};
absl::StatusOr<VertexJobRef> ParseVertexJobRef(const std::string& arg, const std::string& collection);

// gcloud's --sort-by: "~createTime,displayName" (~: descending; snake_case
// keys are taken as the camelCase the API writes).
struct SortKey {
  std::vector<std::string> path;
  bool descending = false;
};
absl::StatusOr<std::vector<SortKey>> ParseSortBy(const std::string& value);
// Sorts resources by the keys in turn (stable; an absent value first,
// numbers by value, everything else by its text).
void SortResources(std::vector<nlohmann::json>& resources, const std::vector<SortKey>& keys);

}  // namespace mle::cli
