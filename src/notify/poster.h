// Sends one webhook delivery: an HTTP POST of its JSON body, signed
// (notify/webhook.h), through libcurl. Never follows a redirect, uses no
// proxy, and connects only to addresses AddressAllowed() accepts (checked
// on each connection, whatever the name resolved to). Blocking, bounded by
// its timeouts. Thread-safe (each call its own handle).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "notify/webhook.h"

namespace mle::notify {

struct PostOptions {
  bool allow_loopback = false;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(10);
};

// OK when the receiver answered 2xx; otherwise an error saying what
// happened in words a project owner can act on ("HTTP 503 from ...",
// "cannot connect to ...: Connection refused", "timed out after 10 s").
absl::Status Post(const Webhook& webhook, const Delivery& delivery, absl::Time now, const PostOptions& options);

}  // namespace mle::notify
