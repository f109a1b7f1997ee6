// Which container images a job may name, and what each one stands for.
//
// There is no internet here: users' configurations name public images (the
// TPU guide's gcr.io/cloud-ml-public/training/pytorch-xla.1-11) or their own
// (gcr.io/PROJECT/trainer:tag). The operator maps such names to images in a
// registry they run (Debian's docker-registry) with a mirror table in the
// server configuration (`containers.mirrors`), and may also let jobs name
// images of that registry directly, or images already in each node's image
// store ("localhost/NAME:TAG", podman's name for an imported image).
//
// An image that stands in for a TPU/XLA image is labelled simulated (as the
// TPU hosts are), and may declare the tpuTfVersion values it goes with: the
// guide's `tpuTfVersion: pytorch-1.11` for the PyTorch XLA 1.11 image.
//
// Pure: no I/O. Thread-safe (immutable).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mle::containers {

struct Mirror {
  std::string name;    // what jobs say: "gcr.io/cloud-ml-public/training/pytorch-xla.1-11"
  std::string image;   // where it is: "REPO[:TAG]" in the registry, or "localhost/NAME:TAG"
  std::vector<std::string> tpu_tf_versions;  // tpuTfVersion values it goes with (TPU images)
  bool simulated = false;                    // stands in for a TPU/XLA image
  std::string description;                   // for people: "Debian 12 python3 + torch 1.13 (CPU)"
};

// `containers:` in the server configuration (config/mlengined.yaml).
struct ContainerSettings {
  bool enabled = false;
  std::string podman = "podman";           // the podman binary
  std::string runtime = "/usr/sbin/runc";  // the OCI runtime podman runs (crun fails on hybrid cgroups)
  std::string init = "/usr/bin/catatonit"; // PID 1 of every container: forwards signals, reaps
  std::string registry;                    // "127.0.0.1:5000": where REPO:TAG images come from
  bool registry_insecure = true;           // plain HTTP (a registry on this machine or cluster)
  bool allow_registry_images = true;       // jobs may name REGISTRY/REPO:TAG directly
  bool allow_local_images = true;          // jobs may name images in the node's store (localhost/...)
  std::string gpu_devices = "cdi";         // how GPUs reach a container: "cdi" (nvidia.com/gpu=N) or "none"
  std::vector<Mirror> mirrors;
};

// Where an image a job names comes from.
struct ImageSource {
  enum class Kind { kRegistry, kLocalStore };
  Kind kind = Kind::kRegistry;
  std::string repository;  // registry: "mle/pytorch"; local store: "localhost/trainer"
  std::string tag;         // "latest" when the name had none
  std::string digest;      // "sha256:..." when the name pinned one
  const Mirror* mirror = nullptr;  // the mirror entry it came through, if any
  // "127.0.0.1:5000/mle/pytorch:1" or "localhost/trainer:1": a reference podman understands.
  std::string Reference(const std::string& registry) const;
};

class ImageTable {
 public:
  explicit ImageTable(ContainerSettings settings) : settings_(std::move(settings)) {}
  const ContainerSettings& settings() const { return settings_; }

  // Where `uri` (a job's imageUri) comes from; FAILED_PRECONDITION saying why
  // it cannot be used here (not mirrored, registry images not allowed, ...).
  absl::StatusOr<ImageSource> Locate(const std::string& uri) const;

  // The TPU worker's tpuTfVersion against the image table: an image whose
  // mirror declares versions takes one of them (validation has already
  // applied AI Platform's own rules). FAILED_PRECONDITION otherwise.
  absl::Status CheckTpuTfVersion(const std::string& uri, const std::string& tpu_tf_version) const;

  // "gcr.io/cloud-ml-public/training/pytorch-xla.1-11 (Debian 12 ... simulated), ..." for messages.
  std::string DescribeMirrors() const;

 private:
  // The mirror entry for an image a job names: by the whole name, else by
  // the name without its tag (never for a name pinned by digest).
  const Mirror* FindMirror(const std::string& uri) const;
  ContainerSettings settings_;
};

// For an image that stands in for one that cannot run here (a mirror marked
// simulated): "gcr.io/.../pytorch-xla.1-11 (simulated here by Debian 12 ...)";
// "" for any other image. Replicas see it as MLENGINE_SIMULATED_IMAGE.
std::string SimulatedImageNote(const ContainerSettings& settings, const std::string& uri);

// "NAME[:TAG][@DIGEST]" split; a ':' after the last '/' is a tag (a ':' before
// it is a registry port). INVALID_ARGUMENT for names podman would refuse.
struct ImageName {
  std::string name;    // "gcr.io/p/trainer"
  std::string tag;     // "" when absent
  std::string digest;  // "" when absent
};
absl::StatusOr<ImageName> ParseImageName(const std::string& uri);

}  // namespace mle::containers
