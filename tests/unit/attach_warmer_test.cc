// AttachWarmer: a kick starts moves of this process into its own cgroup
// (into a plain file here, and the real cgroup as root), which go on for
// `keep` after the last kick and then stop until the next.
#include "sandbox/attach_warmer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sandbox/cgroups.h"

namespace mle::sandbox {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AttachWarmerTest, KickedItMovesThenStopsUntilTheNextKick) {
  const fs::path file = fs::path(::testing::TempDir()) / ("warmer-procs-" + std::to_string(::getpid()));
  std::ofstream(file).close();
  AttachWarmer warmer(file.string(), absl::Milliseconds(30), absl::Milliseconds(1));
  EXPECT_EQ(warmer.moves(), 0);  // nothing before a kick

  warmer.Kick();
  ASSERT_TRUE(warmer.AwaitMoves(3, absl::Seconds(10)));
  EXPECT_EQ(Read(file.string()), std::to_string(::getpid()));
  ASSERT_TRUE(warmer.AwaitIdle(absl::Seconds(10)));
  const int64_t stopped = warmer.moves();
  EXPECT_FALSE(warmer.AwaitMoves(stopped + 1, absl::Milliseconds(50)));  // idle: no move without a kick

  warmer.Kick();
  EXPECT_TRUE(warmer.AwaitMoves(stopped + 1, absl::Seconds(10)));
  fs::remove(file);
}

TEST(AttachWarmerTest, AMissingFileCostsNothingButTheMove) {
  AttachWarmer warmer("/nonexistent/cgroup.procs", absl::Milliseconds(10), absl::Milliseconds(1));
  warmer.Kick();
  EXPECT_TRUE(warmer.AwaitMoves(1, absl::Seconds(10)));
}

// As root on a cgroup v1 or v2 host: the process stays where it was.
TEST(AttachWarmerTest, MovesThisProcessNowhereInItsOwnCgroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  absl::StatusOr<Cgroups> host = Cgroups::DetectHost();
  if (!host.ok() || host->version() != CgroupVersion::kV1) GTEST_SKIP() << "no cgroup v1 here: " << host.status();
  const std::string before = Read("/proc/self/cgroup");
  {
    AttachWarmer warmer(host->OwnProcsFile(), absl::Milliseconds(20), absl::Milliseconds(1));
    warmer.Kick();
    ASSERT_TRUE(warmer.AwaitMoves(2, absl::Seconds(10)));
  }
  EXPECT_EQ(Read("/proc/self/cgroup"), before);
}

}  // namespace
}  // namespace mle::sandbox
