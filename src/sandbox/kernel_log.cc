#include "sandbox/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace mle::sandbox {
namespace {

constexpr std::string_view kOomKill = "oom-kill:";
constexpr size_t kRecordBytes = 8192;  // a /dev/kmsg record is at most about 1 KiB; each read returns one

}  // namespace

std::optional<OomKill> FindOomKill(const std::vector<std::string>& messages, std::string_view cgroup_part) {
  if (cgroup_part.empty()) return std::nullopt;
  std::optional<OomKill> found;
  for (const std::string& message : messages) {
    const size_t at = message.find(kOomKill);
    if (at == std::string::npos) continue;
    OomKill kill;
    std::string task_memcg;
    for (absl::string_view field : absl::StrSplit(absl::string_view(message).substr(at + kOomKill.size()), ',')) {
      const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      const auto& [key, value] = kv;
      if (key == "task") kill.task = std::string(value);
      if (key == "pid" && !absl::SimpleAtoi(value, &kill.pid)) kill.pid = 0;
      if (key == "oom_memcg") kill.oom_memcg = std::string(value);
      if (key == "task_memcg") task_memcg = std::string(value);
    }
    if (kill.oom_memcg.find(cgroup_part) != std::string::npos || task_memcg.find(cgroup_part) != std::string::npos) {
      found = std::move(kill);
    }
  }
  return found;
}

std::vector<std::string> ReadKernelLog() {
  std::vector<std::string> out;
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return out;
  // From the oldest record the buffer holds (a new reader starts there too;
  // SEEK_DATA says so explicitly).
  (void)::lseek(fd, 0, SEEK_DATA);
  std::string record(kRecordBytes, '\0');
  for (;;) {
    const ssize_t n = ::read(fd, record.data(), record.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;  // records overwritten under us: the read goes on at the next
    if (n <= 0) break;                      // EAGAIN: no more records
    // "PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;MESSAGE\n" then " KEY=VALUE" lines.
    absl::string_view text(record.data(), static_cast<size_t>(n));
    const size_t semi = text.find(';');
    if (semi == absl::string_view::npos) continue;
    text.remove_prefix(semi + 1);
    out.emplace_back(text.substr(0, text.find('\n')));
  }
  ::close(fd);
  return out;
}

}  // namespace mle::sandbox
