// YAML/JSON/table output, API error text and log lines.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cli/client.h"
#include "cli/logs.h"
#include "cli/output.h"

namespace mle::cli {
namespace {

using nlohmann::json;

TEST(YamlTest, QuotesStringsThatWouldChangeType) {
  json job = {{"jobId", "j1"},
              {"state", "QUEUED"},
              {"trainingInput",
               {{"workerCount", "4"},
                {"runtimeVersion", "2.10"},
                {"pythonVersion", "3.7"},
                {"masterType", "n1-highcpu-16"},
                {"args", {"--epochs", "3", "true", ""}},
                {"useChiefInTfConfig", true}}},
              {"labels", json::object()}};
  const std::string yaml = ToYaml(job);
  EXPECT_NE(yaml.find("workerCount: '4'"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("runtimeVersion: '2.10'"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("masterType: n1-highcpu-16"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("useChiefInTfConfig: true"), std::string::npos) << yaml;
  // Round trip: YAML reads back the same strings.
  YAML::Node back = YAML::Load(yaml);
  EXPECT_EQ(back["trainingInput"]["workerCount"].as<std::string>(), "4");
  EXPECT_EQ(back["trainingInput"]["args"][2].as<std::string>(), "true");
  EXPECT_EQ(back["trainingInput"]["args"][3].as<std::string>(), "");
  EXPECT_EQ(back["jobId"].as<std::string>(), "j1");
}

TEST(YamlTest, Multiline) {
  const std::string yaml = ToYaml(json{{"errorMessage", "line one\nline two"}});
  YAML::Node back = YAML::Load(yaml);
  EXPECT_EQ(back["errorMessage"].as<std::string>(), "line one\nline two");
}

TEST(FormatTest, Parse) {
  EXPECT_EQ(*ParseFormat(""), Format::kDefault);
  EXPECT_EQ(*ParseFormat("JSON"), Format::kJson);
  EXPECT_EQ(*ParseFormat("yaml"), Format::kYaml);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

// gcloud's projections over two jobs as jobs.list returns them; the
// expected text is what gcloud prints for the same keys (its documented
// value/csv/table formats: tab-separated values, a header of the keys for
// csv, UPPER_SNAKE headers for table).
TEST(ProjectionTest, AsGcloudPrintsThem) {
  const std::vector<nlohmann::json> jobs = {
      nlohmann::json::parse(R"({"jobId": "a_1", "state": "SUCCEEDED", "createTime": "2026-01-02T03:04:05Z",
                               "trainingInput": {"scaleTier": "BASIC", "args": ["--x", "1"], "workerCount": "2"},
                               "labels": {"team": "vision"}})"),
      nlohmann::json::parse(R"({"jobId": "b_22", "state": "RUNNING",
                               "trainingInput": {"scaleTier": "CUSTOM"}})"),
  };
  struct Row {
    std::string format;
    std::string want;
  } rows[] = {
      {"value(state)", "SUCCEEDED\nRUNNING\n"},
      {"get(state)", "SUCCEEDED\nRUNNING\n"},
      {"value(jobId, trainingInput.scaleTier)", "a_1\tBASIC\nb_22\tCUSTOM\n"},
      {"value(trainingInput.args)", "--x;1\n\n"},
      {"value(labels.team,createTime)", "vision\t2026-01-02T03:04:05Z\n\t\n"},
      {"csv(jobId,state)", "jobId,state\na_1,SUCCEEDED\nb_22,RUNNING\n"},
      {"csv(jobId:label=NAME,trainingInput.workerCount)", "NAME,trainingInput.workerCount\na_1,2\nb_22,\n"},
      {"table(jobId,state,createTime)",
       "JOB_ID  STATE      CREATE_TIME\na_1     SUCCEEDED  2026-01-02T03:04:05Z\nb_22    RUNNING\n"},
      {"table(jobId:label=JOB, trainingInput.scaleTier)", "JOB   SCALE_TIER\na_1   BASIC\nb_22  CUSTOM\n"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.format);
    auto f = ParseFormat(row.format);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_EQ(*f, Format::kProjection);
    EXPECT_EQ(Project(f->projection, jobs), row.want);
  }
}

TEST(ProjectionTest, RefusalsSayWhatIsSupported) {
  struct Row {
    std::string format, says;
  } rows[] = {
      {"value(createTime.date())", "transforms such as .date() are not supported"},
      {"flattened(state)", "not flattened()"},
      {"value()", "name at least one key"},
      {"value(state:sort=1)", "only label= is supported"},
      {"xml", "a projection such as value(state)"},
  };
  for (const Row& row : rows) {
    auto f = ParseFormat(row.format);
    ASSERT_FALSE(f.ok()) << row.format;
    EXPECT_NE(std::string(f.status().message()).find(row.says), std::string::npos) << f.status();
  }
}

TEST(TableTest, PadsColumns) {
  EXPECT_EQ(Table({{"JOB_ID", "STATUS", "CREATED"}, {"a_long_job", "RUNNING", "2024"}}),
            "JOB_ID      STATUS   CREATED\n"
            "a_long_job  RUNNING  2024\n");
}

TEST(ApiErrorTest, EveryViolationOnItsOwnLine) {
  const std::string body = R"({"error": {"code": 400, "status": "INVALID_ARGUMENT",
    "message": "Invalid job. trainingInput.workerCount: needs workerType; trainingInput.region: is required",
    "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [
      {"field": "trainingInput.workerCount", "description": "needs workerType"},
      {"field": "trainingInput.region", "description": "is required"}]}]}})";
  absl::Status s = ApiError(400, body);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            "INVALID_ARGUMENT: Invalid job.\n"
            "  trainingInput.workerCount: needs workerType\n"
            "  trainingInput.region: is required");
}

TEST(ApiErrorTest, OtherShapes) {
  absl::Status not_found = ApiError(404, R"({"error": {"code": 404, "status": "NOT_FOUND", "message": "Job x not found."}})");
  EXPECT_EQ(not_found.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(not_found.message()), "NOT_FOUND: Job x not found.");
  absl::Status html = ApiError(502, "<html>bad gateway</html>");
  EXPECT_EQ(html.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(std::string(html.message()), "HTTP 502: <html>bad gateway</html>");
  absl::Status unauth = ApiError(401, R"({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "no token"}})");
  EXPECT_EQ(unauth.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(std::string(unauth.message()).find("--token"), std::string::npos);
}

TEST(UrlEncodeTest, EncodesSlashes) {
  EXPECT_EQ(UrlEncode("a/b c~_.-"), "a%2Fb%20c~_.-");
  EXPECT_EQ(UrlEncode("j:1"), "j%3A1");
}

TEST(LogEntryTest, Format) {
  json e = {{"timestamp", "2024-01-02T03:04:05.123Z"},
            {"taskName", "master-replica-0"},
            {"stream", "stderr"},
            {"severity", "ERROR"},
            {"message", "boom\n"}};
  EXPECT_EQ(FormatLogEntry(e), "2024-01-02T03:04:05.123Z master-replica-0 boom");
}

}  // namespace
}  // namespace mle::cli
