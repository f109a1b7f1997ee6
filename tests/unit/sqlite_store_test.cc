// SqliteStore: a load that meets damage fails; it never returns a shorter
// snapshot as if it were everything (recovery would then forget jobs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "db/store.h"

namespace mle::db {
namespace {

namespace fs = std::filesystem;

model::Job StoredJob(int i) {
  model::Job j;
  j.project = "p";
  j.job_id = "job_" + std::to_string(i);
  j.sequence = i + 1;
  j.state = model::JobState::kQueued;
  j.version = 1;
  j.create_time = absl::FromUnixSeconds(1700000000 + i);
  j.labels["padding"] = std::string(200, 'x');  // a few jobs per page: many pages
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
    for (int i = 0; i < kJobs; ++i) writes.push_back(PutJob{StoredJob(i)});
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

}  // namespace
}  // namespace mle::db
