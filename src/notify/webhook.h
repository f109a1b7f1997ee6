// Webhooks (docs/notifications.md): a project's registrations of a URL that
// is told of its jobs' state changes, and the deliveries owed to them. This
// header is the pure part: the records' shapes and their stored encoding,
// the URL rules, the signature and the retry policy. Sending is poster.h's;
// the service that keeps them is service/webhook_service.h. Thread-safe
// (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mle::notify {

struct Webhook {
  std::string project;
  std::string id;           // "wh-" and 12 hex digits
  std::string url;          // http(s)://HOST[:PORT]/PATH
  std::string secret;       // signs each delivery (shown once, at creation)
  std::set<std::string> states;  // ml v1 state names to tell of; empty: every change
  std::string description;
  std::string creator;      // principal member that registered it
  absl::Time create_time;

  std::string Name() const { return "projects/" + project + "/webhooks/" + id; }
  bool operator==(const Webhook&) const = default;
};

// One event owed to one webhook, until it is delivered or given up.
struct Delivery {
  std::string project;
  std::string webhook_id;
  int64_t sequence = 0;     // the order of deliveries (per webhook, in order)
  std::string event_id;
  std::string body;         // the JSON sent, as it will be signed
  absl::Time create_time;
  int32_t attempts = 0;     // failed attempts so far
  absl::Time next_attempt;  // not before
  std::string last_error;
  bool operator==(const Delivery&) const = default;
};

// Stored records (db::Record kinds and keys, bodies as JSON).
inline constexpr char kWebhookKind[] = "webhook_registration";  // LoadRecords reads by prefix: neither kind is the other's
inline constexpr char kDeliveryKind[] = "webhook_delivery";
std::string WebhookKey(const Webhook& w);    // "PROJECT/ID"
std::string DeliveryKey(const Delivery& d);  // "PROJECT/ID/SEQUENCE" (zero-padded: in order)
std::string EncodeWebhook(const Webhook& w);
absl::StatusOr<Webhook> DecodeWebhook(absl::string_view body);
std::string EncodeDelivery(const Delivery& d);
absl::StatusOr<Delivery> DecodeDelivery(absl::string_view body);

// The URL a webhook may have: http or https, a host, at most 2048
// characters, no user or password in it; with allow_loopback false, no
// host that names this machine (localhost, 127.0.0.0/8, ::1) or a
// link-local address (169.254.0.0/16: cloud metadata). INVALID_ARGUMENT
// saying what is wrong.
absl::Status CheckUrl(absl::string_view url, bool allow_loopback);
// Whether a delivery may connect to this address (numeric, as resolved):
// never to an unspecified, link-local or multicast one, nor loopback unless
// allowed. The check made on each connection (a name may resolve anywhere).
bool AddressAllowed(absl::string_view numeric_address, bool allow_loopback);

// The header a receiver checks: "t=UNIX_SECONDS,v1=HEX" where HEX is
// HMAC-SHA256(secret, "UNIX_SECONDS." + body).
std::string Signature(absl::string_view secret, int64_t unix_seconds, absl::string_view body);

// After a failed attempt: when to try again, or nullopt to give up (the
// delivery is older than `give_up_after`). Waits 1 s, 2 s, 4 s, ... up to
// `max_backoff`.
struct RetryPolicy {
  absl::Duration max_backoff = absl::Minutes(10);
  absl::Duration give_up_after = absl::Hours(24);
};
std::optional<absl::Time> NextAttempt(const Delivery& failed, absl::Time now, const RetryPolicy& policy);

}  // namespace mle::notify
