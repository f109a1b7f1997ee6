// PackageCache with the real venv and pip: an environment is built aside and
// published by one rename, its scripts name the published interpreter, and
// what a build cut short left behind never reaches a job.
#include "runtime/package_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/sha256.h"
#include "common/subprocess.h"
#include "rundir/file_io.h"

namespace mle::runtime {
namespace {

namespace fs = std::filesystem;

class PackageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ / "src" / "greet");
    Write(root_ / "src" / "greet" / "__init__.py", "def main():\n    print('hello from greet')\n");
    Write(root_ / "src" / "setup.py",
          "from setuptools import setup\n"
          "setup(name='greet', version='1.0', packages=['greet'],\n"
          "      entry_points={'console_scripts': ['greet=greet:main']})\n");
    fs::create_directories(root_ / "dist");
    package_ = (root_ / "dist" / "greet-1.0.tar.gz").string();
    auto tar = common::RunCommand({"tar", "-czf", package_, "-C", (root_ / "src").string(),
                                   "--transform", "s,^\\.,greet-1.0,", "."});
    ASSERT_TRUE(tar.ok() && tar->exit_code == 0) << (tar.ok() ? tar->output : tar.status().ToString());
    runtime_.name = "python-test";
    runtime_.python = "/usr/bin/python3";
  }
  void TearDown() override { if (!HasFailure()) fs::remove_all(root_); }

  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  // Prepare with the package at `path`, open as a job's start opens it.
  absl::StatusOr<PreparedEnvironment> Prepare(PackageCache& cache, const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(path);
    auto env = cache.Prepare(runtime_, {{fd, fs::path(path).filename().string()}});
    ::close(fd);
    return env;
  }
  fs::path EnvRoot() const { return root_ / "envs"; }
  // Every entry under ENVS/<runtime>/, names only.
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(EnvRoot() / runtime_.name)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path root_;
  std::string package_;
  Runtime runtime_;
};

TEST_F(PackageCacheTest, PublishedEnvironmentRunsItsScriptsAndLeavesNoStaging) {
  PackageCache cache(EnvRoot().string());
  auto env = Prepare(cache, package_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->cache_hit);
  const fs::path dir = fs::path(env->python).parent_path().parent_path();
  EXPECT_TRUE(fs::exists(dir / ".ready"));
  EXPECT_EQ(Entries(), std::vector<std::string>{dir.filename().string()}) << "nothing but the environment";

  // The console script pip wrote names the published interpreter, not the staging one.
  auto script = rundir::ReadFile((dir / "bin" / "greet").string());
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_NE(script->find((dir / "bin" / "python").string()), std::string::npos) << *script;
  EXPECT_EQ(script->find(".staging"), std::string::npos) << *script;
  auto run = common::RunCommand({(dir / "bin" / "greet").string()});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  EXPECT_EQ(run->output, "hello from greet\n");

  auto again = Prepare(cache, package_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->python, env->python);
}

// Retention's side: each Prepare that hands an environment out marks it
// used; Remove spares one used since it was listed, and otherwise takes it
// away whole, so the next Prepare builds it again.
TEST_F(PackageCacheTest, RemoveSparesAnEnvironmentUsedSinceItWasListedAndTheNextPrepareBuildsItAgain) {
  PackageCache cache(EnvRoot().string());
  auto env = Prepare(cache, package_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->dir, fs::path(env->python).parent_path().parent_path().string());
  auto listed = cache.Environments();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].dir, env->dir);

  // Handed out again (a cache hit): used later than listed, so kept.
  ::usleep(5000);  // file times in ns; the clock moves on
  auto hit = Prepare(cache, package_);
  ASSERT_TRUE(hit.ok() && hit->cache_hit);
  EXPECT_GT(cache.Environments()[0].last_used, listed[0].last_used);
  auto kept = cache.Remove(env->dir, listed[0].last_used);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(*kept);
  EXPECT_TRUE(fs::exists(fs::path(env->dir) / ".ready"));

  // Touch (a running job's) moves the last use on too.
  listed = cache.Environments();
  ::usleep(5000);
  cache.Touch(env->dir);
  EXPECT_FALSE(*cache.Remove(env->dir, listed[0].last_used));

  // Unchanged since listed: removed, nothing left beside it.
  listed = cache.Environments();
  auto removed = cache.Remove(env->dir, listed[0].last_used);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(env->dir));
  EXPECT_TRUE(Entries().empty());
  EXPECT_TRUE(cache.Environments().empty());
  EXPECT_FALSE(*cache.Remove(env->dir, listed[0].last_used)) << "gone already";
  EXPECT_EQ(cache.Remove((root_ / "elsewhere" / "x").string(), listed[0].last_used).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto rebuilt = Prepare(cache, package_);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_FALSE(rebuilt->cache_hit);
  EXPECT_EQ(rebuilt->python, env->python);
  auto run = common::RunCommand({(fs::path(rebuilt->dir) / "bin" / "greet").string()});
  ASSERT_TRUE(run.ok() && run->exit_code == 0);
}

// A runtime that is a venv of its own (torch in /opt/.../venv, as on many
// GPU hosts): the job's environment sees what the runtime sees (its
// packages, and what its own .pth files add), after the job's own, and the
// base interpreter's packages only where the runtime includes them.
TEST_F(PackageCacheTest, AJobsEnvironmentSeesWhatARuntimeThatIsAVenvSees) {
  // Returns the interpreter of a new venv (with the base's packages or not)
  // holding a module of its own and a .pth file that adds another directory.
  auto make_runtime = [this](const std::string& name, bool system_site) -> std::string {
    const fs::path venv = root_ / name;
    // Without the base's packages it needs pip of its own (ensurepip's).
    std::vector<std::string> argv = {"/usr/bin/python3", "-m", "venv", venv.string()};
    if (system_site) argv.insert(argv.begin() + 3, {"--system-site-packages", "--without-pip"});
    auto made = common::RunCommand(argv);
    EXPECT_TRUE(made.ok() && made->exit_code == 0) << (made.ok() ? made->output : made.status().ToString());
    auto site = common::RunCommand({(venv / "bin" / "python").string(), "-c",
                                    "import site; print(site.getsitepackages()[0], end='')"});
    EXPECT_TRUE(site.ok() && site->exit_code == 0);
    Write(fs::path(site->output) / "only_in_the_runtime.py", "WHERE = 'runtime venv'\n");
    fs::create_directories(venv / "extra");
    Write(venv / "extra" / "via_its_pth.py", "");
    Write(fs::path(site->output) / "extra.pth", (venv / "extra").string() + "\n");
    return (venv / "bin" / "python").string();
  };
  const std::string check =
      "import greet, only_in_the_runtime, via_its_pth, sys\n"
      "print(only_in_the_runtime.WHERE)\n"
      "p = [i for i, d in enumerate(sys.path) if d.endswith('site-packages')]\n"
      "print(greet.__file__.startswith(sys.path[p[0]]))\n"
      "try:\n"
      "    import numpy\n"
      "    print('numpy')\n"
      "except ImportError:\n"
      "    print('no numpy')\n"
      "print([d for d in sys.path[1:] if not d.startswith(sys.prefix + '/')])\n";
  PackageCache cache(EnvRoot().string());
  for (const bool system_site : {false, true}) {
    SCOPED_TRACE(system_site ? "with the base's packages" : "without the base's packages");
    runtime_.name = system_site ? "venv-system-site" : "venv-own";
    runtime_.python = make_runtime(runtime_.name, system_site);
    auto env = Prepare(cache, package_);
    ASSERT_TRUE(env.ok()) << env.status();
    auto run = common::RunCommand({env->python, "-c", check});
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 0) << run->output;
    // Its path is the runtime's own, with its own packages before.
    auto runtime_path = common::RunCommand({runtime_.python, "-c", "import sys; print(sys.path[1:])"});
    ASSERT_TRUE(runtime_path.ok() && runtime_path->exit_code == 0);
    EXPECT_EQ(run->output, (system_site ? "runtime venv\nTrue\nnumpy\n" : "runtime venv\nTrue\nno numpy\n") +
                               runtime_path->output);
  }

  // A runtime that is not a venv: the base's packages, and no such file.
  runtime_.name = "python-plain";
  runtime_.python = "/usr/bin/python3";
  auto plain = Prepare(cache, package_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->cache_hit);
  const fs::path plain_dir = fs::path(plain->python).parent_path().parent_path();
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(plain_dir)) found = found || e.path().filename() == "_mlengine_runtime.pth";
  EXPECT_FALSE(found);
  auto numpy = common::RunCommand({plain->python, "-c", "import numpy"});
  ASSERT_TRUE(numpy.ok());
  EXPECT_EQ(numpy->exit_code, 0) << numpy->output;
}

TEST_F(PackageCacheTest, WhatABuildCutShortLeftIsNeverUsedAndIsRemoved) {
  // First learn where the environment goes, then put back what a server
  // killed mid-install leaves: a half-built in-place directory (older
  // versions) and a staging directory of a dead process.
  std::string dir_name;
  {
    PackageCache cache(EnvRoot().string());
    auto env = Prepare(cache, package_);
    ASSERT_TRUE(env.ok()) << env.status();
    dir_name = fs::path(env->python).parent_path().parent_path().filename();
    fs::remove_all(EnvRoot());
  }
  const fs::path runtime_dir = EnvRoot() / runtime_.name;
  fs::create_directories(runtime_dir / dir_name / "lib");
  Write(runtime_dir / dir_name / "lib" / "half-written", "x");
  const std::string dead_staging = "." + dir_name + ".999999-0.staging";
  fs::create_directories(runtime_dir / dead_staging / "bin");
  Write(runtime_dir / dead_staging / "bin" / "python", "not a python");
  const std::string other_staging = ".0123456789abcdef0123456789abcdef.999999-1.staging";
  fs::create_directories(runtime_dir / other_staging);

  PackageCache cache(EnvRoot().string());
  cache.RemoveLeftovers();
  EXPECT_FALSE(fs::exists(runtime_dir / dead_staging));
  EXPECT_FALSE(fs::exists(runtime_dir / other_staging));
  auto env = Prepare(cache, package_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->cache_hit) << "a directory without .ready is never taken as built";
  EXPECT_FALSE(fs::exists(runtime_dir / dir_name / "lib" / "half-written"));
  EXPECT_TRUE(fs::exists(runtime_dir / dir_name / ".ready"));
  EXPECT_EQ(Entries(), std::vector<std::string>{dir_name}) << "the moved-aside directory is removed too";
}

TEST_F(PackageCacheTest, FailedInstallLeavesNothing) {
  Write(root_ / "src" / "setup.py", "raise SystemExit('this package cannot be built')\n");
  const std::string broken = (root_ / "dist" / "broken-1.0.tar.gz").string();
  auto tar = common::RunCommand({"tar", "-czf", broken, "-C", (root_ / "src").string(), "--transform",
                                 "s,^\\.,broken-1.0,", "."});
  ASSERT_TRUE(tar.ok() && tar->exit_code == 0);
  PackageCache cache(EnvRoot().string());
  auto env = Prepare(cache, broken);
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), absl::StatusCode::kFailedPrecondition) << env.status();
  EXPECT_TRUE(Entries().empty());
}

// AI Platform trainers declare cloudml-hypertune and `import hypertune`:
// with mlengine's helpers set, the dependency is met by the metadata that
// lies there and the module imports in the environment with no
// PYTHONPATH; without them pip says what is missing.
TEST_F(PackageCacheTest, TheHelpersMeetADeclaredHypertuneAndImportWithoutPythonpath) {
  const fs::path helpers = root_ / "helpers";
  fs::create_directories(helpers / "hypertune");
  fs::create_directories(helpers / "cloudml_hypertune-0.1.0.dev6.dist-info");
  Write(helpers / "hypertune" / "__init__.py", "class HyperTune:\n    pass\n");
  Write(helpers / "cloudml_hypertune-0.1.0.dev6.dist-info" / "METADATA",
        "Metadata-Version: 2.1\nName: cloudml-hypertune\nVersion: 0.1.0.dev6\n");
  Write(root_ / "src" / "setup.py",
        "from setuptools import setup\n"
        "setup(name='tuned', version='1.0', packages=['greet'], install_requires=['cloudml-hypertune'])\n");
  const std::string tuned = (root_ / "dist" / "tuned-1.0.tar.gz").string();
  auto tar = common::RunCommand({"tar", "-czf", tuned, "-C", (root_ / "src").string(), "--transform",
                                 "s,^\\.,tuned-1.0,", "."});
  ASSERT_TRUE(tar.ok() && tar->exit_code == 0);

  PackageCache without((root_ / "envs-without").string());
  auto refused = Prepare(without, tuned);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cloudml-hypertune"), std::string::npos) << refused.status();

  PackageCache cache(EnvRoot().string());
  cache.SetHelpers(helpers.string());
  auto env = Prepare(cache, tuned);
  ASSERT_TRUE(env.ok()) << env.status();
  common::CommandOptions clean;
  clean.env = std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}};
  auto run = common::RunCommand({env->python, "-c", "import hypertune, greet; print(hypertune.HyperTune.__name__)"},
                                clean);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  EXPECT_EQ(run->output, "HyperTune\n");
}

// The memo of package digests: a rule table over stamps and times.
TEST(DigestMemoTest, RemembersOnlySettledFilesAndFindsOnlyTheSameStamps) {
  constexpr int64_t kSec = 1'000'000'000;
  const FileStamp settled{1, 100, 5000, 10 * kSec, 10 * kSec};
  struct Case {
    const char* name;
    std::vector<FileStamp> remembered;
    int64_t hashed_at;
    std::vector<FileStamp> asked;
    bool found;
  };
  FileStamp rewritten = settled;
  rewritten.ctime_ns = 13 * kSec;  // written after: its ctime moved
  FileStamp reused = settled;
  reused.ctime_ns = 14 * kSec;  // another file under the inode number, later
  FileStamp other_device = settled;
  other_device.dev = 2;
  FileStamp fresh = settled;
  fresh.ctime_ns = 11 * kSec;  // changed less than 2 s before the hash
  const std::vector<Case> cases = {
      {"the same file, settled long before", {settled}, 30 * kSec, {settled}, true},
      {"settled exactly 2 s before", {settled}, 12 * kSec, {settled}, true},
      {"changed within 2 s of the hash", {fresh}, 12 * kSec, {fresh}, false},
      {"rewritten since", {settled}, 12 * kSec, {rewritten}, false},
      {"a new file with the inode number", {settled}, 12 * kSec, {reused}, false},
      {"another device", {settled}, 12 * kSec, {other_device}, false},
      {"one of two packages unsettled", {settled, fresh}, 12 * kSec, {settled, fresh}, false},
      {"the same files in another order", {settled, other_device}, 20 * kSec, {other_device, settled}, false},
      {"both settled, same order", {settled, other_device}, 20 * kSec, {settled, other_device}, true},
  };
  for (const auto& c : cases) {
    DigestMemo memo;
    memo.Remember(c.remembered, c.hashed_at, "digest");
    EXPECT_EQ(memo.Find(c.asked), c.found ? std::optional<std::string>("digest") : std::nullopt) << c.name;
  }
}

TEST(DigestMemoTest, ForgetsEverythingWhenFull) {
  DigestMemo memo;
  for (size_t i = 0; i < DigestMemo::kMaxEntries; ++i) memo.Remember({{1, i, 1, 0, 0}}, int64_t{10'000'000'000}, "d");
  EXPECT_EQ(memo.size(), DigestMemo::kMaxEntries);
  memo.Remember({{1, 999'999, 1, 0, 0}}, int64_t{10'000'000'000}, "last");
  EXPECT_EQ(memo.size(), 1u);
  EXPECT_EQ(memo.Find({{1, 999'999, 1, 0, 0}}), "last");
}

// A package rewritten in place (its bucket is writable by a job) after one
// job used it is hashed again: the next job gets the new contents' digest.
TEST_F(PackageCacheTest, APackageRewrittenInPlaceGetsItsNewDigest) {
  PackageCache cache(EnvRoot().string());
  auto first = Prepare(cache, package_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = Prepare(cache, package_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->digest, first->digest);
  EXPECT_TRUE(again->cache_hit);
  // Another version of the package, written over the first in place (the
  // same inode, as a job that may write the bucket could).
  Write(root_ / "src" / "greet" / "__init__.py", "def main():\n    print('hello again')\n");
  const std::string other = (root_ / "greet-other.tar.gz").string();
  auto tar = common::RunCommand({"tar", "-czf", other, "-C", (root_ / "src").string(), "--transform",
                                 "s,^\\.,greet-1.0,", "."});
  ASSERT_TRUE(tar.ok() && tar->exit_code == 0);
  std::string bytes;
  {
    std::ifstream in(other, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto inode_of = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : ino_t{0};
  };
  const ino_t inode = inode_of(package_);
  {
    std::ofstream out(package_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ASSERT_EQ(inode_of(package_), inode);
  auto digest = common::Sha256HexOfFiles({package_});
  ASSERT_TRUE(digest.ok());
  ASSERT_NE(*digest, first->digest);
  auto after = Prepare(cache, package_);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->digest, *digest);
  EXPECT_FALSE(after->cache_hit) << "the rewritten package gets an environment of its own";
}

}  // namespace
}  // namespace mle::runtime
