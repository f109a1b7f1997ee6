#include "logs/log_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/run_layout.h"
#include "common/status.h"
#include "rundir/replica_files.h"

namespace mle::logs {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxReadBytes = 4 << 20;  // per replica per page

using Offsets = std::map<std::string, int64_t>;

std::string EncodeToken(const Offsets& offsets) {
  std::vector<std::string> parts;
  for (const auto& [task, off] : offsets) parts.push_back(absl::StrCat(task, "=", off));
  return absl::WebSafeBase64Escape(absl::StrJoin(parts, ";"));
}

absl::StatusOr<Offsets> DecodeToken(const std::string& token) {
  Offsets out;
  if (token.empty()) return out;
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) {
    return common::InvalidArgumentWithViolations("Invalid page token.",
                                                 {{"pageToken", "is not a token returned by this logs endpoint"}});
  }
  for (absl::string_view part : absl::StrSplit(raw, ';', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t off = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &off) || off < 0) {
      return common::InvalidArgumentWithViolations("Invalid page token.",
                                                   {{"pageToken", "is not a token returned by this logs endpoint"}});
    }
    out[kv.first] = off;
  }
  return out;
}

std::vector<std::string> Tasks(const std::string& job_dir) {
  std::vector<std::string> tasks;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(job_dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "log")) tasks.push_back(e.path().filename().string());
  }
  std::sort(tasks.begin(), tasks.end());
  return tasks;
}

// A log's key in a page token: its task, after its trial for a tuning job
// ("3/master-replica-0"; task names have no '/').
std::string OffsetKey(const LogSource& source, const std::string& task) {
  std::string key = source.trial_id.empty() ? task : absl::StrCat(source.trial_id, "/", task);
  if (source.attempt > 1) key = absl::StrCat("@", source.attempt, "/", key);
  return key;
}

}  // namespace

absl::StatusOr<LogPage> LogReader::Read(const std::string& project, const std::string& job_id,
                                        const std::string& page_token, const std::string& task_name,
                                        size_t max_entries) const {
  return Read(project, std::vector<LogSource>{{job_id, ""}}, page_token, task_name, max_entries);
}

std::string LogReader::EndToken(const std::string& project, const std::string& job_id) const {
  return EndToken(project, std::vector<LogSource>{{job_id, ""}});
}

absl::StatusOr<LogPage> LogReader::Read(const std::string& project, const std::vector<LogSource>& sources,
                                        const std::string& page_token, const std::string& task_name,
                                        size_t max_entries) const {
  auto offsets = DecodeToken(page_token);
  if (!offsets.ok()) return offsets.status();

  struct Pending {
    LogEntry entry;
    std::string key;  // its log's key in the token
    int64_t end_offset;
  };
  std::vector<Pending> pending;
  bool all_read = true;
  for (const auto& source : sources) {
    const std::string job_dir = common::JobRunDir(runs_dir_, project, source.job_id, source.attempt);
    for (const auto& task : Tasks(job_dir)) {
      if (!task_name.empty() && task != task_name) continue;
      const std::string key = OffsetKey(source, task);
      std::ifstream in(common::ReplicaLogPath(job_dir, task), std::ios::binary);
      if (!in) continue;
      int64_t offset = (*offsets)[key];
      in.seekg(0, std::ios::end);
      const int64_t size = in.tellg();
      if (offset > size) offset = size;
      const int64_t want = std::min<int64_t>(size - offset, kMaxReadBytes);
      std::string chunk(static_cast<size_t>(want), '\0');
      in.seekg(offset);
      in.read(chunk.data(), want);
      // Only complete lines; a partial last line waits for its newline.
      size_t start = 0;
      for (size_t nl; (nl = chunk.find('\n', start)) != std::string::npos; start = nl + 1) {
        rundir::LogLine line = rundir::ParseLogLine(absl::string_view(chunk.data() + start, nl - start));
        Pending p;
        p.entry.task_name = task;
        p.entry.trial_id = source.trial_id;
        p.entry.timestamp = std::move(line.time);
        p.entry.is_stderr = line.is_stderr;
        p.entry.message = std::move(line.text);
        p.key = key;
        p.end_offset = offset + static_cast<int64_t>(nl + 1);
        pending.push_back(std::move(p));
      }
      if (offset + static_cast<int64_t>(start) < size) all_read = false;
    }
  }
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.entry.timestamp < b.entry.timestamp; });
  LogPage page;
  Offsets next = *offsets;
  for (auto& p : pending) {
    if (page.entries.size() == max_entries) {
      all_read = false;
      break;
    }
    next[p.key] = p.end_offset;
    page.entries.push_back(std::move(p.entry));
  }
  page.next_page_token = EncodeToken(next);
  page.at_end = all_read;
  return page;
}

std::string LogReader::EndToken(const std::string& project, const std::vector<LogSource>& sources) const {
  Offsets offsets;
  for (const auto& source : sources) {
    const std::string job_dir = common::JobRunDir(runs_dir_, project, source.job_id, source.attempt);
    for (const auto& task : Tasks(job_dir)) {
      std::error_code ec;
      auto size = fs::file_size(common::ReplicaLogPath(job_dir, task), ec);
      offsets[OffsetKey(source, task)] = ec ? 0 : static_cast<int64_t>(size);
    }
  }
  return EncodeToken(offsets);
}

}  // namespace mle::logs
