#include "service/webhook_service.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "codec/job_codec.h"
#include "codec/vertex_codec.h"
#include "common/random.h"
#include "common/time_format.h"
#include "model/job_state.h"
#include "model/vertex.h"
#include "obs/log.h"
#include "obs/metrics.h"

namespace mle::service {
namespace {

using nlohmann::json;

std::string StageKey(const model::Job& job) {
  return absl::StrCat(job.project, "/", job.job_id, "/", job.version);
}

bool Wanted(const notify::Webhook& w, model::JobState state) {
  return w.states.empty() || w.states.count(std::string(model::JobStateName(state))) > 0;
}

// The JSON a webhook is sent for one change (docs/notifications.md).
std::string EventBody(const JobStateChange& change, const notify::Webhook& webhook, const std::string& event_id) {
  const model::Job& job = change.job;
  const bool vertex = model::IsVertexJob(job);
  auto state_name = [vertex](model::JobState s) {
    return vertex ? model::VertexStateName(s) : std::string(model::JobStateName(s));
  };
  json o = {{"eventId", event_id},
            {"eventType", "mlengine.job.stateChanged"},
            {"eventTime", common::FormatRfc3339(change.time)},
            {"webhook", webhook.Name()},
            {"project", job.project},
            {"api", vertex ? "aiplatform" : "ml"},
            {"job", vertex ? codec::VertexJobName(job) : model::JobName(job)},
            {"jobId", job.job_id},
            {"state", state_name(job.state)}};
  if (change.from != model::JobState::kUnspecified) o["previousState"] = state_name(change.from);
  o["resource"] = vertex ? codec::EncodeVertexJob(job) : codec::EncodeJob(job);
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

db::Mutation Put(const notify::Delivery& d) {
  return db::PutRecord{{notify::kDeliveryKind, notify::DeliveryKey(d), notify::EncodeDelivery(d)}};
}
db::Mutation Remove(const notify::Delivery& d) {
  return db::DeleteRecord{notify::kDeliveryKind, notify::DeliveryKey(d)};
}

void LogFailure(const std::string& what, absl::Status s) {
  if (!s.ok()) obs::Log("webhooks").error("could not store {}: {}", what, s.ToString());
}

}  // namespace

WebhookService::WebhookService(db::Store& store, common::Clock& clock, WebhookOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

WebhookService::~WebhookService() { Stop(); }

absl::Status WebhookService::Recover() {
  auto hooks = store_.LoadRecords(notify::kWebhookKind);
  if (!hooks.ok()) return hooks.status();
  auto deliveries = store_.LoadRecords(notify::kDeliveryKind);
  if (!deliveries.ok()) return deliveries.status();
  std::vector<db::Mutation> orphans;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : *hooks) {
    auto w = notify::DecodeWebhook(r.body);
    if (!w.ok()) return absl::DataLossError(absl::StrCat("webhook ", r.key, ": ", w.status().message()));
    Key key{w->project, w->id};
    webhooks_[key].webhook = *std::move(w);
  }
  for (const auto& r : *deliveries) {  // in key order: each webhook's in sequence
    auto d = notify::DecodeDelivery(r.body);
    if (!d.ok()) return absl::DataLossError(absl::StrCat("webhook delivery ", r.key, ": ", d.status().message()));
    next_sequence_ = std::max(next_sequence_, d->sequence + 1);
    auto it = webhooks_.find({d->project, d->webhook_id});
    if (it == webhooks_.end()) {
      orphans.push_back(db::DeleteRecord{notify::kDeliveryKind, r.key});
      continue;
    }
    it->second.pending.push_back(*std::move(d));
    ++it->second.status.pending;
  }
  if (!orphans.empty()) store_.Commit(std::move(orphans), [](absl::Status s) { LogFailure("deliveries of deleted webhooks", s); });
  size_t pending = 0;
  for (const auto& [key, e] : webhooks_) pending += e.pending.size();
  if (!webhooks_.empty()) {
    obs::Log("webhooks").info("{} webhooks, {} deliveries owed{}", webhooks_.size(), pending,
                              options_.enabled ? "" : " (webhooks are off: none is sent)");
  }
  return absl::OkStatus();
}

void WebhookService::Start() {
  if (!options_.enabled || loop_.joinable()) return;
  senders_ = std::make_unique<common::WorkerPool>(std::max(1, options_.senders), common::WorkerPool::OnStop::kDrain);
  loop_ = std::thread([this] { Loop(); });
}

void WebhookService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (senders_) senders_->Stop();  // a post under way finishes (its timeout bounds it)
}

void WebhookService::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const absl::Time now = clock_.Now();
    std::optional<absl::Time> next_due;
    for (auto& [key, e] : webhooks_) {
      if (e.sending || e.pending.empty()) continue;
      const notify::Delivery& front = e.pending.front();
      if (front.next_attempt > now) {
        next_due = next_due ? std::min(*next_due, front.next_attempt) : front.next_attempt;
        continue;
      }
      e.sending = true;
      senders_->Post([this, key = key, webhook = e.webhook, delivery = front] { Send(key, webhook, delivery); });
    }
    // Woken by a new delivery, a send's end or Stop; else at the next due
    // time (a second at most: the clock may be another's).
    absl::Duration wait = absl::Seconds(1);
    if (next_due) wait = std::clamp(*next_due - now, absl::Milliseconds(1), wait);
    cv_.wait_for(lock, absl::ToChronoMilliseconds(wait));
  }
}

void WebhookService::Send(Key key, notify::Webhook webhook, notify::Delivery delivery) {
  notify::PostOptions post;
  post.allow_loopback = options_.allow_loopback;
  const absl::Status sent = notify::Post(webhook, delivery, clock_.Now(), post);
  const absl::Time now = clock_.Now();
  std::vector<db::Mutation> writes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = webhooks_.find(key);
    if (it == webhooks_.end()) return;  // deleted meanwhile (with its deliveries)
    Entry& e = it->second;
    e.sending = false;
    if (e.pending.empty() || e.pending.front().sequence != delivery.sequence) {
      cv_.notify_all();
      return;
    }
    if (sent.ok()) {
      e.pending.pop_front();
      --e.status.pending;
      ++e.status.delivered;
      e.status.consecutive_failures = 0;
      e.status.last_delivery = now;
      writes.push_back(Remove(delivery));
      obs::Metrics::Default().WebhookDeliveries("delivered").Increment();
    } else {
      notify::Delivery& d = e.pending.front();
      ++d.attempts;
      d.last_error = std::string(sent.message());
      ++e.status.failed_attempts;
      ++e.status.consecutive_failures;
      e.status.last_failure = now;
      e.status.last_error = d.last_error;
      obs::Metrics::Default().WebhookDeliveries("failed").Increment();
      const std::optional<absl::Time> next = notify::NextAttempt(d, now, options_.retry);
      if (next) {
        d.next_attempt = *next;
        writes.push_back(Put(d));
        obs::Log("webhooks").warn("{}: delivery {} failed (attempt {}): {}; next at {}", webhook.Name(), d.event_id,
                                  d.attempts, d.last_error, common::FormatRfc3339(*next));
      } else {
        obs::Log("webhooks").error("{}: gave up delivery {} after {} attempts since {}: {}", webhook.Name(),
                                   d.event_id, d.attempts, common::FormatRfc3339(d.create_time), d.last_error);
        writes.push_back(Remove(d));
        e.pending.pop_front();
        --e.status.pending;
        ++e.status.given_up;
        obs::Metrics::Default().WebhookDeliveries("given_up").Increment();
      }
    }
    // Enqueued under the lock: the store sees each webhook's writes in order.
    store_.Commit(std::move(writes), [name = webhook.Name()](absl::Status s) { LogFailure("a delivery of " + name, s); },
                  db::Sync::kLazy);
  }
  cv_.notify_all();
}

bool WebhookService::Wants(const std::string& project) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = webhooks_.lower_bound({project, ""});
  return it != webhooks_.end() && it->first.first == project;
}

std::vector<db::Mutation> WebhookService::Writes(const JobStateChange& change) {
  std::vector<db::Mutation> writes;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<notify::Delivery>& staged = staged_[StageKey(change.job)];
  for (auto it = webhooks_.lower_bound({change.job.project, ""});
       it != webhooks_.end() && it->first.first == change.job.project; ++it) {
    Entry& e = it->second;
    if (!Wanted(e.webhook, change.job.state)) continue;
    if (e.status.pending >= options_.max_pending) {
      ++e.status.given_up;
      e.status.last_error = absl::StrCat("an event of ", change.job.job_id, " was dropped: ", e.status.pending,
                                         " deliveries wait already (the receiver has not taken them)");
      obs::Metrics::Default().WebhookDeliveries("dropped").Increment();
      continue;
    }
    notify::Delivery d;
    d.project = e.webhook.project;
    d.webhook_id = e.webhook.id;
    d.sequence = next_sequence_++;
    d.event_id = common::RandomHex(12).value_or(absl::StrCat(d.sequence));  // unique either way
    d.body = EventBody(change, e.webhook, d.event_id);
    d.create_time = change.time;
    d.next_attempt = change.time;
    ++e.status.pending;  // counted now, so the cap holds for staged ones too
    writes.push_back(Put(d));
    staged.push_back(std::move(d));
  }
  if (staged.empty()) staged_.erase(StageKey(change.job));
  return writes;
}

void WebhookService::Committed(const JobStateChange& change, const absl::Status& status) {
  std::vector<db::Mutation> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto staged = staged_.find(StageKey(change.job));
    if (staged == staged_.end()) return;
    for (auto& d : staged->second) {
      auto it = webhooks_.find({d.project, d.webhook_id});
      if (it == webhooks_.end()) {
        if (status.ok()) orphans.push_back(Remove(d));  // deleted while the change was written
        continue;
      }
      if (!status.ok()) {
        --it->second.status.pending;  // the change was not stored: neither was its delivery
        continue;
      }
      auto& pending = it->second.pending;
      auto at = std::upper_bound(pending.begin(), pending.end(), d.sequence,
                                 [](int64_t seq, const notify::Delivery& x) { return seq < x.sequence; });
      pending.insert(at, std::move(d));
    }
    staged_.erase(staged);
    if (!orphans.empty()) store_.Commit(std::move(orphans), [](absl::Status s) { LogFailure("deliveries of a deleted webhook", s); });
  }
  cv_.notify_all();
}

WebhookView WebhookService::ViewOf(const Entry& e) const {
  WebhookView v{e.webhook, e.status};
  v.webhook.secret.clear();
  return v;
}

void WebhookService::Create(notify::Webhook request, std::function<void(absl::StatusOr<WebhookView>)> done) {
  if (!options_.enabled) {
    return done(absl::FailedPreconditionError(
        "Webhooks are turned off on this mlengine (the operator's webhooks.enabled is false)."));
  }
  if (auto s = notify::CheckUrl(request.url, options_.allow_loopback); !s.ok()) return done(s);
  for (const auto& state : request.states) {
    const auto parsed = model::ParseJobState(state);
    if (!parsed || *parsed == model::JobState::kUnspecified) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "The webhook's states has \"", state,
          "\", not a job state; give any of QUEUED, PREPARING, RUNNING, SUCCEEDED, FAILED, CANCELLING, CANCELLED "
          "(none: every change)")));
    }
  }
  if (request.description.size() > 1024) {
    return done(absl::InvalidArgumentError("The webhook's description is longer than 1024 characters."));
  }
  auto id = common::RandomHex(6);
  auto secret = common::RandomHex(32);
  if (!id || !secret) {
    return done(absl::InternalError("could not make the webhook's id and secret (OpenSSL's random generator failed)"));
  }
  request.id = "wh-" + *id;
  request.secret = *std::move(secret);
  request.create_time = clock_.Now();
  std::lock_guard<std::mutex> lock(mu_);
  int registered = 0;
  for (auto it = webhooks_.lower_bound({request.project, ""});
       it != webhooks_.end() && it->first.first == request.project; ++it) {
    ++registered;
  }
  if (registered >= options_.max_per_project) {
    return done(absl::ResourceExhaustedError(absl::StrCat("Project ", request.project, " has ",
                                                          options_.max_per_project,
                                                          " webhooks already, the most a project may have; delete "
                                                          "one first.")));
  }
  // Registered at once (a change meanwhile is owed to it too), undone if the write fails.
  const Key key{request.project, request.id};
  webhooks_[key].webhook = request;
  store_.Commit({db::PutRecord{{notify::kWebhookKind, notify::WebhookKey(request), notify::EncodeWebhook(request)}}},
                [this, key, request, done = std::move(done)](absl::Status s) {
                  if (!s.ok()) {
                    {
                      std::lock_guard<std::mutex> lock(mu_);
                      webhooks_.erase(key);
                    }
                    return done(s);
                  }
                  obs::Log("webhooks").info("{} created by {}: {}", request.Name(), request.creator, request.url);
                  WebhookView view{request, {}};
                  done(view);
                });
}

std::vector<WebhookView> WebhookService::List(const std::string& project) const {
  std::vector<WebhookView> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = webhooks_.lower_bound({project, ""}); it != webhooks_.end() && it->first.first == project; ++it) {
    out.push_back(ViewOf(it->second));
  }
  return out;
}

absl::StatusOr<WebhookView> WebhookService::Get(const std::string& project, const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = webhooks_.find({project, id});
  if (it == webhooks_.end()) {
    return absl::NotFoundError(absl::StrCat("Webhook projects/", project, "/webhooks/", id, " not found."));
  }
  return ViewOf(it->second);
}

void WebhookService::Delete(const std::string& project, const std::string& id, std::function<void(absl::Status)> done) {
  std::vector<db::Mutation> writes;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = webhooks_.find({project, id});
  if (it == webhooks_.end()) {
    return done(absl::NotFoundError(absl::StrCat("Webhook projects/", project, "/webhooks/", id, " not found.")));
  }
  writes.push_back(db::DeleteRecord{notify::kWebhookKind, notify::WebhookKey(it->second.webhook)});
  for (const auto& d : it->second.pending) writes.push_back(Remove(d));
  const std::string name = it->second.webhook.Name();
  webhooks_.erase(it);
  store_.Commit(std::move(writes), [name, done = std::move(done)](absl::Status s) {
    if (s.ok()) obs::Log("webhooks").info("{} deleted", name);
    done(s);
  });
}

}  // namespace mle::service
