// Staging location, upload layout and the sdist build.

#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "cli/gcs_path.h"
#include "cli/packaging.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cli_packaging_test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const fs::path& rel, const std::string& text) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path dir_;
};

TEST(GcsPathTest, ParseAndJoin) {
  auto p = ParseGcsPath("gs://bucket/a/b.txt");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bucket, "bucket");
  EXPECT_EQ(p->object, "a/b.txt");
  EXPECT_EQ(p->Uri(), "gs://bucket/a/b.txt");
  auto b = ParseGcsPath("gs://bucket");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->object, "");
  EXPECT_EQ(b->Child("x").Uri(), "gs://bucket/x");
  EXPECT_EQ(ParseGcsPath("gs://bucket/dir/")->Child("x").Uri(), "gs://bucket/dir/x");
  EXPECT_EQ(ParseGcsPath("gs://bucket/dir")->Child("x").Uri(), "gs://bucket/dir/x");
  EXPECT_FALSE(ParseGcsPath("s3://bucket/x").ok());
  EXPECT_FALSE(ParseGcsPath("gs:///x").ok());
  EXPECT_EQ(BaseName("a/b/c.tar.gz"), "c.tar.gz");
  EXPECT_EQ(BaseName("gs://b/dir/"), "dir");
  EXPECT_EQ(BaseName("plain"), "plain");
}

TEST(StagingLocationTest, StagingBucketThenJobDir) {
  auto s = StagingLocation(std::string("gs://stage"), std::string("gs://out/dir"), "job_1");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Uri(), "gs://stage/job_1");
  EXPECT_EQ(StagingLocation(std::string("gs://stage/"), std::nullopt, "job_1")->Uri(), "gs://stage/job_1");
  EXPECT_EQ(StagingLocation(std::nullopt, std::string("gs://out/dir"), "job_1")->Uri(), "gs://out/dir/packages");
  EXPECT_EQ(StagingLocation(std::nullopt, std::string("gs://out/dir/"), "job_1")->Uri(), "gs://out/dir/packages");
  EXPECT_EQ(StagingLocation(std::nullopt, std::string("gs://out"), "job_1")->Uri(), "gs://out/packages");
}

TEST(StagingLocationTest, Errors) {
  EXPECT_FALSE(StagingLocation(std::nullopt, std::nullopt, "j").ok());
  EXPECT_FALSE(StagingLocation(std::string("stage"), std::nullopt, "j").ok());
  auto local_job_dir = StagingLocation(std::nullopt, std::string("/tmp/out"), "j");
  ASSERT_FALSE(local_job_dir.ok());
  EXPECT_NE(std::string(local_job_dir.status().message()).find("--staging-bucket"), std::string::npos);
}

TEST(UploadLayoutTest, StagingDigestBasename) {
  GcsPath staging{"stage", "job_1"};
  auto layout = UploadLayout(staging, "3f2a", {"/tmp/x/dist/trainer-0.0.0.tar.gz", "deps/extra-1.0.whl"});
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_EQ(layout[0].destination.Uri(), "gs://stage/job_1/3f2a/trainer-0.0.0.tar.gz");
  EXPECT_EQ(layout[0].local, fs::path("/tmp/x/dist/trainer-0.0.0.tar.gz"));
  EXPECT_EQ(layout[1].destination.Uri(), "gs://stage/job_1/3f2a/extra-1.0.whl");
  auto from_job_dir = UploadLayout(GcsPath{"out", "dir/packages"}, "ff", {"a.tar.gz"});
  EXPECT_EQ(from_job_dir[0].destination.Uri(), "gs://out/dir/packages/ff/a.tar.gz");
}

TEST(DuplicatesTest, SameBasenameRefused) {
  EXPECT_TRUE(CheckDuplicateBasenames({"a/x.tar.gz", "gs://b/y.tar.gz", "z.whl"}).ok());
  auto s = CheckDuplicateBasenames({"a/x.tar.gz", "gs://b/p/x.tar.gz"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("x.tar.gz"), std::string::npos);
}

TEST(SetupPyTest, Generated) {
  const std::string setup = GeneratedSetupPy("trainer");
  EXPECT_NE(setup.find("name='trainer'"), std::string::npos);
  EXPECT_NE(setup.find("version='0.0.0'"), std::string::npos);
  EXPECT_NE(setup.find("find_packages(include=['trainer', 'trainer.*'])"), std::string::npos);
}

TEST_F(TempDirTest, BuildsAnSdistWithoutTouchingTheUsersTree) {
  Write("src/trainer/__init__.py", "");
  Write("src/trainer/task.py", "print('hi')\n");
  Write("src/trainer/sub/__init__.py", "");
  auto result = BuildSdist(dir_ / "src" / "trainer", dir_ / "work", dir_ / "out", "/usr/bin/python3");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->generated_setup_py);
  ASSERT_EQ(result->files.size(), 1u);
  EXPECT_EQ(result->files[0].filename(), "trainer-0.0.0.tar.gz");
  auto members = ArchiveMembers(result->files[0]);
  ASSERT_TRUE(members.ok()) << members.status();
  auto has = [&](const std::string& m) { return std::find(members->begin(), members->end(), m) != members->end(); };
  EXPECT_TRUE(has("trainer-0.0.0/trainer/__init__.py"));
  EXPECT_TRUE(has("trainer-0.0.0/trainer/task.py"));
  EXPECT_TRUE(has("trainer-0.0.0/trainer/sub/__init__.py"));
  // Nothing was written next to the user's package.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_ / "src")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"trainer"});
}

// A package built twice from the same sources is the same bytes (its
// staged path and mlengined's environment are then the same ones), however
// the files' times and the clock moved in between.
TEST_F(TempDirTest, TwoBuildsOfTheSameSourcesAreTheSameBytes) {
  Write("src/trainer/__init__.py", "");
  Write("src/trainer/task.py", "print('hi')\n");
  Write("src/trainer/b.py", "B = 1\n");
  Write("src/trainer/a.py", "A = 1\n");
  auto first = BuildSdist(dir_ / "src" / "trainer", dir_ / "work1", dir_ / "out1", "/usr/bin/python3");
  ASSERT_TRUE(first.ok()) << first.status();
  for (const char* f : {"__init__.py", "task.py", "a.py", "b.py"}) {
    fs::last_write_time(dir_ / "src" / "trainer" / f, fs::file_time_type::clock::now() - std::chrono::hours(30));
  }
  ::sleep(1);  // the gzip header and setuptools' own files would carry the new second
  auto second = BuildSdist(dir_ / "src" / "trainer", dir_ / "work2", dir_ / "out2", "/usr/bin/python3");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(first->files.size(), 1u);
  ASSERT_EQ(second->files.size(), 1u);
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(first->files[0]), bytes(second->files[0]));
  auto members = ArchiveMembers(second->files[0]);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_TRUE(std::is_sorted(members->begin(), members->end()));
  EXPECT_NE(std::find(members->begin(), members->end(), "trainer-0.0.0/trainer/task.py"), members->end());
}

TEST_F(TempDirTest, UsesTheParentsSetupPy) {
  Write("proj/setup.py",
        "from setuptools import setup\nsetup(name='my-trainer', version='1.2', packages=['trainer'])\n");
  Write("proj/trainer/__init__.py", "");
  auto result = BuildSdist(dir_ / "proj" / "trainer", dir_ / "work", dir_ / "out", "/usr/bin/python3");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->generated_setup_py);
  ASSERT_EQ(result->files.size(), 1u);
  const std::string name = result->files[0].filename().string();
  EXPECT_TRUE(name == "my-trainer-1.2.tar.gz" || name == "my_trainer-1.2.tar.gz") << name;
  EXPECT_FALSE(fs::exists(dir_ / "proj" / "my_trainer.egg-info"));
  EXPECT_FALSE(fs::exists(dir_ / "proj" / "my-trainer.egg-info"));
  EXPECT_FALSE(fs::exists(dir_ / "proj" / "build"));
}

TEST_F(TempDirTest, RefusesNonPackagesAndReportsSetuptoolsFailures) {
  Write("src/notpkg/task.py", "");
  auto no_init = BuildSdist(dir_ / "src" / "notpkg", dir_ / "work", dir_ / "out", "/usr/bin/python3");
  ASSERT_FALSE(no_init.ok());
  EXPECT_NE(std::string(no_init.status().message()).find("__init__.py"), std::string::npos);
  EXPECT_FALSE(BuildSdist(dir_ / "missing", dir_ / "work", dir_ / "out", "/usr/bin/python3").ok());

  Write("broken/setup.py", "raise SystemExit('setup is broken on purpose')\n");
  Write("broken/trainer/__init__.py", "");
  auto broken = BuildSdist(dir_ / "broken" / "trainer", dir_ / "work2", dir_ / "out2", "/usr/bin/python3");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(std::string(broken.status().message()).find("broken on purpose"), std::string::npos) << broken.status();
}

TEST_F(TempDirTest, ArchiveMembersRefusesGarbage) {
  fs::path junk = Write("junk.tar.gz", "this is not an archive");
  EXPECT_FALSE(ArchiveMembers(junk).ok());
}

}  // namespace
}  // namespace mle::cli
