// A project's webhooks (docs/notifications.md): mlengine's own REST methods
// under mlengine/v1/projects/{project}/webhooks, for the project's owners.
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "api/api_call.h"
#include "api/http_util.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::api::webhook_routes {
namespace {

using nlohmann::json;

json WebhookJson(const service::WebhookView& v) {
  const notify::Webhook& w = v.webhook;
  json o = {{"name", w.Name()},
            {"url", w.url},
            {"states", w.states},
            {"createTime", common::FormatRfc3339(w.create_time)},
            {"creator", w.creator}};
  if (!w.description.empty()) o["description"] = w.description;
  if (!w.secret.empty()) o["secret"] = w.secret;
  const service::WebhookStatus& s = v.status;
  json status = {{"pendingDeliveries", s.pending},
                 {"delivered", s.delivered},
                 {"failedAttempts", s.failed_attempts},
                 {"givenUp", s.given_up},
                 {"consecutiveFailures", s.consecutive_failures}};
  if (s.last_delivery) status["lastDeliveryTime"] = common::FormatRfc3339(*s.last_delivery);
  if (s.last_failure) status["lastFailureTime"] = common::FormatRfc3339(*s.last_failure);
  if (!s.last_error.empty()) status["lastError"] = s.last_error;
  o["status"] = std::move(status);
  return o;
}

absl::Status NoWebhooks() { return absl::UnimplementedError("This mlengine has no webhooks."); }

absl::Status Invalid(const std::string& field, const std::string& what) {
  return common::InvalidArgumentWithViolations("The webhook is invalid.", {{field, what}});
}

}  // namespace

void CreateWebhook(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (s.webhooks == nullptr) return respond(Fail(NoWebhooks(), pretty));
  auto body = ParseJsonBody(call.body, false);
  if (!body.ok()) return respond(Fail(body.status(), pretty));
  if (!body->is_object()) return respond(Fail(Invalid("", "the body must be a JSON object: {\"url\": ...}"), pretty));
  notify::Webhook request;
  request.project = call.Var("project");
  request.creator = call.caller.Member();
  for (const auto& [key, value] : body->items()) {
    if (key == "url") {
      if (!value.is_string()) return respond(Fail(Invalid("url", "must be a string"), pretty));
      request.url = value.get<std::string>();
    } else if (key == "description") {
      if (!value.is_string()) return respond(Fail(Invalid("description", "must be a string"), pretty));
      request.description = value.get<std::string>();
    } else if (key == "states") {
      if (!value.is_array()) return respond(Fail(Invalid("states", "must be a list of job states"), pretty));
      for (const auto& state : value) {
        if (!state.is_string()) return respond(Fail(Invalid("states", "must be a list of job states"), pretty));
        request.states.insert(state.get<std::string>());
      }
    } else {
      return respond(Fail(Invalid(key, "unknown field: a webhook has url, states and description"), pretty));
    }
  }
  s.webhooks->Create(std::move(request), [respond, pretty](absl::StatusOr<service::WebhookView> made) {
    if (!made.ok()) return respond(Fail(made.status(), pretty));
    respond(Render(WebhookJson(*made), pretty));
  });
}

void ListWebhooks(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (s.webhooks == nullptr) return respond(Fail(NoWebhooks(), pretty));
  json list = json::array();
  for (const auto& v : s.webhooks->List(call.Var("project"))) list.push_back(WebhookJson(v));
  json out = json::object();
  if (!list.empty()) out["webhooks"] = std::move(list);
  respond(Render(out, pretty));
}

void GetWebhook(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (s.webhooks == nullptr) return respond(Fail(NoWebhooks(), pretty));
  auto v = s.webhooks->Get(call.Var("project"), call.Var("webhook"));
  if (!v.ok()) return respond(Fail(v.status(), pretty));
  respond(Render(WebhookJson(*v), pretty));
}

void DeleteWebhook(const Services& s, const Call& call, Responder respond) {
  const bool pretty = call.pretty;
  if (auto st = CheckQuery(call, {}); !st.ok()) return respond(Fail(st, pretty));
  if (s.webhooks == nullptr) return respond(Fail(NoWebhooks(), pretty));
  s.webhooks->Delete(call.Var("project"), call.Var("webhook"), ReplyEmpty(respond, pretty));
}

}  // namespace mle::api::webhook_routes
