#include "executor/warm_pool.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "obs/log.h"
#include "rundir/file_io.h"

namespace mle::executor {
namespace {

// Connects to a pooled shim's socket; -1 when it does not listen (yet).
int Connect(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Ended(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

WarmPool::WarmPool(WarmPoolOptions options) : options_(std::move(options)) {}

WarmPool::~WarmPool() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [runtime, entries] : idle_) {
    for (const auto& e : entries) ::kill(e.pid, SIGTERM);  // a pooled shim ends its interpreter and exits 0
    for (const auto& e : entries) {
      int status = 0;
      ::waitpid(e.pid, &status, 0);
    }
  }
}

void WarmPool::Fill() {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto s = rundir::CreateDirectories(options_.dir); !s.ok()) {
    obs::Log("warm").error("cannot create {}: {}", options_.dir, s.ToString());
    return;
  }
  for (const auto& [runtime, spec] : options_.runtimes) {
    auto& entries = idle_[runtime];
    std::erase_if(entries, [](const Entry& e) { return Ended(e.pid); });
    while (static_cast<int>(entries.size()) < spec.size) {
      Entry e;
      e.socket = absl::StrCat(options_.dir, "/", runtime, "-", ::getpid(), "-", next_++, ".sock");
      common::SpawnOptions spawn;
      spawn.argv = {options_.shim, "--pool", e.socket, "--"};
      spawn.argv.insert(spawn.argv.end(), spec.program.begin(), spec.program.end());
      spawn.env = options_.env;
      spawn.group = common::ProcessGroup::kNewSession;
      auto child = common::Spawn(spawn);
      if (!child.ok()) {
        obs::Log("warm").error("cannot start a warm {} interpreter: {}", runtime, child.status().ToString());
        break;
      }
      e.pid = child->Release();  // reaped here (Fill, the destructor) or, once claimed, by the caller
      entries.push_back(std::move(e));
    }
  }
}

absl::StatusOr<pid_t> WarmPool::Claim(const std::string& runtime, const WarmClaim& claim) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!options_.runtimes.count(runtime)) return absl::NotFoundError(absl::StrCat("no warm pool for ", runtime));
  auto& entries = idle_[runtime];
  const std::string text = absl::StrCat("log ", claim.log_path, "\nexit ", claim.exit_path, "\ngrace ",
                                        claim.grace_seconds, "\nspec ", claim.spec, "\n",
                                        claim.note.empty() ? "" : absl::StrCat("note ", claim.note, "\n"), "\n");
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    const int fd = Connect(it->socket);
    if (fd < 0) continue;  // still importing
    bool sent = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
    char answer[128] = {};
    const ssize_t got = sent ? ::read(fd, answer, sizeof(answer) - 1) : -1;
    ::close(fd);
    if (got >= 3 && std::strncmp(answer, "ok\n", 3) == 0) {
      const pid_t pid = it->pid;
      entries.erase(it);
      return pid;
    }
    return absl::InternalError(absl::StrCat("the warm interpreter refused the replica: ", answer));
  }
  return absl::UnavailableError(absl::StrCat("no warm ", runtime, " interpreter is ready"));
}

void WarmPool::RemoveLeftovers() {
  std::error_code ec;
  std::vector<std::string> sockets;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (e.path().extension() == ".sock") sockets.push_back(e.path().string());
  }
  if (sockets.empty()) return;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid <= 1) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("mlengine-replica --pool ") == std::string::npos) continue;
    for (const auto& s : sockets) {
      if (cmdline.find(" --pool " + s + " ") != std::string::npos) ::kill(pid, SIGTERM);  // ends its interpreter too
    }
  }
  for (const auto& s : sockets) std::filesystem::remove(s, ec);
}

int WarmPool::Pooled(const std::string& runtime) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = idle_.find(runtime);
  return it == idle_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace mle::executor
