// The run-directory formats as tables (every file's writer and reader agree;
// damaged files are refused with a message naming what is wrong), and the
// durable file primitives.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "rundir/file_io.h"
#include "rundir/replica_files.h"

namespace mle::rundir {
namespace {

namespace fs = std::filesystem;
using Stage = RunManifest::Stage;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("mle_rundir_test_" + std::to_string(::getpid()) + "_" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(RunManifestTest, RoundTrips) {
  const std::vector<RunManifest> rows = {
      {Stage::kStarting, {}, false, {{"master-replica-0", "localhost", {}, 0}}},
      {Stage::kStarted, {}, false, {{"master-replica-0", "localhost", {0, 1}, 1234}, {"worker-replica-0", "localhost", {2}, 1235}}},
      {Stage::kStarted, {"tpuhost1", "tpuhost2"}, true, {{"master-replica-0", "localhost", {}, 99}, {"tpu-replica-0", "localhost", {}, 100}}},
      {Stage::kStarting, {}, false, {}},
      {Stage::kStarted, {}, false, {{"master-replica-0", "localhost", {}, 7}}, 524300},  // sandboxed: its uid
  };
  for (const auto& m : rows) {
    auto parsed = ParseManifest(FormatManifest(m));
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << FormatManifest(m);
    EXPECT_EQ(*parsed, m) << FormatManifest(m);
  }
}

TEST(RunManifestTest, ReadsTheManifestOfEarlierVersions) {
  auto m = ParseManifest("tpu tpuhost1 1\nreplica master-replica-0 4321 localhost 0,1\nstarted\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->stage, Stage::kStarted);
  EXPECT_EQ(m->tpu_hosts, std::vector<std::string>{"tpuhost1"});
  ASSERT_EQ(m->replicas.size(), 1u);
  EXPECT_EQ(m->replicas[0].pid, 4321);
  EXPECT_EQ(m->replicas[0].gpus, (std::vector<int>{0, 1}));
  auto cut = ParseManifest("replica master-replica-0 4321 localhost -\n");
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->stage, Stage::kStarting);
}

TEST(RunManifestTest, RefusesDamagedManifests) {
  struct Row {
    std::string text;
    std::string says;
  };
  const std::vector<Row> rows = {
      {"", "does not start with"},
      {"garbage\n", "does not start with"},
      {"mlengine-run 1\n", "no stage line"},
      {"mlengine-run 1\nstage maybe\n", "not a manifest line"},
      {"mlengine-run 1\nstage started\nreplica m localhost - notapid\n", "bad pid"},
      {"mlengine-run 1\nstage started\nreplica m localhost 0,x 12\n", "bad GPU list"},
      {"mlengine-run 1\nstage started\nreplica m localhost\n", "not a manifest line"},
      {"mlengine-run 1\nstage started\ntpu h 7\n", "not a manifest line"},
      {"mlengine-run 1\nstage starting\nreplica m localhost - 0\npid w 12\n", "no such replica"},
      {"mlengine-run 1\nstage starting\nreplica m localhost - 0\npid m x\n", "bad pid"},
  };
  for (const auto& row : rows) {
    auto m = ParseManifest(row.text);
    ASSERT_FALSE(m.ok()) << row.text;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << row.text;
    EXPECT_NE(m.status().message().find(row.says), std::string::npos) << m.status() << " for " << row.text;
  }
}

TEST(RunManifestTest, AbsentIsNulloptAndDamagedNamesTheFile) {
  TempDir dir;
  auto none = ReadManifest(dir.str());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::ofstream(ManifestPath(dir.str())) << "nonsense\n";
  auto bad = ReadManifest(dir.str());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(ManifestPath(dir.str())), std::string::npos);
  RunManifest m{Stage::kStarted, {}, false, {{"master-replica-0", "localhost", {}, 7}}};
  ASSERT_TRUE(WriteManifest(dir.str(), m).ok());
  auto back = ReadManifest(dir.str());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(**back, m);
}

TEST(RunManifestTest, StartedIsAppendedWithEveryPid) {
  TempDir dir;
  RunManifest m{Stage::kStarting, {}, false, {{"master-replica-0", "localhost", {}, 0}, {"worker-replica-0", "localhost", {1}, 0}}};
  m.uid = 524300;
  ASSERT_TRUE(WriteManifest(dir.str(), m).ok());
  auto starting = ReadManifest(dir.str());
  ASSERT_TRUE(starting.ok() && starting->has_value());
  EXPECT_EQ(**starting, m);
  ASSERT_TRUE(MarkManifestStarted(dir.str(), {{"master-replica-0", 41}, {"worker-replica-0", 42}}).ok());
  auto started = ReadManifest(dir.str());
  ASSERT_TRUE(started.ok() && started->has_value()) << started.status();
  m.stage = Stage::kStarted;
  m.replicas[0].pid = 41;
  m.replicas[1].pid = 42;
  EXPECT_EQ(**started, m);
  // No manifest to append to: an error, and nothing made.
  TempDir empty;
  EXPECT_FALSE(MarkManifestStarted(empty.str(), {{"master-replica-0", 41}}).ok());
  EXPECT_FALSE(ReadManifest(empty.str())->has_value());
}

TEST(ReplicaExitTest, Table) {
  struct Row {
    std::string text;
    bool ok;
    ReplicaExit exit;
  };
  const std::vector<Row> rows = {
      {"exit 0\n", true, {false, 0}},   {"exit 3", true, {false, 3}},      {"signal 9\n", true, {true, 9}},
      {"exit 255\n", true, {false, 255}}, {"exit 256\n", false, {}},       {"exit -1\n", false, {}},
      {"signal\n", false, {}},          {"", false, {}},                   {"quit 0\n", false, {}},
      {"exit 0 extra\n", false, {}},
  };
  for (const auto& row : rows) {
    auto e = ParseExit(row.text);
    EXPECT_EQ(e.ok(), row.ok) << row.text;
    if (e.ok() && row.ok) {
      EXPECT_EQ(*e, row.exit) << row.text;
      EXPECT_EQ(ParseExit(FormatExit(*e)).value(), *e);
    }
    if (!e.ok()) {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
    }
  }
}

TEST(LogLineTest, Table) {
  struct Row {
    std::string line;
    std::string time;
    bool is_stderr;
    std::string text;
  };
  const std::vector<Row> rows = {
      {"2026-01-01T00:00:00.000001Z\tO\thello", "2026-01-01T00:00:00.000001Z", false, "hello"},
      {"2026-01-01T00:00:00.000001Z\tE\tbad\tthing", "2026-01-01T00:00:00.000001Z", true, "bad\tthing"},
      {"2026-01-01T00:00:00.000001Z\tO\t", "2026-01-01T00:00:00.000001Z", false, ""},
      {"no tabs at all", "", false, "no tabs at all"},
      {"t\tX\tnot a stream", "", false, "t\tX\tnot a stream"},
  };
  for (const auto& row : rows) {
    LogLine l = ParseLogLine(row.line);
    EXPECT_EQ(l.time, row.time) << row.line;
    EXPECT_EQ(l.is_stderr, row.is_stderr) << row.line;
    EXPECT_EQ(l.text, row.text) << row.line;
  }
}

TEST(FileIoTest, AtomicWriteNeverWritesThroughALinkItFinds) {
  // Where a sandboxed build or job may write (a package environment being
  // built), it may leave links at the temporary name or at the name itself.
  TempDir dir;
  const std::string victim = dir / "victim", path = dir / ".ready";
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, path + ".tmp");
  ASSERT_TRUE(WriteFileAtomically(path, "digest\n").ok());
  EXPECT_EQ(ReadFile(victim).value(), "precious\n");
  EXPECT_EQ(ReadFile(path).value(), "digest\n");
  EXPECT_FALSE(fs::is_symlink(path));
  fs::remove(path);
  fs::create_symlink(victim, path);
  ASSERT_TRUE(WriteFileAtomically(path, "digest\n", 0644, Durability::kProcessCrash).ok());
  EXPECT_EQ(ReadFile(victim).value(), "precious\n");
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(FileIoTest, AtomicWriteReplacesWholeAndLeavesNoTemp) {
  TempDir dir;
  const std::string path = dir / "f";
  ASSERT_TRUE(WriteFileAtomically(path, "one\n").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two\n", 0600).ok());
  EXPECT_EQ(ReadFile(path).value(), "two\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// The directory's inode flags; nullopt where its file system keeps none.
std::optional<int> InodeFlags(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int flags = 0;
  const bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  return ok ? std::optional<int>(flags) : std::nullopt;
}

bool OnExt2To4(const std::string& path) {
  struct statfs s;
  return ::statfs(path.c_str(), &s) == 0 && s.f_type == EXT4_SUPER_MAGIC;  // ext2, ext3 and ext4 alike
}

TEST(FileIoTest, ARunDirectorysNewParentIsMadeATopDirectory) {
  TempDir dir;
  const std::string project = dir / "runs/p";
  ASSERT_TRUE(CreateSpreadDirectory(project + "/job", Durability::kProcessCrash).ok());
  EXPECT_TRUE(FileExists(project + "/job").value());
  ASSERT_TRUE(MarkTopDirectory(dir.str()).ok());
  ASSERT_TRUE(MarkTopDirectory(dir.str()).ok()) << "idempotent";
  EXPECT_EQ(MarkTopDirectory(dir / "absent").code(), absl::StatusCode::kNotFound);
  if (!OnExt2To4(dir.str())) GTEST_SKIP() << "elsewhere the flag does not exist and the calls are no-ops (OK above)";
  EXPECT_NE(InodeFlags(project).value() & FS_TOPDIR_FL, 0);
  EXPECT_NE(InodeFlags(dir.str()).value() & FS_TOPDIR_FL, 0);
  EXPECT_EQ(InodeFlags(project + "/job").value() & FS_TOPDIR_FL, 0) << "only the parent spreads its children";
  ASSERT_TRUE(CreateSpreadDirectory(project + "/job2", Durability::kProcessCrash).ok());
  EXPECT_EQ(InodeFlags(project + "/job2").value() & FS_TOPDIR_FL, 0);
}

TEST(FileIoTest, FailuresAreStatusesNamingThePath) {
  TempDir dir;
  auto missing = ReadFile(dir / "absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir / "absent"), std::string::npos);
  auto s = WriteFileAtomically(dir / "no/such/dir/f", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos);
  EXPECT_FALSE(FileExists(dir / "absent").value());
  ASSERT_TRUE(CreateDirectories(dir / "a/b/c").ok());
  EXPECT_TRUE(FileExists(dir / "a/b/c").value());
  ASSERT_TRUE(WriteFileAtomically(dir / "a/file", "x").ok());
  EXPECT_EQ(CreateDirectories(dir / "a/file/sub").code(), absl::StatusCode::kFailedPrecondition);
}

// Every tag of a hypertune file, as hypertune.py writes it and as other
// writers might: values as strings or numbers; foreign lines skipped.
TEST(MetricReportsTest, EveryTagOfTheFile) {
  const std::string text =
      R"({"accuracy": "0.5", "checkpoint_path": "", "global_step": "10", "timestamp": 1700000000.5, "trial": "3"})"
      "\n"
      R"({"loss": 1.25, "global_step": 20, "timestamp": 1700000001})"
      "\n"
      "not json\n"
      R"({"accuracy": "nan", "global_step": "30"})"
      "\n"
      R"({"accuracy": "0.75", "loss": "0.5", "global_step": "40", "timestamp": 1700000002})"
      "\n"
      R"([1, 2])"
      "\n"
      R"({"accuracy": "high", "global_step": "50"})"
      "\n";
  const auto all = ParseAllMetricReports(text);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at("accuracy"),
            (std::vector<MetricReport>{{10, 0.5, 1700000000.5}, {40, 0.75, 1700000002}}));
  EXPECT_EQ(all.at("loss"), (std::vector<MetricReport>{{20, 1.25, 1700000001}, {40, 0.5, 1700000002}}));
  // The one-tag reader agrees with it.
  EXPECT_EQ(ParseMetricReports(text, "accuracy"), all.at("accuracy"));
  EXPECT_TRUE(ParseAllMetricReports("").empty());
  TempDir dir;
  EXPECT_TRUE(ReadAllMetricReports(dir / "absent").value().empty());
}

}  // namespace
}  // namespace mle::rundir

namespace mle::rundir {
namespace {

TEST(ReadJobFileTest, APlainFileOnlyNeverThroughALinkAndNotTooMuch) {
  TempDir dir;
  const std::string secret = dir.str() + "/secret", file = dir.str() + "/output.metrics";
  std::ofstream(secret) << "token";
  std::ofstream(file) << "{\"loss\": 1}\n";
  fs::create_symlink(secret, dir.str() + "/link");
  ASSERT_EQ(::mkfifo((dir.str() + "/fifo").c_str(), 0666), 0);
  struct Row {
    std::string name;
    size_t max;
    absl::StatusCode want;
  };
  const Row rows[] = {
      {"output.metrics", 1024, absl::StatusCode::kOk},
      {"output.metrics", 4, absl::StatusCode::kResourceExhausted},
      {"link", 1024, absl::StatusCode::kUnavailable},  // ELOOP: never the link's target
      {"fifo", 1024, absl::StatusCode::kFailedPrecondition},
      {"absent", 1024, absl::StatusCode::kNotFound},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    auto text = ReadJobFile(dir.str() + "/" + row.name, row.max);
    EXPECT_EQ(text.status().code(), row.want) << text.status();
    if (text.ok()) {
      EXPECT_EQ(*text, "{\"loss\": 1}\n");
    }
  }
  // The metrics readers read that way: a link planted by the job counts as
  // an error, not as its target's reports.
  EXPECT_FALSE(ReadAllMetricReports(dir.str() + "/link").ok());
  EXPECT_TRUE(ReadAllMetricReports(dir.str() + "/absent")->empty());
}

}  // namespace
}  // namespace mle::rundir
