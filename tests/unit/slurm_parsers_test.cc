// Parsers of Slurm output, driven by real output captured from Slurm 22.05
// (scripts/slurm/cluster.sh, files in tests/data/slurm). Each table row is
// one job as Slurm reported it and what mlengine must read from it.
#include "executor/slurm/slurm_parsers.h"

#include "executor/slurm/slurm_commands.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mle::executor::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using model::JobState;

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(MLE_TEST_DATA) + "/slurm/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// ---- sbatch --parsable -----------------------------------------------------

TEST(ParseSbatchParsable, CapturedOutputs) {
  auto plain = ParseSbatchParsable(ReadData("sbatch_parsable.txt"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->job_id, 3);
  EXPECT_EQ(plain->cluster, "");
  // A heterogeneous job prints the leader's id only.
  auto het = ParseSbatchParsable(ReadData("sbatch_parsable_het.txt"));
  ASSERT_TRUE(het.ok()) << het.status();
  EXPECT_EQ(het->job_id, 7);
}

TEST(ParseSbatchParsable, Table) {
  struct Case {
    std::string text;
    bool ok;
    int64_t job_id;
    std::string cluster;
  };
  const std::vector<Case> cases = {
      {"42\n", true, 42, ""},
      {"42;cluster1\n", true, 42, "cluster1"},
      {"  1234567  ", true, 1234567, ""},
      {"", false, 0, ""},
      {"0", false, 0, ""},
      {"-3", false, 0, ""},
      {"42;", false, 0, ""},
      {"sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification", false, 0, ""},
      {"Submitted batch job 42", false, 0, ""},
  };
  for (const auto& c : cases) {
    auto got = ParseSbatchParsable(c.text);
    EXPECT_EQ(got.ok(), c.ok) << "'" << c.text << "'";
    if (got.ok() && c.ok) {
      EXPECT_EQ(got->job_id, c.job_id) << c.text;
      EXPECT_EQ(got->cluster, c.cluster) << c.text;
    }
  }
}

// ---- hostlists ---------------------------------------------------------------

TEST(ExpandHostlist, MatchesScontrolShowHostnames) {
  // The expected lists are `scontrol show hostnames <expr>` output.
  auto tpu = ExpandHostlist("tpuhost[1-4]");
  ASSERT_TRUE(tpu.ok());
  EXPECT_EQ(*tpu, Lines(ReadData("hostnames_tpuhost.txt")));
  auto mixed = ExpandHostlist("a[01-03,7],b1");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(*mixed, Lines(ReadData("hostnames_mixed.txt")));
}

TEST(ExpandHostlist, Table) {
  struct Case {
    std::string expr;
    std::vector<std::string> hosts;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"(null)", {}},
      {"tpuhost1", {"tpuhost1"}},
      {"tpuhost[2-3]", {"tpuhost2", "tpuhost3"}},
      {"n[8-10]", {"n8", "n9", "n10"}},
      {"n[098-101]", {"n098", "n099", "n100", "n101"}},
      {"a,b,c", {"a", "b", "c"}},
      {"rack[1-2]-n[01-02]", {"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
      {"gpu[1,3],cpu[5-6]x", {"gpu1", "gpu3", "cpu5x", "cpu6x"}},
      // Found with the fuzz target: the loop stepped past INT64_MAX (undefined).
      {"n[9223372036854775806-9223372036854775807]", {"n9223372036854775806", "n9223372036854775807"}},
  };
  for (const auto& c : cases) {
    auto got = ExpandHostlist(c.expr);
    ASSERT_TRUE(got.ok()) << c.expr << ": " << got.status();
    EXPECT_EQ(*got, c.hosts) << c.expr;
  }
  for (const char* bad : {"a[1-", "a]1", "a[3-1]", "a[x]", "a[[1]]", "a[1-2000000]", "a[]"}) {
    EXPECT_FALSE(ExpandHostlist(bad).ok()) << bad;
  }
}

// ---- GRES ----------------------------------------------------------------------

TEST(ParseGres, CountsByNameAndByType) {
  EXPECT_EQ(ParseGres("gpu:t4:2(S:0-1),tpu:8"),
            (std::map<std::string, int64_t>{{"gpu", 2}, {"gpu:t4", 2}, {"tpu", 8}}));
  EXPECT_EQ(ParseGres("gpu:a100:1,gpu:t4:3"),
            (std::map<std::string, int64_t>{{"gpu", 4}, {"gpu:a100", 1}, {"gpu:t4", 3}}));
  EXPECT_TRUE(ParseGres("(null)").empty());
  // Found with the fuzz target: summing counts overflowed int64 (undefined); they saturate.
  EXPECT_EQ(ParseGres("gpu:t4:9223372036854775807,gpu:t4:5"),
            (std::map<std::string, int64_t>{{"gpu", INT64_MAX}, {"gpu:t4", INT64_MAX}}));
}

// ---- squeue's table (kSqueueFields, kSqueueNamedFields) ------------------
// squeue_*.txt: the jobs captured from Slurm 22.05's `squeue --json`, as
// `squeue -h -t all -O kSqueueNamedFields` prints them.

struct JobRow {
  int64_t job_id;
  std::string name;
  std::string state;
  std::string reason;
  std::vector<std::string> nodes;
  int64_t het_job_id;
  int het_job_offset;
};

void ExpectJobs(const std::string& file, const std::vector<JobRow>& rows) {
  auto jobs = ParseJobsTable(ReadData(file), /*named=*/true);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::map<int64_t, SlurmJob> by_id;
  for (const auto& j : *jobs) by_id[j.job_id] = j;
  ASSERT_EQ(by_id.size(), rows.size()) << file;
  for (const auto& row : rows) {
    SCOPED_TRACE(file + " job " + std::to_string(row.job_id));
    ASSERT_TRUE(by_id.count(row.job_id));
    const SlurmJob& j = by_id[row.job_id];
    EXPECT_EQ(j.name, row.name);
    EXPECT_EQ(j.state, row.state);
    EXPECT_EQ(j.state_reason, row.reason);
    EXPECT_EQ(j.nodes, row.nodes);
    EXPECT_EQ(j.het_job_id, row.het_job_id);
    EXPECT_EQ(j.het_job_offset, row.het_job_offset);
  }
}

const std::vector<std::string> kAllHosts = {"tpuhost1", "tpuhost2", "tpuhost3", "tpuhost4"};

// The jobs the two captures list alike (they had ended, or never ran, when
// the first was taken), and each capture's others.
const std::vector<JobRow> kEndedBeforeBoth = {
    {1, "wrap", "COMPLETED", "", kAllHosts, 0, 0},
    {3, "mle-completed", "COMPLETED", "", {"tpuhost1"}, 0, 0},
    {4, "mle-failed", "FAILED", "NonZeroExitCode", {"tpuhost2"}, 0, 0},
    {5, "mle-signaled", "FAILED", "JobLaunchFailure", {"tpuhost2"}, 0, 0},
    {6, "mle-cancelled", "CANCELLED", "", {"tpuhost3"}, 0, 0},
    {7, "mle-het", "COMPLETED", "", {"tpuhost1"}, 7, 0},
    {8, "mle-het", "COMPLETED", "", {"tpuhost2", "tpuhost3"}, 7, 1},
    {11, "mle-held", "PENDING", "JobHeldUser", {}, 0, 0},
};
std::vector<JobRow> With(std::vector<JobRow> rows, const std::vector<JobRow>& more) {
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

TEST(ParseJobsTable, WhileRunning) {
  // Captured with a 4-node job running and a 4-node job pending behind it.
  ExpectJobs("squeue_all.txt", With(kEndedBeforeBoth, {
      {2, "mle-timeout", "RUNNING", "", {"tpuhost1"}, 0, 0},
      {9, "mle-running", "RUNNING", "", kAllHosts, 0, 0},
      {10, "mle-pending", "PENDING", "Resources", {}, 0, 0},
  }));
}

TEST(ParseJobsTable, AfterTheyEnded) {
  ExpectJobs("squeue_final.txt", With(kEndedBeforeBoth, {
      {2, "mle-timeout", "TIMEOUT", "TimeLimit", {"tpuhost1"}, 0, 0},
      {9, "mle-running", "COMPLETED", "", kAllHosts, 0, 0},
      {10, "mle-pending", "COMPLETED", "", kAllHosts, 0, 0},
  }));
}

// Lines as this cluster's squeue 22.05 prints them, and what is read of each.
TEST(ParseJobsTable, Lines) {
  struct Case {
    std::string text;
    bool named;
    int64_t id;
    std::string account, state, reason;
    std::vector<std::string> nodes;
    std::string name;
  };
  const std::vector<Case> cases = {
      {"204|N/A|N/A|root|COMPLETED|None|tpuhost1\n", false, 204, "root", "COMPLETED", "", {"tpuhost1"}, ""},
      {"203|N/A|N/A|root|FAILED|BadConstraints|", false, 203, "root", "FAILED", "BadConstraints", {}, ""},
      {"206|N/A|N/A|mle-p|PENDING|Priority|(null)\n", false, 206, "mle-p", "PENDING", "Priority", {}, ""},
      {"9|N/A|N/A|(null)|RUNNING|None|tpuhost[1-2]\n", false, 9, "", "RUNNING", "", {"tpuhost1", "tpuhost2"}, ""},
      {"5|N/A|N/A|root|RUNNING|None|tpuhost1|mle-p-j\n", true, 5, "root", "RUNNING", "", {"tpuhost1"}, "mle-p-j"},
      // A name takes the rest of its line, '|' and all.
      {"5|N/A|N/A|root|RUNNING|None|tpuhost1|a|b\n", true, 5, "root", "RUNNING", "", {"tpuhost1"}, "a|b"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto jobs = ParseJobsTable(c.text, c.named);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    ASSERT_EQ(jobs->size(), 1u);
    const SlurmJob& j = jobs->front();
    EXPECT_EQ(j.job_id, c.id);
    EXPECT_EQ(j.het_job_id, 0);
    EXPECT_EQ(j.het_job_offset, 0);
    EXPECT_EQ(j.account, c.account);
    EXPECT_EQ(j.state, c.state);
    EXPECT_EQ(j.state_reason, c.reason);
    EXPECT_EQ(j.nodes, c.nodes);
    EXPECT_EQ(j.name, c.name);
  }
  auto none = ParseJobsTable("", false);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParseJobsTable, LinesOfAnotherShapeAreErrors) {
  struct Case {
    std::string text;
    bool named;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"slurm_load_jobs error: Unable to contact slurm controller\n", false, "1 fields, not 7"},
      {"1|N/A|N/A|root|RUNNING|None\n", false, "6 fields, not 7"},
      // An unnamed listing has no free text: an eighth field is no line of it.
      {"1|N/A|N/A|root|RUNNING|None|tpuhost1|x\n", false, "more than 7 fields"},
      {"1|N/A|N/A|root|RUNNING|None|tpuhost1\n", true, "7 fields, not 8"},
      {"x|N/A|N/A|root|RUNNING|None|h1\n", false, "no job id"},
      {"0|N/A|N/A|root|RUNNING|None|h1\n", false, "no job id"},
      {"1|z|N/A|root|RUNNING|None|h1\n", false, "HetJobID"},
      {"1|1|-1|root|RUNNING|None|h1\n", false, "HetJobOffset"},
      {"1|N/A|N/A|root||None|h1\n", false, "no state"},
      {"1|N/A|N/A|root|RUNNING|None|a[1-\n", false, "unbalanced"},
      // One good line does not excuse a bad one.
      {"1|N/A|N/A|root|RUNNING|None|h1\nsqueue: error: oops\n", false, "squeue: error: oops"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto jobs = ParseJobsTable(c.text, c.named);
    ASSERT_FALSE(jobs.ok());
    EXPECT_EQ(jobs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(jobs.status().message()), HasSubstr(c.says));
  }
}

// ---- state mapping -------------------------------------------------------------

TEST(MapSlurmState, Table) {
  struct Case {
    std::string state;
    std::string reason;
    JobState want;
    std::string message_has;  // "" = message must be empty
  };
  const std::vector<Case> cases = {
      {"PENDING", "Resources", JobState::kQueued, "Resources"},
      {"PENDING", "JobHeldUser", JobState::kQueued, "JobHeldUser"},
      {"PENDING", "None", JobState::kQueued, "Waiting"},
      {"REQUEUED", "None", JobState::kQueued, "REQUEUED"},
      {"REQUEUE_HOLD", "JobHeldAdmin", JobState::kQueued, "JobHeldAdmin"},
      {"CONFIGURING", "None", JobState::kPreparing, "configuring"},
      {"RUNNING", "None", JobState::kRunning, ""},
      {"COMPLETING", "None", JobState::kRunning, ""},
      {"COMPLETED", "None", JobState::kSucceeded, ""},
      {"FAILED", "NonZeroExitCode", JobState::kFailed, "NonZeroExitCode"},
      {"FAILED", "JobLaunchFailure", JobState::kFailed, "JobLaunchFailure"},
      {"TIMEOUT", "TimeLimit", JobState::kFailed, "time limit"},
      {"NODE_FAIL", "None", JobState::kFailed, "node"},
      {"OUT_OF_MEMORY", "None", JobState::kFailed, "memory"},
      {"PREEMPTED", "None", JobState::kFailed, "preempted"},
      {"BOOT_FAIL", "None", JobState::kFailed, "boot"},
      {"DEADLINE", "None", JobState::kFailed, "deadline"},
      {"CANCELLED", "None", JobState::kCancelled, "Cancelled"},
      {"SPECIAL_EXIT", "None", JobState::kUnspecified, "SPECIAL_EXIT"},
  };
  for (const auto& c : cases) {
    MappedState got = MapSlurmState(c.state, c.reason);
    EXPECT_EQ(got.state, c.want) << c.state;
    if (c.message_has.empty()) {
      EXPECT_EQ(got.message, "") << c.state;
    } else {
      EXPECT_THAT(got.message, HasSubstr(c.message_has)) << c.state;
    }
  }
}

TEST(MapSlurmState, EveryCapturedJobMaps) {
  for (const char* file : {"squeue_all.txt", "squeue_final.txt", "squeue_assoc_jobs_limit.txt",
                           "squeue_assoc_cpu_limit.txt", "squeue_assoc_gres_limit.txt"}) {
    auto jobs = ParseJobsTable(ReadData(file), /*named=*/true);
    ASSERT_TRUE(jobs.ok());
    for (const auto& j : *jobs) {
      EXPECT_NE(MapSlurmState(j.state, j.state_reason).state, JobState::kUnspecified) << file << " " << j.job_id;
    }
  }
}

// ---- association limits (captured with AccountingStorageEnforce=limits) --------

TEST(ParseAssociations, CapturedSacctmgrShowAssoc) {
  auto got = ParseAssociations(ReadData("sacctmgr_assoc.txt"));
  ASSERT_TRUE(got.ok()) << got.status();
  AccountLimits limited{1, {{"cpu", 2}, {"gres/tpu", 8}}};
  EXPECT_THAT(*got, ElementsAre(SlurmAssociation{"root", "", {}}, SlurmAssociation{"root", "root", {}},
                                SlurmAssociation{"mle-p1", "", limited}, SlurmAssociation{"mle-p1", "root", {}}));
  EXPECT_EQ(FormatTres(limited.grp_tres), "cpu=2,gres/tpu=8");
}

TEST(ParseAssociations, Malformed) {
  EXPECT_FALSE(ParseAssociations("a|b|c\n").ok());
  EXPECT_FALSE(ParseAssociations("a||x|\n").ok());
  EXPECT_FALSE(ParseAssociations("a|||cpu\n").ok());
  EXPECT_FALSE(ParseAssociations("a|||cpu=two\n").ok());
  auto empty = ParseAssociations("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// Each file holds one job of account mle-p1 that Slurm holds for its
// association limit (GrpJobs=1; GrpTRES=cpu=2; GrpTRES=gres/tpu=8) beside
// the ones that run.
TEST(MapSlurmState, AssociationLimitsOnCapturedJobs) {
  // `with_limits`: the message when mlengined knows the account's limits; `without`: when it does not.
  auto check = [](const std::string& file, int64_t job_id, const AccountLimits& limits, const std::string& with_limits,
                  const std::string& without) {
    auto jobs = ParseJobsTable(ReadData(file), /*named=*/true);
    ASSERT_TRUE(jobs.ok()) << file;
    bool found = false;
    for (const auto& j : *jobs) {
      EXPECT_EQ(j.account, "mle-p1") << file;
      if (j.job_id != job_id) continue;
      found = true;
      ASSERT_EQ(j.state, "PENDING") << file;
      MappedState known = MapSlurmState(j.state, j.state_reason, j.account, &limits);
      EXPECT_EQ(known.state, JobState::kQueued);
      EXPECT_EQ(known.message, with_limits);
      EXPECT_EQ(MapSlurmState(j.state, j.state_reason, j.account, nullptr).message, without);
    }
    EXPECT_TRUE(found) << file;
  };
  AccountLimits jobs;
  jobs.grp_jobs = 1;
  check("squeue_assoc_jobs_limit.txt", 2, jobs,
        "Waiting in the Slurm queue: the project's Slurm account mle-p1 is at its limit of 1 running job "
        "(AssocGrpJobsLimit)",
        "Waiting in the Slurm queue: its Slurm account mle-p1 is at its limit of running jobs (AssocGrpJobsLimit)");
  AccountLimits cpus;
  cpus.grp_tres["cpu"] = 2;
  check("squeue_assoc_cpu_limit.txt", 3, cpus,
        "Waiting in the Slurm queue: the project's Slurm account mle-p1 is at its limit of 2 CPUs (AssocGrpCpuLimit)",
        "Waiting in the Slurm queue: its Slurm account mle-p1 is at its limit of CPUs (AssocGrpCpuLimit)");
  AccountLimits tpus;
  tpus.grp_tres["cpu"] = 4;
  tpus.grp_tres["gres/tpu"] = 8;
  check("squeue_assoc_gres_limit.txt", 5, tpus,
        "Waiting in the Slurm queue: the project's Slurm account mle-p1 is at its limit of gres/tpu=8 (AssocGrpGRES)",
        "Waiting in the Slurm queue: its Slurm account mle-p1 is at its limit of GRES (AssocGrpGRES)");
}

TEST(DescribeAssociationLimit, OtherReasons) {
  EXPECT_EQ(DescribeAssociationLimit("Resources", "a", nullptr), "");
  EXPECT_EQ(DescribeAssociationLimit("AssocGrpBillingMinutes", "mle-p", nullptr),
            "its Slurm account mle-p is at one of its limits (AssocGrpBillingMinutes)");
  AccountLimits none;
  EXPECT_EQ(DescribeAssociationLimit("AssocGrpCpuLimit", "mle-p", &none),
            "the project's Slurm account mle-p is at its limit of CPUs (AssocGrpCpuLimit)");
  EXPECT_EQ(DescribeAssociationLimit("AssocGrpCpuLimit", "", nullptr),
            "its Slurm account is at its limit of CPUs (AssocGrpCpuLimit)");
}

// ---- the real CommandRunner ------------------------------------------------------

TEST(SubprocessCommandRunner, RunsWithExtraEnvironment) {
  SubprocessCommandRunner runner(std::map<std::string, std::string>{{"SLURM_CONF", "/tmp/x/slurm.conf"}});
  auto got = runner.Run({"/bin/sh", "-c", "echo conf=$SLURM_CONF; exit 3"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->exit_code, 3);
  EXPECT_EQ(got->output, "conf=/tmp/x/slurm.conf\n");
  EXPECT_FALSE(runner.Run({"/nonexistent/sbatch"}).ok());
  SubprocessCommandRunner quick({}, absl::Milliseconds(200));
  auto slow = quick.Run({"/bin/sleep", "5"});
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mle::executor::slurm

namespace mle::executor::slurm {
namespace {

// `squeue --json` is ~4 KB per job: a busy controller's answer is megabytes,
// and a cut document cannot be parsed. The runner keeps all of it.
TEST(SubprocessCommandRunner, KeepsLargeOutputWhole) {
  SubprocessCommandRunner runner;
  auto r = runner.Run({"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo END"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->output.size(), 3000004u);
  EXPECT_EQ(r->output.substr(r->output.size() - 4), "END\n");
  EXPECT_EQ(r->output.front(), 'a');
}

}  // namespace
}  // namespace mle::executor::slurm
