#include "rundir/file_io.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mle::rundir {
namespace {

namespace fs = std::filesystem;

absl::Status Errno(const std::string& what, const std::string& path, int err) {
  const std::string message = absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::UnavailableError(message);
}

std::string Parent(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno("write", path, errno);
    off += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MarkTopDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("open directory", dir, errno);
  // A file system without inode flags, or without this one, says so by one
  // of these: nothing to do there.
  auto unsupported = [](int err) { return err == ENOTTY || err == EOPNOTSUPP || err == EINVAL || err == ENOSYS; };
  int flags = 0;
  absl::Status result = absl::OkStatus();
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    if (!unsupported(errno)) result = Errno("read the flags of", dir, errno);
  } else if ((flags & FS_TOPDIR_FL) == 0) {
    flags |= FS_TOPDIR_FL;
    if (::ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0 && !unsupported(errno)) {
      result = Errno("set the top-directory flag of", dir, errno);
    }
  }
  ::close(fd);
  return result;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Errno("sync directory", dir, err);
  return absl::OkStatus();
}

absl::Status CreateDirectories(const std::string& dir, Durability durability) {
  std::vector<std::string> missing;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat(p.string(), " is not a directory"));
      break;
    }
    if (errno == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": a parent is not a directory"));
    }
    if (errno != ENOENT) return Errno("inspect", p.string(), errno);
    missing.push_back(p.string());
    if (!p.has_parent_path() || p.parent_path() == p) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) return Errno("create directory", *it, errno);
    if (durability == Durability::kProcessCrash) continue;
    if (auto s = SyncDirectory(Parent(*it)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CreateSpreadDirectory(const std::string& dir, Durability durability) {
  const std::string parent = Parent(fs::path(dir).lexically_normal().string());
  struct stat st;
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno != ENOENT) return Errno("inspect", parent, errno);
    if (auto s = CreateDirectories(parent, durability); !s.ok()) return s;
    if (auto s = MarkTopDirectory(parent); !s.ok()) return s;
  }
  return CreateDirectories(dir, durability);
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode,
                                 Durability durability) {
  const bool sync = durability == Durability::kMachineCrash;
  const std::string tmp = path + ".tmp";
  // A new file, never whatever is at `tmp` already: a leftover of a crash,
  // or a symbolic link planted where a sandboxed build or job may write
  // (opening it would write through it, as root). O_EXCL refuses a link
  // too; it is unlinked (the link, not its target) and the file made anew.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  }
  if (fd < 0) return Errno("create", tmp, errno);
  absl::Status s = WriteAll(fd, contents, tmp);
  if (s.ok() && ::fchmod(fd, mode) != 0) s = Errno("set the mode of", tmp, errno);  // whatever the umask
  if (s.ok() && sync && ::fsync(fd) != 0) s = Errno("sync", tmp, errno);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", tmp, errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Errno("rename to " + path, tmp, errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return sync ? SyncDirectory(Parent(path)) : absl::OkStatus();
}

absl::Status SyncFilesystemOf(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path, errno);
  const int rc = ::syncfs(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Errno("sync the filesystem of", path, err);
  return absl::OkStatus();
}

namespace {
// All of `fd` (closed here), at most `max_bytes` of it.
absl::StatusOr<std::string> ReadAll(int fd, const std::string& path, size_t max_bytes) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return out;
}
}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path, errno);
  return ReadAll(fd, path, std::string().max_size());
}

absl::StatusOr<std::string> ReadJobFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Errno("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  return ReadAll(fd, path, max_bytes);
}

absl::StatusOr<bool> FileExists(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return Errno("inspect", path, errno);
}

}  // namespace mle::rundir
