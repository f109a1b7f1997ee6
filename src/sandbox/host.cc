#include "sandbox/host.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sandbox/enter.h"

namespace mle::sandbox {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSystemDirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc"};
constexpr const char* kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"};

}  // namespace

HostLayout DetectHostLayout(const std::vector<std::string>& extra_read_only) {
  HostLayout layout;
  std::error_code ec;
  for (const char* dir : kSystemDirs) {
    const fs::path p(dir);
    if (fs::is_symlink(p, ec)) {
      layout.links.emplace_back(dir, fs::read_symlink(p, ec).string());
    } else if (fs::is_directory(p, ec)) {
      layout.read_only.push_back(dir);
    }
  }
  for (const auto& extra : extra_read_only) {
    const fs::path canonical = fs::canonical(extra, ec);
    if (ec || !fs::is_directory(canonical, ec)) continue;
    bool covered = false;
    for (const auto& dir : layout.read_only) {
      const std::string c = canonical.string();
      covered = covered || c == dir || c.rfind(dir + "/", 0) == 0;
    }
    if (!covered) layout.read_only.push_back(canonical.string());
  }
  for (const char* dev : kDevices) {
    if (fs::exists(dev, ec)) layout.devices.push_back(dev);
  }
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0 && !e.is_directory(ec)) {
      layout.devices.push_back(e.path().string());
    }
  }
  return layout;
}

absl::Status CheckHost(const SandboxSettings& settings, const HostLayout& layout, const std::string& data_dir,
                       const std::string& scratch) {
  std::vector<std::string> problems;
  const uid_t last = settings.first_uid + settings.uid_count - 1;
  if (settings.first_uid < 1000 || settings.uid_count == 0 || last < settings.first_uid) {
    problems.push_back(absl::StrCat("the uid range ", settings.first_uid, " + ", settings.uid_count,
                                    " is not a range of unprivileged ids (start at 1000 or above)"));
  } else {
    setpwent();
    while (passwd* p = getpwent()) {
      if (p->pw_uid >= settings.first_uid && p->pw_uid <= last) {
        problems.push_back(absl::StrCat("the user ", p->pw_name, " (uid ", p->pw_uid, ") is in the uid range ",
                                        settings.first_uid, "-", last, " jobs run as"));
      }
    }
    endpwent();
    setgrent();
    while (group* g = getgrent()) {
      if (g->gr_gid >= settings.first_uid && g->gr_gid <= last) {
        problems.push_back(absl::StrCat("the group ", g->gr_name, " (gid ", g->gr_gid, ") is in the id range ",
                                        settings.first_uid, "-", last, " jobs run as"));
      }
    }
    endgrent();
  }
  std::error_code ec;
  const std::string data = fs::weakly_canonical(data_dir, ec).string();
  for (const auto& dir : layout.read_only) {
    if (data == dir || data.rfind(dir + "/", 0) == 0) {
      problems.push_back(absl::StrCat("the data directory ", data, " is inside ", dir,
                                      ", which every job sees; put it elsewhere (e.g. /var/lib/mlengine)"));
    }
  }

  // The real thing, in a child: enter a sandbox as a job would, and check
  // that the data directory is out of sight.
  if (geteuid() != 0) {
    problems.push_back("mlengined runs as uid " + std::to_string(geteuid()) +
                       "; it must run as root to give each job an identity and a view of its own");
  } else if (problems.empty()) {
    ReplicaView view;
    view.uid = settings.first_uid;
    view.gid = settings.first_uid;
    view.cwd = scratch + "/work";
    view.tmp = scratch + "/tmp";
    view.writable = {view.cwd};
    fs::create_directories(view.cwd, ec);
    fs::create_directories(view.tmp, ec);
    const SandboxSpec spec = PlanReplicaSandbox(layout, view);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError(std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[0]);
      std::string why = EnterSandbox(spec);
      // Only the paths to what is bound exist there, never the server's files.
      for (const char* file : {"/lock", "/admin.token", "/mlengine.db"}) {
        if (why.empty() && ::access((data + file).c_str(), F_OK) == 0) {
          why = "the data directory's files are visible inside the sandbox";
        }
      }
      if (why.empty() && ::access("/proc/1/status", F_OK) == 0) why = "/proc shows processes of other users";
      if (!why.empty()) (void)!::write(pipe_fds[1], why.data(), why.size());
      ::_exit(why.empty() ? 0 : 1);
    }
    ::close(pipe_fds[1]);
    std::string why;
    char buf[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0;) why.append(buf, static_cast<size_t>(n));
    ::close(pipe_fds[0]);
    int status = 0;
    if (pid < 0) {
      why = std::string("cannot fork: ") + std::strerror(errno);
    } else {
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (why.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) why = "the test sandbox did not start";
    }
    if (!why.empty()) {
      problems.push_back("a test replica could not enter its sandbox (" + why +
                         "): the host must allow mount and IPC namespaces, open_tree and pivot_root (Linux 5.12 or "
                         "later, as root, not inside a restricted container)");
    }
    fs::remove_all(scratch, ec);
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "mlengined cannot sandbox jobs on this host: ", absl::StrJoin(problems, "; "),
      ". Fix that, or run jobs without a sandbox by saying so in the configuration: `sandbox: {enabled: false}` "
      "(every job can then read the data directory, its tokens and every bucket, and use all of the host)."));
}

IdentityPool::IdentityPool(uid_t first, uint32_t count, const std::string& lease_file)
    : first_(first), count_(count) {
  if (!lease_file.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(lease_file).parent_path(), ec);
    lease_fd_ = ::open(lease_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lease_fd_ < 0) {
      lease_status_ = absl::FailedPreconditionError(
          absl::StrCat("cannot open the uid lease file ", lease_file, ": ", std::strerror(errno)));
    }
    std::random_device random;
    next_ = count_ > 0 ? random() % count_ : 0;
  }
}

IdentityPool::~IdentityPool() {
  if (lease_fd_ >= 0) ::close(lease_fd_);  // every lease goes with it
}

namespace {
bool LockByte(int fd, uid_t uid, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(uid);
  lock.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}
}  // namespace

bool IdentityPool::Lease(uid_t uid) {
  if (lease_fd_ < 0) return lease_status_.ok();  // no lease file wanted: in-process only
  return LockByte(lease_fd_, uid, F_WRLCK);
}

void IdentityPool::Unlease(uid_t uid) {
  if (lease_fd_ >= 0) LockByte(lease_fd_, uid, F_UNLCK);
}

std::optional<uid_t> IdentityPool::HeldByLocked(const std::string& owner) const {
  for (const auto& [uid, holder] : held_) {
    if (holder == owner) return uid;
  }
  return std::nullopt;
}

std::optional<uid_t> IdentityPool::HeldBy(const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  return HeldByLocked(owner);
}

std::optional<uid_t> IdentityPool::Acquire(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto held = HeldByLocked(owner)) return held;
  for (uint32_t tried = 0; tried < count_; ++tried) {
    const uid_t uid = first_ + next_;
    next_ = (next_ + 1) % count_;
    if (held_.count(uid) || !Lease(uid)) continue;
    held_.emplace(uid, owner);
    return uid;
  }
  return std::nullopt;
}

bool IdentityPool::Hold(uid_t uid, const std::string& owner) {
  if (!Contains(uid)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = held_.find(uid); it != held_.end()) return it->second == owner;
  if (!Lease(uid)) return false;
  held_.emplace(uid, owner);
  return true;
}

bool IdentityPool::Owns(uid_t uid, const std::string& owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(uid);
  return it != held_.end() && it->second == owner;
}

void IdentityPool::Release(uid_t uid, const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(uid);
  if (it == held_.end() || it->second != owner) return;
  held_.erase(it);
  Unlease(uid);
}

}  // namespace mle::sandbox
