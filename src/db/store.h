// Durable state of mlengined: projects and jobs. The service keeps the
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
#include "model/job.h"
#include "model/project.h"

namespace mle::db {

// Insert or replace, keyed by (project, job_id) / project id.
struct PutJob {
  model::Job job;
};
struct PutProject {
  model::Project project;
};
using Mutation = std::variant<PutJob, PutProject>;

struct Snapshot {
  std::vector<model::Project> projects;
  std::vector<model::Job> jobs;  // in creation order
};

class Store {
 public:
  virtual ~Store() = default;

  // Everything stored, for recovery at start.
  virtual absl::StatusOr<Snapshot> Load() = 0;

  // Makes `mutations` durable atomically, then calls `done` (on a store
  // thread; keep it short). All-or-nothing: on error nothing was written.
  virtual void Commit(std::vector<Mutation> mutations,
                      std::function<void(absl::Status)> done) = 0;

  // Blocking form of Commit.
  absl::Status CommitSync(std::vector<Mutation> mutations);
};

struct SqliteOptions {
  std::string path;            // e.g. DATA_DIR/mlengine.db
  bool synchronous_full = true;  // fsync every commit (survives power loss)
};

// Opens (creating and migrating as needed) the SQLite database at path.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options);

}  // namespace mle::db
