#include "api/field_mask.h"

#include <gtest/gtest.h>

namespace mle::api {
namespace {

using nlohmann::json;

TEST(FieldMaskTest, Table) {
  const json job = json::parse(R"({"jobId":"a","state":"QUEUED","etag":"x",
      "trainingInput":{"scaleTier":"CUSTOM","region":"us-central1","workerCount":"2"}})");
  const json list = {{"jobs", {job, job}}, {"nextPageToken", "t"}};
  struct Case { const char* fields; json value; json want; };
  const Case cases[] = {
      {"", job, job},
      {"jobId,state", job, {{"jobId", "a"}, {"state", "QUEUED"}}},
      {"trainingInput/scaleTier", job, {{"trainingInput", {{"scaleTier", "CUSTOM"}}}}},
      {"trainingInput(region,workerCount)", job,
       {{"trainingInput", {{"region", "us-central1"}, {"workerCount", "2"}}}}},
      {"jobs(jobId),nextPageToken", list, json::parse(R"({"jobs":[{"jobId":"a"},{"jobId":"a"}],"nextPageToken":"t"})")},
      {"jobs/state", list, json::parse(R"({"jobs":[{"state":"QUEUED"},{"state":"QUEUED"}]})")},
      {"*", job, job},
      {"nosuch", job, json::object()},
  };
  for (const auto& c : cases) {
    auto mask = FieldMask::Parse(c.fields);
    ASSERT_TRUE(mask.ok()) << c.fields;
    EXPECT_EQ(mask->Apply(c.value), c.want) << c.fields;
  }
}

TEST(FieldMaskTest, RefusesBrokenSelections) {
  for (const char* bad : {"jobs(jobId", "jobId)", "a,,b", "a/", "(x)"}) {
    EXPECT_EQ(FieldMask::Parse(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace mle::api
