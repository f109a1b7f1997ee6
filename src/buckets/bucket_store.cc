#include "buckets/bucket_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/random.h"
#include "common/sha256.h"

namespace mle::buckets {
namespace {

constexpr size_t kMaxObjectNameBytes = 1024;
constexpr size_t kMaxSegmentBytes = NAME_MAX;  // 255 on Linux
constexpr size_t kCopyBufferBytes = 1 << 20;
constexpr int kMaxListResults = 1000;
constexpr absl::string_view kTmpDir = ".tmp";
constexpr absl::string_view kMetaDir = ".meta";
constexpr absl::string_view kUploadsDir = ".uploads";
// Buckets' directories and objects are open to every identity: jobs reach a
// bucket only through their sandbox's view, where it is mounted read-only
// unless their account may write it (docs/security.md), and the bucket root
// itself is inside the data directory (0700). So an object a job wrote stays
// readable, and replaceable, by later jobs whose account may.
constexpr mode_t kSharedDirMode = 0777;
constexpr mode_t kObjectMode = 0666;
// In .meta: written once every existing bucket was given those modes.
constexpr absl::string_view kModesMarker = "modes-shared-v1";

// mkdirat with `mode` exactly (the umask would take from it).
int MakeDirAt(int dir_fd, const char* name, mode_t mode) {
  if (::mkdirat(dir_fd, name, mode) != 0) return -1;
  return ::fchmodat(dir_fd, name, mode, 0);
}

// Gives every directory below `dir_fd` kSharedDirMode and every regular
// file kObjectMode (never following a symbolic link).
void ShareTree(int dir_fd) {
  ::fchmod(dir_fd, kSharedDirMode);
  DIR* d = ::fdopendir(::dup(dir_fd));
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      ::fchmodat(dir_fd, name.c_str(), kObjectMode, 0);
    } else if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        ShareTree(sub);
        ::close(sub);
      }
    }
  }
  ::closedir(d);
}

// Keeps errno-based failures short and canonical. The server's own disk
// failing is never the caller's fault, so most map to INTERNAL.
absl::Status IoError(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(message);
    case ENOENT: return absl::NotFoundError(message);
    default: return absl::InternalError(message);
  }
}

absl::Status SymlinkRefused(absl::string_view bucket, absl::string_view path) {
  return absl::FailedPreconditionError(absl::StrCat(
      "gs://", bucket, "/", path,
      " is a symbolic link in the bucket directory; the object store never follows symbolic links."));
}

absl::Status NoSuchObject(absl::string_view bucket, absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("No such object: ", bucket, "/", name));
}

absl::Status NoSuchBucket(absl::string_view bucket) {
  return absl::NotFoundError(absl::StrCat("The specified bucket does not exist: ", bucket));
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

bool IsIpv4(absl::string_view s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '.');
  if (parts.size() != 4) return false;
  for (auto p : parts) {
    int v = 0;
    if (p.empty() || p.size() > 3 || !std::all_of(p.begin(), p.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(p, &v) ||
        v > 255) {
      return false;
    }
  }
  return true;
}

absl::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("write", errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

absl::Time MtimeOf(const struct stat& st) { return absl::TimeFromTimespec(st.st_mtim); }

// The sidecar describing `info` as the file `st`: believed only while the
// file still has this size, mtime and inode.
ObjectMeta MetaOf(const struct stat& st, const ObjectInfo& info) {
  ObjectMeta meta;
  meta.size = st.st_size;
  meta.mtime_ns = MtimeNs(st);
  meta.ino = static_cast<uint64_t>(st.st_ino);
  meta.generation = info.generation;
  meta.metageneration = info.metageneration;
  meta.created_us = absl::ToUnixMicros(info.created);
  meta.attrs = info.attrs;
  meta.checksums = info.checksums;
  return meta;
}

ScopedFd OpenDirAt(int dir_fd, const std::string& name) {
  return ScopedFd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Names in a directory (not "." and ".."), unsorted; with each, whether it
// is a directory, a regular file, or something to skip (symlinks, devices).
enum class EntryKind { kDir, kFile, kOther };
struct Entry {
  std::string name;
  EntryKind kind;
};

absl::StatusOr<std::vector<Entry>> ReadDir(int dir_fd) {
  // A new open file description (not dup, which would share the read
  // position with every other reader of dir_fd, e.g. concurrent listings).
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot read a directory", errno);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return IoError("fdopendir", err);
  }
  std::vector<Entry> out;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    EntryKind kind = EntryKind::kOther;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
    }
    if (type == DT_DIR) kind = EntryKind::kDir;
    if (type == DT_REG) kind = EntryKind::kFile;
    out.push_back({std::move(name), kind});
  }
  ::closedir(dir);
  return out;
}

std::string RandomHex(int bytes) {
  // Not security relevant (O_EXCL makes clashes harmless): the clock when the generator fails.
  return common::RandomHex(static_cast<size_t>(bytes))
      .value_or(absl::BytesToHexString(absl::StrCat(absl::ToUnixNanos(absl::Now()), ::getpid())));
}

BucketInfo BucketInfoAt(int root_fd, absl::string_view name) {
  BucketInfo info;
  info.name = std::string(name);
  struct statx stx;
  if (::statx(root_fd, info.name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_MTIME, &stx) == 0) {
    info.updated = absl::FromUnixSeconds(stx.stx_mtime.tv_sec) + absl::Nanoseconds(stx.stx_mtime.tv_nsec);
    info.created = (stx.stx_mask & STATX_BTIME)
                       ? absl::FromUnixSeconds(stx.stx_btime.tv_sec) + absl::Nanoseconds(stx.stx_btime.tv_nsec)
                       : info.updated;
  }
  return info;
}

}  // namespace

// ---- ScopedFd ----

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

// ---- names ----

absl::Status ValidateBucketName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid bucket name \"", name, "\": ", why));
  };
  if (name.size() < 3 || name.size() > 63) return bad("bucket names have 3 to 63 characters");
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.')) {
      return bad("bucket names use only lowercase letters, digits, '-', '_' and '.'");
    }
  }
  if (!absl::ascii_isalnum(name.front()) || !absl::ascii_isalnum(name.back())) {
    return bad("bucket names start and end with a letter or digit");
  }
  if (IsIpv4(name)) return bad("bucket names cannot be IP addresses");
  return absl::OkStatus();
}

absl::Status ValidateObjectName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    // The name may hold anything; quote it escaped.
    return absl::InvalidArgumentError(absl::StrCat("Invalid object name \"", absl::CEscape(name), "\": ", why));
  };
  if (name.empty()) return bad("object names cannot be empty");
  if (name.size() > kMaxObjectNameBytes) return bad("object names are at most 1024 bytes");
  if (!IsUtf8(name)) return bad("object names must be valid UTF-8");
  for (char c : name) {
    if (c == '\0') return bad("object names cannot contain NUL");
    if (c == '\\') return bad("object names cannot contain backslashes");
    if (c == '\r' || c == '\n') return bad("object names cannot contain carriage returns or line feeds");
  }
  if (name.front() == '/') return bad("object names cannot start with '/'");
  for (absl::string_view seg : absl::StrSplit(name, '/')) {
    if (seg.empty()) {
      return bad(name.back() == '/' ? "object names cannot end with '/'"
                                    : "object names cannot contain empty path segments (\"//\")");
    }
    if (seg == "." || seg == "..") return bad("object names cannot contain \".\" or \"..\" path segments");
    if (seg.size() > kMaxSegmentBytes) return bad("each '/'-separated part of an object name is at most 255 bytes");
  }
  return absl::OkStatus();
}

namespace {
absl::Status ValidatePath(absl::string_view path) {
  if (path.empty()) return absl::OkStatus();
  if (path.back() == '/') path.remove_suffix(1);
  return ValidateObjectName(path);
}
}  // namespace

absl::StatusOr<GcsUri> ParseGcsUri(absl::string_view uri) {
  if (!absl::StartsWith(uri, "gs://")) {
    return absl::InvalidArgumentError(absl::StrCat("\"", uri, "\" is not a gs:// URI"));
  }
  absl::string_view rest = uri.substr(5);
  GcsUri out;
  auto slash = rest.find('/');
  out.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) out.path = std::string(rest.substr(slash + 1));
  if (auto s = ValidateBucketName(out.bucket); !s.ok()) return s;
  if (auto s = ValidatePath(out.path); !s.ok()) return s;
  return out;
}

// ---- BucketStore ----

BucketStore::BucketStore(std::string root, ScopedFd root_fd, ScopedFd tmp_fd, dev_t dev)
    : root_(std::move(root)), root_fd_(std::move(root_fd)), tmp_fd_(std::move(tmp_fd)), dev_(dev) {}

BucketStore::~BucketStore() = default;

absl::StatusOr<std::unique_ptr<BucketStore>> BucketStore::Open(const std::string& root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create the bucket root ", root, ": ", ec.message()));
  auto canonical = std::filesystem::canonical(root, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve the bucket root ", root, ": ", ec.message()));
  ScopedFd root_fd(::open(canonical.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return IoError(absl::StrCat("cannot open the bucket root ", canonical.string()), errno);
  for (absl::string_view dir : {kTmpDir, kMetaDir, kUploadsDir}) {
    if (::mkdirat(root_fd.get(), std::string(dir).c_str(), 0700) != 0 && errno != EEXIST) {
      return IoError(absl::StrCat("cannot create ", canonical.string(), "/", dir), errno);
    }
  }
  ScopedFd tmp_fd = OpenDirAt(root_fd.get(), std::string(kTmpDir));
  if (!tmp_fd.valid()) {
    return IoError(absl::StrCat("cannot open ", canonical.string(), "/", kTmpDir, " (it must be a directory)"), errno);
  }
  // What a crash left behind: partial uploads and metadata never renamed.
  auto entries = ReadDir(tmp_fd.get());
  if (!entries.ok()) return entries.status();
  for (const auto& e : *entries) {
    if (e.kind != EntryKind::kDir) ::unlinkat(tmp_fd.get(), e.name.c_str(), 0);
  }
  struct stat st;
  if (::fstat(tmp_fd.get(), &st) != 0) return IoError("fstat", errno);
  ScopedFd uploads_fd = OpenDirAt(root_fd.get(), std::string(kUploadsDir));
  if (!uploads_fd.valid()) {
    return IoError(absl::StrCat("cannot open ", canonical.string(), "/", kUploadsDir, " (it must be a directory)"),
                   errno);
  }
  auto store = std::unique_ptr<BucketStore>(
      new BucketStore(canonical.string(), std::move(root_fd), std::move(tmp_fd), st.st_dev));
  store->uploads_fd_ = std::move(uploads_fd);
  store->RemoveExpiredUploads();
  // Buckets of a data directory from before the sandbox: given the shared
  // modes once.
  const std::string marker = absl::StrCat(kMetaDir, "/", kModesMarker);
  if (::faccessat(store->root_fd_.get(), marker.c_str(), F_OK, 0) != 0) {
    auto buckets = ReadDir(store->root_fd_.get());
    if (buckets.ok()) {
      for (const auto& e : *buckets) {
        if (e.kind != EntryKind::kDir || absl::StartsWith(e.name, ".")) continue;
        ScopedFd b = OpenDirAt(store->root_fd_.get(), e.name);
        if (b.valid()) ShareTree(b.get());
      }
      ScopedFd m(::openat(store->root_fd_.get(), marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    }
  }
  return store;
}

// -- buckets --

absl::StatusOr<ScopedFd> BucketStore::OpenBucketDir(absl::string_view bucket) const {
  if (auto s = ValidateBucketName(bucket); !s.ok()) return s;
  const std::string name(bucket);
  ScopedFd fd = OpenDirAt(root_fd_.get(), name);
  if (fd.valid()) return fd;
  const int err = errno;
  struct stat st;
  if (::fstatat(root_fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "The directory of bucket ", bucket, " is a symbolic link; the object store never follows symbolic links."));
  }
  if (err == ENOENT || err == ENOTDIR || err == ELOOP) return NoSuchBucket(bucket);
  return IoError(absl::StrCat("cannot open bucket ", bucket), err);
}

absl::StatusOr<BucketInfo> BucketStore::CreateBucket(absl::string_view bucket) {
  if (auto s = ValidateBucketName(bucket); !s.ok()) return s;
  absl::MutexLock lock(&namespace_mu_);
  const std::string name(bucket);
  if (MakeDirAt(root_fd_.get(), name.c_str(), kSharedDirMode) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("The bucket ", bucket, " already exists."));
    }
    return IoError(absl::StrCat("cannot create bucket ", bucket), errno);
  }
  ::fsync(root_fd_.get());
  return BucketInfoAt(root_fd_.get(), bucket);
}

absl::StatusOr<BucketInfo> BucketStore::EnsureBucket(absl::string_view bucket) {
  if (auto s = ValidateBucketName(bucket); !s.ok()) return s;
  {
    absl::MutexLock lock(&namespace_mu_);
    const std::string name(bucket);
    if (MakeDirAt(root_fd_.get(), name.c_str(), kSharedDirMode) == 0) {
      ::fsync(root_fd_.get());
    } else if (errno != EEXIST) {
      return IoError(absl::StrCat("cannot create bucket ", bucket), errno);
    }
  }
  return GetBucket(bucket);
}

absl::StatusOr<BucketInfo> BucketStore::GetBucket(absl::string_view bucket) const {
  auto fd = OpenBucketDir(bucket);
  if (!fd.ok()) return fd.status();
  return BucketInfoAt(root_fd_.get(), bucket);
}

absl::StatusOr<std::vector<BucketInfo>> BucketStore::ListBuckets() const {
  auto entries = ReadDir(root_fd_.get());
  if (!entries.ok()) return entries.status();
  std::vector<BucketInfo> out;
  for (const auto& e : *entries) {
    if (e.kind != EntryKind::kDir || !ValidateBucketName(e.name).ok()) continue;
    out.push_back(BucketInfoAt(root_fd_.get(), e.name));
  }
  std::sort(out.begin(), out.end(), [](const BucketInfo& a, const BucketInfo& b) { return a.name < b.name; });
  return out;
}

// -- walking --

absl::StatusOr<BucketStore::ObjectDir> BucketStore::OpenObjectDir(absl::string_view bucket, absl::string_view name,
                                                                  bool create) const {
  ObjectDir dir;
  auto bucket_fd = OpenBucketDir(bucket);
  if (!bucket_fd.ok()) return bucket_fd.status();
  dir.bucket = *std::move(bucket_fd);
  auto parent = OpenParentDir(dir.bucket.get(), bucket, name, create, &dir.chain);
  if (!parent.ok()) return parent.status();
  dir.parent = *parent;
  const size_t slash = name.rfind('/');
  dir.leaf = std::string(slash == absl::string_view::npos ? name : name.substr(slash + 1));
  return dir;
}

absl::StatusOr<int> BucketStore::OpenParentDir(int bucket_fd, absl::string_view bucket, absl::string_view name,
                                               bool create, std::vector<ScopedFd>* chain) const {
  std::vector<absl::string_view> segments = absl::StrSplit(name, '/');
  segments.pop_back();  // the leaf
  int current = bucket_fd;
  size_t walked = 0;  // bytes of `name` covered so far, for messages
  for (absl::string_view seg : segments) {
    const std::string part(seg);
    walked += seg.size() + 1;
    ScopedFd next = OpenDirAt(current, part);
    if (!next.valid() && errno == ENOENT && create) {
      if (MakeDirAt(current, part.c_str(), kSharedDirMode) != 0 && errno != EEXIST) {
        return IoError(absl::StrCat("cannot create a directory for gs://", bucket, "/", name), errno);
      }
      ::fsync(current);
      next = OpenDirAt(current, part);
    }
    if (!next.valid()) {
      const int err = errno;
      const absl::string_view prefix = name.substr(0, walked - 1);
      struct stat st;
      if (::fstatat(current, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) return SymlinkRefused(bucket, prefix);
        if (create) {
          return absl::FailedPreconditionError(absl::StrCat(
              "Cannot write gs://", bucket, "/", name, ": the object ", prefix,
              " exists, and buckets are directories, so an object cannot also be a prefix of other objects."));
        }
        return NoSuchObject(bucket, name);
      }
      if (err == ENOENT || err == ENOTDIR) return NoSuchObject(bucket, name);
      return IoError(absl::StrCat("cannot open the directory of gs://", bucket, "/", name), err);
    }
    current = next.get();
    chain->push_back(std::move(next));
  }
  return current;
}


ObjectInfo BucketStore::Describe(absl::string_view bucket, absl::string_view name, const struct stat& st) const {
  ObjectInfo info;
  info.bucket = std::string(bucket);
  info.name = std::string(name);
  info.size = st.st_size;
  info.updated = MtimeOf(st);
  if (auto meta = ReadMeta(bucket, name, st)) {
    info.generation = meta->generation;
    info.metageneration = meta->metageneration;
    info.created = absl::FromUnixMicros(meta->created_us);
    info.attrs = std::move(meta->attrs);
    info.checksums = std::move(meta->checksums);
  } else {
    // Written by a trainer: its mtime stands for its generation (a rewrite
    // changes both).
    info.generation = MtimeNs(st) / 1000;
    info.metageneration = 1;
    info.created = info.updated;
  }
  return info;
}

absl::StatusOr<ObjectInfo> BucketStore::StatOpen(absl::string_view bucket, absl::string_view name,
                                                 ScopedFd* fd_out) const {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  auto dir = OpenObjectDir(bucket, name, false);
  if (!dir.ok()) return dir.status();
  const std::string& leaf = dir->leaf;
  // O_NONBLOCK: opening a FIFO a trainer left must not hang us.
  ScopedFd fd(::openat(dir->parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    struct stat st;
    if (::fstatat(dir->parent, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      return SymlinkRefused(bucket, name);
    }
    if (err == ENOENT || err == ENOTDIR || err == ELOOP) return NoSuchObject(bucket, name);
    return IoError(absl::StrCat("cannot open gs://", bucket, "/", name), err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return IoError("fstat", errno);
  if (!S_ISREG(st.st_mode)) return NoSuchObject(bucket, name);  // a directory is a prefix, not an object
  // Back to blocking reads.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  ObjectInfo info = Describe(bucket, name, st);
  if (fd_out != nullptr) *fd_out = std::move(fd);
  return info;
}

absl::Status BucketStore::FillChecksums(ObjectInfo& info, int fd) const {
  if (info.checksums) return absl::OkStatus();
  struct stat before;
  if (::fstat(fd, &before) != 0) return IoError("fstat", errno);
  auto sums = common::ChecksumsOfFd(fd);
  if (!sums.ok()) return sums.status();
  struct stat after;
  if (::fstat(fd, &after) != 0) return IoError("fstat", errno);
  info.checksums = *sums;
  if (after.st_size == before.st_size && MtimeNs(after) == MtimeNs(before)) {
    // Remember them (with the generation and attributes already described);
    // a cache, so failing to write it is no error.
    const ObjectMeta meta = MetaOf(after, info);
    absl::MutexLock lock(&namespace_mu_);
    // Only while the object is still this file (a writer may have replaced it).
    if (auto current = OpenObjectDir(info.bucket, info.name, false); current.ok()) {
      struct stat now;
      if (::fstatat(current->parent, current->leaf.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
          now.st_ino == after.st_ino && now.st_dev == after.st_dev) {
        (void)WriteMeta(info.bucket, info.name, meta);
      }
    }
  } else {
    // Changed while we read it: report what we read, remember nothing.
    info.size = after.st_size;
    info.updated = MtimeOf(after);
  }
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> BucketStore::Stat(absl::string_view bucket, absl::string_view name,
                                             bool compute_checksums) const {
  ScopedFd fd;
  auto info = StatOpen(bucket, name, &fd);
  if (!info.ok() || !compute_checksums) return info;
  if (auto s = FillChecksums(*info, fd.get()); !s.ok()) return s;
  return info;
}

absl::StatusOr<OpenedObject> BucketStore::OpenObject(absl::string_view bucket, absl::string_view name,
                                                     bool compute_checksums) const {
  OpenedObject out;
  auto info = StatOpen(bucket, name, &out.fd);
  if (!info.ok()) return info.status();
  if (compute_checksums) {
    if (auto s = FillChecksums(*info, out.fd.get()); !s.ok()) return s;
  }
  out.info = *std::move(info);
  return out;
}

absl::StatusOr<std::string> BucketStore::Read(absl::string_view bucket, absl::string_view name) const {
  auto object = OpenObject(bucket, name);
  if (!object.ok()) return object.status();
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t r = ::read(object->fd.get(), buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoError("read", errno);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

// -- metadata --

namespace {
struct MetaLocation {
  std::string shard;  // two hex digits
  std::string file;   // 64 hex digits
};
MetaLocation MetaFor(absl::string_view name) {
  std::string h = common::Sha256Hex(name);
  return {h.substr(0, 2), h};
}

// A file's content, if it is a regular file of at most `limit` bytes.
std::optional<std::string> ReadSmallFile(int dir_fd, const std::string& name, size_t limit) {
  ScopedFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out(limit + 1, '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > limit) return std::nullopt;
  out.resize(got);
  return out;
}

constexpr size_t kMaxMetaFileBytes = 64 * 1024;
}  // namespace

absl::Status BucketStore::WriteMeta(absl::string_view bucket, absl::string_view name, const ObjectMeta& meta) const {
  const MetaLocation loc = MetaFor(name);
  std::string tmp_name;
  auto tmp = MakeTemp("meta", &tmp_name);
  if (!tmp.ok()) return tmp.status();
  const std::string content = EncodeObjectMeta(meta);
  absl::Status s = WriteAll(tmp->get(), content.data(), content.size());
  if (s.ok() && ::fsync(tmp->get()) != 0) s = IoError("fsync", errno);
  ScopedFd dir;
  if (s.ok()) {
    int current = root_fd_.get();
    std::vector<ScopedFd> keep;
    for (const std::string& part : {std::string(kMetaDir), std::string(bucket), loc.shard}) {
      if (::mkdirat(current, part.c_str(), 0700) != 0 && errno != EEXIST) {
        s = IoError("cannot create a metadata directory", errno);
        break;
      }
      ScopedFd next = OpenDirAt(current, part);
      if (!next.valid()) {
        s = IoError("cannot open a metadata directory", errno);
        break;
      }
      current = next.get();
      keep.push_back(std::move(next));
    }
    if (s.ok()) dir = std::move(keep.back());
  }
  if (s.ok() && ::renameat(tmp_fd_.get(), tmp_name.c_str(), dir.get(), loc.file.c_str()) != 0) {
    s = IoError("cannot install object metadata", errno);
  }
  if (!s.ok()) {
    ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
    return s;
  }
  ::fsync(dir.get());
  return absl::OkStatus();
}

std::optional<ObjectMeta> BucketStore::ReadMeta(absl::string_view bucket, absl::string_view name,
                                                const struct stat& st) const {
  const MetaLocation loc = MetaFor(name);
  int current = root_fd_.get();
  std::vector<ScopedFd> keep;
  for (const std::string& part : {std::string(kMetaDir), std::string(bucket), loc.shard}) {
    ScopedFd next = OpenDirAt(current, part);
    if (!next.valid()) return std::nullopt;
    current = next.get();
    keep.push_back(std::move(next));
  }
  auto text = ReadSmallFile(current, loc.file, kMaxMetaFileBytes);
  if (!text) return std::nullopt;
  auto meta = DecodeObjectMeta(*text);
  // Only while it still describes this very file.
  if (!meta || meta->size != st.st_size || meta->mtime_ns != MtimeNs(st) ||
      meta->ino != static_cast<uint64_t>(st.st_ino)) {
    return std::nullopt;
  }
  return meta;
}

void BucketStore::RemoveMeta(absl::string_view bucket, absl::string_view name) const {
  const MetaLocation loc = MetaFor(name);
  ScopedFd meta = OpenDirAt(root_fd_.get(), std::string(kMetaDir));
  if (!meta.valid()) return;
  ScopedFd b = OpenDirAt(meta.get(), std::string(bucket));
  if (!b.valid()) return;
  ScopedFd shard = OpenDirAt(b.get(), loc.shard);
  if (!shard.valid()) return;
  ::unlinkat(shard.get(), loc.file.c_str(), 0);
}

// -- writing --

absl::StatusOr<ScopedFd> BucketStore::MakeTemp(const std::string& tag, std::string* name) const {
  for (int attempt = 0; attempt < 16; ++attempt) {
    *name = absl::StrCat(tag, "-", RandomHex(12));
    ScopedFd fd(::openat(tmp_fd_.get(), name->c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.valid()) return fd;
    if (errno != EEXIST) return IoError(absl::StrCat("cannot create a temporary file in ", root_, "/.tmp"), errno);
  }
  return absl::InternalError("cannot create a temporary file: too many name clashes");
}

absl::StatusOr<std::optional<ObjectInfo>> BucketStore::CurrentAt(absl::string_view bucket, absl::string_view name,
                                                                 int dir, const std::string& leaf) const {
  struct stat existing;
  if (::fstatat(dir, leaf.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<ObjectInfo>();
    return IoError(absl::StrCat("cannot stat gs://", bucket, "/", name), errno);
  }
  if (S_ISLNK(existing.st_mode)) return SymlinkRefused(bucket, name);
  if (S_ISDIR(existing.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cannot write gs://", bucket, "/", name, ": objects exist under the prefix ", name,
                     "/, and buckets are directories, so an object cannot also be a prefix of other objects."));
  }
  if (!S_ISREG(existing.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("Cannot write gs://", bucket, "/", name, ": a special file (not a regular file) is there."));
  }
  return std::optional<ObjectInfo>(Describe(bucket, name, existing));
}

absl::StatusOr<ObjectInfo> BucketStore::Install(absl::string_view bucket, absl::string_view name, int fd,
                                                int source_dir, const std::string& source,
                                                const WriteOptions& options, const common::Checksums& sums,
                                                const ObjectInfo* restored) {
  if (auto s = ValidateAttrs(options.attrs); !s.ok()) return s;
  if (auto s = VerifyChecksums(options, sums); !s.ok()) return s;
  // Objects are ordinary files the replicas read and replace.
  if (::fchmod(fd, kObjectMode) != 0) return IoError("fchmod", errno);
  if (::fsync(fd) != 0) return IoError(absl::StrCat("cannot write gs://", bucket, "/", name), errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("fstat", errno);

  absl::MutexLock lock(&namespace_mu_);
  auto dir = OpenObjectDir(bucket, name, true);
  if (!dir.ok()) return dir.status();
  const std::string& leaf = dir->leaf;
  auto current = CurrentAt(bucket, name, dir->parent, leaf);
  if (!current.ok()) return current.status();
  const ObjectInfo* now = current->has_value() ? &**current : nullptr;
  if (auto s = CheckPreconditions(options.preconditions, now, absl::StrCat("gs://", bucket, "/", name)); !s.ok()) {
    return s;
  }
  ObjectMeta meta;
  meta.size = st.st_size;
  meta.mtime_ns = MtimeNs(st);
  meta.ino = static_cast<uint64_t>(st.st_ino);
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  meta.generation = restored ? restored->generation : std::max(now_us, now ? now->generation + 1 : 0);
  meta.metageneration = restored ? restored->metageneration : 1;
  meta.created_us = restored ? absl::ToUnixMicros(restored->created) : now_us;
  meta.attrs = options.attrs;
  meta.checksums = sums;
  // Metadata first: if we crash before the rename, it describes a file that
  // is not there (and is ignored, its inode differing from any later file).
  if (auto s = WriteMeta(bucket, name, meta); !s.ok()) return s;
  if (::renameat(source_dir, source.c_str(), dir->parent, leaf.c_str()) != 0) {
    const int err = errno;
    RemoveMeta(bucket, name);
    return IoError(absl::StrCat("cannot write gs://", bucket, "/", name), err);
  }
  ::fsync(dir->parent);
  ObjectInfo info;
  info.bucket = std::string(bucket);
  info.name = std::string(name);
  info.size = st.st_size;
  info.generation = meta.generation;
  info.metageneration = meta.metageneration;
  info.created = absl::FromUnixMicros(meta.created_us);
  info.updated = MtimeOf(st);
  info.attrs = options.attrs;
  info.checksums = sums;
  return info;
}

absl::StatusOr<ObjectInfo> BucketStore::Put(absl::string_view bucket, absl::string_view name,
                                            absl::string_view content, const WriteOptions& options) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  if (auto b = OpenBucketDir(bucket); !b.ok()) return b.status();
  std::string tmp_name;
  auto fd = MakeTemp("put", &tmp_name);
  if (!fd.ok()) return fd.status();
  absl::Status s = WriteAll(fd->get(), content.data(), content.size());
  if (!s.ok()) {
    ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
    return s;
  }
  auto info = Install(bucket, name, fd->get(), tmp_fd_.get(), tmp_name, options, common::ChecksumsOf(content));
  if (!info.ok()) ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
  return info;
}

absl::StatusOr<ObjectInfo> BucketStore::PutFile(absl::string_view bucket, absl::string_view name,
                                                const std::string& source, const WriteOptions& options,
                                                std::optional<common::Checksums> known) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  if (auto b = OpenBucketDir(bucket); !b.ok()) return b.status();
  ScopedFd fd(::open(source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return IoError(absl::StrCat("cannot open the uploaded file ", source), errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return IoError("fstat", errno);
  if (!S_ISREG(st.st_mode)) return absl::InternalError(absl::StrCat(source, " is not a regular file"));

  if (st.st_dev == dev_) {
    if (!known) {
      auto sums = common::ChecksumsOfFd(fd.get());
      if (!sums.ok()) return sums.status();
      known = *sums;
    }
    return Install(bucket, name, fd.get(), AT_FDCWD, source, options, *known);
  }
  // Another file system: copy into ROOT/.tmp (checksumming on the way), then install.
  auto info = InstallCopy(bucket, name, {{fd.get(), 0, -1}}, options);
  if (info.ok()) ::unlink(source.c_str());
  return info;
}

absl::StatusOr<ObjectInfo> BucketStore::PutRange(absl::string_view bucket, absl::string_view name, int source_fd,
                                                 int64_t offset, int64_t length, const WriteOptions& options) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  if (auto b = OpenBucketDir(bucket); !b.ok()) return b.status();
  return InstallCopy(bucket, name, {{source_fd, offset, length}}, options);
}

absl::StatusOr<ObjectInfo> BucketStore::InstallCopy(absl::string_view bucket, absl::string_view name,
                                                    const std::vector<Piece>& pieces, const WriteOptions& options,
                                                    const ObjectInfo* restored) {
  if (auto s = ValidateAttrs(options.attrs); !s.ok()) return s;
  std::string tmp_name;
  auto copy = MakeTemp("copy", &tmp_name);
  if (!copy.ok()) return copy.status();
  common::Checksummer sums;
  std::vector<char> buf(kCopyBufferBytes);
  absl::Status s;
  for (const Piece& piece : pieces) {
    int64_t at = piece.offset;
    int64_t left = piece.length;
    while (s.ok() && (piece.length < 0 || left > 0)) {
      const size_t want = piece.length < 0 ? buf.size() : static_cast<size_t>(std::min<int64_t>(left, buf.size()));
      ssize_t r = ::pread(piece.fd, buf.data(), want, at);
      if (r < 0) {
        if (errno == EINTR) continue;
        s = IoError("read", errno);
        break;
      }
      if (r == 0) {
        if (piece.length >= 0) s = absl::InternalError("a source shrank while it was being copied");
        break;
      }
      sums.Update(buf.data(), static_cast<size_t>(r));
      s = WriteAll(copy->get(), buf.data(), static_cast<size_t>(r));
      at += r;
      left -= r;
    }
    if (!s.ok()) break;
  }
  if (!s.ok()) {
    ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
    return s;
  }
  auto info = Install(bucket, name, copy->get(), tmp_fd_.get(), tmp_name, options, sums.Finish(), restored);
  if (!info.ok()) ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
  return info;
}

absl::StatusOr<ObjectInfo> BucketStore::Import(const ObjectInfo& info, int fd) {
  if (auto s = ValidateObjectName(info.name); !s.ok()) return s;
  if (auto b = EnsureBucket(info.bucket); !b.ok()) return b.status();
  WriteOptions options;
  options.attrs = info.attrs;
  if (info.checksums) {
    // The bytes read are the bytes the source described.
    options.expected_md5 = info.checksums->md5;
    options.expected_crc32c = info.checksums->crc32c;
  }
  return InstallCopy(info.bucket, info.name, {{fd, 0, -1}}, options, &info);
}

absl::StatusOr<ObjectInfo> BucketStore::Compose(absl::string_view bucket, absl::string_view name,
                                                const std::vector<ComposeSource>& sources,
                                                const WriteOptions& options) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  if (sources.empty() || sources.size() > static_cast<size_t>(kMaxComposeSources)) {
    return absl::InvalidArgumentError(
        absl::StrCat("A composition takes 1 to ", kMaxComposeSources, " source objects, not ", sources.size(), "."));
  }
  std::vector<ScopedFd> fds;
  std::vector<Piece> pieces;
  for (const ComposeSource& source : sources) {
    ScopedFd fd;
    auto info = StatOpen(bucket, source.name, &fd);
    if (!info.ok()) return info.status();
    Preconditions p;
    p.generation_match = source.if_generation_match;
    if (auto s = CheckPreconditions(p, &*info, absl::StrCat("source gs://", bucket, "/", source.name)); !s.ok()) {
      return s;
    }
    pieces.push_back({fd.get(), 0, info->size});
    fds.push_back(std::move(fd));
  }
  return InstallCopy(bucket, name, pieces, options);
}

absl::StatusOr<ObjectInfo> BucketStore::Copy(absl::string_view source_bucket, absl::string_view source_name,
                                             const Preconditions& source_preconditions, absl::string_view bucket,
                                             absl::string_view name,
                                             const std::function<absl::Status(ObjectAttrs&)>& change,
                                             const Preconditions& preconditions) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  if (auto b = OpenBucketDir(bucket); !b.ok()) return b.status();
  ScopedFd fd;
  auto source = StatOpen(source_bucket, source_name, &fd);
  if (!source.ok()) return source.status();
  if (auto s = CheckPreconditions(source_preconditions, &*source,
                                  absl::StrCat("source gs://", source_bucket, "/", source_name));
      !s.ok()) {
    return s;
  }
  WriteOptions options;
  options.attrs = source->attrs;
  if (change) {
    if (auto s = change(options.attrs); !s.ok()) return s;
  }
  options.preconditions = preconditions;
  // The copy must be what the source's checksums say (when known).
  if (source->checksums) {
    options.expected_md5 = source->checksums->md5;
    options.expected_crc32c = source->checksums->crc32c;
  }
  return InstallCopy(bucket, name, {{fd.get(), 0, source->size}}, options);
}

absl::StatusOr<ObjectInfo> BucketStore::UpdateAttrs(absl::string_view bucket, absl::string_view name,
                                                    const Preconditions& preconditions,
                                                    const std::function<absl::Status(ObjectAttrs&)>& change) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  absl::MutexLock lock(&namespace_mu_);
  auto dir = OpenObjectDir(bucket, name, false);
  if (!dir.ok()) return dir.status();
  struct stat st;
  if (::fstatat(dir->parent, dir->leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return NoSuchObject(bucket, name);
  if (S_ISLNK(st.st_mode)) return SymlinkRefused(bucket, name);
  if (!S_ISREG(st.st_mode)) return NoSuchObject(bucket, name);
  ObjectInfo info = Describe(bucket, name, st);
  if (auto s = CheckPreconditions(preconditions, &info, absl::StrCat("gs://", bucket, "/", name)); !s.ok()) return s;
  if (auto s = change(info.attrs); !s.ok()) return s;
  if (auto s = ValidateAttrs(info.attrs); !s.ok()) return s;
  ++info.metageneration;
  // `updated` is the file's mtime: a metadata update sets it (as Cloud
  // Storage does), and the metadata records the new one.
  const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  if (::utimensat(dir->parent, dir->leaf.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return IoError(absl::StrCat("cannot update gs://", bucket, "/", name), errno);
  }
  struct stat touched;
  if (::fstatat(dir->parent, dir->leaf.c_str(), &touched, AT_SYMLINK_NOFOLLOW) != 0) return IoError("fstatat", errno);
  if (touched.st_ino != st.st_ino || touched.st_size != st.st_size) {
    return absl::AbortedError(absl::StrCat("gs://", bucket, "/", name, " changed while its metadata was updated; retry."));
  }
  st = touched;
  info.updated = MtimeOf(st);
  if (auto s = WriteMeta(bucket, name, MetaOf(st, info)); !s.ok()) return s;
  return info;
}

// -- deleting --

absl::Status BucketStore::Delete(absl::string_view bucket, absl::string_view name,
                                 const Preconditions& preconditions) {
  if (auto s = ValidateObjectName(name); !s.ok()) return s;
  absl::MutexLock lock(&namespace_mu_);
  auto dir = OpenObjectDir(bucket, name, false);
  if (!dir.ok()) return dir.status();
  const std::string& leaf = dir->leaf;
  struct stat st;
  if (::fstatat(dir->parent, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return NoSuchObject(bucket, name);
    return IoError(absl::StrCat("cannot delete gs://", bucket, "/", name), errno);
  }
  if (S_ISLNK(st.st_mode)) return SymlinkRefused(bucket, name);
  if (!S_ISREG(st.st_mode)) return NoSuchObject(bucket, name);
  const ObjectInfo current = Describe(bucket, name, st);
  if (auto s = CheckPreconditions(preconditions, &current, absl::StrCat("gs://", bucket, "/", name)); !s.ok()) {
    return s;
  }
  if (::unlinkat(dir->parent, leaf.c_str(), 0) != 0) {
    return IoError(absl::StrCat("cannot delete gs://", bucket, "/", name), errno);
  }
  RemoveMeta(bucket, name);
  ::fsync(dir->parent);
  // Directories exist only to hold objects: remove the ones left empty.
  std::vector<absl::string_view> segments = absl::StrSplit(name, '/');
  for (size_t i = dir->chain.size(); i-- > 0;) {
    const int above = i == 0 ? dir->bucket.get() : dir->chain[i - 1].get();
    if (::unlinkat(above, std::string(segments[i]).c_str(), AT_REMOVEDIR) != 0) break;
  }
  return absl::OkStatus();
}

absl::Status BucketStore::DeleteBucket(absl::string_view bucket) {
  absl::MutexLock lock(&namespace_mu_);
  auto fd = OpenBucketDir(bucket);
  if (!fd.ok()) return fd.status();
  auto entries = ReadDir(fd->get());
  if (!entries.ok()) return entries.status();
  if (!entries->empty()) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "The bucket you tried to delete is not empty: gs://", bucket,
                          " still holds objects (or files a trainer wrote there). Delete them first.")),
                      "conflict", 409);
  }
  if (::unlinkat(root_fd_.get(), std::string(bucket).c_str(), AT_REMOVEDIR) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      return WithReason(absl::FailedPreconditionError(absl::StrCat(
                            "The bucket you tried to delete is not empty: gs://", bucket, " gained an object.")),
                        "conflict", 409);
    }
    return IoError(absl::StrCat("cannot delete bucket ", bucket), errno);
  }
  ::fsync(root_fd_.get());
  // Its metadata (a cache of nothing now).
  std::error_code ec;
  std::filesystem::remove_all(absl::StrCat(root_, "/", kMetaDir, "/", bucket), ec);
  return absl::OkStatus();
}

// -- resumable uploads --

void BucketStore::RemoveExpiredUploads() {
  auto entries = ReadDir(uploads_fd_.get());
  if (!entries.ok()) return;
  for (const auto& e : *entries) {
    if (!absl::EndsWith(e.name, ".session")) continue;
    const std::string id = e.name.substr(0, e.name.size() - 8);
    if (!GetUpload(id).ok()) CancelUpload(id).IgnoreError();  // expired or unreadable
  }
  // Data files whose session record never got written (a crash in between).
  for (const auto& e : *entries) {
    if (!absl::EndsWith(e.name, ".data")) continue;
    const std::string id = e.name.substr(0, e.name.size() - 5);
    struct stat st;
    if (::fstatat(uploads_fd_.get(), UploadFile(id, ".session").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ::unlinkat(uploads_fd_.get(), e.name.c_str(), 0);
    }
  }
}

namespace {
bool IsSessionId(absl::string_view id) {
  return id.size() == 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

absl::Status NoSuchUpload() {
  return absl::NotFoundError(
      "No such upload session: it never existed, was cancelled or completed, or expired (sessions last a week).");
}
}  // namespace

std::string BucketStore::UploadFile(absl::string_view id, absl::string_view suffix) const {
  return absl::StrCat(id, suffix);
}

absl::Status BucketStore::WriteSession(absl::string_view id, const SessionRecord& record) const {
  std::string tmp_name;
  auto tmp = MakeTemp("session", &tmp_name);
  if (!tmp.ok()) return tmp.status();
  const std::string content = EncodeSession(record);
  absl::Status s = WriteAll(tmp->get(), content.data(), content.size());
  if (s.ok() && ::fsync(tmp->get()) != 0) s = IoError("fsync", errno);
  if (s.ok() && ::renameat(tmp_fd_.get(), tmp_name.c_str(), uploads_fd_.get(),
                           UploadFile(id, ".session").c_str()) != 0) {
    s = IoError("cannot store the upload session", errno);
  }
  if (!s.ok()) {
    ::unlinkat(tmp_fd_.get(), tmp_name.c_str(), 0);
    return s;
  }
  ::fsync(uploads_fd_.get());
  return absl::OkStatus();
}

absl::StatusOr<UploadSession> BucketStore::CreateUpload(SessionRecord record) {
  if (auto s = ValidateObjectName(record.name); !s.ok()) return s;
  if (auto s = ValidateAttrs(record.options.attrs); !s.ok()) return s;
  if (auto b = OpenBucketDir(record.bucket); !b.ok()) return b.status();
  UploadSession session;
  const std::optional<std::string> id = common::RandomHex(32);
  if (!id) return absl::InternalError("cannot draw a random upload session id");
  session.id = *id;
  record.created_us = absl::ToUnixMicros(absl::Now());
  // The data file first: a session record always has one.
  ScopedFd data(::openat(uploads_fd_.get(), UploadFile(session.id, ".data").c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!data.valid()) return IoError("cannot create an upload session", errno);
  if (auto s = WriteSession(session.id, record); !s.ok()) {
    ::unlinkat(uploads_fd_.get(), UploadFile(session.id, ".data").c_str(), 0);
    return s;
  }
  session.record = std::move(record);
  return session;
}

absl::StatusOr<UploadSession> BucketStore::GetUpload(absl::string_view id) const {
  if (!IsSessionId(id)) return NoSuchUpload();
  auto text = ReadSmallFile(uploads_fd_.get(), UploadFile(id, ".session"), kMaxMetaFileBytes);
  if (!text) return NoSuchUpload();
  auto record = DecodeSession(*text);
  if (!record) return absl::InternalError(absl::StrCat("The upload session ", id, " is unreadable."));
  if (absl::FromUnixMicros(record->created_us) + kUploadSessionLifetime < absl::Now()) return NoSuchUpload();
  struct stat st;
  if (::fstatat(uploads_fd_.get(), UploadFile(id, ".data").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return NoSuchUpload();
  }
  UploadSession out;
  out.id = std::string(id);
  out.record = *std::move(record);
  out.received = st.st_size;
  return out;
}

absl::StatusOr<int64_t> BucketStore::AppendUpload(absl::string_view id, int64_t offset, const std::string& source) {
  auto session = GetUpload(id);
  if (!session.ok()) return session.status();
  ScopedFd data(::openat(uploads_fd_.get(), UploadFile(id, ".data").c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!data.valid()) return NoSuchUpload();
  if (::flock(data.get(), LOCK_EX | LOCK_NB) != 0) {
    return absl::AbortedError("Another request is writing to this upload session; retry after it ends.");
  }
  struct stat st;
  if (::fstat(data.get(), &st) != 0) return IoError("fstat", errno);
  const int64_t received = st.st_size;
  if (offset > received) {
    return absl::InvalidArgumentError(absl::StrCat("This piece starts at byte ", offset, " but only ", received,
                                                   " bytes were received: ask for the upload's status "
                                                   "(Content-Range: bytes */*) and resume from there."));
  }
  ScopedFd in(::open(source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return IoError("cannot open the uploaded piece", errno);
  struct stat in_st;
  if (::fstat(in.get(), &in_st) != 0) return IoError("fstat", errno);
  const int64_t skip = received - offset;
  if (in_st.st_size <= skip) return received;  // nothing new
  loff_t in_off = skip;
  loff_t out_off = received;
  int64_t left = in_st.st_size - skip;
  while (left > 0) {
    ssize_t n = ::copy_file_range(in.get(), &in_off, data.get(), &out_off, static_cast<size_t>(left), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
      // Fall back to read/write.
      std::vector<char> buf(kCopyBufferBytes);
      while (left > 0) {
        ssize_t r = ::pread(in.get(), buf.data(), std::min<int64_t>(left, buf.size()), in_off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return IoError("cannot read the uploaded piece", r < 0 ? errno : EIO);
        ssize_t w = ::pwrite(data.get(), buf.data(), static_cast<size_t>(r), out_off);
        if (w != r) return IoError("cannot store the uploaded piece", w < 0 ? errno : EIO);
        in_off += r;
        out_off += r;
        left -= r;
      }
      break;
    }
    if (n <= 0) return IoError("cannot store the uploaded piece", n < 0 ? errno : EIO);
    left -= n;
  }
  if (::fdatasync(data.get()) != 0) return IoError("cannot store the uploaded piece", errno);
  return static_cast<int64_t>(out_off);
}

absl::StatusOr<ObjectInfo> BucketStore::FinishUpload(absl::string_view id, const WriteOptions* final_expected) {
  auto session = GetUpload(id);
  if (!session.ok()) return session.status();
  const std::string data_name = UploadFile(id, ".data");
  ScopedFd data(::openat(uploads_fd_.get(), data_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!data.valid()) return NoSuchUpload();
  if (::flock(data.get(), LOCK_EX | LOCK_NB) != 0) {
    return absl::AbortedError("Another request is writing to this upload session; retry after it ends.");
  }
  auto sums = common::ChecksumsOfFd(data.get());
  if (!sums.ok()) return sums.status();
  WriteOptions options = session->record.options;
  if (final_expected != nullptr) {
    if (final_expected->expected_md5) options.expected_md5 = final_expected->expected_md5;
    if (final_expected->expected_crc32c) options.expected_crc32c = final_expected->expected_crc32c;
  }
  if (auto s = ValidateObjectName(session->record.name); !s.ok()) return s;
  auto info = Install(session->record.bucket, session->record.name, data.get(), uploads_fd_.get(), data_name,
                      options, *sums);
  // A checksum mismatch or failed precondition ends the session too (as
  // Cloud Storage does): what was received cannot become the object.
  if (info.ok() || info.status().code() == absl::StatusCode::kInvalidArgument ||
      info.status().code() == absl::StatusCode::kFailedPrecondition) {
    ::unlinkat(uploads_fd_.get(), data_name.c_str(), 0);
    ::unlinkat(uploads_fd_.get(), UploadFile(id, ".session").c_str(), 0);
  }
  return info;
}

absl::Status BucketStore::CancelUpload(absl::string_view id) {
  if (!IsSessionId(id)) return NoSuchUpload();
  const int a = ::unlinkat(uploads_fd_.get(), UploadFile(id, ".session").c_str(), 0);
  const int b = ::unlinkat(uploads_fd_.get(), UploadFile(id, ".data").c_str(), 0);
  if (a != 0 && b != 0) return NoSuchUpload();
  return absl::OkStatus();
}

// -- listing --

namespace {

// Lists a bucket in GCS order (byte order of names) by a depth-first walk
// that visits each directory's entries sorted by name, directories as
// "name/": every name under "d/" shares that prefix, so the walk's order is
// the global order and a page can stop early and skip what came before.
class Lister {
 public:
  Lister(absl::string_view bucket, const ListObjectsRequest& req, std::string after,
         std::function<ObjectInfo(const std::string&, const struct stat&)> describe)
      : bucket_(bucket),
        prefix_(req.prefix),
        delimiter_(req.delimiter),
        after_(std::move(after)),
        limit_(std::clamp(req.max_results, 1, kMaxListResults)),
        start_(req.start_offset),
        end_(req.end_offset),
        describe_(std::move(describe)) {}

  // False once the page is full (and there is more).
  absl::StatusOr<bool> Visit(int dir_fd, const std::string& dir_prefix) {
    auto entries = ReadDir(dir_fd);
    if (!entries.ok()) return entries.status();
    std::vector<std::pair<std::string, const Entry*>> keyed;
    for (const auto& e : *entries) {
      if (e.kind == EntryKind::kOther) continue;
      keyed.emplace_back(e.kind == EntryKind::kDir ? e.name + "/" : e.name, &e);
    }
    std::sort(keyed.begin(), keyed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, entry] : keyed) {
      const std::string full = dir_prefix + key;
      if (entry->kind == EntryKind::kDir) {
        if (!absl::StartsWith(full, prefix_) && !absl::StartsWith(prefix_, full)) continue;
        // Wholly before startOffset, or wholly at or after endOffset.
        if (!start_.empty() && full < start_ && !absl::StartsWith(start_, full)) continue;
        if (!end_.empty() && full >= end_) continue;
        // Everything below sorts before the page token.
        if (!after_.empty() && full < after_ && !absl::StartsWith(after_, full)) continue;
        ScopedFd sub = OpenDirAt(dir_fd, entry->name);
        if (!sub.valid()) continue;  // vanished, or replaced by a symlink
        if (auto group = GroupOf(full)) {
          // The whole directory collapses into one prefix.
          if (Skips(*group) || !InRange(*group) || !HasObject(sub.get(), full)) continue;
          if (!Emit(*group, nullptr)) return false;
          continue;
        }
        auto more = Visit(sub.get(), full);
        if (!more.ok() || !*more) return more;
        continue;
      }
      if (!absl::StartsWith(full, prefix_) || !ValidateObjectName(full).ok()) continue;
      if (!InRange(full)) continue;
      if (auto group = GroupOf(full)) {
        if (!InRange(*group)) continue;
        if (!Emit(*group, nullptr)) return false;
        continue;
      }
      struct stat st;
      if (::fstatat(dir_fd, entry->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      ObjectInfo info = describe_(full, st);
      if (!Emit(full, &info)) return false;
    }
    return true;
  }

  ListObjectsResult Finish() {
    if (more_) result_.next_page_token = absl::WebSafeBase64Escape(last_);
    return std::move(result_);
  }

 private:
  // The prefix a name (or a directory "d/") is grouped under, if any.
  std::optional<std::string> GroupOf(const std::string& full) const {
    if (delimiter_.empty() || !absl::StartsWith(full, prefix_)) return std::nullopt;
    auto pos = full.find(delimiter_, prefix_.size());
    if (pos == std::string::npos) return std::nullopt;
    return full.substr(0, pos + delimiter_.size());
  }

  // Whether a listable object lies anywhere below.
  bool HasObject(int dir_fd, const std::string& dir_prefix) const {
    auto entries = ReadDir(dir_fd);
    if (!entries.ok()) return false;
    for (const auto& e : *entries) {
      if (e.kind == EntryKind::kFile && ValidateObjectName(dir_prefix + e.name).ok()) return true;
    }
    for (const auto& e : *entries) {
      if (e.kind != EntryKind::kDir) continue;
      ScopedFd sub = OpenDirAt(dir_fd, e.name);
      if (sub.valid() && HasObject(sub.get(), dir_prefix + e.name + "/")) return true;
    }
    return false;
  }

  bool InRange(const std::string& key) const { return key >= start_ && (end_.empty() || key < end_); }

  // Already returned: on an earlier page, or (a prefix) just now.
  bool Skips(const std::string& key) const {
    return (!after_.empty() && key <= after_) || (count_ > 0 && key == last_);
  }

  // Adds an item (info != null) or a prefix with sort key `key`; false when
  // the page was already full (so there is a next page).
  bool Emit(const std::string& key, ObjectInfo* info) {
    if (Skips(key)) return true;
    if (count_ == limit_) {
      more_ = true;
      return false;
    }
    ++count_;
    last_ = key;
    if (info) {
      result_.items.push_back(std::move(*info));
    } else {
      result_.prefixes.push_back(key);
    }
    return true;
  }

  absl::string_view bucket_;
  const std::string prefix_;
  const std::string delimiter_;
  const std::string after_;
  const int limit_;
  const std::string start_;
  const std::string end_;
  std::function<ObjectInfo(const std::string&, const struct stat&)> describe_;
  ListObjectsResult result_;
  int count_ = 0;
  bool more_ = false;
  std::string last_;
};

}  // namespace

absl::StatusOr<ListObjectsResult> BucketStore::List(absl::string_view bucket,
                                                    const ListObjectsRequest& request) const {
  std::string after;
  if (!request.page_token.empty() && !absl::WebSafeBase64Unescape(request.page_token, &after)) {
    return absl::InvalidArgumentError("The page token is not one this server returned.");
  }
  auto bucket_fd = OpenBucketDir(bucket);
  if (!bucket_fd.ok()) return bucket_fd.status();
  Lister lister(bucket, request, std::move(after),
                [this, bucket](const std::string& name, const struct stat& st) { return Describe(bucket, name, st); });
  auto walked = lister.Visit(bucket_fd->get(), "");
  if (!walked.ok()) return walked.status();
  return lister.Finish();
}

absl::StatusOr<std::string> BucketStore::LocalPath(absl::string_view bucket, absl::string_view path) const {
  if (auto s = ValidateBucketName(bucket); !s.ok()) return s;
  if (auto s = ValidatePath(path); !s.ok()) return s;
  return path.empty() ? absl::StrCat(root_, "/", bucket) : absl::StrCat(root_, "/", bucket, "/", path);
}

}  // namespace mle::buckets
