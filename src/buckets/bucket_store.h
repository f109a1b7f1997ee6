// BucketStore: the gs:// object store, kept as a plain directory tree so that
// replicas see every bucket B as the directory $MLENGINE_GCS_ROOT/B.
//
// Layout under ROOT (e.g. DATA_DIR/buckets):
//   ROOT/BUCKET/<object name>   the object's bytes, a plain file; '/' in a
//                               name is a directory. This directory IS what
//                               replicas see, so nothing else lives in it.
//   ROOT/.meta/BUCKET/xx/<h>    per-object metadata (size, mtime, inode,
//                               sha256), h = hex SHA-256 of the object name,
//                               xx its first two digits. A cache: it is only
//                               believed while size, mtime and inode still
//                               match the file, so files written by trainers
//                               (no metadata) or rewritten by them are served
//                               with size/updated from stat and their sha256
//                               computed on demand.
//   ROOT/.tmp/                  temporary files (uploads in flight); emptied
//                               at Open, never listed.
// Bucket names cannot start with '.', so they never collide with .meta/.tmp.
//
// Crash safety: an object is written to ROOT/.tmp, fsynced, its metadata
// written (temp file, fsync, rename), then renamed into place and its
// directory fsynced. A crash leaves either the old object or the new one,
// plus at worst a temporary file that Open removes.
//
// Symbolic links are never followed below ROOT: every path is walked one
// component at a time with openat(O_NOFOLLOW); a symlink met on the way (or
// as the object itself) is refused with FAILED_PRECONDITION, and listings
// skip symlinks and anything that is not a regular file or directory.
//
// Names (see ValidateBucketName / ValidateObjectName):
//   bucket: 3-63 characters of [a-z0-9-_.], starting and ending with a letter
//     or digit, not an IPv4 address.
//   object: 1-1024 bytes of UTF-8; no NUL, '\\', '\r', '\n'; no leading '/';
//     segments between '/' non-empty (so no "a//b" and no trailing '/',
//     which a file system could not tell from "a/b" and the directory "a"),
//     never "." or "..", each at most 255 bytes (a file name's limit).
//   A file system cannot hold both "a" and "a/b": writing one while the
//   other exists is FAILED_PRECONDITION.
//
// Thread-safe: namespace changes (creating directories, renaming into place,
// deleting and pruning empty directories) are serialized by one mutex; the
// slow parts (hashing, fsync of data) run outside it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mle::buckets {

// An owned file descriptor (closed on destruction). Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// INVALID_ARGUMENT naming the rule broken, or OK.
absl::Status ValidateBucketName(absl::string_view name);
absl::Status ValidateObjectName(absl::string_view name);

// "gs://BUCKET[/PATH]" split into its bucket and path. The path may be empty
// or end with '/' (a prefix, e.g. a job directory); otherwise it follows the
// object name rules.
struct GcsUri {
  std::string bucket;
  std::string path;
};
absl::StatusOr<GcsUri> ParseGcsUri(absl::string_view uri);

struct ObjectInfo {
  std::string bucket;
  std::string name;
  int64_t size = 0;
  absl::Time updated;  // the file's mtime
  std::string sha256;  // lowercase hex; empty when not known (see Stat)
};

struct BucketInfo {
  std::string name;
  absl::Time created;  // the directory's birth time (its mtime where unknown)
  absl::Time updated;  // the directory's mtime
};

struct OpenedObject {
  ScopedFd fd;  // open for reading, at offset 0
  ObjectInfo info;
};

struct ListObjectsRequest {
  std::string prefix;
  std::string delimiter;   // "" = no grouping
  std::string page_token;  // from a previous ListObjectsResult
  int max_results = 1000;  // items + prefixes per page, clamped to [1, 1000]
};

struct ListObjectsResult {
  std::vector<ObjectInfo> items;      // by name, byte order
  std::vector<std::string> prefixes;  // by name, byte order
  std::string next_page_token;        // empty on the last page
};

class BucketStore {
 public:
  // Opens (creating it if needed) the store rooted at `root`; removes what a
  // previous run left in ROOT/.tmp.
  static absl::StatusOr<std::unique_ptr<BucketStore>> Open(const std::string& root);
  ~BucketStore();

  // The absolute root: $MLENGINE_GCS_ROOT for replicas.
  const std::string& root() const { return root_; }
  // Where the HTTP server should stream uploads (same file system as the
  // buckets, so PutFile is a rename).
  std::string upload_dir() const { return root_ + "/.tmp"; }

  // ALREADY_EXISTS when it exists.
  absl::StatusOr<BucketInfo> CreateBucket(absl::string_view bucket);
  // Creates the bucket unless it exists.
  absl::StatusOr<BucketInfo> EnsureBucket(absl::string_view bucket);
  absl::StatusOr<BucketInfo> GetBucket(absl::string_view bucket) const;
  // Every bucket (directories under ROOT with a valid bucket name), by name.
  absl::StatusOr<std::vector<BucketInfo>> ListBuckets() const;

  // Writes `content` as the object (replacing it). The bucket must exist.
  absl::StatusOr<ObjectInfo> Put(absl::string_view bucket, absl::string_view name, absl::string_view content);
  // Moves the file at `source` (a temporary file the caller owns; if it is on
  // another file system it is copied) into place as the object. `sha256_hex`
  // when the caller already hashed the bytes, else it is computed here. On
  // failure `source` is left where it was.
  absl::StatusOr<ObjectInfo> PutFile(absl::string_view bucket, absl::string_view name, const std::string& source,
                                     std::optional<std::string> sha256_hex = std::nullopt);

  // The object's metadata. With `compute_sha256`, a sha256 not known from
  // metadata is computed (reading the whole file) and remembered.
  absl::StatusOr<ObjectInfo> Stat(absl::string_view bucket, absl::string_view name, bool compute_sha256) const;
  // The object opened for reading (info.sha256 only when known).
  absl::StatusOr<OpenedObject> OpenObject(absl::string_view bucket, absl::string_view name) const;
  // The whole content (for small objects and tests).
  absl::StatusOr<std::string> Read(absl::string_view bucket, absl::string_view name) const;

  absl::StatusOr<ListObjectsResult> List(absl::string_view bucket, const ListObjectsRequest& request) const;

  // NOT_FOUND when absent. Empty directories left behind are removed.
  absl::Status Delete(absl::string_view bucket, absl::string_view name);

  // ROOT/BUCKET/PATH, the file a replica sees (path as in GcsUri: may be
  // empty or end with '/'). Names are validated; nothing is created.
  absl::StatusOr<std::string> LocalPath(absl::string_view bucket, absl::string_view path) const;

 private:
  BucketStore(std::string root, ScopedFd root_fd, ScopedFd tmp_fd, dev_t dev);

  // ROOT/BUCKET, never through a symlink.
  absl::StatusOr<ScopedFd> OpenBucketDir(absl::string_view bucket) const;
  // Walks (creating with `create`) the directories of `name` below the
  // bucket without following symlinks; returns the leaf's directory, owned
  // by `chain` (or bucket_fd itself), which holds every directory opened.
  // An object's parent directory, reached without following symlinks; the
  // descriptors of the path stay open while this lives. `parent` belongs to
  // `bucket` or `chain`.
  struct ObjectDir {
    ScopedFd bucket;
    std::vector<ScopedFd> chain;
    int parent = -1;
    std::string leaf;  // the object's last path segment
  };
  absl::StatusOr<ObjectDir> OpenObjectDir(absl::string_view bucket, absl::string_view name, bool create) const;
  absl::StatusOr<int> OpenParentDir(int bucket_fd, absl::string_view bucket, absl::string_view name, bool create,
                                    std::vector<ScopedFd>* chain) const;
  // A new empty file in ROOT/.tmp; its name there in *name.
  absl::StatusOr<ScopedFd> MakeTemp(const std::string& tag, std::string* name) const;
  // fsyncs `fd` (the file at source_dir/source), writes its metadata and
  // renames it into place.
  absl::StatusOr<ObjectInfo> Install(absl::string_view bucket, absl::string_view name, int fd, int source_dir,
                                     const std::string& source, const std::string& sha256)
      ABSL_LOCKS_EXCLUDED(namespace_mu_);
  absl::Status WriteMeta(absl::string_view bucket, absl::string_view name, const struct stat& st,
                         const std::string& sha256) const;
  std::optional<std::string> ReadMeta(absl::string_view bucket, absl::string_view name, const struct stat& st) const;
  void RemoveMeta(absl::string_view bucket, absl::string_view name) const;
  absl::StatusOr<ObjectInfo> StatOpen(absl::string_view bucket, absl::string_view name, ScopedFd* fd_out) const;

  const std::string root_;
  const ScopedFd root_fd_;  // ROOT
  const ScopedFd tmp_fd_;   // ROOT/.tmp
  const dev_t dev_;         // ROOT's file system
  mutable absl::Mutex namespace_mu_;
};

}  // namespace mle::buckets
