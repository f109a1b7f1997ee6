// What the object store knows about an object beyond its bytes, the rules
// on it that are pure functions (preconditions, metadata limits), and the
// two small files that hold it on disk, written and read only here:
//
//   object metadata   ROOT/.meta/BUCKET/xx/<h>  (EncodeObjectMeta)
//   upload session    ROOT/.uploads/<id>.session (EncodeSession)
//
// Both are text: a magic first line ("mle-object-meta-v2",
// "mle-upload-session-v1"), then one record per line, fields separated by
// tabs, each field C-escaped (so tabs and newlines in values are safe):
//   size N | mtime NS | ino N | generation N | metageneration N |
//   created UNIX_US | md5 HEX | crc32c N | content_type S | meta KEY VALUE
//   (sessions: bucket S | name S | owner S | if_generation_match N | ... )
// Unknown records are skipped, so a later version may add some.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/checksums.h"

namespace mle::buckets {

// What a writer sets on an object.
struct ObjectAttrs {
  std::string content_type;                     // "" = not set (served as application/octet-stream)
  std::map<std::string, std::string> metadata;  // the user's key/values
};
inline constexpr size_t kMaxCustomMetadataBytes = 8 * 1024;  // Cloud Storage's limit (keys + values)
// INVALID_ARGUMENT when the custom metadata exceeds Cloud Storage's limit or
// a key is empty, or the content type is unreasonable.
absl::Status ValidateAttrs(const ObjectAttrs& attrs);

struct ObjectInfo {
  std::string bucket;
  std::string name;
  int64_t size = 0;
  int64_t generation = 0;  // microseconds since the epoch when written
  int64_t metageneration = 1;
  absl::Time created;
  absl::Time updated;  // the file's mtime
  ObjectAttrs attrs;
  std::optional<common::Checksums> checksums;  // unknown until computed (see Stat)
};

// Cloud Storage's conditions on the object's current state; a write with
// generation_match 0 requires that there is no object.
struct Preconditions {
  std::optional<int64_t> generation_match;
  std::optional<int64_t> generation_not_match;
  std::optional<int64_t> metageneration_match;
  std::optional<int64_t> metageneration_not_match;
};
// OK, or FAILED_PRECONDITION with reason conditionNotMet (412) naming the
// condition that failed. `current` is null when there is no object.
absl::Status CheckPreconditions(const Preconditions& p, const ObjectInfo* current, absl::string_view what);

// What a write promises and requires.
struct WriteOptions {
  ObjectAttrs attrs;
  Preconditions preconditions;
  // Checksums the client computed; a mismatch refuses the write (400).
  std::optional<std::string> expected_md5;  // raw digest bytes
  std::optional<uint32_t> expected_crc32c;
};
// INVALID_ARGUMENT (a person-readable message) when `actual` differs from
// what `options` expects.
absl::Status VerifyChecksums(const WriteOptions& options, const common::Checksums& actual);

// Cloud Storage error reasons the store's statuses carry (payload), for the
// API's error body and its HTTP status: "conditionNotMet" (412),
// "conflict" (409), "requestedRangeNotSatisfiable" (416).
absl::Status WithReason(absl::Status status, absl::string_view reason, int http_status);
struct ErrorReason {
  std::string reason;
  int http_status = 0;
};
std::optional<ErrorReason> ReasonOf(const absl::Status& status);

// The metadata file of an object: believed only while size, mtime and
// inode still match the file.
struct ObjectMeta {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t ino = 0;
  int64_t generation = 0;
  int64_t metageneration = 1;
  int64_t created_us = 0;
  ObjectAttrs attrs;
  std::optional<common::Checksums> checksums;
};
std::string EncodeObjectMeta(const ObjectMeta& meta);
std::optional<ObjectMeta> DecodeObjectMeta(absl::string_view text);

// A resumable upload session's record.
struct SessionRecord {
  std::string bucket;
  std::string name;
  std::string owner;  // the member who began it; only they may continue it
  WriteOptions options;
  int64_t created_us = 0;
};
std::string EncodeSession(const SessionRecord& record);
std::optional<SessionRecord> DecodeSession(absl::string_view text);

}  // namespace mle::buckets
