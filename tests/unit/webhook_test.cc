// Webhooks' pure part (notify/webhook.h): which URLs and addresses a
// delivery may go to, the signature a receiver checks, the retry policy,
// and the stored records.
#include "notify/webhook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mle::notify {
namespace {

using ::testing::HasSubstr;

TEST(CheckUrl, Table) {
  struct Row {
    std::string url;
    bool allow_loopback;
    std::string error;  // part of the refusal; "" accepted
  };
  const std::vector<Row> rows = {
      {"https://hooks.example.com/mlengine", false, ""},
      {"http://10.1.2.3:8080/hook?team=vision", false, ""},  // a private network: a team's own receiver
      {"http://[2001:db8::1]:80/x", false, ""},
      {"http://127.0.0.1:9000/hook", true, ""},
      {"http://localhost/hook", true, ""},
      {"", false, "is required"},
      {"ftp://example.com/x", false, "must start with http:// or https://"},
      {"example.com/hook", false, "must start with http:// or https://"},
      {"https:///path", false, "has no host"},
      {"https://alice:pw@example.com/", false, "must not hold a user or password"},
      {"https://exa mple.com/", false, "a space or a control character"},
      {"https://example.com/" + std::string(2100, 'a'), false, "longer than 2048"},
      {"http://localhost:8080/", false, "names this machine (localhost)"},
      {"http://api.localhost/", false, "names this machine (localhost)"},
      {"http://127.0.0.1/", false, "may not go to (127.0.0.1"},
      {"http://[::1]:8080/", false, "may not go to (::1"},
      {"http://169.254.169.254/computeMetadata", true, "may not go to (169.254.169.254"},
      {"http://0.0.0.0/", true, "may not go to (0.0.0.0"},
      {"http://[2001:db8::1/x", false, "without its ]"},
      {"http://exa$mple.com/", false, "a character a host name cannot have"},
  };
  for (const auto& row : rows) {
    const absl::Status s = CheckUrl(row.url, row.allow_loopback);
    if (row.error.empty()) {
      EXPECT_TRUE(s.ok()) << row.url << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << row.url;
      EXPECT_THAT(std::string(s.message()), HasSubstr(row.error)) << row.url;
    }
  }
}

TEST(AddressAllowed, Table) {
  struct Row {
    std::string address;
    bool allow_loopback;
    bool allowed;
  };
  const std::vector<Row> rows = {
      {"93.184.216.34", false, true},  {"10.0.0.7", false, true},        {"192.168.1.2", false, true},
      {"127.0.0.1", false, false},     {"127.0.0.1", true, true},        {"127.5.6.7", false, false},
      {"::1", false, false},           {"::1", true, true},              {"169.254.169.254", true, false},
      {"fe80::1", true, false},        {"224.0.0.1", true, false},       {"ff02::1", true, false},
      {"0.0.0.0", true, false},        {"::", true, false},              {"::ffff:127.0.0.1", false, false},
      {"::ffff:127.0.0.1", true, true}, {"::ffff:169.254.1.1", true, false}, {"2001:db8::5", false, true},
      {"not an address", true, false}, {"255.255.255.255", true, false},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(AddressAllowed(row.address, row.allow_loopback), row.allowed)
        << row.address << " allow_loopback=" << row.allow_loopback;
  }
}

TEST(Signature, IsHmacSha256OfTheTimeAndTheBody) {
  // Python: hmac.new(b"secret", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
  EXPECT_EQ(Signature("secret", 1'700'000'000, R"({"a":1})"),
            "t=1700000000,v1=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686");
  EXPECT_NE(Signature("secret", 1'700'000'001, R"({"a":1})"), Signature("secret", 1'700'000'000, R"({"a":1})"));
  EXPECT_NE(Signature("other", 1'700'000'000, R"({"a":1})"), Signature("secret", 1'700'000'000, R"({"a":1})"));
}

TEST(NextAttempt, DoublesToItsMaximumThenGivesUp) {
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  RetryPolicy policy;
  policy.max_backoff = absl::Seconds(60);
  policy.give_up_after = absl::Hours(1);
  struct Row {
    int attempts;            // failed so far, this one included
    absl::Duration age;      // since the event
    std::optional<absl::Duration> wait;  // nullopt: given up
  };
  const std::vector<Row> rows = {
      {1, absl::Seconds(0), absl::Seconds(1)},   {2, absl::Seconds(1), absl::Seconds(2)},
      {3, absl::Seconds(3), absl::Seconds(4)},   {6, absl::Seconds(31), absl::Seconds(32)},
      {7, absl::Seconds(63), absl::Seconds(60)}, {40, absl::Minutes(59), absl::Seconds(60)},
      {41, absl::Hours(1), std::nullopt},        {2, absl::Hours(2), std::nullopt},
  };
  for (const auto& row : rows) {
    Delivery d;
    d.create_time = t0;
    d.attempts = row.attempts;
    const absl::Time now = t0 + row.age;
    const auto next = NextAttempt(d, now, policy);
    ASSERT_EQ(next.has_value(), row.wait.has_value()) << row.attempts;
    if (next) {
      EXPECT_EQ(*next - now, *row.wait) << row.attempts;
    }
  }
}

TEST(Records, RoundTripAndKeysSortInOrder) {
  Webhook w;
  w.project = "vision";
  w.id = "wh-0123456789ab";
  w.url = "https://hooks.example.com/x";
  w.secret = std::string(64, 'f');
  w.states = {"FAILED", "SUCCEEDED"};
  w.description = "team channel";
  w.creator = "user:ana@example.com";
  w.create_time = absl::FromUnixMicros(1'700'000'000'123'456);
  auto back = DecodeWebhook(EncodeWebhook(w));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, w);
  EXPECT_EQ(w.Name(), "projects/vision/webhooks/wh-0123456789ab");

  Delivery d;
  d.project = "vision";
  d.webhook_id = w.id;
  d.sequence = 9;
  d.event_id = "e1";
  d.body = R"({"state":"SUCCEEDED"})";
  d.create_time = w.create_time;
  d.attempts = 3;
  d.next_attempt = w.create_time + absl::Seconds(4);
  d.last_error = "HTTP 503 from https://hooks.example.com/x";
  auto again = DecodeDelivery(EncodeDelivery(d));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, d);
  Delivery later = d;
  later.sequence = 10;
  EXPECT_LT(DeliveryKey(d), DeliveryKey(later));  // 9 before 10: zero-padded

  EXPECT_EQ(DecodeWebhook("[]").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeWebhook(R"({"project":"p"})").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDelivery(R"({"attempts":"x","project":"p","webhookId":"w"})").status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mle::notify
