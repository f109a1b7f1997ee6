// Admission of a container job: every image it names is located (mirror
// table, registry, node store) and pinned to what it is now (a registry
// digest, or an image id in the node's store), so the job runs exactly the
// image that was checked, however the tag moves later. A missing image is
// refused at submission, naming what is available.
// Thread-safe (no state of its own; the registry and podman are asked each time).
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "containers/images.h"
#include "containers/podman.h"
#include "containers/registry.h"
#include "model/job.h"

namespace mle::containers {

// Every imageUri the job's replicas run (their own, or the master's), in no
// particular order; empty for a job without containers.
std::vector<std::string> JobImages(const model::TrainingInput& t);

class ImageResolver {
 public:
  // `podman` may be null (then images of the node's store are refused).
  ImageResolver(ImageTable table, const Podman* podman);
  const ImageTable& table() const { return table_; }

  // imageUri -> pinned reference, for every image of the job.
  // FAILED_PRECONDITION for images that are missing or not allowed (naming
  // what is available), UNAVAILABLE when the registry cannot be reached.
  absl::StatusOr<std::map<std::string, std::string>> Resolve(const model::TrainingInput& t) const;

 private:
  absl::StatusOr<std::string> Pin(const std::string& uri) const;
  const ImageTable table_;
  const Podman* const podman_;
  const RegistryClient registry_;
};

}  // namespace mle::containers
