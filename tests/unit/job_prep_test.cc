// OpenPackage: a package is read from bucket storage only as a plain file
// of the bucket store, never through a symbolic link a job planted (a job
// that may write a bucket can make one pointing anywhere).
// ContainerMemoryFailure: a container replica killed at its memory limit,
// found by its id in the kernel log.
#include "executor/job_prep.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace mle::executor {
namespace {

namespace fs = std::filesystem;

TEST(OpenPackageTest, OnlyAPlainFileOfTheStoreThroughNoLink) {
  const fs::path root = fs::path(::testing::TempDir()) / ("open-in-buckets-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path gcs = root / "buckets";
  fs::create_directories(gcs / "mine" / "pkgs");
  fs::create_directories(gcs / "theirs");
  std::ofstream(gcs / "mine" / "pkgs" / "trainer-1.0.tar.gz") << "mine";
  std::ofstream(gcs / "theirs" / "secret.tar.gz") << "theirs";
  std::ofstream(root / "admin.token") << "token";
  fs::create_symlink(gcs / "theirs" / "secret.tar.gz", gcs / "mine" / "pkgs" / "linked.tar.gz");
  fs::create_symlink("../../../admin.token", gcs / "mine" / "pkgs" / "relative.tar.gz");
  fs::create_directory_symlink(gcs / "theirs", gcs / "mine" / "dir");
  ASSERT_EQ(::mkfifo((gcs / "mine" / "pkgs" / "fifo.tar.gz").c_str(), 0666), 0);
  auto store = buckets::BucketStore::Open(gcs.string());
  ASSERT_TRUE(store.ok()) << store.status();

  struct Row {
    std::string path;
    std::string want;  // "" : refused
  };
  const Row rows[] = {
      {"mine/pkgs/trainer-1.0.tar.gz", "mine"},
      {"mine/pkgs/linked.tar.gz", ""},     // a link to another project's object
      {"mine/pkgs/relative.tar.gz", ""},   // a link out of the buckets
      {"mine/dir/secret.tar.gz", ""},      // through a linked directory
      {"mine/../../admin.token", ""},      // out of the root by name
      {"mine/pkgs/fifo.tar.gz", ""},       // would stall a start
      {"mine/pkgs", ""},                   // a directory
      {"mine/pkgs/absent.tar.gz", ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.path);
    auto fd = OpenPackage(**store, "gs://" + row.path);
    if (row.want.empty()) {
      ASSERT_FALSE(fd.ok());
      EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(fd.status().message().find("gs://" + row.path), std::string::npos) << fd.status();
      continue;
    }
    ASSERT_TRUE(fd.ok()) << fd.status();
    char buf[16] = {};
    EXPECT_EQ(::read(fd->get(), buf, sizeof(buf) - 1), static_cast<ssize_t>(row.want.size()));
    EXPECT_EQ(std::string(buf), row.want);
  }
  store->reset();
  fs::remove_all(root);
}

TEST(ContainerMemoryFailureTest, ByTheContainersIdInTheKernelLog) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("container-oom-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string id = "bd231360e645525df61cb4398f2eb3fc03e4cf5bd0bce175a45a0682a19835e9";
  const std::string kill = "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/libpod_parent/libpod-" + id +
                           ",task_memcg=/libpod_parent/libpod-" + id + ",task=python3,pid=4242,uid=524301";
  struct Row {
    std::string name;
    std::string id_file;  // "-": none
    std::vector<std::string> log;
    std::string want;     // "": nullopt
  };
  const Row rows[] = {
      {"killed at its limit", id + "\n", {"boot", kill},
       "The replica master-replica-0 ran out of memory: the kernel killed its process python3 (pid 4242) at its "
       "memory limit of 96 MiB. Use less memory, or ask for a machine type with more (the operator's "
       "configuration says what each one gets)."},
      {"another container was", std::string(64, 'a'), {kill}, ""},
      {"no id file (a process replica)", "-", {kill}, ""},
      {"a short id matches nothing", "bd23", {kill}, ""},
      {"no record", id, {"boot"}, ""},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    fs::remove(dir / kContainerIdFile);
    if (row.id_file != "-") std::ofstream(dir / kContainerIdFile) << row.id_file;
    int reads = 0;
    const std::optional<std::string> got = ContainerMemoryFailure(dir.string(), "master-replica-0", 96, [&] {
      ++reads;
      return row.log;
    });
    EXPECT_EQ(got.value_or(""), row.want);
    EXPECT_EQ(reads, row.id_file.size() >= 32 ? 1 : 0);  // the log only for a container's id
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mle::executor

namespace mle::executor {
namespace {

struct TracebackCase {
  const char* name;
  std::vector<std::string> lines;
  std::optional<PythonError> want;
};

TEST(LastPythonErrorTest, Table) {
  const std::string env = "/data/envs/pytorch-1.13-cpu/4f2a/lib/python3.11/site-packages";
  const std::vector<TracebackCase> cases = {
      {"none", {"epoch 1 loss 0.3", "done"}, std::nullopt},
      {"a trainer's error: the innermost frame, its path from site-packages on",
       {"epoch 1", "Traceback (most recent call last):", "  File \"<frozen runpy>\", line 198, in _run_module_as_main",
        "  File \"" + env + "/trainer/task.py\", line 40, in <module>", "    main()",
        "  File \"" + env + "/trainer/task.py\", line 12, in train", "    x = np.reshape(y, (3, 3))",
        "        ^^^^^^^^^^^^^^^^^^^^^^", "ValueError: cannot reshape array of size 4 into shape (3,3)"},
       PythonError{"ValueError: cannot reshape array of size 4 into shape (3,3)", "trainer/task.py, line 12, in train"}},
      {"a path outside an environment stays whole",
       {"Traceback (most recent call last):", "  File \"/work/train.py\", line 3, in <module>",
        "    raise RuntimeError('no data')", "RuntimeError: no data"},
       PythonError{"RuntimeError: no data", "/work/train.py, line 3, in <module>"}},
      {"chained: the last traceback, and the first line of a long message",
       {"Traceback (most recent call last):", "  File \"/a.py\", line 1, in f", "KeyError: 'x'", "",
        "During handling of the above exception, another exception occurred:", "",
        "Traceback (most recent call last):", "  File \"/a.py\", line 5, in g", "OSError: first line",
        "second line of the message"},
       PythonError{"OSError: first line", "/a.py, line 5, in g"}},
      {"cut off before its exception line", {"Traceback (most recent call last):", "  File \"/a.py\", line 1, in f"},
       std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(LastPythonError(c.lines), c.want) << c.name;
}

}  // namespace
}  // namespace mle::executor
