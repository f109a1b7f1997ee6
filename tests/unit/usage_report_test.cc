// The operator's usage report (service/usage_report.h): rows per project,
// user or both; a tuning job's trials add their usage, not a job; a job
// counts in a period it was alive in.
#include "service/usage_report.h"

#include <gtest/gtest.h>

namespace mle::service {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

model::Job JobOf(const std::string& project, const std::string& id, const std::string& creator,
                 absl::Time created, std::optional<absl::Time> ended) {
  model::Job job;
  job.project = project;
  job.job_id = id;
  job.creator = creator;
  job.create_time = created;
  job.end_time = ended;
  return job;
}

model::Usage Units(double units) {
  model::Usage u;
  u.ml_units = units;
  u.run_hours = units > 0 ? 1 : 0;
  return u;
}

struct Expected {
  std::string project, user;
  int64_t jobs;
  double units;
};

TEST(UsageReport, GroupsByProjectUserOrBoth) {
  const absl::Time now = kT0 + absl::Hours(10);
  std::vector<std::pair<model::Job, model::Usage>> jobs = {
      {JobOf("a", "j1", "user:x@example.com", kT0, kT0 + absl::Hours(1)), Units(1)},
      {JobOf("a", "j2", "operator", kT0, std::nullopt), Units(2)},
      {JobOf("b", "j3", "user:x@example.com", kT0, kT0 + absl::Hours(1)), Units(4)},
      {JobOf("b", "j4", "", kT0, kT0 + absl::Hours(1)), Units(8)},  // from before creators were kept
  };
  // j2's trial: its usage is j2's project's and creator's, not a job.
  model::Job trial = JobOf("a", "j2.1", "operator", kT0, kT0 + absl::Hours(1));
  trial.trial_of = "j2";
  trial.trial_id = "1";
  jobs.push_back({trial, Units(16)});
  struct Case {
    bool by_project, by_user;
    std::vector<Expected> rows;
  };
  const std::vector<Case> cases = {
      {true, false, {{"a", "", 2, 19}, {"b", "", 2, 12}}},
      {false, true, {{"", "(unknown)", 1, 8}, {"", "operator", 1, 18}, {"", "user:x@example.com", 2, 5}}},
      {true, true,
       {{"a", "operator", 1, 18}, {"a", "user:x@example.com", 1, 1}, {"b", "(unknown)", 1, 8},
        {"b", "user:x@example.com", 1, 4}}},
      {false, false, {{"", "", 4, 31}}},
  };
  for (const auto& c : cases) {
    UsageQuery q;
    q.by_project = c.by_project;
    q.by_user = c.by_user;
    UsageReport report(q);
    for (const auto& [job, usage] : jobs) report.Add(job, usage, now);
    const auto rows = report.Rows();
    ASSERT_EQ(rows.size(), c.rows.size()) << c.by_project << c.by_user;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].project, c.rows[i].project) << i;
      EXPECT_EQ(rows[i].user, c.rows[i].user) << i;
      EXPECT_EQ(rows[i].jobs, c.rows[i].jobs) << rows[i].project << " " << rows[i].user;
      EXPECT_DOUBLE_EQ(rows[i].usage.ml_units, c.rows[i].units) << rows[i].project << " " << rows[i].user;
    }
  }
}

TEST(UsageReport, AJobCountsInAPeriodItWasAliveIn) {
  const absl::Time now = kT0 + absl::Hours(10);
  const model::Job ended = JobOf("a", "ended", "operator", kT0, kT0 + absl::Hours(2));
  const model::Job running = JobOf("a", "running", "operator", kT0, std::nullopt);
  struct Case {
    model::Period period;
    int64_t jobs;
  };
  const std::vector<Case> cases = {
      {{}, 2},
      {{kT0 + absl::Hours(1), kT0 + absl::Hours(3)}, 2},
      {{kT0 + absl::Hours(2), std::nullopt}, 1},  // ended as the period began
      {{std::nullopt, kT0}, 0},                   // created as it ended
      {{kT0 - absl::Hours(5), kT0 - absl::Hours(1)}, 0},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    UsageQuery q;
    q.period = cases[i].period;
    UsageReport report(q);
    report.Add(ended, {}, now);
    report.Add(running, {}, now);
    const auto rows = report.Rows();
    EXPECT_EQ(rows.empty() ? 0 : rows[0].jobs, cases[i].jobs) << i;
  }
}

}  // namespace
}  // namespace mle::service
