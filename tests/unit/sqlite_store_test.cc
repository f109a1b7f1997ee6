// SqliteStore: a load that meets damage fails; it never returns a shorter
// snapshot as if it were everything (recovery would then forget jobs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "db/store.h"
#include "obs/metrics.h"

namespace mle::db {
namespace {

namespace fs = std::filesystem;

// A job's row; its body is opaque to the store (the service's encoding).
StoredJob JobRow(int i) {
  StoredJob j;
  j.project = "p";
  j.job_id = "job_" + std::to_string(i);
  j.sequence = i + 1;
  j.state = "QUEUED";
  j.body = "{\"jobId\":\"job_" + std::to_string(i) + "\"," + std::string(200, 'x') +  // a few jobs per page
           "}";
  return j;
}

TEST(SqliteStoreTest, ALoadThatMeetsDamageFailsInsteadOfReturningLess) {
  const fs::path dir = fs::temp_directory_path() / ("mle_sqlite_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "mlengine.db").string();
  constexpr int kJobs = 400;
  {
    auto store = OpenSqliteStore({path, true});
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<Mutation> writes;
    for (int i = 0; i < kJobs; ++i) writes.push_back(PutJob{JobRow(i)});
    ASSERT_TRUE((*store)->CommitSync(std::move(writes)).ok());
    auto snapshot = (*store)->Load();
    ASSERT_TRUE(snapshot.ok());
    ASSERT_EQ(snapshot->jobs.size(), static_cast<size_t>(kJobs));
  }
  // Checkpointed into the main file on close; damage a page in its second half.
  ASSERT_FALSE(fs::exists(path + "-wal") && fs::file_size(path + "-wal") > 0);
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 40960u);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 3 * 4096 + 16));
    const std::string garbage(2000, '\xff');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto store = OpenSqliteStore({path, true});
  if (store.ok()) {
    auto snapshot = (*store)->Load();
    EXPECT_FALSE(snapshot.ok()) << "a damaged database loaded as " << snapshot->jobs.size() << " of " << kJobs
                                << " jobs";
  }
  fs::remove_all(dir);
}

// The writer prepares its statements once and runs them again each round:
// every round's values land, none of an earlier round's bindings leak into
// a later one, and a record deleted in one round stays deleted.
TEST(SqliteStoreTest, StatementsRunAgainRoundAfterRoundWriteEachRoundsValues) {
  const fs::path dir = fs::temp_directory_path() / ("mle_sqlite_rounds_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    auto store = OpenSqliteStore({(dir / "mlengine.db").string(), true});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int round = 0; round < 5; ++round) {
      StoredJob job = JobRow(round);
      job.state = round % 2 ? "RUNNING" : "SUCCEEDED";
      job.body += std::to_string(round);
      model::Project project;
      project.id = "project-" + std::to_string(round);
      project.number = 100 + round;
      project.service_account = "sa" + std::to_string(round);
      AuditRecord audit;
      audit.time_us = round;
      audit.project = "p";
      audit.method = "m" + std::to_string(round);
      // Odd rounds give the body as the service does, encoded by the writer.
      PutJob put{job};
      if (round % 2) {
        put.job.body.clear();
        put.encode = [body = job.body] { return body; };
      }
      std::vector<Mutation> writes = {put, PutProject{project},
                                      PutRecord{{"test.kind", "k" + std::to_string(round), "body" + std::to_string(round)}},
                                      AppendAudit{audit}};
      if (round > 0) writes.push_back(DeleteRecord{"test.kind", "k" + std::to_string(round - 1)});
      ASSERT_TRUE((*store)->CommitSync(std::move(writes)).ok()) << "round " << round;
    }
    auto snapshot = (*store)->Load();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    ASSERT_EQ(snapshot->jobs.size(), 5u);
    ASSERT_EQ(snapshot->projects.size(), 5u);
    for (int round = 0; round < 5; ++round) {
      EXPECT_EQ(snapshot->jobs[round].job_id, "job_" + std::to_string(round));
      EXPECT_EQ(snapshot->jobs[round].project, "p");
      EXPECT_EQ(snapshot->jobs[round].sequence, round + 1);
      EXPECT_EQ(snapshot->jobs[round].state, round % 2 ? "RUNNING" : "SUCCEEDED");
      EXPECT_EQ(snapshot->jobs[round].body, JobRow(round).body + std::to_string(round));  // as written, byte for byte
    }
    auto records = (*store)->LoadRecords("test.");
    ASSERT_TRUE(records.ok());
    ASSERT_EQ(records->size(), 1u);
    EXPECT_EQ((*records)[0], (Record{"test.kind", "k4", "body4"}));
    auto audit = (*store)->ReadAudit({"p", 0, 10});
    ASSERT_TRUE(audit.ok());
    ASSERT_EQ(audit->size(), 5u);
    EXPECT_EQ((*audit)[0].method, "m4");  // newest first
    EXPECT_EQ((*audit)[4].method, "m0");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mle::db

namespace mle::db {
namespace {

double Flushes() { return obs::Metrics::Default().StoreFlushes().Value(); }

// kLazy commits are committed (a store opened again reads them, as a
// restarted mlengined would after kill -9) without a flush of their own;
// kDurable ones flush, and carry every earlier commit to disk with them.
TEST(SqliteStoreTest, LazyCommitsAreReadBackAndOnlyDurableOnesFlush) {
  const fs::path dir = fs::temp_directory_path() / ("mle_sqlite_sync_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto commit = [](Store& store, std::vector<Mutation> writes, Sync sync) {
    std::promise<absl::Status> done;
    store.Commit(std::move(writes), [&done](absl::Status s) { done.set_value(std::move(s)); }, sync);
    return done.get_future().get();
  };
  {
    auto store = OpenSqliteStore({(dir / "mlengine.db").string(), true});
    ASSERT_TRUE(store.ok()) << store.status();
    const double before = Flushes();
    StoredJob job = JobRow(0);
    for (const char* state : {"PREPARING", "RUNNING"}) {
      job.state = state;
      ASSERT_TRUE(commit(**store, {PutJob{job}}, Sync::kLazy).ok());
    }
    EXPECT_EQ(Flushes(), before) << "lazy commits flush nothing";
    ASSERT_TRUE(commit(**store, {PutRecord{{"test.kind", "k", "lazy"}}}, Sync::kLazy).ok());
    job.state = "SUCCEEDED";
    ASSERT_TRUE(commit(**store, {PutJob{job}}, Sync::kDurable).ok());
    EXPECT_EQ(Flushes(), before + 1);
  }
  {
    auto store = OpenSqliteStore({(dir / "mlengine.db").string(), true});
    ASSERT_TRUE(store.ok()) << store.status();
    auto snapshot = (*store)->Load();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    ASSERT_EQ(snapshot->jobs.size(), 1u);
    EXPECT_EQ(snapshot->jobs[0].state, "SUCCEEDED");
    auto records = (*store)->LoadRecords("test.");
    ASSERT_TRUE(records.ok());
    EXPECT_EQ(*records, (std::vector<Record>{{"test.kind", "k", "lazy"}}));
  }
  {
    // A store opened with synchronous_full false never flushes a commit.
    auto store = OpenSqliteStore({(dir / "mlengine.db").string(), false});
    ASSERT_TRUE(store.ok()) << store.status();
    const double before = Flushes();
    ASSERT_TRUE(commit(**store, {PutRecord{{"test.kind", "k2", "x"}}}, Sync::kDurable).ok());
    EXPECT_EQ(Flushes(), before);
  }
  fs::remove_all(dir);
}

// An online backup (mlengined backup) is a whole database another
// SqliteStore opens, taken while the store serves; it does not overwrite.
TEST(SqliteStoreTest, ABackupIsAWholeDatabaseAndDescribesItself) {
  const fs::path dir = fs::temp_directory_path() / ("mle_sqlite_backup_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    auto store = OpenSqliteStore({(dir / "a.db").string(), false});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 50; ++i) ASSERT_TRUE((*store)->CommitSync({PutJob{JobRow(i)}}).ok());
    ASSERT_TRUE((*store)->BackupTo((dir / "b.db").string()).ok());
    ASSERT_TRUE((*store)->CommitSync({PutJob{JobRow(50)}}).ok());  // after the backup: not in it
    EXPECT_FALSE((*store)->BackupTo((dir / "b.db").string()).ok());  // never over another file
  }
  auto described = DescribeDatabase((dir / "b.db").string());
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->jobs, 50);
  EXPECT_EQ(described->schema_version, LatestSchemaVersion());
  auto copy = OpenSqliteStore({(dir / "b.db").string(), false});
  ASSERT_TRUE(copy.ok()) << copy.status();
  auto loaded = (*copy)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->jobs.size(), 50u);
  copy->reset();
  EXPECT_FALSE(DescribeDatabase((dir / "missing.db").string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mle::db
