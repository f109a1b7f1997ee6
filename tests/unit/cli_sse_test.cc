// SseParser: server-sent events read from pieces however they are cut.
#include "cli/sse.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace mle::cli {
namespace {

using Events = std::vector<std::pair<std::string, std::string>>;

Events Parse(const std::vector<std::string>& pieces) {
  Events got;
  SseParser parser([&](const std::string& type, const std::string& data) {
    got.emplace_back(type, data);
    return true;
  });
  for (const auto& p : pieces) EXPECT_TRUE(parser.Feed(p));
  return got;
}

TEST(SseParserTest, ReadsEventsHoweverTheBytesAreCut) {
  const std::string stream =
      ": heartbeat\n\ndata: {\"a\":1}\n\nevent: error\ndata: {\"error\":{}}\n\ndata: one\ndata: two\n\n";
  const Events want = {{"", "{\"a\":1}"}, {"error", "{\"error\":{}}"}, {"", "one\ntwo"}};
  EXPECT_EQ(Parse({stream}), want);
  // Every cut of it into two pieces, and byte by byte.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    EXPECT_EQ(Parse({stream.substr(0, cut), stream.substr(cut)}), want) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(Parse(bytes), want);
}

TEST(SseParserTest, LineEndsAreLfCrlfOrCrEvenSplit) {
  const Events want = {{"", "x"}, {"", "y"}, {"", "z"}};
  EXPECT_EQ(Parse({"data: x\r\n\r\ndata: y\r\rdata: z\n\n"}), want);
  EXPECT_EQ(Parse({"data: x\r", "\n\r", "\ndata: y\r\r", "data: z\n\n"}), want);
}

TEST(SseParserTest, FieldsAsTheStandardReadsThem) {
  struct Case {
    std::string in;
    Events want;
  };
  const Case cases[] = {
      {"data:no space\n\n", {{"", "no space"}}},
      {"data:  two spaces\n\n", {{"", " two spaces"}}},  // only one space is taken off
      {"data\n\n", {{"", ""}}},                            // a field with no colon: empty value
      {"id: 7\nretry: 10\n\n", {}},                         // no data: no event
      {"event: x\n\n", {}},
      {"event: x\ndata: 1\n\ndata: 2\n\n", {{"x", "1"}, {"", "2"}}},  // the type is the event's alone
      {"data: 1\n", {}},                                   // not ended: not dispatched
      {"unknown: 1\ndata: 2\n\n", {{"", "2"}}},
  };
  for (const auto& c : cases) EXPECT_EQ(Parse({c.in}), c.want) << c.in;
}

TEST(SseParserTest, StopsWhenTheCallbackSaysSo) {
  int seen = 0;
  SseParser parser([&](const std::string&, const std::string&) { return ++seen < 2; });
  EXPECT_TRUE(parser.Feed("data: 1\n\n"));
  EXPECT_FALSE(parser.Feed("data: 2\n\ndata: 3\n\n"));
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace mle::cli
