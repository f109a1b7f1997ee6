// SqliteStore: the embedded Store. One connection, owned by one writer
// thread; Commit() enqueues and the writer drains the queue into a single
// transaction per round (group commit), so N concurrent creates cost one
// fsync rather than N. The callbacks of a round run on a second thread, in
// commit order, while the writer begins the next round: the writer is the
// one serial stage every create passes, and the callbacks (the service's
// bookkeeping, the scheduler's queue, the answer) were about 40% of its
// work.

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/worker_pool.h"
#include "db/store.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/request_id.h"

namespace mle::db {

absl::Status Store::CommitSync(std::vector<Mutation> mutations) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status result;
  Commit(std::move(mutations), [&](absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    result = std::move(s);
    finished = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  return result;
}

namespace {

// Versioned schema migrations; index i upgrades user_version i -> i+1.
constexpr const char* kMigrations[] = {
    // 0 -> 1: projects and jobs.
    "CREATE TABLE projects ("
    "  id TEXT PRIMARY KEY,"
    "  number INTEGER NOT NULL UNIQUE,"
    "  service_account TEXT NOT NULL,"
    "  tpu_service_account TEXT NOT NULL,"
    "  create_time_us INTEGER NOT NULL);"
    "CREATE TABLE jobs ("
    "  project TEXT NOT NULL,"
    "  job_id TEXT NOT NULL,"
    "  sequence INTEGER NOT NULL,"
    "  state TEXT NOT NULL,"
    "  body TEXT NOT NULL,"
    "  PRIMARY KEY (project, job_id));"
    "CREATE INDEX jobs_by_sequence ON jobs(sequence);",
    // 1 -> 2: identity records and the audit log.
    "CREATE TABLE records ("
    "  kind TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  body TEXT NOT NULL,"
    "  PRIMARY KEY (kind, key));"
    "CREATE TABLE audit_log ("
    "  sequence INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  time_us INTEGER NOT NULL,"
    "  project TEXT NOT NULL,"
    "  principal TEXT NOT NULL,"
    "  method TEXT NOT NULL,"
    "  resource TEXT NOT NULL,"
    "  outcome TEXT NOT NULL,"
    "  request_id TEXT NOT NULL);"
    "CREATE INDEX audit_by_project ON audit_log(project, sequence);",
};

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* db, std::string path, bool synchronous_full)
      : db_(db), path_(std::move(path)), synchronous_full_(synchronous_full), flushing_(synchronous_full) {
    writer_ = std::thread([this] { WriterLoop(); });
  }
  ~SqliteStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    writer_.join();  // every commit written; its callbacks posted
    callbacks_.Stop();  // and called
    writes_.reset();
    sqlite3_close(db_);
  }

  absl::StatusOr<Snapshot> Load() override {
    std::lock_guard<std::mutex> lock(db_mu_);
    Snapshot snap;
    {
      Statement st(db_, "SELECT id, number, service_account, tpu_service_account, create_time_us FROM projects");
      if (!st.ok()) return Error("prepare projects query");
      int rc;
      while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        model::Project p;
        p.id = Text(st.get(), 0);
        p.number = sqlite3_column_int64(st.get(), 1);
        p.service_account = Text(st.get(), 2);
        p.tpu_service_account = Text(st.get(), 3);
        p.create_time = absl::FromUnixMicros(sqlite3_column_int64(st.get(), 4));
        snap.projects.push_back(std::move(p));
      }
      // Anything but the end of the rows (corruption, I/O error, busy) is a
      // failed load, never a shorter snapshot.
      if (rc != SQLITE_DONE) return Error("read projects");
    }
    {
      Statement st(db_, "SELECT project, job_id, sequence, state, body FROM jobs ORDER BY sequence");
      if (!st.ok()) return Error("prepare jobs query");
      int rc;
      while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        StoredJob job;
        job.project = Text(st.get(), 0);
        job.job_id = Text(st.get(), 1);
        job.sequence = sqlite3_column_int64(st.get(), 2);
        job.state = Text(st.get(), 3);
        job.body = Text(st.get(), 4);
        snap.jobs.push_back(std::move(job));
      }
      if (rc != SQLITE_DONE) return Error("read jobs");
    }
    return snap;
  }

  absl::StatusOr<std::vector<Record>> LoadRecords(const std::string& kind_prefix) override {
    std::lock_guard<std::mutex> lock(db_mu_);
    Statement st(db_, "SELECT kind, key, body FROM records WHERE substr(kind, 1, ?) = ? ORDER BY kind, key");
    if (!st.ok()) return Error("prepare records query");
    sqlite3_bind_int(st.get(), 1, static_cast<int>(kind_prefix.size()));
    sqlite3_bind_text(st.get(), 2, kind_prefix.c_str(), -1, SQLITE_TRANSIENT);
    std::vector<Record> records;
    int rc;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
      records.push_back({Text(st.get(), 0), Text(st.get(), 1), Text(st.get(), 2)});
    }
    if (rc != SQLITE_DONE) return Error("read records");
    return records;
  }

  absl::StatusOr<std::vector<AuditRecord>> ReadAudit(const AuditQuery& query) override {
    std::lock_guard<std::mutex> lock(db_mu_);
    Statement st(db_,
                 "SELECT sequence, time_us, project, principal, method, resource, outcome, request_id FROM audit_log "
                 "WHERE project = ? AND sequence < ? ORDER BY sequence DESC LIMIT ?");
    if (!st.ok()) return Error("prepare audit query");
    sqlite3_bind_text(st.get(), 1, query.project.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st.get(), 2, query.before_sequence > 0 ? query.before_sequence : INT64_MAX);
    sqlite3_bind_int(st.get(), 3, query.limit);
    std::vector<AuditRecord> out;
    int rc;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
      AuditRecord r;
      r.sequence = sqlite3_column_int64(st.get(), 0);
      r.time_us = sqlite3_column_int64(st.get(), 1);
      r.project = Text(st.get(), 2);
      r.principal = Text(st.get(), 3);
      r.method = Text(st.get(), 4);
      r.resource = Text(st.get(), 5);
      r.outcome = Text(st.get(), 6);
      r.request_id = Text(st.get(), 7);
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return Error("read the audit log");
    return out;
  }

  absl::Status BackupTo(const std::string& path) override {
    // A new file, never another database (an empty file is an empty one).
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
    ::close(fd);
    sqlite3* dest = nullptr;
    if (sqlite3_open_v2(path.c_str(), &dest, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      std::string msg = dest ? sqlite3_errmsg(dest) : "out of memory";
      sqlite3_close(dest);
      return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", msg));
    }
    absl::Status s;
    {
      // No transaction of the writer's is half done while it copies.
      std::lock_guard<std::mutex> lock(db_mu_);
      sqlite3_backup* backup = sqlite3_backup_init(dest, "main", db_, "main");
      if (backup == nullptr) {
        s = absl::InternalError(absl::StrCat("cannot back up the database: ", sqlite3_errmsg(dest)));
      } else {
        const int rc = sqlite3_backup_step(backup, -1);
        sqlite3_backup_finish(backup);
        if (rc != SQLITE_DONE) {
          s = absl::UnavailableError(absl::StrCat("backing up the database to ", path, " failed: ",
                                                  sqlite3_errstr(rc)));
        }
      }
    }
    // On disk before the backup says it is whole.
    if (s.ok() && sqlite3_exec(dest, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) != SQLITE_OK) {
      s = absl::UnavailableError(absl::StrCat("cannot finish ", path, ": ", sqlite3_errmsg(dest)));
    }
    sqlite3_close(dest);
    return s;
  }

  using Store::Commit;
  void Commit(std::vector<Mutation> mutations, std::function<void(absl::Status)> done, Sync sync) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(mutations), obs::BindRequestId(std::move(done)), sync});
    cv_.notify_one();
  }

 private:
  struct Pending {
    std::vector<Mutation> mutations;
    std::function<void(absl::Status)> done;
    Sync sync = Sync::kDurable;
  };
  // A written round's callbacks and what each is told.
  using Completions = std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>;

  static std::string Text(sqlite3_stmt* st, int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  }

  absl::Status Error(absl::string_view what) {
    if (DiskFull()) return FullError();
    return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_)));
  }

  // The last error was the disk's: SQLITE_FULL, or an I/O error of ENOSPC
  // or EDQUOT (a write, a sync, the WAL growing).
  bool DiskFull() const {
    const int code = sqlite3_errcode(db_);
    const int err = sqlite3_system_errno(db_);
    return code == SQLITE_FULL || ((code & 0xff) == SQLITE_IOERR && (err == ENOSPC || err == EDQUOT));
  }
  absl::Status FullError() const {
    return absl::ResourceExhaustedError(absl::StrCat(
        "The disk of mlengine's data directory is full (", path_,
        " could not grow): nothing was written. Jobs already running go on; mlengined takes new work again as "
        "soon as space is freed on that disk, without a restart."));
  }

  absl::Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      if (DiskFull()) return FullError();
      return absl::InternalError(absl::StrCat("sqlite: ", msg));
    }
    return absl::OkStatus();
  }

  // The writer's prepared statements: made once, on the writer's first
  // round (preparing five statements and parsing BEGIN and COMMIT each
  // round cost every commit a tenth of a millisecond).
  struct Writes {
    explicit Writes(sqlite3* db)
        : begin(db, "BEGIN IMMEDIATE"),
          commit(db, "COMMIT"),
          // An update in place (not OR REPLACE, which deletes the row and
          // inserts it anew under another rowid: the table's pages at both
          // places and both indexes written again); a job's sequence never
          // changes, so no index is touched.
          put_job(db,
                  "INSERT INTO jobs(project, job_id, sequence, state, body) VALUES (?,?,?,?,?) "
                  "ON CONFLICT(project, job_id) DO UPDATE SET state = excluded.state, body = excluded.body"),
          put_project(db,
                      "INSERT OR REPLACE INTO projects(id, number, service_account, tpu_service_account, "
                      "create_time_us) VALUES (?,?,?,?,?)"),
          put_record(db,
                     "INSERT INTO records(kind, key, body) VALUES (?,?,?) "
                     "ON CONFLICT(kind, key) DO UPDATE SET body = excluded.body"),
          delete_record(db, "DELETE FROM records WHERE kind = ? AND key = ?"),
          delete_job(db, "DELETE FROM jobs WHERE project = ? AND job_id = ?"),
          append_audit(db,
                       "INSERT INTO audit_log(time_us, project, principal, method, resource, outcome, request_id) "
                       "VALUES (?,?,?,?,?,?,?)") {}
    bool ok() const {
      return begin.ok() && commit.ok() && put_job.ok() && put_project.ok() && put_record.ok() && delete_record.ok() &&
             delete_job.ok() && append_audit.ok();
    }
    Statement begin, commit, put_job, put_project, put_record, delete_record, delete_job, append_audit;
  };

  // One statement without rows (BEGIN, COMMIT), run again.
  absl::Status Step(Statement& st, absl::string_view what) {
    sqlite3_reset(st.get());
    if (sqlite3_step(st.get()) != SQLITE_DONE) {
      absl::Status s = Error(what);
      sqlite3_reset(st.get());  // a failed COMMIT's statement holds nothing for the ROLLBACK after it
      return s;
    }
    sqlite3_reset(st.get());
    return absl::OkStatus();
  }

  absl::Status Apply(const Mutation& m, Writes& w) {
    if (const auto* r = std::get_if<PutRecord>(&m)) {
      sqlite3_stmt* st = w.put_record.get();
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, r->record.kind.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, r->record.key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 3, r->record.body.c_str(), static_cast<int>(r->record.body.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(st) != SQLITE_DONE) return Error("write record");
      return absl::OkStatus();
    }
    if (const auto* d = std::get_if<DeleteJob>(&m)) {
      sqlite3_stmt* st = w.delete_job.get();
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, d->project.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, d->job_id.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) != SQLITE_DONE) return Error("delete job");
      return absl::OkStatus();
    }
    if (const auto* d = std::get_if<DeleteRecord>(&m)) {
      sqlite3_stmt* st = w.delete_record.get();
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, d->kind.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, d->key.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) != SQLITE_DONE) return Error("delete record");
      return absl::OkStatus();
    }
    if (const auto* a = std::get_if<AppendAudit>(&m)) {
      const AuditRecord& r = a->record;
      sqlite3_stmt* st = w.append_audit.get();
      sqlite3_reset(st);
      sqlite3_bind_int64(st, 1, r.time_us);
      int i = 2;
      for (const std::string* text : {&r.project, &r.principal, &r.method, &r.resource, &r.outcome, &r.request_id}) {
        sqlite3_bind_text(st, i++, text->c_str(), -1, SQLITE_TRANSIENT);
      }
      if (sqlite3_step(st) != SQLITE_DONE) return Error("append to the audit log");
      return absl::OkStatus();
    }
    sqlite3_stmt* put_job = w.put_job.get();
    sqlite3_stmt* put_project = w.put_project.get();
    if (const auto* pj = std::get_if<PutJob>(&m)) {
      const StoredJob job = pj->Row();
      sqlite3_reset(put_job);
      sqlite3_bind_text(put_job, 1, job.project.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(put_job, 2, job.job_id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(put_job, 3, job.sequence);
      sqlite3_bind_text(put_job, 4, job.state.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(put_job, 5, job.body.c_str(), static_cast<int>(job.body.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(put_job) != SQLITE_DONE) return Error("write job");
      return absl::OkStatus();
    }
    const auto& p = std::get<PutProject>(m).project;
    sqlite3_reset(put_project);
    sqlite3_bind_text(put_project, 1, p.id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_project, 2, p.number);
    sqlite3_bind_text(put_project, 3, p.service_account.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(put_project, 4, p.tpu_service_account.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_project, 5, absl::ToUnixMicros(p.create_time));
    if (sqlite3_step(put_project) != SQLITE_DONE) return Error("write project");
    return absl::OkStatus();
  }

  void WriterLoop() {
    for (;;) {
      std::deque<Pending> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        batch.swap(queue_);
      }
      // The round's callbacks, on their own thread, in order.
      callbacks_.Post([round = WriteBatch(batch)]() mutable {
        for (auto& [done, status] : round) done(std::move(status));
      });
    }
  }

  // One transaction for the whole batch. If it fails, each pending write is
  // retried in its own transaction so one bad write cannot fail the others.
  // What each pending write is to be told, in order.
  Completions WriteBatch(std::deque<Pending>& batch) {
    std::lock_guard<std::mutex> lock(db_mu_);
    obs::ScopedTimer timer(obs::Metrics::Default().StoreCommit());
    obs::Metrics::Default().StoreBatchSize().Observe(static_cast<double>(batch.size()));
    if (!writes_ || !writes_->ok()) writes_ = std::make_unique<Writes>(db_);  // a failed prepare is tried again
    Writes& writes = *writes_;
    auto run = [&](auto begin, auto end) -> absl::Status {
      if (!writes.ok()) return Error("prepare write");
      // A transaction is flushed (synchronous=FULL: the WAL is synced at its
      // commit, with every frame before it) when any write in it must be.
      const bool flush = synchronous_full_ && std::any_of(begin, end, [](const Pending& p) {
                           return p.sync == Sync::kDurable;
                         });
      if (flush != flushing_) {
        if (auto s = Exec(flush ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"); !s.ok()) return s;
        flushing_ = flush;
      }
      if (auto s = Step(writes.begin, "begin"); !s.ok()) return s;
      for (auto it = begin; it != end; ++it) {
        for (const auto& m : it->mutations) {
          if (auto s = Apply(m, writes); !s.ok()) {
            Exec("ROLLBACK").IgnoreError();
            return s;
          }
        }
      }
      if (auto s = Step(writes.commit, "commit"); !s.ok()) {
        Exec("ROLLBACK").IgnoreError();
        return s;
      }
      if (flush) obs::Metrics::Default().StoreFlushes().Increment();
      return absl::OkStatus();
    };
    Completions out;
    out.reserve(batch.size());
    absl::Status s = run(batch.begin(), batch.end());
    if (s.ok() || batch.size() == 1) {
      for (auto& p : batch) out.emplace_back(std::move(p.done), s);
      return out;
    }
    obs::Log("store").warn("a group commit of {} writes failed ({}); committing each alone", batch.size(),
                           s.ToString());
    for (auto it = batch.begin(); it != batch.end(); ++it) {
      absl::Status alone = run(it, std::next(it));
      out.emplace_back(std::move(it->done), std::move(alone));
    }
    return out;
  }

  sqlite3* db_;
  const std::string path_;
  const bool synchronous_full_;  // SqliteOptions::synchronous_full
  std::mutex db_mu_;  // guards db_ use (Load vs the writer), writes_ and flushing_
  // The connection's synchronous setting is FULL (as opened when
  // synchronous_full_; else NORMAL throughout, and flushing_ stays false).
  bool flushing_;
  std::unique_ptr<Writes> writes_;  // finalized before db_ is closed
  std::mutex mu_;     // guards queue_, stopping_
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  // Written rounds' callbacks, one round after another; before writer_,
  // which posts to it.
  common::WorkerPool callbacks_{1, common::WorkerPool::OnStop::kDrain};
  std::thread writer_;
};

int SchemaVersion(sqlite3* db) {
  Statement st(db, "PRAGMA user_version");
  return st.ok() && sqlite3_step(st.get()) == SQLITE_ROW ? sqlite3_column_int(st.get(), 0) : 0;
}

// A database a later mlengined wrote: refused before anything is written to it.
absl::Status CheckNotNewer(sqlite3* db) {
  const int version = SchemaVersion(db);
  const int latest = LatestSchemaVersion();
  if (version <= latest) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the database schema is version ", version, " but this mlengined knows only up to ", latest,
      " (a later release wrote this data directory; nothing in it was changed): run a newer mlengined"));
}

absl::Status Migrate(sqlite3* db) {
  if (auto s = CheckNotNewer(db); !s.ok()) return s;
  const int version = SchemaVersion(db);
  const int latest = LatestSchemaVersion();
  for (int v = version; v < latest; ++v) {
    std::string sql = absl::StrCat("BEGIN IMMEDIATE;", kMigrations[v], "PRAGMA user_version=", v + 1, ";COMMIT;");
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return absl::InternalError(absl::StrCat("schema migration ", v, "->", v + 1, " failed: ", msg));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

absl::StatusOr<DatabaseSummary> DescribeDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open database ", path, ": ", msg));
  }
  DatabaseSummary out;
  absl::Status s;
  auto count = [&](const char* sql, int64_t* n) {
    Statement st(db, sql);
    if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW) {
      s = absl::DataLossError(absl::StrCat(path, " is not an mlengine database: ", sqlite3_errmsg(db)));
      return;
    }
    *n = sqlite3_column_int64(st.get(), 0);
  };
  int64_t version = 0;
  count("PRAGMA user_version", &version);
  out.schema_version = static_cast<int>(version);
  if (s.ok() && out.schema_version > 0) count("SELECT count(*) FROM jobs", &out.jobs);
  if (s.ok() && out.schema_version > 0) count("SELECT count(*) FROM projects", &out.projects);
  if (s.ok() && out.schema_version > 0) count("SELECT count(*) FROM records", &out.records);
  sqlite3_close(db);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(options.path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open database ", options.path, ": ", msg));
  }
  sqlite3_busy_timeout(db, 5000);
  if (auto s = CheckNotNewer(db); !s.ok()) {  // before the pragmas below write anything
    sqlite3_close(db);
    return s;
  }
  // The database is mlengined's alone (one connection, in one process): it
  // holds the file's lock from its first write until it closes, so no
  // transaction takes and gives back POSIX locks, and WAL's index lives in
  // its memory rather than a shared -shm file. Another program (sqlite3)
  // reads it while mlengined is stopped.
  const std::string pragmas = absl::StrCat(
      "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=",
      options.synchronous_full ? "FULL" : "NORMAL", "; PRAGMA foreign_keys=ON;");
  if (sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot configure database ", options.path, ": ", msg));
  }
  if (auto s = Migrate(db); !s.ok()) {
    sqlite3_close(db);
    return s;
  }
  return std::unique_ptr<Store>(new SqliteStore(db, options.path, options.synchronous_full));
}

}  // namespace mle::db
