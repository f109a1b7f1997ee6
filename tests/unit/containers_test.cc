// The pure parts of custom containers: image names, the mirror table, the
// tpuTfVersion rule, and the `podman run` command line of a replica.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "containers/images.h"
#include "containers/podman.h"
#include "containers/resolver.h"

namespace mle::containers {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct NameCase {
  std::string uri;
  bool ok;
  std::string name, tag, digest;
};

TEST(ParseImageName, Table) {
  const std::string d = "sha256:" + std::string(64, 'a');
  const NameCase cases[] = {
      {"gcr.io/cloud-ml-public/training/pytorch-xla.1-11", true, "gcr.io/cloud-ml-public/training/pytorch-xla.1-11", "", ""},
      {"gcr.io/p/trainer:v1", true, "gcr.io/p/trainer", "v1", ""},
      {"127.0.0.1:5000/mlengine/python:bookworm", true, "127.0.0.1:5000/mlengine/python", "bookworm", ""},
      {"127.0.0.1:5000/mlengine/python", true, "127.0.0.1:5000/mlengine/python", "", ""},
      {"localhost/trainer@" + d, true, "localhost/trainer", "", d},
      {"r:5000/a/b:t@" + d, true, "r:5000/a/b", "t", d},
      {"", false, "", "", ""},
      {"a//b", false, "", "", ""},
      {"/a", false, "", "", ""},
      {"a/b:", false, "", "", ""},
      {"a/b@sha256:123", false, "", "", ""},
      {"a/b c", false, "", "", ""},
      {"a/b:t$", false, "", "", ""},
  };
  for (const auto& c : cases) {
    auto parsed = ParseImageName(c.uri);
    EXPECT_EQ(parsed.ok(), c.ok) << c.uri << ": " << parsed.status();
    if (!parsed.ok() || !c.ok) continue;
    EXPECT_EQ(parsed->name, c.name) << c.uri;
    EXPECT_EQ(parsed->tag, c.tag) << c.uri;
    EXPECT_EQ(parsed->digest, c.digest) << c.uri;
  }
}

ContainerSettings Settings() {
  ContainerSettings s;
  s.enabled = true;
  s.registry = "127.0.0.1:5000";
  s.mirrors = {{"gcr.io/cloud-ml-public/training/pytorch-xla.1-11", "mlengine/pytorch:bookworm", {"pytorch-1.11"}, true,
                "torch (CPU)"},
               {"gcr.io/p/trainer", "e2e/trainer", {}, false, ""},
               {"gcr.io/p/local", "localhost/trainer:2", {}, false, ""}};
  return s;
}

struct LocateCase {
  std::string uri;
  std::string reference;  // "" = refused
  std::string error;      // a part of the refusal
};

TEST(ImageTable, LocateTable) {
  const ImageTable table(Settings());
  const LocateCase cases[] = {
      {"gcr.io/cloud-ml-public/training/pytorch-xla.1-11", "127.0.0.1:5000/mlengine/pytorch:bookworm", ""},
      // A mirror without a tag takes the job's tag.
      {"gcr.io/p/trainer:v7", "127.0.0.1:5000/e2e/trainer:v7", ""},
      {"gcr.io/p/trainer", "127.0.0.1:5000/e2e/trainer:latest", ""},
      {"gcr.io/p/local:x", "localhost/trainer:2", ""},
      {"127.0.0.1:5000/team/job:3", "127.0.0.1:5000/team/job:3", ""},
      {"localhost/mine:1", "localhost/mine:1", ""},
      {"gcr.io/other/image:1", "", "is not available on this cluster"},
      {"docker.io/library/python:3", "", "Mirrored images: gcr.io/cloud-ml-public/training/pytorch-xla.1-11 (torch"},
      {"bad name", "", "is not an image name"},
  };
  for (const auto& c : cases) {
    auto src = table.Locate(c.uri);
    if (c.reference.empty()) {
      ASSERT_FALSE(src.ok()) << c.uri;
      EXPECT_EQ(src.status().code(), absl::StatusCode::kFailedPrecondition) << c.uri;
      EXPECT_THAT(std::string(src.status().message()), HasSubstr(c.error)) << c.uri;
    } else {
      ASSERT_TRUE(src.ok()) << c.uri << ": " << src.status();
      EXPECT_EQ(src->Reference("127.0.0.1:5000"), c.reference) << c.uri;
    }
  }
}

TEST(ImageTable, WhatOperatorsDisallowIsRefused) {
  ContainerSettings s = Settings();
  s.allow_registry_images = false;
  s.allow_local_images = false;
  const ImageTable table(s);
  EXPECT_FALSE(table.Locate("127.0.0.1:5000/team/job:3").ok());
  EXPECT_THAT(std::string(table.Locate("localhost/mine:1").status().message()), HasSubstr("allow_local_images"));
  EXPECT_TRUE(table.Locate("gcr.io/p/local:x").ok());  // mirrors still work
}

TEST(ImageTable, TpuTfVersionGoesWithTheImage) {
  const ImageTable table(Settings());
  const std::string xla = "gcr.io/cloud-ml-public/training/pytorch-xla.1-11";
  EXPECT_TRUE(table.CheckTpuTfVersion(xla, "pytorch-1.11").ok());
  auto wrong = table.CheckTpuTfVersion(xla, "pytorch-1.10");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("goes with tpuTfVersion pytorch-1.11"));
  // Images without declared versions: AI Platform's own rules (validation) decide.
  EXPECT_TRUE(table.CheckTpuTfVersion("gcr.io/p/trainer:1", "2.11").ok());
}

TEST(PodmanRunArgv, EveryPartOfTheReplicaIsOnTheCommandLine) {
  ContainerSettings s = Settings();
  ContainerRun run;
  run.name = "mle-p-j-master-replica-0-abcd";
  run.image = "127.0.0.1:5000/e2e/trainer@sha256:" + std::string(64, 'b');
  run.entrypoint = {"python3", "-m", "trainer.task"};
  run.args = {"--epochs", "2 words"};
  run.env_names = {"TF_CONFIG", "MLENGINE_ACCESS_TOKEN"};
  run.labels = {{kRunDirLabel, "/data/runs/p/j"}};
  run.mounts = {"/data/buckets", "/data/runs/p/j/master-replica-0"};
  run.gpus = {0, 3};
  const auto argv = PodmanRunArgv(s, run);
  const std::vector<std::string> expected = {
      "podman", "run", "--rm", "--name", run.name, "--network", "host", "--init", "--init-path",
      "/usr/bin/catatonit", "--pull", "never", "--log-driver", "none", "--label", "mlengine.run=/data/runs/p/j",
      "--env", "TF_CONFIG", "--env", "MLENGINE_ACCESS_TOKEN", "--volume", "/data/buckets:/data/buckets",
      "--volume", "/data/runs/p/j/master-replica-0:/data/runs/p/j/master-replica-0", "--device",
      "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=3", "--entrypoint", R"(["python3","-m","trainer.task"])",
      run.image, "--epochs", "2 words"};
  EXPECT_EQ(argv, expected);
  // No secret is on the command line: the environment is passed by name.
  for (const auto& a : argv) {
    for (const auto& name : run.env_names) EXPECT_EQ(a.find(name + "="), std::string::npos) << a;
  }
}

TEST(PodmanRunArgv, TheImagesOwnEntrypointAndGpusOff) {
  ContainerSettings s = Settings();
  s.gpu_devices = "none";
  ContainerRun run;
  run.name = "n";
  run.image = "i";
  run.gpus = {1};
  const auto argv = PodmanRunArgv(s, run);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--entrypoint"), 0);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--device"), 0);
  EXPECT_EQ(argv.back(), "i");
}

// podman 4.3's `images --format json`: an image with two names is listed
// twice (once is kept), ids come without "sha256:".
TEST(ParseStoredImages, Table) {
  const std::string listed = R"([
    {"Id": "e712f1", "RepoTags": null, "Size": 218452549, "Containers": 0,
     "RepoDigests": ["localhost/mlengine/python@sha256:50a0"],
     "Names": ["localhost/mlengine/python:f620", "localhost/mlengine/python:bookworm"]},
    {"Id": "e712f1", "RepoTags": null, "Size": 218452549, "Containers": 0,
     "RepoDigests": ["localhost/mlengine/python@sha256:50a0"],
     "Names": ["localhost/mlengine/python:f620", "localhost/mlengine/python:bookworm"]},
    {"Id": "sha256:77aa", "Size": 1024, "RepoDigests": ["127.0.0.1:5000/e2e/t@sha256:99"], "Names": null,
     "Containers": 2}
  ])";
  auto images = ParseStoredImages(listed);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2u);
  EXPECT_EQ((*images)[0].id, "sha256:e712f1");
  EXPECT_THAT((*images)[0].names,
              ::testing::ElementsAre("localhost/mlengine/python:f620", "localhost/mlengine/python:bookworm"));
  EXPECT_THAT((*images)[0].repo_digests, ::testing::ElementsAre("localhost/mlengine/python@sha256:50a0"));
  EXPECT_EQ((*images)[0].bytes, 218452549);
  EXPECT_EQ((*images)[1].id, "sha256:77aa");
  EXPECT_TRUE((*images)[1].names.empty());
  EXPECT_EQ((*images)[1].bytes, 1024);
  EXPECT_EQ((*images)[0].containers, 0);
  EXPECT_EQ((*images)[1].containers, 2);

  EXPECT_TRUE(ParseStoredImages("[]")->empty());
  for (const char* bad : {"", "{}", "[{\"Names\": []}]", "[1]", "not json"}) {
    EXPECT_EQ(ParseStoredImages(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ContainerName, UniqueAndSafe) {
  const std::string a = ContainerName("my-project", "job_1", "master-replica-0");
  EXPECT_EQ(a.rfind("mle-my-project-job_1-master-replica-0-", 0), 0u) << a;
  EXPECT_NE(a, ContainerName("my-project", "job_1", "worker-replica-0"));
  EXPECT_NE(ContainerName("p", "a_b", "t"), ContainerName("p_a", "b", "t"));
  for (char ch : a) EXPECT_TRUE(isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_') << a;
}

TEST(ContainersConf, RuncAndNoDefaultUlimits) {
  const std::string conf = ContainersConf(Settings());
  EXPECT_THAT(conf, HasSubstr("default_ulimits = []"));
  EXPECT_THAT(conf, HasSubstr("mlengine = [\"/usr/sbin/runc\"]"));
  EXPECT_THAT(conf, HasSubstr("runtime = \"mlengine\""));
}

TEST(JobImages, OwnImagesAndTheMastersForTheRest) {
  model::TrainingInput t;
  t.master_config.emplace();
  t.master_config->image_uri = "gcr.io/p/trainer:1";
  t.worker_config.emplace();
  t.worker_config->image_uri = "gcr.io/p/worker:1";
  t.evaluator_config.emplace();
  EXPECT_THAT(JobImages(t), ElementsAre("gcr.io/p/trainer:1", "gcr.io/p/worker:1"));
}

}  // namespace
}  // namespace mle::containers
