// Backups of a data directory, and restores from them (mlengined backup,
// mlengined restore; docs/operations.md).
//
// A backup is a directory:
//   backup.json    what it holds (written last: without it the backup is
//                  not whole); {"format": "mlengine-backup-v1", ...}
//   mlengine.db    the database at one moment (SQLite's online backup):
//                  jobs, projects, users, token hashes, policies, service
//                  accounts, studies, quotas, the audit log
//   buckets/       every object, with its generation, metageneration,
//                  creation time, attributes and checksums (each object
//                  whole, checked against its checksums; one a trainer
//                  rewrites in place all the while is left out, and named)
//   runs/          each job's run records: replicas' logs, exit statuses,
//                  metrics, manifests (not their work or tmp directories)
//   admin.token    the operator's token
// Not kept: package environments and warm interpreters (made again when a
// job needs them), resumable uploads in progress, and what a running
// replica holds in memory. A job running at the backup is, once restored,
// as one whose machine restarted: its start is undone and it runs again
// (or fails, if its attempts are spent).
//
// Both run while nothing else writes the destination. A backup is taken
// while mlengined serves: the database copy is atomic; each object is
// whole, as of a moment during the backup; logs are as long as they were
// when copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "buckets/bucket_store.h"
#include "db/store.h"

namespace mle::backup {

inline constexpr char kFormat[] = "mlengine-backup-v1";

struct Summary {
  db::DatabaseSummary database;  // its schema and counts
  int64_t buckets = 0;
  int64_t objects = 0;
  int64_t object_bytes = 0;
  // gs://BUCKET/NAME (why) of each object left out: rewritten in place, or
  // turned into a link, each time it was read (a trainer writing it then).
  std::vector<std::string> skipped_objects;
  int64_t run_files = 0;
  int64_t run_bytes = 0;
  absl::Duration took;
};

// Its description as backup.json and the backups API say it:
// {"schemaVersion", "jobs", "projects", "records", "buckets", "objects",
// "objectBytes", "skippedObjects", "runFiles", "runBytes", "seconds"}; and
// back.
nlohmann::json SummaryJson(const Summary& summary);
Summary SummaryFromJson(const nlohmann::json& o);

// Writes a backup of the data directory `data_dir`, whose database is
// `store` and objects `objects`, into `to` (absolute; it must not exist or
// be an empty directory, and must lie outside data_dir). On failure what
// was written is left for the operator to look at, without backup.json.
absl::StatusOr<Summary> WriteBackup(db::Store& store, const buckets::BucketStore& objects,
                                    const std::string& data_dir, const std::string& to);

// Restores the backup in `from` into `data_dir`, which must not exist or
// be an empty directory. Refuses a backup a later mlengined made (its
// database schema is newer than this one's) and one that is not whole.
absl::StatusOr<Summary> RestoreBackup(const std::string& from, const std::string& data_dir);

// The backup's own description (backup.json), checked: FAILED_PRECONDITION
// when it is missing (not a whole backup) or of a format or schema this
// mlengined does not read.
absl::StatusOr<Summary> ReadSummary(const std::string& from);

}  // namespace mle::backup
