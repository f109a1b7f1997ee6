#include "rundir/slurm_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/run_layout.h"
#include "rundir/file_io.h"

namespace mle::rundir {
namespace {

namespace fs = std::filesystem;

// A codec's phrase about a document ("has no ...") with the file in front.
absl::Status AboutFile(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(path, " ", s.message()));
}

// The file's contents; std::nullopt when it does not exist.
absl::StatusOr<std::optional<std::string>> ReadIfPresent(const std::string& path) {
  auto text = ReadFile(path);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  return *std::move(text);
}

// Removes `path` durably; OK when it is already gone.
absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("cannot remove ", path, ": ", std::strerror(errno)));
  }
  return SyncDirectory(fs::path(path).parent_path().string());
}

std::vector<std::string> Lines(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return out;
}

}  // namespace

std::string LaunchJobPath(const std::string& run_dir) { return run_dir + "/job.json"; }
std::string SlurmTasksPath(const std::string& run_dir) { return run_dir + "/tasks"; }
std::string BatchScriptPath(const std::string& run_dir) { return run_dir + "/batch.sh"; }
std::string SubmittingPath(const std::string& run_dir) { return run_dir + "/submitting"; }
std::string SlurmJobIdPath(const std::string& run_dir) { return run_dir + "/slurm_job_id"; }
std::string SlurmOutputPattern(const std::string& run_dir) { return run_dir + "/slurm-%j.out"; }
std::string SlurmOutputPath(const std::string& run_dir, int64_t slurm_job_id) {
  return absl::StrCat(run_dir, "/slurm-", slurm_job_id, ".out");
}
std::string TaskLaunchPath(const std::string& run_dir, const std::string& task) {
  return common::ReplicaDir(run_dir, task) + "/launch";
}
std::string SlurmPlacementPath(const std::string& run_dir) { return run_dir + "/placement"; }
std::string OutcomePath(const std::string& run_dir) { return run_dir + "/outcome"; }

absl::Status ClearRunDirectory(const std::string& run_dir) {
  std::error_code ec;
  fs::remove_all(run_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot remove the earlier run in ", run_dir, ": ", ec.message()));
  return CreateSpreadDirectory(run_dir);
}

absl::Status WriteLaunchJob(const std::string& run_dir, const codec::LaunchJob& job) {
  return WriteFileAtomically(LaunchJobPath(run_dir), codec::EncodeLaunchJob(job));
}

absl::StatusOr<codec::LaunchJob> ReadLaunchJob(const std::string& run_dir) {
  const std::string path = LaunchJobPath(run_dir);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto job = codec::DecodeLaunchJob(*text);
  if (!job.ok()) return AboutFile(path, job.status());
  return job;
}

absl::Status WriteSlurmTasks(const std::string& run_dir, const std::vector<std::string>& tasks) {
  return WriteFileAtomically(SlurmTasksPath(run_dir), tasks.empty() ? "" : absl::StrJoin(tasks, "\n") + "\n");
}

absl::StatusOr<std::vector<std::string>> ReadSlurmTasks(const std::string& run_dir) {
  const std::string path = SlurmTasksPath(run_dir);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::string> tasks = Lines(*text);
  for (const auto& t : tasks) {
    if (t.find_first_of(" \t/") != std::string::npos) {
      return absl::DataLossError(absl::StrCat(path, " lists \"", t, "\", which is not a task name"));
    }
  }
  return tasks;
}

absl::Status WriteBatchScript(const std::string& run_dir, const std::string& script) {
  return WriteFileAtomically(BatchScriptPath(run_dir), script);
}

absl::Status WriteSubmittingMarker(const std::string& run_dir) {
  return WriteFileAtomically(SubmittingPath(run_dir), "");
}

absl::StatusOr<bool> HasSubmittingMarker(const std::string& run_dir) { return FileExists(SubmittingPath(run_dir)); }

absl::Status WriteSlurmJobId(const std::string& run_dir, int64_t slurm_job_id) {
  if (slurm_job_id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("not a Slurm job id: ", slurm_job_id, " (for ", run_dir, ")"));
  }
  return WriteFileAtomically(SlurmJobIdPath(run_dir), absl::StrCat(slurm_job_id, "\n"));
}

absl::StatusOr<std::optional<int64_t>> ReadSlurmJobId(const std::string& run_dir) {
  const std::string path = SlurmJobIdPath(run_dir);
  auto text = ReadIfPresent(path);
  if (!text.ok()) return text.status();
  if (!text->has_value()) return std::nullopt;
  int64_t id = 0;
  const absl::string_view digits = absl::StripAsciiWhitespace(**text);
  if (!absl::SimpleAtoi(digits, &id) || id <= 0) {
    return absl::DataLossError(absl::StrCat(path, " holds \"", digits.substr(0, 40), "\", not a Slurm job id"));
  }
  return id;
}

absl::Status WriteTaskLaunch(const std::string& run_dir, const std::string& task, const codec::TaskLaunch& launch) {
  if (auto s = CreateDirectories(common::ReplicaDir(run_dir, task), Durability::kProcessCrash); !s.ok()) return s;
  return WriteFileAtomically(TaskLaunchPath(run_dir, task), codec::EncodeTaskLaunch(launch), 0644,
                             Durability::kProcessCrash);
}

absl::StatusOr<codec::TaskLaunch> ReadTaskLaunch(const std::string& run_dir, const std::string& task) {
  const std::string path = TaskLaunchPath(run_dir, task);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto launch = codec::DecodeTaskLaunch(*text);
  if (!launch.ok()) return AboutFile(path, launch.status());
  return launch;
}

absl::Status WriteSlurmPlacement(const std::string& run_dir, const std::map<std::string, std::string>& node_of_task) {
  std::string text;
  for (const auto& [task, node] : node_of_task) absl::StrAppend(&text, task, " ", node, "\n");
  return WriteFileAtomically(SlurmPlacementPath(run_dir), text, 0644, Durability::kProcessCrash);
}

absl::StatusOr<std::map<std::string, std::string>> ReadSlurmPlacement(const std::string& run_dir) {
  const std::string path = SlurmPlacementPath(run_dir);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::map<std::string, std::string> out;
  for (const std::string& line : Lines(*text)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() != 2) {
      return absl::DataLossError(absl::StrCat(path, " has the line \"", line, "\"; expected \"<task> <node>\""));
    }
    out[parts[0]] = parts[1];
  }
  return out;
}

absl::Status WriteRunOutcome(const std::string& run_dir, const RunOutcome& outcome) {
  return WriteFileAtomically(OutcomePath(run_dir),
                             absl::StrCat(outcome.succeeded ? "SUCCEEDED" : "FAILED", "\n", outcome.message, "\n"),
                             0644, Durability::kProcessCrash);
}

absl::StatusOr<std::optional<RunOutcome>> ReadRunOutcome(const std::string& run_dir) {
  const std::string path = OutcomePath(run_dir);
  auto text = ReadIfPresent(path);
  if (!text.ok()) return text.status();
  if (!text->has_value()) return std::nullopt;
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(**text, absl::MaxSplits('\n', 1));
  RunOutcome out;
  if (parts.first == "SUCCEEDED") {
    out.succeeded = true;
  } else if (parts.first != "FAILED") {
    return absl::DataLossError(absl::StrCat(path, " starts with \"", parts.first.substr(0, 40),
                                            "\"; expected SUCCEEDED or FAILED"));
  }
  out.message = std::string(absl::StripTrailingAsciiWhitespace(parts.second));
  return out;
}

absl::Status SetOutcomeAside(const std::string& run_dir, int run) {
  const std::string path = OutcomePath(run_dir);
  const std::string aside = absl::StrCat(path, ".run", run);
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("cannot move ", path, " to ", aside, ": ", std::strerror(errno)));
  }
  return SyncDirectory(run_dir);
}

absl::Status RemoveEarlierRunResults(const std::string& run_dir, const std::vector<std::string>& tasks) {
  if (auto s = RemoveFile(OutcomePath(run_dir)); !s.ok()) return s;
  for (const auto& task : tasks) {
    if (auto s = RemoveFile(common::ReplicaExitPath(run_dir, task)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace mle::rundir
