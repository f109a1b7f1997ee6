// BucketStore: the gs:// object store, kept as a plain directory tree so that
// replicas see every bucket B as the directory $MLENGINE_GCS_ROOT/B.
//
// Layout under ROOT (e.g. DATA_DIR/buckets):
//   ROOT/BUCKET/<object name>   the object's bytes, a plain file; '/' in a
//                               name is a directory. This directory IS what
//                               replicas see, so nothing else lives in it.
//   ROOT/.meta/BUCKET/xx/<h>    per-object metadata (object_meta.h: size,
//                               mtime, inode, generation, metageneration,
//                               MD5/CRC32C, content type, user metadata),
//                               h = hex SHA-256 of the object name, xx its
//                               first two digits. Only believed while size,
//                               mtime and inode still match the file, so
//                               files written by trainers (no metadata) or
//                               rewritten by them are served with generation
//                               and updated from their mtime and checksums
//                               computed on demand (and then remembered).
//   ROOT/.tmp/                  temporary files (uploads in flight); emptied
//                               at Open, never listed.
//   ROOT/.uploads/<id>.session  resumable upload sessions (object_meta.h)
//   ROOT/.uploads/<id>.data     and the bytes received so far; they survive
//                               a restart and are removed a week after they
//                               began (as Cloud Storage's sessions expire).
// Bucket names cannot start with '.', so they never collide with these.
//
// Crash safety: an object is written to ROOT/.tmp (or .uploads), fsynced,
// its metadata written (temp file, fsync, rename), then renamed into place
// and its directory fsynced. A crash leaves either the old object or the
// new one, plus at worst a temporary file that Open removes.
//
// Generations: an object installed here gets generation max(now in
// microseconds, previous generation + 1) and metageneration 1; changing its
// metadata (UpdateAttrs) increments the metageneration. Preconditions
// (Preconditions) are checked under the namespace lock together with the
// rename that installs, so two writers with ifGenerationMatch cannot both win.
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
#include <functional>
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
#include "buckets/object_meta.h"
#include "common/checksums.h"

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
  // Only names in [start_offset, end_offset) (end "" = no end).
  std::string start_offset;
  std::string end_offset;
  // With a delimiter: an object named exactly like a prefix ("d/" for
  // delimiter "/") is listed too. Never true here: such names cannot exist.
  bool include_trailing_delimiter = false;
};

struct ListObjectsResult {
  std::vector<ObjectInfo> items;      // by name, byte order
  std::vector<std::string> prefixes;  // by name, byte order
  std::string next_page_token;        // empty on the last page
};

// One source of Compose: the object, and optionally the generation it must have.
struct ComposeSource {
  std::string name;
  std::optional<int64_t> if_generation_match;
};
inline constexpr int kMaxComposeSources = 32;

// A resumable upload in progress (see CreateUpload).
struct UploadSession {
  std::string id;  // 64 hex digits from a CSPRNG: the session's only name
  SessionRecord record;
  int64_t received = 0;  // bytes stored so far (the prefix 0..received-1)
};
inline constexpr absl::Duration kUploadSessionLifetime = absl::Hours(24 * 7);

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

  // Removes an empty bucket (and its metadata); FAILED_PRECONDITION with
  // reason "conflict" (StorageErrorReason) when it holds anything.
  absl::Status DeleteBucket(absl::string_view bucket);

  // Writes `content` as the object (replacing it). The bucket must exist.
  // Every write below checks options.preconditions atomically with the
  // install and options' expected checksums before it (INVALID_ARGUMENT on
  // a mismatch; nothing is installed).
  absl::StatusOr<ObjectInfo> Put(absl::string_view bucket, absl::string_view name, absl::string_view content,
                                 const WriteOptions& options = {});
  // Moves the file at `source` (a temporary file the caller owns; if it is on
  // another file system it is copied) into place as the object. `known`
  // when the caller already checksummed the bytes, else they are computed
  // here. On failure `source` is left where it was.
  absl::StatusOr<ObjectInfo> PutFile(absl::string_view bucket, absl::string_view name, const std::string& source,
                                     const WriteOptions& options = {},
                                     std::optional<common::Checksums> known = std::nullopt);
  // Copies `length` bytes of `source_fd` from `offset` (e.g. the media part
  // of a multipart upload) into place as the object.
  absl::StatusOr<ObjectInfo> PutRange(absl::string_view bucket, absl::string_view name, int source_fd,
                                      int64_t offset, int64_t length, const WriteOptions& options = {});
  // The concatenation of `sources` (objects of `bucket`, at most
  // kMaxComposeSources) as `name`; options.attrs are the new object's.
  absl::StatusOr<ObjectInfo> Compose(absl::string_view bucket, absl::string_view name,
                                     const std::vector<ComposeSource>& sources, const WriteOptions& options);
  // A copy of an object (checked against `source_preconditions`), with the
  // source's attributes as `change` (if any) changes them.
  absl::StatusOr<ObjectInfo> Copy(absl::string_view source_bucket, absl::string_view source_name,
                                  const Preconditions& source_preconditions, absl::string_view bucket,
                                  absl::string_view name, const std::function<absl::Status(ObjectAttrs&)>& change,
                                  const Preconditions& preconditions);
  // Changes the object's attributes with `change` (which may refuse),
  // metageneration + 1. The bytes are untouched.
  absl::StatusOr<ObjectInfo> UpdateAttrs(absl::string_view bucket, absl::string_view name,
                                         const Preconditions& preconditions,
                                         const std::function<absl::Status(ObjectAttrs&)>& change);

  // The object's metadata. With `compute_checksums`, checksums not known
  // from metadata are computed (reading the whole file) and remembered.
  absl::StatusOr<ObjectInfo> Stat(absl::string_view bucket, absl::string_view name, bool compute_checksums) const;
  // The object opened for reading; with `compute_checksums` as Stat, for
  // the descriptor returned (so the checksums describe what is read).
  absl::StatusOr<OpenedObject> OpenObject(absl::string_view bucket, absl::string_view name,
                                          bool compute_checksums = false) const;
  // The whole content (for small objects and tests).
  absl::StatusOr<std::string> Read(absl::string_view bucket, absl::string_view name) const;

  absl::StatusOr<ListObjectsResult> List(absl::string_view bucket, const ListObjectsRequest& request) const;

  // NOT_FOUND when absent. Empty directories left behind are removed.
  absl::Status Delete(absl::string_view bucket, absl::string_view name, const Preconditions& preconditions = {});

  // ---- resumable uploads ----
  // A new session for writing `record.name` in `record.bucket` (which must
  // exist, checked now and again when it completes).
  absl::StatusOr<UploadSession> CreateUpload(SessionRecord record);
  // NOT_FOUND for an unknown, cancelled, completed or expired session.
  absl::StatusOr<UploadSession> GetUpload(absl::string_view id) const;
  // Stores bytes [offset, offset + size of `source`) of the upload: bytes
  // before `received` are skipped (a client resending what was stored),
  // offset > received is INVALID_ARGUMENT. Moves or copies `source` (a
  // temporary file on this file system, which the caller owns). The new
  // received count is durable when this returns. ABORTED when another
  // request is writing the same session.
  absl::StatusOr<int64_t> AppendUpload(absl::string_view id, int64_t offset, const std::string& source);
  // Installs the bytes received as the object (checking the session's
  // preconditions and expected checksums, and `final_expected` ones sent
  // with the last piece) and ends the session.
  absl::StatusOr<ObjectInfo> FinishUpload(absl::string_view id, const WriteOptions* final_expected = nullptr);
  // Ends the session and removes what it stored. NOT_FOUND when unknown.
  absl::Status CancelUpload(absl::string_view id);

  // An object as another store had it (mlengined backup and restore): the
  // bytes of `fd` (from offset 0 to its end) under info's bucket and name,
  // with info's generation, metageneration, creation time and attributes.
  // When info has checksums the bytes must match them (INVALID_ARGUMENT
  // otherwise). Makes the bucket; replaces what is there.
  absl::StatusOr<ObjectInfo> Import(const ObjectInfo& info, int fd);

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
  // Verifies `sums` against the options' expected checksums, fsyncs `fd`
  // (the file at source_dir/source), checks the preconditions against the
  // current object, writes the metadata and renames the file into place.
  // `restored`: the object as a backup kept it (Import): its generation,
  // metageneration and creation time, whatever is there now.
  absl::StatusOr<ObjectInfo> Install(absl::string_view bucket, absl::string_view name, int fd, int source_dir,
                                     const std::string& source, const WriteOptions& options,
                                     const common::Checksums& sums, const ObjectInfo* restored = nullptr)
      ABSL_LOCKS_EXCLUDED(namespace_mu_);
  // Copies `length` bytes (or to the end, length < 0) of each source into
  // a temporary file, checksumming them, and installs it.
  struct Piece {
    int fd;
    int64_t offset;
    int64_t length;
  };
  absl::StatusOr<ObjectInfo> InstallCopy(absl::string_view bucket, absl::string_view name,
                                         const std::vector<Piece>& pieces, const WriteOptions& options,
                                         const ObjectInfo* restored = nullptr);
  absl::Status WriteMeta(absl::string_view bucket, absl::string_view name, const ObjectMeta& meta) const;
  std::optional<ObjectMeta> ReadMeta(absl::string_view bucket, absl::string_view name, const struct stat& st) const;
  void RemoveMeta(absl::string_view bucket, absl::string_view name) const;
  // The object as the store describes it: from its metadata when that still
  // matches `st`, else from `st` alone.
  ObjectInfo Describe(absl::string_view bucket, absl::string_view name, const struct stat& st) const;
  absl::StatusOr<ObjectInfo> StatOpen(absl::string_view bucket, absl::string_view name, ScopedFd* fd_out) const;
  // Computes and remembers the checksums of the file open as `fd`.
  absl::Status FillChecksums(ObjectInfo& info, int fd) const;
  // The current object at dir/leaf (nullopt when there is none), under the lock.
  absl::StatusOr<std::optional<ObjectInfo>> CurrentAt(absl::string_view bucket, absl::string_view name, int dir,
                                                      const std::string& leaf) const;
  std::string UploadFile(absl::string_view id, absl::string_view suffix) const;
  absl::Status WriteSession(absl::string_view id, const SessionRecord& record) const;
  void RemoveExpiredUploads();

  const std::string root_;
  const ScopedFd root_fd_;  // ROOT
  const ScopedFd tmp_fd_;   // ROOT/.tmp
  ScopedFd uploads_fd_;     // ROOT/.uploads
  const dev_t dev_;         // ROOT's file system
  mutable absl::Mutex namespace_mu_;
};

}  // namespace mle::buckets
