#include "sandbox/enter.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace mle::sandbox {
namespace {

// The new root is built on a tmpfs mounted here (in the process's own mount
// namespace, after every source was captured: covering it hides nothing the
// view needs), then becomes "/".
constexpr char kBuildRoot[] = "/tmp";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes all of `text` into `path`, opened with O_WRONLY|O_CLOEXEC and
// `flags` (O_CREAT makes it 0644).
bool WriteFile(const std::string& path, const std::string& text, int flags, std::string* error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
  if (fd < 0) {
    *error = Errno("cannot open " + path);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = Errno("cannot write " + path);
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

// Makes every directory of `path` below `root` (mode 0755), refusing to go
// through anything that is not a directory (a symlink of the view).
bool MakeParents(const std::string& root, const std::string& path, std::string* error) {
  std::string at = root;
  size_t start = 1;
  for (size_t slash; (slash = path.find('/', start)) != std::string::npos; start = slash + 1) {
    if (slash == start) continue;
    at += path.substr(start - 1, slash - start + 1);
    struct stat st;
    if (::lstat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        *error = "the view's path " + path + " goes through a non-directory";
        return false;
      }
      continue;
    }
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = Errno("cannot make " + path.substr(0, slash) + " in the view");
      return false;
    }
  }
  return true;
}

// An empty directory or file at `at` to mount on, as `dir` says.
bool MakeMountPoint(const std::string& at, bool dir, std::string* error) {
  struct stat st;
  if (::lstat(at.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode) != dir) {
      *error = "cannot mount on " + at + ": something else is there";
      return false;
    }
    return true;
  }
  if (dir) {
    if (::mkdir(at.c_str(), 0755) == 0) return true;
  } else {
    const int fd = ::open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
  }
  *error = Errno("cannot make the mount point " + at);
  return false;
}

// A file of the spec's text at `at` (a file of the view, made or the
// host's): written on the view's root tmpfs beside it, never on the host's
// disk, bound read-only over `at`, and its own name unlinked (the bind
// keeps it), so only `at` shows it.
std::string PlaceFile(const std::string& root, size_t index, const ViewEntry& e, const std::string& at) {
  const std::string staged = root + "/.mlengine-file-" + std::to_string(index);
  std::string error;
  if (!WriteFile(staged, e.source, O_CREAT | O_EXCL | O_NOFOLLOW, &error)) return "cannot make " + e.target + ": " + error;
  if (::mount(staged.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    error = Errno("cannot place the file " + e.target);
  }
  if (::unlink(staged.c_str()) != 0 && error.empty()) error = Errno("cannot unlink the staged " + e.target);
  return error;
}

struct Captured {
  int fd = -1;
  bool dir = false;
};

// A detached copy of the host's tree at `source` (with what is mounted
// below it), its flags set: nosuid always, nodev but for devices, read-only
// unless writable, noexec for devices.
bool Capture(const ViewEntry& e, Captured* out, std::string* error) {
  const int fd = ::open_tree(AT_FDCWD, e.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  if (fd < 0) {
    *error = Errno("cannot bind " + e.source);
    return false;
  }
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_NOSUID;
  if (e.kind == ViewEntry::Kind::kDevice) {
    attr.attr_set |= MOUNT_ATTR_NOEXEC;
    attr.attr_clr = MOUNT_ATTR_NODEV;
  } else {
    attr.attr_set |= MOUNT_ATTR_NODEV;
    if (!e.writable) attr.attr_set |= MOUNT_ATTR_RDONLY;
  }
  if (::mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
    *error = Errno("cannot set the flags of " + e.source);
    ::close(fd);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = Errno("cannot stat " + e.source);
    ::close(fd);
    return false;
  }
  out->fd = fd;
  out->dir = S_ISDIR(st.st_mode);
  return true;
}

bool DropPrivileges(const SandboxSpec& spec, std::string* error) {
  // Capabilities are numbered from 0 to the kernel's last without a gap:
  // the first it calls invalid ends the bounding set.
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
    if (errno == EINVAL && cap > 0) break;
    *error = Errno("cannot drop capability " + std::to_string(cap));
    return false;
  }
  if (::syscall(SYS_setgroups, 0, nullptr) != 0) {
    *error = Errno("cannot drop the supplementary groups");
    return false;
  }
  if (::syscall(SYS_setresgid, spec.gid, spec.gid, spec.gid) != 0) {
    *error = Errno("cannot become gid " + std::to_string(spec.gid));
    return false;
  }
  if (::syscall(SYS_setresuid, spec.uid, spec.uid, spec.uid) != 0) {
    *error = Errno("cannot become uid " + std::to_string(spec.uid));
    return false;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *error = Errno("cannot set no_new_privs");
    return false;
  }
  // No way back: root is gone for good.
  if (::syscall(SYS_setresuid, 0, 0, 0) == 0 || ::getuid() != spec.uid || ::getegid() != spec.gid) {
    *error = "the process could still become root";
    return false;
  }
  ::umask(spec.umask);
  return true;
}

}  // namespace

std::string EnterSandbox(const SandboxSpec& spec) {
  std::string error;
  if (spec.uid == 0 || spec.gid == 0) return "a sandboxed replica never runs as root";
  for (const auto& dir : spec.cgroups) {
    if (!WriteFile(dir + "/cgroup.procs", "0", 0, &error)) return "cannot join the cgroup " + dir + ": " + error;
  }
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) return Errno("cannot make a mount namespace");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Errno("cannot make / private");

  // Every host path first, while the host's tree is still in sight.
  std::vector<Captured> captured(spec.view.size());
  auto release = [&captured] {
    for (auto& c : captured) {
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
    }
  };
  for (size_t i = 0; i < spec.view.size(); ++i) {
    const ViewEntry& e = spec.view[i];
    if (e.kind != ViewEntry::Kind::kBind && e.kind != ViewEntry::Kind::kDevice) continue;
    if (!Capture(e, &captured[i], &error)) {
      release();
      return error;
    }
  }

  const std::string root = kBuildRoot;
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    release();
    return Errno("cannot mount the view's root");
  }
  for (size_t i = 0; i < spec.view.size(); ++i) {
    const ViewEntry& e = spec.view[i];
    const std::string at = root + e.target;
    if (!MakeParents(root, e.target, &error)) break;
    switch (e.kind) {
      case ViewEntry::Kind::kBind:
      case ViewEntry::Kind::kDevice:
        if (!MakeMountPoint(at, captured[i].dir, &error)) break;
        if (::move_mount(captured[i].fd, "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
          error = Errno("cannot bind " + e.source + " at " + e.target);
        }
        break;
      case ViewEntry::Kind::kSymlink:
        if (::symlink(e.source.c_str(), at.c_str()) != 0) error = Errno("cannot make the symlink " + e.target);
        break;
      case ViewEntry::Kind::kTmpfs:
        if (!MakeMountPoint(at, true, &error)) break;
        if (::mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, e.source.c_str()) != 0) {
          error = Errno("cannot mount a tmpfs at " + e.target);
        }
        break;
      case ViewEntry::Kind::kDir:
        if (!MakeMountPoint(at, true, &error) || e.source.empty()) break;
        if (::chmod(at.c_str(), static_cast<mode_t>(std::stoul(e.source, nullptr, 8))) != 0) {
          error = Errno("cannot set the mode of " + e.target);
        }
        break;
      case ViewEntry::Kind::kSysfs:
        // A sysfs of its own, read-only, without what is mounted below the
        // host's /sys: its cgroup trees (/sys/fs/cgroup, which name every
        // job on the host) are empty directories here.
        if (!MakeMountPoint(at, true, &error)) break;
        if (::mount("sysfs", at.c_str(), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
          error = Errno("cannot mount /sys at " + e.target);
        }
        break;
      case ViewEntry::Kind::kFile:
        if (!MakeMountPoint(at, false, &error)) break;
        error = PlaceFile(root, i, e, at);
        break;
      case ViewEntry::Kind::kProc:
        if (!MakeMountPoint(at, true, &error)) break;
        if (::mount("proc", at.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") != 0) {
          error = Errno("cannot mount /proc at " + e.target);
        }
        break;
    }
    if (!error.empty()) break;
  }
  release();
  if (!error.empty()) return error;

  // The view becomes the root; the host's tree goes.
  if (::mount(nullptr, root.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    return Errno("cannot make the view's root read-only");
  }
  if (::chdir(root.c_str()) != 0) return Errno("cannot enter the view");
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return Errno("cannot make the view the root");
  if (::umount2(".", MNT_DETACH) != 0) return Errno("cannot let go of the host's root");
  if (::chdir("/") != 0) return Errno("cannot enter the view's root");

  if (!DropPrivileges(spec, &error)) return error;
  if (::chdir(spec.cwd.c_str()) != 0) return Errno("cannot enter the working directory " + spec.cwd);
  return "";
}

}  // namespace mle::sandbox

extern "C" int mle_sandbox_enter(const char* spec_path, char* error, unsigned long error_size) {
  mle::sandbox::SandboxSpec spec;
  std::string why;
  if (spec_path == nullptr) {
    why = "no sandbox spec";
  } else if (mle::sandbox::ReadSpec(spec_path, &spec, &why)) {
    why = mle::sandbox::EnterSandbox(spec);
  }
  if (why.empty()) return 0;
  if (error != nullptr && error_size > 0) {
    const size_t n = why.size() < error_size - 1 ? why.size() : error_size - 1;
    std::memcpy(error, why.data(), n);
    error[n] = '\0';
  }
  return -1;
}
