#include "service/job_filter.h"

#include <gtest/gtest.h>

#include "common/status.h"

namespace mle::service {
namespace {

model::Job MakeJob(std::string id, model::JobState state, std::map<std::string, std::string> labels = {}) {
  model::Job j;
  j.job_id = std::move(id);
  j.state = state;
  j.labels = std::move(labels);
  j.create_time = absl::FromUnixSeconds(1700000000);  // 2023-11-14T22:13:20Z
  model::TrainingInput t;
  t.region = "us-central1";
  t.scale_tier = "BASIC_TPU";
  j.training_input = t;
  return j;
}

TEST(JobFilterTest, Table) {
  const model::Job census = MakeJob("census_42", model::JobState::kFailed, {{"team", "vision"}});
  struct Case { const char* filter; bool matches; };
  const Case cases[] = {
      {"", true},
      {"state=FAILED", true},
      {"state=SUCCEEDED", false},
      {"state!=SUCCEEDED", true},
      {"jobId:census*", true},
      {"jobId:CENSUS*", true},
      {"jobId:rnn*", false},
      {"jobId=census_42", true},
      {"jobId=census", false},
      {"jobId:census", true},  // ':' matches a word of the value
      {"labels.team=vision", true},
      {"labels.team=audio", false},
      {"labels.owner:*", false},
      {"labels.team:*", true},
      {"jobId:census* AND state=FAILED", true},
      {"jobId:census* AND state=RUNNING", false},
      {"jobId:census* state=FAILED", true},  // implicit AND
      {"state=RUNNING OR state=FAILED", true},
      {"NOT state=FAILED", false},
      {"-state=FAILED", false},
      {"(state=RUNNING OR state=QUEUED) AND jobId:census*", false},
      {"createTime>2023-01-01", true},
      {"createTime<2023-01-01", false},
      {"trainingInput.region=us-central1", true},
      {"trainingInput.scaleTier=BASIC_TPU", true},
      {"state=\"FAILED\"", true},
  };
  for (const auto& c : cases) {
    auto f = JobFilter::Parse(c.filter);
    ASSERT_TRUE(f.ok()) << c.filter << ": " << f.status();
    EXPECT_EQ(f->Matches(census), c.matches) << c.filter;
  }
}

TEST(JobFilterTest, RefusesBrokenFiltersNamingTheFilterField) {
  for (const char* bad : {"state", "state=", "colour=red", "(state=FAILED", "state=FAILED)", "jobId!census",
                          "\"unterminated", "AND", "state=FAILED AND"}) {
    auto f = JobFilter::Parse(bad);
    ASSERT_FALSE(f.ok()) << bad;
    auto v = common::GetFieldViolations(f.status());
    ASSERT_EQ(v.size(), 1u) << bad;
    EXPECT_EQ(v[0].field, "filter");
  }
}

}  // namespace
}  // namespace mle::service
