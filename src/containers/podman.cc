#include "containers/podman.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"
#include "common/subprocess.h"

namespace mle::containers {

std::vector<std::string> PodmanRunArgv(const ContainerSettings& settings, const ContainerRun& run) {
  std::vector<std::string> argv = {settings.podman, "run", "--rm", "--name", run.name,
                                   // Replicas reach each other (TF_CONFIG, MASTER_ADDR) as bare processes do.
                                   "--network", "host",
                                   // An init as PID 1: a trainer gets the stop signal (PID 1 ignores
                                   // signals it has no handler for) and its orphans are reaped.
                                   "--init", "--init-path", settings.init,
                                   // Pulled (and pinned by digest) before the job starts.
                                   "--pull", "never",
                                   // The output goes to mlengine's log store through this client.
                                   "--log-driver", "none"};
  for (const auto& [k, v] : run.labels) {
    argv.push_back("--label");
    argv.push_back(absl::StrCat(k, "=", v));
  }
  for (const auto& name : run.env_names) {
    argv.push_back("--env");
    argv.push_back(name);  // the value comes from podman's own environment
  }
  for (const auto& dir : run.mounts) {
    argv.push_back("--volume");
    argv.push_back(absl::StrCat(dir, ":", dir));
  }
  for (const auto& dir : run.read_only_mounts) {
    argv.push_back("--volume");
    argv.push_back(absl::StrCat(dir, ":", dir, ":ro"));
  }
  if (!run.user.empty()) {
    // Not root on the host, nor able to become it; setuid files in the
    // image raise nothing.
    argv.insert(argv.end(), {"--user", run.user, "--cap-drop", "all", "--security-opt", "no-new-privileges",
                             // The image's HOME (often /root) is not its to write.
                             "--env", "HOME=/tmp"});
  }
  if (!run.cidfile.empty()) argv.insert(argv.end(), {"--cidfile", run.cidfile});
  if (run.cpu_milli > 0) {
    argv.push_back("--cpus");
    argv.push_back(absl::StrFormat("%d.%03d", run.cpu_milli / 1000, run.cpu_milli % 1000));
  }
  if (run.memory_mib > 0) {
    // The same for memory and swap: no swap beyond the limit.
    argv.insert(argv.end(), {"--memory", absl::StrCat(run.memory_mib, "m"), "--memory-swap",
                             absl::StrCat(run.memory_mib, "m")});
  }
  if (run.pids_limit > 0) argv.insert(argv.end(), {"--pids-limit", absl::StrCat(run.pids_limit)});
  if (settings.gpu_devices == "cdi") {
    for (int g : run.gpus) {
      argv.push_back("--device");
      argv.push_back(absl::StrCat("nvidia.com/gpu=", g));
    }
  }
  if (!run.workdir.empty()) {
    argv.push_back("--workdir");
    argv.push_back(run.workdir);
  }
  if (!run.entrypoint.empty()) {
    argv.push_back("--entrypoint");
    argv.push_back(nlohmann::json(run.entrypoint).dump());  // the JSON form keeps every word
  }
  argv.push_back(run.image);
  argv.insert(argv.end(), run.args.begin(), run.args.end());
  return argv;
}

std::string ContainerName(const std::string& project, const std::string& job_id, const std::string& task) {
  auto clean = [](const std::string& s) {
    std::string out;
    for (char ch : s) out.push_back(absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' ? ch : '_');
    return out;
  };
  // Project ids and job ids are already of safe characters; the hash keeps
  // names unique even if cleaning ever merged two.
  const std::string hash = common::Sha256Hex(absl::StrCat(project, "/", job_id, "/", task)).substr(0, 8);
  return absl::StrCat("mle-", clean(project), "-", clean(job_id), "-", clean(task), "-", hash);
}

std::string ContainersConf(const ContainerSettings& settings) {
  return absl::StrCat(
      "# Written by mlengined for the podman it runs (CONTAINERS_CONF); see docs/containers.md.\n"
      "[containers]\n"
      "default_ulimits = []\n"
      "init_path = \"", settings.init, "\"\n"
      "[engine]\n"
      "runtime = \"mlengine\"\n"
      "cgroup_manager = \"cgroupfs\"\n"
      "events_logger = \"file\"\n"
      "[engine.runtimes]\n"
      "mlengine = [\"", settings.runtime, "\"]\n");
}

Podman::Podman(ContainerSettings settings, std::string containers_conf)
    : settings_(std::move(settings)), containers_conf_(std::move(containers_conf)) {}

std::map<std::string, std::string> Podman::Environment() const { return {{"CONTAINERS_CONF", containers_conf_}}; }

std::vector<std::string> Podman::Command(std::initializer_list<std::string> args) const {
  std::vector<std::string> argv = {settings_.podman};
  argv.insert(argv.end(), args);
  return argv;
}

namespace {

absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                          absl::Duration timeout) {
  common::CommandOptions options;
  options.env = common::CurrentEnvironmentWith(env);
  options.timeout = timeout;
  return common::RunCommand(argv, options);
}

std::string Trimmed(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

}  // namespace

absl::Status Podman::Pull(const std::string& reference) const {
  const bool pinned = absl::StrContains(reference, "@sha256:") || absl::StartsWith(reference, "sha256:");
  if (pinned) {
    absl::MutexLock lock(&mu_);
    if (present_.count(reference)) return absl::OkStatus();
  }
  auto remember = [&] {
    if (!pinned) return;
    absl::MutexLock lock(&mu_);
    present_.insert(reference);
  };
  if (auto id = LocalImageId(reference); id.ok() && id->has_value()) {
    remember();
    return absl::OkStatus();
  }
  std::vector<std::string> argv = {settings_.podman, "pull", "--quiet"};
  if (settings_.registry_insecure) argv.push_back("--tls-verify=false");
  argv.push_back(reference);
  auto r = Run(argv, Environment(), absl::Minutes(30));
  if (!r.ok()) return absl::FailedPreconditionError(absl::StrCat("cannot run podman: ", r.status().message()));
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("podman could not pull ", reference, ": ", Trimmed(r->output)));
  }
  remember();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Podman::LocalImageId(const std::string& reference) const {
  auto r = Run(Command({"image", "inspect", "--format", "{{.Id}}", reference}), Environment(), absl::Minutes(1));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return std::optional<std::string>();
  const std::string id = Trimmed(r->output);
  if (id.size() != 64) return absl::InternalError(absl::StrCat("podman image inspect said: ", id));
  return std::optional<std::string>(absl::StrCat("sha256:", id));
}

absl::StatusOr<std::vector<std::string>> Podman::LocalImages() const {
  auto r = Run(Command({"images", "--noheading", "--format", "{{.Repository}}:{{.Tag}}"}), Environment(),
               absl::Minutes(1));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::UnavailableError(absl::StrCat("podman images: ", Trimmed(r->output)));
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(r->output, '\n', absl::SkipWhitespace())) {
    if (absl::StartsWith(line, "localhost/")) out.emplace_back(line);
  }
  return out;
}

absl::StatusOr<std::vector<StoredImage>> ParseStoredImages(absl::string_view json) {
  const nlohmann::json parsed = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return absl::InvalidArgumentError("podman images did not print a JSON list");
  auto strings = [](const nlohmann::json& image, const char* key) {
    std::vector<std::string> out;
    if (auto it = image.find(key); it != image.end() && it->is_array()) {
      for (const auto& v : *it) {
        if (v.is_string()) out.push_back(v.get<std::string>());
      }
    }
    return out;
  };
  std::vector<StoredImage> out;
  for (const auto& image : parsed) {
    if (!image.is_object() || !image.contains("Id") || !image["Id"].is_string()) {
      return absl::InvalidArgumentError("podman images printed an image without an Id");
    }
    StoredImage stored;
    stored.id = image["Id"].get<std::string>();
    if (!absl::StartsWith(stored.id, "sha256:")) stored.id = absl::StrCat("sha256:", stored.id);
    // podman 4 lists an image once for each of its names.
    if (std::any_of(out.begin(), out.end(), [&](const StoredImage& s) { return s.id == stored.id; })) continue;
    stored.names = strings(image, "Names");
    stored.repo_digests = strings(image, "RepoDigests");
    if (auto size = image.find("Size"); size != image.end() && size->is_number_integer()) {
      stored.bytes = size->get<int64_t>();
    }
    if (auto n = image.find("Containers"); n != image.end() && n->is_number_integer()) {
      stored.containers = n->get<int>();
    }
    out.push_back(std::move(stored));
  }
  return out;
}

absl::StatusOr<std::vector<StoredImage>> Podman::StoredImages() const {
  auto r = Run(Command({"images", "--format", "json"}), Environment(), absl::Minutes(1));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::UnavailableError(absl::StrCat("podman images: ", Trimmed(r->output)));
  return ParseStoredImages(r->output);
}

absl::StatusOr<bool> Podman::RemoveImage(const StoredImage& image, const std::function<bool()>& still_unused) const {
  absl::MutexLock lock(&mu_);
  if (!still_unused()) return false;
  // Without --force: podman refuses an image a container holds. Untagged
  // first: by id, podman removes an image with several names only by force.
  auto untag = Run(Command({"untag", image.id}), Environment(), absl::Minutes(1));
  if (!untag.ok()) return untag.status();
  present_.clear();  // its names may be gone, whatever rmi says: the next pull of each asks the store again
  auto r = Run(Command({"rmi", image.id}), Environment(), absl::Minutes(2));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    if (absl::StrContains(r->output, "image is in use")) return false;
    if (absl::StrContains(r->output, "image not known")) return false;  // gone already
    return absl::UnavailableError(absl::StrCat("podman rmi ", image.id, ": ", Trimmed(r->output)));
  }
  return true;
}

absl::StatusOr<int> Podman::RemoveRunContainers(const std::string& run_dir) const {
  auto r = Run(Command({"ps", "--all", "--quiet", "--filter", absl::StrCat("label=", kRunDirLabel, "=", run_dir)}),
               Environment(), absl::Minutes(1));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::UnavailableError(absl::StrCat("podman ps: ", Trimmed(r->output)));
  std::vector<std::string> ids = absl::StrSplit(r->output, '\n', absl::SkipWhitespace());
  if (ids.empty()) return 0;
  std::vector<std::string> argv = {settings_.podman, "rm", "--force", "--time", "0", "--ignore"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  auto rm = Run(argv, Environment(), absl::Minutes(2));
  if (!rm.ok()) return rm.status();
  if (rm->exit_code != 0) return absl::UnavailableError(absl::StrCat("podman rm: ", Trimmed(rm->output)));
  return static_cast<int>(ids.size());
}

}  // namespace mle::containers
