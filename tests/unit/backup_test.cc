// Backups (backup/backup.h) on real temporary directories: what a job's
// trainer controls in its run directory (its hypertune directory) is
// copied only as regular files of the tree: a link to a secret, a pipe
// and a replica's scratch stay behind, and a restore gives back the rest.
#include "backup/backup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "buckets/bucket_store.h"
#include "db/store.h"

namespace mle::backup {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Backup, RunRecordsAreCopiedAsRegularFilesOfTheTreeOnly) {
  const fs::path dir = fs::temp_directory_path() / ("mle_backup_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path data = dir / "data";
  const fs::path replica = data / "runs" / "p" / "j" / "master-replica-0";
  Write(replica / "log", "a line\n");
  Write(replica / "hypertune" / "output.metrics", "{\"loss\": 1}\n");
  Write(replica / "hypertune" / "deeper" / "notes", "mine\n");
  Write(replica / "work" / "scratch", "big\n");
  Write(dir / "secret", "the operator's\n");
  fs::create_symlink(dir / "secret", replica / "hypertune" / "link");
  fs::create_directory_symlink(dir, replica / "hypertune" / "dirlink");
  ASSERT_EQ(::mkfifo((replica / "hypertune" / "pipe").c_str(), 0600), 0);  // a copy that opened it would wait
  Write(data / "admin.token", "token\n");

  auto store = db::OpenSqliteStore({(data / "mlengine.db").string(), false});
  ASSERT_TRUE(store.ok()) << store.status();
  auto objects = buckets::BucketStore::Open((data / "buckets").string());
  ASSERT_TRUE(objects.ok()) << objects.status();
  ASSERT_TRUE((*objects)->CreateBucket("bkt-a").ok());
  ASSERT_TRUE((*objects)->Put("bkt-a", "o.txt", "object").ok());
  auto summary = WriteBackup(**store, **objects, data.string(), (dir / "backup").string());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->objects, 1);
  EXPECT_EQ(summary->run_files, 3);  // log, output.metrics, deeper/notes

  const fs::path copied = dir / "backup" / "runs" / "p" / "j" / "master-replica-0";
  EXPECT_EQ(Read(copied / "log"), "a line\n");
  EXPECT_EQ(Read(copied / "hypertune" / "output.metrics"), "{\"loss\": 1}\n");
  EXPECT_EQ(Read(copied / "hypertune" / "deeper" / "notes"), "mine\n");
  for (const char* left : {"hypertune/link", "hypertune/dirlink", "hypertune/pipe", "work"}) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(copied / left))) << left;
  }
  EXPECT_EQ(Read(dir / "backup" / "admin.token"), "token\n");

  auto restored = RestoreBackup((dir / "backup").string(), (dir / "restored").string());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->objects, 1);
  EXPECT_EQ(restored->run_files, 3);
  EXPECT_EQ(Read(dir / "restored" / "runs" / "p" / "j" / "master-replica-0" / "hypertune" / "output.metrics"),
            "{\"loss\": 1}\n");
  store->reset();
  fs::remove_all(dir);
}

// An object a trainer rewrites in place reads as other bytes than the
// store described: it is read again, then left out and named, and the
// backup goes on with every other object.
TEST(Backup, AnObjectRewrittenWhileReadIsLeftOutAndNamed) {
  const fs::path dir = fs::temp_directory_path() / ("mle_backup_flux_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path data = dir / "data";
  fs::create_directories(data);
  auto store = db::OpenSqliteStore({(data / "mlengine.db").string(), false});
  ASSERT_TRUE(store.ok()) << store.status();
  auto objects = buckets::BucketStore::Open((data / "buckets").string());
  ASSERT_TRUE(objects.ok()) << objects.status();
  ASSERT_TRUE((*objects)->CreateBucket("bkt-a").ok());
  ASSERT_TRUE((*objects)->Put("bkt-a", "steady.txt", "steady").ok());
  ASSERT_TRUE((*objects)->Put("bkt-a", "flux.txt", "aaaa").ok());
  // Rewritten behind the store's back, keeping size, inode and mtime: the
  // store still believes its checksums of "aaaa" (as it does for a moment
  // while a trainer writes the file).
  const fs::path file = data / "buckets" / "bkt-a" / "flux.txt";
  struct stat before;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  { std::fstream(file, std::ios::in | std::ios::out | std::ios::binary) << "bbbb"; }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);

  auto summary = WriteBackup(**store, **objects, data.string(), (dir / "backup").string());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->objects, 1);
  ASSERT_EQ(summary->skipped_objects.size(), 1u);
  EXPECT_EQ(summary->skipped_objects[0].rfind("gs://bkt-a/flux.txt (", 0), 0u) << summary->skipped_objects[0];
  EXPECT_EQ(Read(dir / "backup" / "buckets" / "bkt-a" / "steady.txt"), "steady");
  EXPECT_FALSE(fs::exists(dir / "backup" / "buckets" / "bkt-a" / "flux.txt"));
  auto described = ReadSummary((dir / "backup").string());
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->skipped_objects, summary->skipped_objects);
  store->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mle::backup
