#include "containers/resolver.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/catalog.h"

namespace mle::containers {

std::vector<std::string> JobImages(const model::TrainingInput& t) {
  std::set<std::string> images;
  for (const auto* c : {&t.master_config, &t.worker_config, &t.parameter_server_config, &t.evaluator_config}) {
    if (c->has_value() && !(*c)->image_uri.empty()) images.insert((*c)->image_uri);
  }
  return {images.begin(), images.end()};
}

ImageResolver::ImageResolver(ImageTable table, const Podman* podman)
    : table_(std::move(table)),
      podman_(podman),
      registry_(table_.settings().registry, table_.settings().registry_insecure) {}

absl::StatusOr<std::string> ImageResolver::Pin(const std::string& uri) const {
  auto src = table_.Locate(uri);
  if (!src.ok()) return src.status();
  const std::string& registry = table_.settings().registry;
  const std::string shown = src->Reference(registry);
  const std::string via = shown == uri ? "" : absl::StrCat(" (", shown, " on this cluster)");
  if (src->kind == ImageSource::Kind::kLocalStore) {
    if (podman_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("Image ", uri, " would come from the node's image store, "
                                                        "which this executor cannot read."));
    }
    auto id = podman_->LocalImageId(shown);
    if (!id.ok()) return absl::UnavailableError(absl::StrCat("cannot ask podman about ", shown, ": ", id.status().message()));
    if (!id->has_value()) {
      auto local = podman_->LocalImages();
      return absl::FailedPreconditionError(absl::StrCat(
          "Image ", uri, via, " is not in this node's image store. ",
          local.ok() && !local->empty() ? absl::StrCat("Images there: ", absl::StrJoin(*local, ", "), ".")
                                        : "It holds no localhost/ images.",
          registry.empty() ? "" : absl::StrCat(" Or push the image to the registry ", registry, " and name it there.")));
    }
    return **id;  // podman runs an image by its id
  }
  auto digest = registry_.Digest(src->repository, src->digest.empty() ? src->tag : src->digest);
  if (!digest.ok()) return digest.status();
  if (!digest->has_value()) {
    auto available = registry_.List();
    std::string what = available.ok() ? (available->empty() ? std::string("it holds no images")
                                                            : absl::StrCat("it holds ", absl::StrJoin(*available, ", ")))
                                      : std::string(available.status().message());
    const std::string mirrors = table_.DescribeMirrors();
    return absl::FailedPreconditionError(absl::StrCat(
        "Image ", uri, via, " was not found in the image registry ", registry, " (", what, ").",
        mirrors.empty() ? "" : absl::StrCat(" Mirrored public images: ", mirrors, "."),
        " Push the image there (podman push) or ask the operator to mirror it."));
  }
  return absl::StrCat(registry, "/", src->repository, "@", **digest);
}

absl::StatusOr<std::map<std::string, std::string>> ImageResolver::Resolve(const model::TrainingInput& t) const {
  std::map<std::string, std::string> out;
  for (const auto& uri : JobImages(t)) {
    auto pinned = Pin(uri);
    if (!pinned.ok()) return pinned.status();
    out[uri] = *pinned;
  }
  // The TPU worker's tpuTfVersion goes with its image.
  if (t.worker_type == model::kCloudTpuMachine && t.worker_config && !t.worker_config->tpu_tf_version.empty()) {
    const std::string image = !t.worker_config->image_uri.empty()
                                  ? t.worker_config->image_uri
                                  : (t.master_config ? t.master_config->image_uri : "");
    if (!image.empty()) {
      if (auto s = table_.CheckTpuTfVersion(image, t.worker_config->tpu_tf_version); !s.ok()) return s;
    }
  }
  return out;
}

}  // namespace mle::containers
