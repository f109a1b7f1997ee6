// WebhookService: a project's webhooks (docs/notifications.md). Its owner
// registers a URL; each state change of the project's jobs (both APIs'; a
// tuning job's, not its trials') is POSTed there as JSON, signed with the
// webhook's secret (notify/webhook.h).
//
// Never on the job path: what a change owes each webhook is written in the
// change's own transaction (JobSubscriber::Writes), so it is durable exactly
// when the change is, and sent later by the service's own thread and
// senders. Each webhook's deliveries go in order, one at a time; a failed
// one is tried again with back-off (1 s doubling to notify::RetryPolicy's
// max) until it is given up (after a day), the later ones waiting behind it.
// A delivered one is deleted. What failed, when, and how many wait is shown
// with the webhook (Get, List), in the log and /metrics.
//
// Thread-safe. Start() after Recover(); Stop() before the store goes.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/worker_pool.h"
#include "db/store.h"
#include "notify/poster.h"
#include "notify/webhook.h"
#include "service/job_events.h"

namespace mle::service {

struct WebhookOptions {
  bool enabled = true;          // false: none may be created; stored ones are kept, not sent
  bool allow_loopback = false;  // deliver to this machine (127.0.0.0/8, ::1, localhost)
  notify::RetryPolicy retry;
  int max_per_project = 10;
  int64_t max_pending = 10000;  // per webhook: past it, new events are dropped (and counted)
  int senders = 4;              // deliveries posted at once (to different webhooks)
};

// How a webhook's deliveries go (counts since mlengined started; pending
// from the store).
struct WebhookStatus {
  int64_t pending = 0;
  int64_t delivered = 0;
  int64_t failed_attempts = 0;
  int64_t given_up = 0;  // deliveries abandoned (too old) or events dropped (too many pending)
  int32_t consecutive_failures = 0;
  std::optional<absl::Time> last_delivery;
  std::optional<absl::Time> last_failure;
  std::string last_error;
};

struct WebhookView {
  notify::Webhook webhook;  // its secret only in Create's answer
  WebhookStatus status;
};

class WebhookService final : public JobSubscriber {
 public:
  WebhookService(db::Store& store, common::Clock& clock, WebhookOptions options);
  ~WebhookService() override;

  // Loads the webhooks and what is owed to them. Once, before Start.
  absl::Status Recover();
  void Start();
  // Ends sending (a post under way finishes, within its timeout); what is
  // not delivered stays stored for the next start.
  void Stop();

  // Registers `request` (project, url, states, description) for `creator`:
  // an id and a secret are made. INVALID_ARGUMENT naming the field,
  // RESOURCE_EXHAUSTED past max_per_project, FAILED_PRECONDITION when the
  // operator turned webhooks off. `done` once durable.
  void Create(notify::Webhook request, std::function<void(absl::StatusOr<WebhookView>)> done);
  std::vector<WebhookView> List(const std::string& project) const;
  absl::StatusOr<WebhookView> Get(const std::string& project, const std::string& id) const;
  // Removes the webhook and every delivery it was owed.
  void Delete(const std::string& project, const std::string& id, std::function<void(absl::Status)> done);

  // JobSubscriber
  bool Wants(const std::string& project) const override;
  std::vector<db::Mutation> Writes(const JobStateChange& change) override;
  void Committed(const JobStateChange& change, const absl::Status& status) override;

 private:
  struct Entry {
    notify::Webhook webhook;
    WebhookStatus status;
    std::deque<notify::Delivery> pending;  // in sequence order
    bool sending = false;
  };
  using Key = std::pair<std::string, std::string>;  // project, id

  void Loop();
  void Send(Key key, notify::Webhook webhook, notify::Delivery delivery);
  WebhookView ViewOf(const Entry& e) const;  // mu_ held; secret removed

  db::Store& store_;
  common::Clock& clock_;
  const WebhookOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Entry> webhooks_;
  // Deliveries written with a job's change, until it is committed: by
  // "PROJECT/JOB/VERSION".
  std::map<std::string, std::vector<notify::Delivery>> staged_;
  int64_t next_sequence_ = 1;
  bool stopping_ = false;
  std::thread loop_;
  std::unique_ptr<common::WorkerPool> senders_;
};

}  // namespace mle::service
