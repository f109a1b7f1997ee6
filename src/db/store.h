// Durable state of mlengined: projects, jobs (opaque bodies the service
// encodes), identity records (opaque bodies the iam module encodes) and the
// audit log. The service keeps the
// working copy in memory and writes through this interface before it answers;
// at start it loads everything back. Implementations: SqliteStore (embedded,
// one file in WAL mode); PostgreSQL later, same interface.
//
// Thread-safe: Commit may be called from any thread. Writes issued
// concurrently are grouped into one transaction (group commit), and each
// caller is told once its mutation is durable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/project.h"

namespace mle::db {

// A job as the store keeps it: what it is found and ordered by, in columns,
// and the rest as the service's encoding, which the store never reads.
struct StoredJob {
  std::string project;
  std::string job_id;
  int64_t sequence = 0;  // creation order; never changes
  std::string state;     // for a person reading the database
  std::string body;
};

// Insert or replace, keyed by (project, job_id) / project id. The body is
// `encode()` when it is set: the writer calls it as it writes, off the
// caller's thread (which may hold its own locks while it commits);
// otherwise `job.body`.
struct PutJob {
  StoredJob job;
  std::function<std::string()> encode = nullptr;

  // The row as written.
  StoredJob Row() const {
    StoredJob row = job;
    if (encode) row.body = encode();
    return row;
  }
};
struct PutProject {
  model::Project project;
};
// A record of some kind (users, service accounts, tokens, policies, ...),
// keyed within its kind; the body is the owner's encoding.
struct Record {
  std::string kind;
  std::string key;
  std::string body;
  bool operator==(const Record&) const = default;
};
struct PutRecord {
  Record record;
};
struct DeleteRecord {
  std::string kind;
  std::string key;
};
// One line of the audit log: append-only.
struct AuditRecord {
  int64_t time_us = 0;
  std::string project;    // the project the call concerned ("" for none)
  std::string principal;  // "user:alice@example.com", "operator", ...
  std::string method;     // "ml.projects.jobs.create"
  std::string resource;   // "projects/p/jobs/j"
  std::string outcome;    // "OK", "PERMISSION_DENIED", ...
  std::string request_id;
  int64_t sequence = 0;   // assigned by the store, increasing
  bool operator==(const AuditRecord&) const = default;
};
struct AppendAudit {
  AuditRecord record;
};
// A job gone for good (Vertex AI's customJobs.delete of a job that ended).
struct DeleteJob {
  std::string project;
  std::string job_id;
};
using Mutation = std::variant<PutJob, PutProject, PutRecord, DeleteRecord, AppendAudit, DeleteJob>;

struct Snapshot {
  std::vector<model::Project> projects;
  std::vector<StoredJob> jobs;  // in creation order
};

// A page of a project's audit log, newest first.
struct AuditQuery {
  std::string project;
  int64_t before_sequence = 0;  // 0: from the newest
  int limit = 100;
};

// How far a commit reaches before its caller is told it is done.
enum class Sync {
  // On disk: it survives a crash of the machine. What a caller was told
  // (a job accepted, its end), a revocation, anything a job that outlives
  // this machine (Slurm's) depends on.
  kDurable,
  // Committed, not flushed: a restarted mlengined reads it (after kill -9
  // too); a crash of the machine may lose it, and the next kDurable commit
  // (or SQLite's checkpoint) carries it to disk. For steps that recovery
  // takes again after a machine crash anyway: a local job's PREPARING and
  // RUNNING, the token of its replicas (which end with the machine), why a
  // job waits. Each saves a disk flush per job.
  kLazy,
};

class Store {
 public:
  virtual ~Store() = default;

  // Everything stored, for recovery at start.
  virtual absl::StatusOr<Snapshot> Load() = 0;

  // Makes `mutations` durable (as `sync` says) atomically, then calls `done`
  // (on a store thread, in commit order; keep it short: the callbacks of
  // all commits share that thread. A later commit may already be written
  // when an earlier one's `done` runs). All-or-nothing: on error nothing was
  // written. Commits are applied in the order they were made, whatever
  // their Sync: a kDurable one makes every earlier one durable too.
  virtual void Commit(std::vector<Mutation> mutations, std::function<void(absl::Status)> done, Sync sync) = 0;
  void Commit(std::vector<Mutation> mutations, std::function<void(absl::Status)> done) {
    Commit(std::move(mutations), std::move(done), Sync::kDurable);
  }

  // The Records whose kind starts with `kind_prefix` ("iam."), by kind then
  // key: each owner loads its own at start.
  virtual absl::StatusOr<std::vector<Record>> LoadRecords(const std::string& kind_prefix) = 0;

  // The audit lines of `query.project` with sequence < before_sequence,
  // newest first, at most `limit`.
  virtual absl::StatusOr<std::vector<AuditRecord>> ReadAudit(const AuditQuery& query) = 0;

  // A consistent copy of the whole database, as a new file at `path`
  // (SQLite's online backup), taken while mlengined serves: commits wait
  // while it copies (milliseconds for each few megabytes). `path` must not
  // exist.
  virtual absl::Status BackupTo(const std::string& path) = 0;

  // Blocking form of Commit.
  absl::Status CommitSync(std::vector<Mutation> mutations);
};

struct SqliteOptions {
  std::string path;            // e.g. DATA_DIR/mlengine.db
  bool synchronous_full = true;  // fsync every commit (survives power loss)
};

// Opens (creating and migrating as needed) the SQLite database at path.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options);

// The newest schema version this mlengined writes: a database of a later
// one (a newer mlengined's) is refused, never altered.
int LatestSchemaVersion();

// What a database file no mlengined has open holds, read without changing
// it (a backup's, mlengined backup/restore).
struct DatabaseSummary {
  int schema_version = 0;
  int64_t jobs = 0;
  int64_t projects = 0;
  int64_t records = 0;  // users, tokens, policies, service accounts, studies, ...
};
absl::StatusOr<DatabaseSummary> DescribeDatabase(const std::string& path);

}  // namespace mle::db
