// PackageCache with the real venv and pip: an environment is built aside and
// published by one rename, its scripts name the published interpreter, and
// what a build cut short left behind never reaches a job.
#include "runtime/package_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace mle::runtime
