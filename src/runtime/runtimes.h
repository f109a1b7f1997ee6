// Runtime versions installed on this cluster: each binds a runtimeVersion
// name to a Python environment. The operator lists them in the configuration's `runtimes:`;
// AI Platform's own catalog (model/catalog.h) stays for validation. A job
// naming a runtime this cluster does not have is refused at submission.
// Immutable after loading; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::runtime {

struct Runtime {
  std::string name;            // the runtimeVersion users pass, e.g. "pytorch-1.13-cpu"
  std::string python;          // interpreter, e.g. /usr/bin/python3
  std::string python_version;  // what pythonVersion may say, e.g. "3.11"
  bool tpu_capable = false;    // may be placed with (simulated) TPU hosts
  std::string description;     // what it is, for people: "Debian 12 python3 + torch 1.13 (CPU)"
  // Warm starts (docs/design/warm_start.md): replicas of this runtime are
  // forked from an interpreter that has already imported warm_preload.
  // False: every replica starts cold.
  bool warm_start = false;
  std::vector<std::string> warm_preload;
  // Vertex AI jobs: the executor images (pythonPackageSpec.executorImageUri)
  // whose packages this runtime runs; a trailing '*' matches any rest
  // (validate::RuntimeForExecutorImage). Vertex's own prebuilt training
  // images that no runtime names run with the first runtime.
  std::vector<std::string> executor_images;
};

class RuntimeCatalog {
 public:
  RuntimeCatalog() = default;
  explicit RuntimeCatalog(std::vector<Runtime> runtimes) : runtimes_(std::move(runtimes)) {}
  // Parses YAML: {runtimes: [{name, python, python_version, tpu_capable, description, warm_start,
  // executor_images}]}.
  static absl::StatusOr<RuntimeCatalog> FromYaml(const std::string& text);
  static absl::StatusOr<RuntimeCatalog> FromFile(const std::string& path);

  const Runtime* Find(const std::string& name) const;
  const std::vector<Runtime>& runtimes() const { return runtimes_; }
  // "pytorch-1.13-cpu (Debian 12 python3 ...), ..." for messages.
  std::string Describe() const;

 private:
  std::vector<Runtime> runtimes_;
};

}  // namespace mle::runtime
