// obs/: request ids, the log line formats, and the metrics' text exposition.

#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/request_id.h"

namespace mle::obs {
namespace {

TEST(RequestIdTest, FreshIdsAreSixteenHexDigitsAndDiffer) {
  const std::string a = NewRequestId();
  const std::string b = NewRequestId();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_TRUE(IsAcceptableRequestId(a));
}

TEST(RequestIdTest, AcceptsCommonIdsAndRefusesWhatCouldBreakALine) {
  struct Row {
    std::string id;
    bool acceptable;
  };
  const Row rows[] = {
      {"3f9c0a1b2d4e5f60", true},
      {"123e4567-e89b-12d3-a456-426614174000", true},   // UUID
      {"Root=1-5759e988-bd862e3fe1be46a994272793", true},  // a trace id
      {"01ARZ3NDEKTSV4RRFFQ69G5FAV", true},               // ULID
      {"a.b_c:d+e/f", true},
      {"", false},
      {std::string(128, 'a'), true},
      {std::string(129, 'a'), false},
      {"has space", false},
      {"quote\"", false},
      {"new\nline", false},
      {"tab\t", false},
      {"back\\slash", false},
      {"semi;colon", false},
      {"caf\xc3\xa9", false},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(IsAcceptableRequestId(row.id), row.acceptable) << "\"" << row.id << "\"";
    const std::string accepted = AcceptRequestId(row.id);
    if (row.acceptable) {
      EXPECT_EQ(accepted, row.id);
    } else {
      EXPECT_NE(accepted, row.id);
      EXPECT_TRUE(IsAcceptableRequestId(accepted)) << accepted;
    }
  }
}

TEST(RequestIdTest, ScopesNestAndRestore) {
  EXPECT_EQ(CurrentRequestId(), "");
  {
    ScopedRequestId outer("outer");
    EXPECT_EQ(CurrentRequestId(), "outer");
    {
      ScopedRequestId inner("inner");
      EXPECT_EQ(CurrentRequestId(), "inner");
    }
    EXPECT_EQ(CurrentRequestId(), "outer");
  }
  EXPECT_EQ(CurrentRequestId(), "");
}

TEST(RequestIdTest, BoundCallbackRunsUnderTheIdOnAnotherThread) {
  std::function<std::string(int)> bound;
  {
    ScopedRequestId scope("req-1");
    bound = BindRequestId([](int n) { return CurrentRequestId() + "#" + std::to_string(n); });
  }
  std::string seen;
  std::string after;
  std::thread t([&] {
    seen = bound(7);
    after = CurrentRequestId();
  });
  t.join();
  EXPECT_EQ(seen, "req-1#7");
  EXPECT_EQ(after, "") << "the id must not outlive the call";
}

TEST(LogOptionsTest, ParsesLevelsAndFormats) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("WARNING"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("error"), spdlog::level::err);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  auto bad = ParseLogLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "trace, debug, info, warn, error or off"));
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

// Logs through the real loggers into a string, restoring stderr at the end.
class LogCapture {
 public:
  LogCapture(LogFormat format, spdlog::level::level_enum level) {
    InitLogging({level, format, std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)});
  }
  ~LogCapture() { InitLogging({}); }
  std::vector<std::string> Lines() const { return absl::StrSplit(out_.str(), '\n', absl::SkipEmpty()); }

 private:
  std::ostringstream out_;
};

TEST(LogTest, TextLinesNameTimeLevelComponentAndRequest) {
  LogCapture capture(LogFormat::kText, spdlog::level::info);
  Log("store").info("plain {}", 1);
  {
    ScopedRequestId scope("abc123");
    Log("api").warn("in a request");
  }
  Log("api").debug("below the level");
  const auto lines = capture.Lines();
  ASSERT_EQ(lines.size(), 2u) << capture.Lines().size();
  // 2024-05-01T12:00:00.123Z info store plain 1
  EXPECT_EQ(lines[0].size(), std::string("2024-05-01T12:00:00.123Z info store plain 1").size()) << lines[0];
  EXPECT_EQ(lines[0][10], 'T');
  EXPECT_EQ(lines[0][23], 'Z');
  EXPECT_TRUE(absl::EndsWith(lines[0], " info store plain 1")) << lines[0];
  EXPECT_TRUE(absl::EndsWith(lines[1], " warning api [abc123] in a request")) << lines[1];
}

TEST(LogTest, JsonLinesAreOneObjectEachAndEscapeTheMessage) {
  LogCapture capture(LogFormat::kJson, spdlog::level::debug);
  {
    ScopedRequestId scope("req-9");
    Log("scheduler").debug("quote \" newline \n bad utf-8 \xff end");
  }
  Log("scheduler").error("no request");
  const auto lines = capture.Lines();
  ASSERT_EQ(lines.size(), 2u);
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["level"], "debug");
  EXPECT_EQ(first["component"], "scheduler");
  EXPECT_EQ(first["request_id"], "req-9");
  EXPECT_EQ(first["message"], "quote \" newline \n bad utf-8 \xef\xbf\xbd end");
  EXPECT_TRUE(absl::EndsWith(first["time"].get<std::string>(), "Z"));
  auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["level"], "error");
  EXPECT_FALSE(second.contains("request_id"));
}

// The value of one sample line ("name{labels} value") of a rendering.
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, series + " ")) return std::stod(std::string(line.substr(series.size() + 1)));
  }
  ADD_FAILURE() << "no sample " << series << " in:\n" << text;
  return -1;
}

TEST(MetricsTest, RendersTheTextFormatWithLabelsAndBuckets) {
  Metrics m;
  m.ObserveRequest("POST", "ml.projects.jobs.create", 200, absl::Milliseconds(3));
  m.ObserveRequest("POST", "ml.projects.jobs.create", 200, absl::Milliseconds(30));
  m.ObserveRequest("BREW", "", 404, absl::Milliseconds(1));
  m.SetJobCount("QUEUED", 4);
  m.SetQueue("p1", 4, absl::Seconds(90));
  m.ObserveQueueWait("p1", absl::Seconds(2));
  m.StoreBatchSize().Observe(3);
  m.ReplicaStarts("local").Increment(2);
  { ScopedTimer t(m.SchedulingPass()); }
  const std::string text = m.Render();
  EXPECT_TRUE(absl::StrContains(text, "# TYPE mlengine_http_request_duration_seconds histogram")) << text;
  EXPECT_EQ(Sample(text, "mlengine_http_request_duration_seconds_count{code=\"200\",method=\"POST\","
                         "route=\"ml.projects.jobs.create\"}"),
            2);
  EXPECT_EQ(Sample(text, "mlengine_http_request_duration_seconds_bucket{code=\"200\",method=\"POST\","
                         "route=\"ml.projects.jobs.create\",le=\"0.005\"}"),
            1);
  // Unknown methods and unrouted requests are labelled so clients cannot add series.
  EXPECT_EQ(Sample(text, "mlengine_http_request_duration_seconds_count{code=\"404\",method=\"other\","
                         "route=\"none\"}"),
            1);
  EXPECT_EQ(Sample(text, "mlengine_jobs{state=\"QUEUED\"}"), 4);
  EXPECT_EQ(Sample(text, "mlengine_queue_length{project=\"p1\"}"), 4);
  EXPECT_EQ(Sample(text, "mlengine_queue_oldest_wait_seconds{project=\"p1\"}"), 90);
  EXPECT_EQ(Sample(text, "mlengine_queue_wait_seconds_sum{project=\"p1\"}"), 2);
  EXPECT_EQ(Sample(text, "mlengine_store_commit_batch_size_sum"), 3);
  EXPECT_EQ(Sample(text, "mlengine_replica_starts_total{executor=\"local\"}"), 2);
  EXPECT_EQ(Sample(text, "mlengine_scheduling_pass_seconds_count"), 1);
}

}  // namespace
}  // namespace mle::obs
