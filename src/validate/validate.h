// Validation of a Job submitted to jobs.create: every rule of the `ml` v1 API
// and of the TPU training guide, as data-driven checks that return all field
// violations at once (never just the first).
//
// Field paths are the wire's camelCase paths from the request body, e.g.
// "trainingInput.workerConfig.acceleratorConfig.count" or "jobId"; list
// elements use brackets: "trainingInput.hyperparameters.params[2].minValue".
//
// Pure functions over model values; thread-safe.
#pragma once

#include <map>
#include <utility>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/catalog.h"
#include "model/job.h"

namespace mle::validate {

// A field path and a sentence for a person: what is wrong, what is allowed.
using FieldViolation = common::FieldViolation;

// What this deployment accepts. Defaults() gives AI Platform's values;
// the server may add runtime versions (e.g. locally installed runtimes) and
// change the region lists from its configuration file.
struct Config {
  std::vector<std::string> regions;
  std::vector<std::string> tpu_regions;
  // The regions this deployment serves (its `regions:`); empty: all of
  // `regions`. A job for an AI Platform region not served here is refused.
  std::vector<std::string> served_regions;
  // The runtime versions this deployment runs (names among
  // runtime_versions); a refusal lists these, not every name AI Platform
  // had. Empty: all of runtime_versions.
  std::vector<std::string> installed_runtimes;
  std::vector<model::RuntimeVersion> runtime_versions;
  // Vertex AI jobs (model/vertex.h): which runtime runs a package whose
  // pythonPackageSpec.executorImageUri matches a pattern (a trailing '*'
  // matches any rest), in order: {pattern, runtime name}.
  std::vector<std::pair<std::string, std::string>> executor_images;
  static Config Defaults();
};

// The runtime (a name among the installed runtimes) that runs packages for
// Vertex's `executor_image`: the first of config.executor_images that
// matches; else, for one of Vertex's own prebuilt training images
// (LOCATION-docker.pkg.dev/vertex-ai/training/...), the first installed
// runtime. "" when none does.
std::string RuntimeForExecutorImage(const Config& config, const std::string& executor_image);

// The TPU runtime version a Vertex AI cloud-tpu pool's container `image`
// runs with (ml v1's workerConfig.tpuTfVersion, which Vertex has not: a TPU
// VM runs what its container brings): a pytorch-xla image's own value, else
// the first TPU-capable runtime this cluster installs; "" when it has none.
std::string TpuRuntimeForImage(const Config& config, const std::string& image);

// Checks a job for jobs.create. The job's output-only fields are ignored
// (the API layer drops them). Returns an empty vector when the job is valid.
std::vector<FieldViolation> ValidateJob(const model::Job& job, const Config& config);

// Checks the `labels` map alone (also used by jobs.patch).
std::vector<FieldViolation> ValidateLabels(
    const std::map<std::string, std::string>& labels, const std::string& path);

}  // namespace mle::validate
