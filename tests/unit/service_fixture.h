// What the service tests share: a job that passes validation, and a fresh
// directory for the running test.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "model/job.h"

namespace mle::testing {

// A BASIC job of one package and module, in us-central1 on runtime 2.11.
inline model::Job BasicPackageJob(const std::string& id) {
  model::Job j;
  j.job_id = id;
  model::TrainingInput t;
  t.scale_tier = "BASIC";
  t.package_uris = {"gs://b/trainer-0.0.0.tar.gz"};
  t.python_module = "trainer.task";
  t.region = "us-central1";
  t.runtime_version = "2.11";
  j.training_input = t;
  return j;
}

// An empty directory under the system's temporary one, named after
// `prefix`, this process and the running test; made anew.
inline std::filesystem::path FreshTestDirectory(const std::string& prefix) {
  const auto dir = std::filesystem::temp_directory_path() /
                   (prefix + "_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace mle::testing
