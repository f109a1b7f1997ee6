#include "executor/job_prep.h"

#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/run_layout.h"
#include "model/catalog.h"
#include "obs/log.h"
#include "rundir/replica_files.h"

namespace mle::executor {

namespace fs = std::filesystem;

bool IsContainerJob(const model::Job& job) {
  return job.training_input && model::UsesCustomContainer(*job.training_input);
}

absl::Status CheckJobRunnable(const model::Job& job, const runtime::RuntimeCatalog& runtimes, bool containers) {
  if (!job.training_input) return absl::OkStatus();
  const model::TrainingInput& t = *job.training_input;
  if (IsContainerJob(job)) {
    if (!containers) {
      return absl::FailedPreconditionError(
          "This job uses a custom container (masterConfig.imageUri), but this mlengine server runs no containers "
          "(the operator enables them with `containers:` in the server configuration; see docs/containers.md). "
          "Submit the trainer as a package (--package-path / packageUris with --runtime-version) instead.");
    }
    return absl::OkStatus();  // its images were checked at submission (containers::ImageResolver)
  }
  const runtime::Runtime* rt = runtimes.Find(t.runtime_version);
  if (rt == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Runtime version ", t.runtime_version.empty() ? "(none)" : t.runtime_version,
        " is not installed on this cluster. Installed runtime versions: ", runtimes.Describe(), "."));
  }
  if (!t.python_version.empty() && t.python_version != rt->python_version) {
    return absl::FailedPreconditionError(absl::StrCat("Runtime version ", rt->name, " provides Python ",
                                                      rt->python_version, ", not ", t.python_version,
                                                      "; set pythonVersion to ", rt->python_version, " or leave it unset."));
  }
  const bool tpu = t.scale_tier == "BASIC_TPU" || t.worker_type == model::kCloudTpuMachine;
  if (tpu && !rt->tpu_capable) {
    return absl::FailedPreconditionError(absl::StrCat("Runtime version ", rt->name,
                                                      " is not declared TPU-capable on this cluster (`tpu_capable: true` in the "
                                                      "configuration's `runtimes:`), so it cannot run a TPU job."));
  }
  return absl::OkStatus();
}

absl::StatusOr<buckets::ScopedFd> OpenPackage(const buckets::BucketStore& buckets, const std::string& uri) {
  auto missing = [&uri](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "The package ", uri, " is missing or not a plain file in bucket storage (", why,
        "). Stage it first (mlengine jobs submit training --package-path does), or check it with `mlengine "
        "storage ls`."));
  };
  auto parsed = buckets::ParseGcsUri(uri);
  if (!parsed.ok()) return missing(parsed.status().message());
  auto opened = buckets.OpenObject(parsed->bucket, parsed->path);
  if (!opened.ok()) return missing(opened.status().message());
  return std::move(opened->fd);
}

absl::StatusOr<runtime::PreparedEnvironment> PrepareJobEnvironment(const model::Job& job,
                                                                   const runtime::RuntimeCatalog& runtimes,
                                                                   runtime::PackageCache& cache,
                                                                   const buckets::BucketStore* buckets) {
  const model::TrainingInput& t = *job.training_input;
  const runtime::Runtime* rt = runtimes.Find(t.runtime_version);
  if (rt == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("Runtime version ", t.runtime_version, " is not installed."));
  }
  // Packages: objects of the bucket store, opened here once (whoever may
  // write their bucket may replace them meanwhile, never what is read).
  std::vector<buckets::ScopedFd> opened;
  std::vector<runtime::PackageFile> packages;
  if (buckets == nullptr && !t.package_uris.empty()) {
    return absl::FailedPreconditionError("This server has no bucket storage to read the job's packages from.");
  }
  for (const auto& uri : t.package_uris) {
    auto fd = OpenPackage(*buckets, uri);
    if (!fd.ok()) return fd.status();
    packages.push_back({fd->get(), fs::path(uri).filename().string()});
    opened.push_back(*std::move(fd));
  }
  return cache.Prepare(*rt, packages);
}

absl::Status PullJobImages(const model::Job& job, const containers::Podman* podman) {
  if (podman == nullptr) {
    return absl::FailedPreconditionError("This server runs no containers (no `containers:` in its configuration).");
  }
  std::set<std::string> images;
  for (const auto& [uri, pinned] : job.resolved_images) images.insert(pinned);
  for (const auto& image : images) {
    if (auto s = podman->Pull(image); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("The job's image could not be made ready: ", s.message()));
    }
  }
  return absl::OkStatus();
}

containers::ContainerRun ContainerRunOf(const model::Job& job, const runtime::ReplicaLaunch& launch,
                                        const std::string& run_dir, const std::string& replica_dir,
                                        const std::string& gcs_root, const std::map<std::string, std::string>& env,
                                        const model::Placement& placement, const ContainerSandbox* sandbox) {
  containers::ContainerRun c;
  c.name = containers::ContainerName(job.project, job.job_id, launch.task_name);
  c.image = launch.image;
  c.entrypoint = launch.entrypoint;
  c.args = launch.argv;
  // The replica's contract: every variable mlengine sets for it (not the
  // server's own environment, which the container does not inherit).
  for (const auto& [k, v] : launch.env) c.env_names.push_back(k);
  for (const char* extra : {"CLOUD_ML_HP_METRIC_FILE", "MLENGINE_RUN_DIR"}) {
    if (env.count(extra) && !launch.env.count(extra)) c.env_names.push_back(extra);
  }
  c.labels = {{containers::kRunDirLabel, run_dir}, {containers::kTaskLabel, launch.task_name}};
  if (sandbox == nullptr) {
    c.mounts = {gcs_root, replica_dir};
  } else {
    c.mounts = {replica_dir + "/work", replica_dir + "/hypertune"};
    for (const auto& b : sandbox->buckets) {
      (b.writable ? c.mounts : c.read_only_mounts).push_back(gcs_root + "/" + b.bucket);
    }
    c.user = absl::StrCat(sandbox->uid, ":", sandbox->uid);
    c.cidfile = replica_dir + "/" + kContainerIdFile;
    c.cpu_milli = sandbox->cpu_milli;
    c.memory_mib = sandbox->memory_mib;
    c.pids_limit = sandbox->pids_limit;
  }
  if (auto p = placement.replicas.find(launch.task_name); p != placement.replicas.end()) c.gpus = p->second.gpu_indices;
  return c;
}

std::map<std::string, std::string> SimulatedImageNotes(const containers::ContainerSettings& settings,
                                                       const model::Job& job) {
  std::map<std::string, std::string> out;
  for (const auto& [uri, pinned] : job.resolved_images) {
    if (std::string note = containers::SimulatedImageNote(settings, uri); !note.empty()) out[uri] = std::move(note);
  }
  return out;
}

void SetContainerEnvironment(const containers::Podman& podman, const model::Job& job,
                             const std::map<std::string, std::string>& simulated, containers::ContainerRun& run,
                             std::map<std::string, std::string>* env) {
  for (const auto& [k, v] : podman.Environment()) (*env)[k] = v;
  std::string uri = run.image;  // the imageUri the pinned image was resolved from
  for (const auto& [named, pinned] : job.resolved_images) {
    if (pinned == run.image) uri = named;
  }
  if (auto note = simulated.find(uri); note != simulated.end()) {
    (*env)["MLENGINE_SIMULATED_IMAGE"] = note->second;
    run.env_names.push_back("MLENGINE_SIMULATED_IMAGE");
  }
  if (podman.settings().gpu_devices == "cdi" && !run.gpus.empty()) {
    std::vector<std::string> inside;
    for (size_t i = 0; i < run.gpus.size(); ++i) inside.push_back(std::to_string(i));
    (*env)["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(inside, ",");
  }
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<rundir::ReplicaExit> ReadReplicaExit(const std::string& path) {
  auto exit = rundir::ReadExit(path);
  if (!exit.ok()) {
    obs::Log("executor").warn("{}", std::string(exit.status().message()));
    return std::nullopt;
  }
  return *exit;
}

// The last `n` lines of a replica log, without their timestamps.
std::vector<std::string> LogTail(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 16384);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (from > 0 && !lines.empty()) lines.erase(lines.begin());  // partial first line
  std::vector<std::string> out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out.push_back(rundir::ParseLogLine(lines[i]).text);
  }
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = sigdescr_np(sig);
  return absl::StrCat(sig, " (", abbrev ? absl::StrCat("SIG", abbrev) : "?", desc ? absl::StrCat(": ", desc) : "",
                      ")");
}

std::string OutOfMemoryMessage(const std::string& task, int64_t limit_mib, const std::string& killed) {
  return absl::StrCat("The replica ", task, " ran out of memory: the kernel killed ",
                      killed.empty() ? "it" : killed, " at its memory limit",
                      limit_mib > 0 ? absl::StrCat(" of ", limit_mib, " MiB") : std::string(),
                      ". Use less memory, or ask for a machine type with more (the operator's configuration says "
                      "what each one gets).");
}

std::optional<std::string> ContainerMemoryFailure(const std::string& replica_dir, const std::string& task,
                                                  int64_t limit_mib,
                                                  const std::function<std::vector<std::string>()>& read_kernel_log) {
  const std::string id(absl::StripAsciiWhitespace(ReadFileOrEmpty(replica_dir + "/" + kContainerIdFile)));
  // A container id is 64 hex digits; anything shorter could match another's path.
  if (id.size() < 32) return std::nullopt;
  const std::optional<sandbox::OomKill> kill = sandbox::FindOomKill(read_kernel_log(), id);
  if (!kill) return std::nullopt;
  const std::string what =
      kill->task.empty() ? std::string() : absl::StrCat("its process ", kill->task, " (pid ", kill->pid, ")");
  return OutOfMemoryMessage(task, limit_mib, what);
}

std::optional<PythonError> LastPythonError(const std::vector<std::string>& lines) {
  size_t start = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    if (absl::StripTrailingAsciiWhitespace(lines[i]) == "Traceback (most recent call last):") {
      start = i;
      break;
    }
  }
  if (start == lines.size()) return std::nullopt;
  PythonError error;
  for (size_t i = start + 1; i < lines.size(); ++i) {
    absl::string_view line = absl::StripTrailingAsciiWhitespace(lines[i]);
    if (absl::StartsWith(line, "  File \"")) {
      // '  File "/env/lib/python3.11/site-packages/trainer/task.py", line 12, in train'
      absl::string_view frame = absl::StripLeadingAsciiWhitespace(line);
      frame.remove_prefix(6);  // File "
      const size_t quote = frame.find('"');
      if (quote == absl::string_view::npos) continue;
      absl::string_view path = frame.substr(0, quote);
      if (const size_t sp = path.rfind("/site-packages/"); sp != absl::string_view::npos) {
        path.remove_prefix(sp + std::string_view("/site-packages/").size());
      }
      error.frame = absl::StrCat(path, frame.substr(quote + 1));
      continue;
    }
    if (line.empty() || absl::StartsWith(line, " ")) continue;  // the frame's source line, ^^^ markers
    error.exception = std::string(line);
    break;
  }
  if (error.exception.empty()) return std::nullopt;
  return error;
}

std::string DescribeReplicaEnd(const std::string& job_dir, const std::string& task,
                               const std::optional<rundir::ReplicaExit>& exit) {
  // A node's launcher found the replica killed at its memory limit.
  if (std::string oom = ReadFileOrEmpty(common::ReplicaDir(job_dir, task) + "/" + kMemoryNote); !oom.empty()) {
    return oom;
  }
  std::string what;
  if (!exit) {
    what = "was killed before it could record how it ended";
  } else if (exit->signaled) {
    what = absl::StrCat("was terminated by signal ", SignalName(exit->value));
  } else {
    what = exit->value == 127 ? absl::StrCat("could not start its program (exit status 127)")
                              : absl::StrCat("exited with a non-zero status of ", exit->value);
  }
  // The trainer's own error first, when it died of an exception.
  constexpr size_t kShown = 8, kSearched = 80;
  std::vector<std::string> tail = LogTail(common::ReplicaLogPath(job_dir, task), kSearched);
  if (auto error = LastPythonError(tail); error && exit && !exit->Succeeded()) {
    absl::StrAppend(&what, ": ", error->exception, error->frame.empty() ? "" : absl::StrCat(" (", error->frame, ")"));
  }
  std::string message = absl::StrCat("The replica ", task, " ", what, ".");
  if (tail.size() > kShown) tail.erase(tail.begin(), tail.end() - kShown);
  if (!tail.empty()) absl::StrAppend(&message, " Last lines of its log:\n", absl::StrJoin(tail, "\n"));
  return message;
}

}  // namespace mle::executor
