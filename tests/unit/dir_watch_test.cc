// DirWatch with the real inotify on a temporary directory: a write, a file
// made, a directory made each tell their directory; counted watches end with
// their last Remove. Waits on a condition with a deadline, never a sleep.
#include "logs/dir_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <vector>

namespace mle::logs {
namespace {

namespace fs = std::filesystem;

struct Seen {
  std::string dir, name;
  bool made_dir;
};

class DirWatchTest : public ::testing::Test {
 protected:
  DirWatchTest()
      : root_(fs::temp_directory_path() / ("mle_dir_watch_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        watch_([this](const std::string& dir, const std::string& name, bool made_dir) {
          std::lock_guard<std::mutex> lock(mu_);
          seen_.push_back({dir, name, made_dir});
          cv_.notify_all();
        }) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "run");
  }
  ~DirWatchTest() override { fs::remove_all(root_); }

  // Waits (up to 5 s) for an event naming `name`; returns it.
  std::optional<Seen> WaitFor(const std::string& name) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<Seen> found;
    cv_.wait_for(lock, std::chrono::seconds(5), [&] {
      for (const auto& s : seen_) {
        if (s.name == name) found = s;
      }
      return found.has_value();
    });
    return found;
  }
  void Append(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::app) << text; }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }

  fs::path root_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  DirWatch watch_;
};

TEST_F(DirWatchTest, AWriteAFileAndADirectoryMadeAreTold) {
  ASSERT_TRUE(watch_.ok());
  const std::string run = (root_ / "run").string();
  ASSERT_TRUE(watch_.Add(run));
  fs::create_directory(root_ / "run" / "master-replica-0");
  auto made = WaitFor("master-replica-0");
  ASSERT_TRUE(made);
  EXPECT_EQ(made->dir, run);
  EXPECT_TRUE(made->made_dir);
  Append(root_ / "run" / "log", "a line\n");
  auto written = WaitFor("log");
  ASSERT_TRUE(written);
  EXPECT_EQ(written->dir, run);
  EXPECT_FALSE(written->made_dir);
}

TEST_F(DirWatchTest, WatchesAreCountedAndEndWithTheirLastRemove) {
  const std::string run = (root_ / "run").string();
  ASSERT_TRUE(watch_.Add(run));
  ASSERT_TRUE(watch_.Add(run));
  watch_.Remove(run);
  Append(root_ / "run" / "first", "x\n");
  ASSERT_TRUE(WaitFor("first")) << "still watched by the second Add";
  watch_.Remove(run);
  // Nothing is told of a directory no longer watched: a marker in a second,
  // watched directory comes after anything the first could still say.
  const std::string other = (root_ / "other").string();
  fs::create_directory(other);
  ASSERT_TRUE(watch_.Add(other));
  Append(root_ / "run" / "second", "x\n");
  Append(fs::path(other) / "marker", "x\n");
  ASSERT_TRUE(WaitFor("marker"));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : seen_) EXPECT_NE(s.name, "second") << "told after its last Remove";
}

TEST_F(DirWatchTest, AnAbsentDirectoryCannotBeWatched) {
  EXPECT_FALSE(watch_.Add((root_ / "absent").string()));
  watch_.Remove((root_ / "absent").string());  // harmless
}

}  // namespace
}  // namespace mle::logs
