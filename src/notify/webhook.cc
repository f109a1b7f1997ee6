#include "notify/webhook.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/time_format.h"

namespace mle::notify {
namespace {

using nlohmann::json;

absl::Time TimeOf(const json& o, const char* key) {
  auto t = common::ParseRfc3339(o.value(key, std::string()));
  return t.value_or(absl::UnixEpoch());
}

// The host of an http(s) URL (brackets of an IPv6 literal removed), or
// INVALID_ARGUMENT.
absl::StatusOr<std::string> HostOf(absl::string_view url) {
  absl::string_view rest;
  if (absl::StartsWith(url, "https://")) {
    rest = url.substr(8);
  } else if (absl::StartsWith(url, "http://")) {
    rest = url.substr(7);
  } else {
    return absl::InvalidArgumentError("must start with http:// or https://");
  }
  const size_t end = rest.find_first_of("/?#");
  absl::string_view authority = rest.substr(0, end);
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError("must not hold a user or password (user@host): sign deliveries with the secret");
  }
  std::string host;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("has an IPv6 address without its ]");
    host = std::string(authority.substr(1, close - 1));
  } else {
    host = std::string(authority.substr(0, authority.find(':')));
  }
  if (host.empty()) return absl::InvalidArgumentError("has no host");
  for (char c : host) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != ':' && c != '_') {
      return absl::InvalidArgumentError(absl::StrCat("has a host with a character a host name cannot have ('", std::string(1, c), "')"));
    }
  }
  return absl::AsciiStrToLower(host);
}

}  // namespace

std::string WebhookKey(const Webhook& w) { return absl::StrCat(w.project, "/", w.id); }

std::string DeliveryKey(const Delivery& d) {
  return absl::StrFormat("%s/%s/%020d", d.project, d.webhook_id, d.sequence);
}

std::string EncodeWebhook(const Webhook& w) {
  json o = {{"project", w.project},         {"id", w.id},
            {"url", w.url},                 {"secret", w.secret},
            {"states", w.states},           {"description", w.description},
            {"creator", w.creator},         {"createTime", common::FormatRfc3339(w.create_time)}};
  return o.dump();
}

absl::StatusOr<Webhook> DecodeWebhook(absl::string_view body) {
  json o = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) return absl::DataLossError("a stored webhook is not a JSON object");
  try {
    Webhook w;
    w.project = o.value("project", "");
    w.id = o.value("id", "");
    w.url = o.value("url", "");
    w.secret = o.value("secret", "");
    w.states = o.value("states", std::set<std::string>{});
    w.description = o.value("description", "");
    w.creator = o.value("creator", "");
    w.create_time = TimeOf(o, "createTime");
    if (w.project.empty() || w.id.empty() || w.url.empty()) {
      return absl::DataLossError("a stored webhook has no project, id or url");
    }
    return w;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("a stored webhook has a field of the wrong type: ", e.what()));
  }
}

std::string EncodeDelivery(const Delivery& d) {
  json o = {{"project", d.project},
            {"webhookId", d.webhook_id},
            {"sequence", d.sequence},
            {"eventId", d.event_id},
            {"body", d.body},
            {"createTime", common::FormatRfc3339(d.create_time)},
            {"attempts", d.attempts},
            {"nextAttemptTime", common::FormatRfc3339(d.next_attempt)},
            {"lastError", d.last_error}};
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<Delivery> DecodeDelivery(absl::string_view body) {
  json o = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) return absl::DataLossError("a stored webhook delivery is not a JSON object");
  try {
    Delivery d;
    d.project = o.value("project", "");
    d.webhook_id = o.value("webhookId", "");
    d.sequence = o.value("sequence", int64_t{0});
    d.event_id = o.value("eventId", "");
    d.body = o.value("body", "");
    d.create_time = TimeOf(o, "createTime");
    d.attempts = o.value("attempts", 0);
    d.next_attempt = TimeOf(o, "nextAttemptTime");
    d.last_error = o.value("lastError", "");
    if (d.project.empty() || d.webhook_id.empty()) return absl::DataLossError("a stored webhook delivery names no webhook");
    return d;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("a stored webhook delivery has a field of the wrong type: ", e.what()));
  }
}

bool AddressAllowed(absl::string_view numeric_address, bool allow_loopback) {
  const std::string text(numeric_address);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    const uint32_t a = ntohl(v4.s_addr);
    if (a == 0) return false;                                        // 0.0.0.0
    if ((a >> 24) == 127) return allow_loopback;                     // 127.0.0.0/8
    if ((a >> 16) == ((169u << 8) | 254u)) return false;             // 169.254.0.0/16
    if ((a >> 28) == 0xE) return false;                              // 224.0.0.0/4 multicast
    if (a == 0xFFFFFFFFu) return false;                              // broadcast
    return true;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    static const in6_addr any = IN6ADDR_ANY_INIT;
    if (std::memcmp(&v6, &any, sizeof(v6)) == 0) return false;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return allow_loopback;
    if (IN6_IS_ADDR_LINKLOCAL(&v6) || IN6_IS_ADDR_MULTICAST(&v6)) return false;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      char mapped[INET_ADDRSTRLEN];
      if (inet_ntop(AF_INET, &v6.s6_addr[12], mapped, sizeof(mapped)) == nullptr) return false;
      return AddressAllowed(mapped, allow_loopback);
    }
    return true;
  }
  return false;  // not an address at all
}

absl::Status CheckUrl(absl::string_view url, bool allow_loopback) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("The webhook's url ", why, "."));
  };
  if (url.empty()) return bad("is required: where to POST each event (http:// or https://)");
  if (url.size() > 2048) return bad("is longer than 2048 characters");
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("has a space or a control character");
  }
  auto host = HostOf(url);
  if (!host.ok()) return bad(host.status().message());
  if (!allow_loopback && (*host == "localhost" || absl::EndsWith(*host, ".localhost"))) {
    return bad("names this machine (localhost); mlengined delivers to other hosts only (the operator's "
               "webhooks.allow_loopback allows it)");
  }
  in_addr v4{};
  in6_addr v6{};
  const bool literal = inet_pton(AF_INET, host->c_str(), &v4) == 1 || inet_pton(AF_INET6, host->c_str(), &v6) == 1;
  if (literal && !AddressAllowed(*host, allow_loopback)) {
    return bad(absl::StrCat("names an address deliveries may not go to (", *host,
                            ": this machine, link-local or multicast)"));
  }
  return absl::OkStatus();
}

std::string Signature(absl::string_view secret, int64_t unix_seconds, absl::string_view body) {
  const std::string message = absl::StrCat(unix_seconds, ".", body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length) == nullptr) {
    return absl::StrCat("t=", unix_seconds, ",v1=");  // OpenSSL failed: a signature no receiver accepts
  }
  return absl::StrCat("t=", unix_seconds, ",v1=",
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), length)));
}

std::optional<absl::Time> NextAttempt(const Delivery& failed, absl::Time now, const RetryPolicy& policy) {
  if (now - failed.create_time >= policy.give_up_after) return std::nullopt;
  absl::Duration wait = absl::Seconds(1);
  for (int i = 1; i < failed.attempts && wait < policy.max_backoff; ++i) wait *= 2;
  return now + std::min(wait, policy.max_backoff);
}

}  // namespace mle::notify
