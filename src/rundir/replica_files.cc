#include "rundir/replica_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rundir/file_io.h"

namespace mle::rundir {
namespace {

constexpr absl::string_view kManifestHeader = "mlengine-run 1";

absl::Status Corrupt(absl::string_view what, absl::string_view detail) {
  return absl::DataLossError(absl::StrCat(what, " is damaged: ", detail));
}

// "0,1,2" or "-" (none); false when malformed.
bool ParseGpus(absl::string_view text, std::vector<int>* gpus) {
  if (text == "-") return true;
  for (absl::string_view g : absl::StrSplit(text, ',')) {
    int idx = 0;
    if (!absl::SimpleAtoi(g, &idx) || idx < 0) return false;
    gpus->push_back(idx);
  }
  return true;
}

bool ParsePid(absl::string_view text, pid_t* pid) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0 || value > 0x3fffffff) return false;
  *pid = static_cast<pid_t>(value);
  return true;
}

}  // namespace

std::string ManifestPath(const std::string& run_dir) { return run_dir + "/replicas"; }

// mlengine-run 1
// stage starting|started
// tpu <host> <0|1>                       one per TPU host
// uid <uid>                              sandboxed: the job's identity
// replica <task> <host> <gpus|-> <pid>   one per replica
// Appended once every replica runs (MarkManifestStarted), in one write:
// pid <task> <pid>                       one per replica: its shim's pid
// stage started
std::string FormatManifest(const RunManifest& m) {
  std::string out = absl::StrCat(kManifestHeader, "\nstage ",
                                 m.stage == RunManifest::Stage::kStarted ? "started" : "starting", "\n");
  for (const auto& h : m.tpu_hosts) absl::StrAppend(&out, "tpu ", h, " ", m.tpu_simulated ? 1 : 0, "\n");
  if (m.uid != 0) absl::StrAppend(&out, "uid ", m.uid, "\n");
  for (const auto& r : m.replicas) {
    absl::StrAppend(&out, "replica ", r.task, " ", r.host, " ", r.gpus.empty() ? "-" : absl::StrJoin(r.gpus, ","),
                    " ", r.pid, "\n");
  }
  return out;
}

// The manifest of mlengine before its version line: "tpu HOST 0|1",
// "replica TASK PID HOST GPUS" (appended as replicas were spawned) and a last
// "started". Read so that jobs running across an upgrade are adopted.
absl::StatusOr<RunManifest> ParseLegacyManifest(const std::vector<absl::string_view>& lines) {
  RunManifest m;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    if (f.size() == 1 && f[0] == "started") {
      m.stage = RunManifest::Stage::kStarted;
    } else if (f.size() == 3 && f[0] == "tpu") {
      m.tpu_hosts.emplace_back(f[1]);
      m.tpu_simulated = f[2] == "1";
    } else if (f.size() == 5 && f[0] == "replica") {
      ManifestReplica r;
      r.task = std::string(f[1]);
      if (!ParsePid(f[2], &r.pid)) return Corrupt("the run manifest", absl::StrCat("line ", i + 1, ": bad pid"));
      r.host = std::string(f[3]);
      if (!ParseGpus(f[4], &r.gpus)) {
        return Corrupt("the run manifest", absl::StrCat("line ", i + 1, ": bad GPU list"));
      }
      m.replicas.push_back(std::move(r));
    } else {
      return Corrupt("the run manifest", absl::StrCat("line ", i + 1, " (\"", lines[i], "\"): not a manifest line"));
    }
  }
  return m;
}

absl::StatusOr<RunManifest> ParseManifest(absl::string_view text) {
  RunManifest m;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (!lines.empty() && (absl::StartsWith(lines[0], "replica ") || absl::StartsWith(lines[0], "tpu "))) {
    return ParseLegacyManifest(lines);
  }
  if (lines.empty() || lines[0] != kManifestHeader) {
    return Corrupt("the run manifest", absl::StrCat("it does not start with \"", kManifestHeader, "\""));
  }
  bool have_stage = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    const std::string where = absl::StrCat("line ", i + 1, " (\"", lines[i], "\")");
    if (f.size() == 2 && f[0] == "stage" && (f[1] == "starting" || f[1] == "started")) {
      m.stage = f[1] == "started" ? RunManifest::Stage::kStarted : RunManifest::Stage::kStarting;
      have_stage = true;
    } else if (f.size() == 3 && f[0] == "tpu" && (f[2] == "0" || f[2] == "1")) {
      m.tpu_hosts.emplace_back(f[1]);
      m.tpu_simulated = f[2] == "1";
    } else if (f.size() == 2 && f[0] == "uid") {
      if (!absl::SimpleAtoi(f[1], &m.uid) || m.uid == 0) return Corrupt("the run manifest", where + ": bad uid");
    } else if (f.size() == 5 && f[0] == "replica") {
      ManifestReplica r;
      r.task = std::string(f[1]);
      r.host = std::string(f[2]);
      if (!ParseGpus(f[3], &r.gpus)) return Corrupt("the run manifest", where + ": bad GPU list");
      if (!ParsePid(f[4], &r.pid)) return Corrupt("the run manifest", where + ": bad pid");
      m.replicas.push_back(std::move(r));
    } else if (f.size() == 3 && f[0] == "pid") {
      auto r = std::find_if(m.replicas.begin(), m.replicas.end(),
                            [&](const ManifestReplica& x) { return x.task == f[1]; });
      if (r == m.replicas.end()) return Corrupt("the run manifest", where + ": no such replica");
      if (!ParsePid(f[2], &r->pid)) return Corrupt("the run manifest", where + ": bad pid");
    } else {
      return Corrupt("the run manifest", where + ": not a manifest line");
    }
  }
  if (!have_stage) return Corrupt("the run manifest", "it has no stage line");
  return m;
}

absl::Status WriteManifest(const std::string& run_dir, const RunManifest& manifest) {
  return WriteFileAtomically(ManifestPath(run_dir), FormatManifest(manifest), 0644, Durability::kProcessCrash);
}

absl::Status MarkManifestStarted(const std::string& run_dir, const std::map<std::string, pid_t>& pids) {
  std::string text;
  for (const auto& [task, pid] : pids) absl::StrAppend(&text, "pid ", task, " ", pid, "\n");
  absl::StrAppend(&text, "stage started\n");
  const std::string path = ManifestPath(run_dir);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::UnavailableError(absl::StrCat("cannot append to ", path, ": ", n < 0 ? std::strerror(err) : "short write"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<RunManifest>> ReadManifest(const std::string& run_dir) {
  auto text = ReadFile(ManifestPath(run_dir));
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  auto m = ParseManifest(*text);
  if (!m.ok()) return absl::DataLossError(absl::StrCat(ManifestPath(run_dir), ": ", m.status().message()));
  return std::optional<RunManifest>(*std::move(m));
}

absl::Status WriteRunEnvironment(const std::string& run_dir, const std::string& environment_dir) {
  return WriteFileAtomically(run_dir + "/environment", environment_dir + "\n", 0644, Durability::kProcessCrash);
}

absl::StatusOr<std::optional<std::string>> ReadRunEnvironment(const std::string& run_dir) {
  auto text = ReadFile(run_dir + "/environment");
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  const absl::string_view dir = absl::StripAsciiWhitespace(*text);
  if (dir.empty() || dir.front() != '/') {
    return absl::DataLossError(absl::StrCat(run_dir, "/environment holds no directory"));
  }
  return std::optional<std::string>(dir);
}

std::string FormatExit(const ReplicaExit& e) { return absl::StrCat(e.signaled ? "signal " : "exit ", e.value, "\n"); }

absl::StatusOr<ReplicaExit> ParseExit(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  ReplicaExit e;
  absl::string_view number;
  if (absl::ConsumePrefix(&text, "exit ")) {
    number = text;
  } else if (absl::ConsumePrefix(&text, "signal ")) {
    e.signaled = true;
    number = text;
  } else {
    return Corrupt("the exit record", absl::StrCat("\"", text, "\" is neither \"exit N\" nor \"signal N\""));
  }
  if (!absl::SimpleAtoi(number, &e.value) || e.value < 0 || e.value > 255) {
    return Corrupt("the exit record", absl::StrCat("\"", number, "\" is not a status"));
  }
  return e;
}

absl::StatusOr<std::optional<ReplicaExit>> ReadExit(const std::string& exit_path) {
  auto text = ReadFile(exit_path);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  auto e = ParseExit(*text);
  if (!e.ok()) return absl::DataLossError(absl::StrCat(exit_path, ": ", e.status().message()));
  return std::optional<ReplicaExit>(*e);
}

absl::Status WriteExit(const std::string& exit_path, const ReplicaExit& exit) {
  return WriteFileAtomically(exit_path, FormatExit(exit));
}

absl::Status AppendLogLine(const std::string& log_path, bool is_stderr, absl::string_view text) {
  std::string line = absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()), "\t",
                                  is_stderr ? "E" : "O", "\t");
  for (char c : text) line.push_back(c == '\n' || c == '\r' ? ' ' : c);
  line.push_back('\n');
  FILE* f = std::fopen(log_path.c_str(), "a");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno)));
  const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size();
  if (std::fclose(f) != 0 || !ok) return absl::UnavailableError(absl::StrCat("cannot write ", log_path));
  return absl::OkStatus();
}

LogLine ParseLogLine(absl::string_view line) {
  LogLine out;
  std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits('\t', 2));
  if (f.size() == 3 && (f[1] == "O" || f[1] == "E")) {
    out.time = std::string(f[0]);
    out.is_stderr = f[1] == "E";
    out.text = std::string(f[2]);
  } else {
    out.text = std::string(line);
  }
  return out;
}

namespace {

// Strings as hypertune writes them; plain numbers from other writers too.
bool MetricNumber(const nlohmann::json& v, double* d) {
  if (v.is_number()) {
    *d = v.get<double>();
    return true;
  }
  return v.is_string() && absl::SimpleAtod(v.get<std::string>(), d);
}

// The report of `value` on the line `o`; nullopt when it is not a finite number.
std::optional<MetricReport> ReportOf(const nlohmann::json& o, const nlohmann::json& value) {
  MetricReport r;
  if (!MetricNumber(value, &r.value) || !std::isfinite(r.value)) return std::nullopt;
  if (auto step = o.find("global_step"); step != o.end()) {
    double s = 0;
    if (MetricNumber(*step, &s) && std::isfinite(s)) r.step = static_cast<int64_t>(s);
  }
  if (auto ts = o.find("timestamp"); ts != o.end()) MetricNumber(*ts, &r.timestamp);
  return r;
}

// The keys of a report line that are not metric tags.
bool IsReportField(const std::string& key) {
  return key == "global_step" || key == "timestamp" || key == "trial" || key == "checkpoint_path";
}

}  // namespace

std::vector<MetricReport> ParseMetricReports(absl::string_view text, const std::string& tag) {
  std::vector<MetricReport> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const nlohmann::json o = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!o.is_object()) continue;
    auto value = o.find(tag);
    if (value == o.end()) continue;
    if (auto r = ReportOf(o, *value)) out.push_back(*r);
  }
  return out;
}

std::map<std::string, std::vector<MetricReport>> ParseAllMetricReports(absl::string_view text) {
  std::map<std::string, std::vector<MetricReport>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const nlohmann::json o = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!o.is_object()) continue;
    for (const auto& [key, value] : o.items()) {
      if (IsReportField(key)) continue;
      if (auto r = ReportOf(o, value)) out[key].push_back(*r);
    }
  }
  return out;
}

// A replica's hypertune file is its own to write (sandboxed: its identity
// owns the directory): read as a job's file. It keeps the last 100 reports.
constexpr size_t kMaxMetricFileBytes = size_t{16} << 20;

absl::StatusOr<std::vector<MetricReport>> ReadMetricReports(const std::string& path, const std::string& tag) {
  auto text = ReadJobFile(path, kMaxMetricFileBytes);
  if (absl::IsNotFound(text.status())) return std::vector<MetricReport>{};
  if (!text.ok()) return text.status();
  return ParseMetricReports(*text, tag);
}

absl::StatusOr<std::map<std::string, std::vector<MetricReport>>> ReadAllMetricReports(const std::string& path) {
  auto text = ReadJobFile(path, kMaxMetricFileBytes);
  if (absl::IsNotFound(text.status())) return std::map<std::string, std::vector<MetricReport>>{};
  if (!text.ok()) return text.status();
  return ParseAllMetricReports(*text);
}

}  // namespace mle::rundir
