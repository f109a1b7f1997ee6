// Containers through Debian's podman (its CLI; no hand-written runtime).
//
// PodmanRunArgv is the pure half: the `podman run` command line of one
// replica (host network, the same paths mounted, signals forwarded by the
// container's init, environment passed by name so no secret is on a command
// line). Podman is the impure half: pulling images, looking them up in the
// node's store, and removing what a job's containers left.
//
// podman is configured by a containers.conf that mlengined writes
// (WriteContainersConf) and names in CONTAINERS_CONF for every podman it
// starts: runc as the runtime (podman's default crun fails on hybrid
// cgroups), no default ulimits (setrlimit is refused in some sandboxes),
// cgroupfs, events to a file.
// Thread-safe (Podman holds only immutable settings).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "containers/images.h"

namespace mle::containers {

// One replica's container.
struct ContainerRun {
  std::string name;                     // unique on the node: "mle-<project>-<job>-<task>"
  std::string image;                    // the pinned reference to run
  std::vector<std::string> entrypoint;  // containerCommand; empty: the image's
  std::vector<std::string> args;        // containerArgs then args; empty: the image's CMD
  std::vector<std::string> env_names;   // passed from podman's environment by name
  std::map<std::string, std::string> labels;
  std::vector<std::string> mounts;      // host directories, mounted at the same path
  std::vector<std::string> read_only_mounts;  // the same, read-only
  std::string workdir;                  // empty: the image's
  std::vector<int> gpus;                // GPU indices given to the replica
  // Sandboxed (docs/security.md): the container's processes run as this
  // identity ("UID:GID"; empty: the image's user, as root may be), with no
  // capabilities and no new privileges, within these limits (0: none).
  std::string user;
  // Where podman writes the container's id as it creates it (--cidfile; it
  // refuses a file that exists); "" for none.
  std::string cidfile;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t pids_limit = 0;
};

// Labels every mlengine container carries.
inline constexpr char kRunDirLabel[] = "mlengine.run";   // the job's run directory
inline constexpr char kTaskLabel[] = "mlengine.task";    // master-replica-0, ...

std::vector<std::string> PodmanRunArgv(const ContainerSettings& settings, const ContainerRun& run);

// A container name podman accepts, from a job and task: [a-zA-Z0-9_.-],
// unique for (project, job, task).
std::string ContainerName(const std::string& project, const std::string& job_id, const std::string& task);

// The containers.conf mlengined uses (see above).
std::string ContainersConf(const ContainerSettings& settings);

// An image in the node's store (podman images).
struct StoredImage {
  std::string id;                         // "sha256:..."
  std::vector<std::string> names;         // "127.0.0.1:5000/e2e/trainer:1"
  std::vector<std::string> repo_digests;  // "127.0.0.1:5000/e2e/trainer@sha256:..."
  int64_t bytes = 0;                      // its size as podman counts it (shared layers in each image's)
  int containers = 0;                     // containers made from it (running or not)
};

// The images of `podman images --format json` (podman 4's output: an
// image with several names is listed once for each), each once;
// INVALID_ARGUMENT when it is not that.
absl::StatusOr<std::vector<StoredImage>> ParseStoredImages(absl::string_view json);

class Podman {
 public:
  // `containers_conf`: the file written from ContainersConf (CONTAINERS_CONF).
  Podman(ContainerSettings settings, std::string containers_conf);

  const ContainerSettings& settings() const { return settings_; }
  const std::string& containers_conf() const { return containers_conf_; }
  // What every podman started for mlengine needs in its environment.
  std::map<std::string, std::string> Environment() const;

  // Pulls `reference` into the node's store unless it is there already.
  // FAILED_PRECONDITION with podman's words when it cannot. A reference
  // pinned by digest or id names the same bytes forever: once present it is
  // remembered, and later calls ask podman nothing.
  absl::Status Pull(const std::string& reference) const;
  // The image's id in the node's store ("sha256:..."), nullopt when absent.
  absl::StatusOr<std::optional<std::string>> LocalImageId(const std::string& reference) const;
  // Every image in the node's store: "localhost/trainer:1", ...
  absl::StatusOr<std::vector<std::string>> LocalImages() const;
  // Every image in the node's store.
  absl::StatusOr<std::vector<StoredImage>> StoredImages() const;
  // Removes `image` from the node's store when `still_unused()`, asked
  // under the lock Pull checks what it already pulled under, still says so:
  // a job whose pull was skipped because the image was there has been seen
  // by then. True when removed; false when `still_unused` said no or a
  // container holds the image (podman refuses). Its names go first (podman
  // removes an image with several only by force, which would remove the
  // containers too). Later pulls fetch it again.
  absl::StatusOr<bool> RemoveImage(const StoredImage& image, const std::function<bool()>& still_unused) const;
  // Removes (killing first) every container labelled kRunDirLabel=run_dir;
  // returns how many there were.
  absl::StatusOr<int> RemoveRunContainers(const std::string& run_dir) const;

 private:
  std::vector<std::string> Command(std::initializer_list<std::string> args) const;
  ContainerSettings settings_;
  std::string containers_conf_;
  mutable absl::Mutex mu_;
  mutable std::set<std::string> present_ ABSL_GUARDED_BY(mu_);  // pinned references known pulled
};

}  // namespace mle::containers
