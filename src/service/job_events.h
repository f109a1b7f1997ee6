// What JobService tells subscribers of its jobs' state changes (webhooks:
// service/webhook_service.h). A subscriber's writes join the change's own
// transaction, so what it owes for a change is durable exactly when the
// change is. Trials of tuning jobs are not told (their tuning job is).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "db/store.h"
#include "model/job.h"

namespace mle::service {

struct JobStateChange {
  model::Job job;               // as it is after the change (its version bumped)
  model::JobState from = model::JobState::kUnspecified;  // kUnspecified: a job just created
  absl::Time time;
};

class JobSubscriber {
 public:
  virtual ~JobSubscriber() = default;
  // Whether a change of `project`'s jobs is wanted at all (cheap; any
  // thread, JobService's lock maybe held): JobService copies nothing for a
  // project no one listens to.
  virtual bool Wants(const std::string& project) const = 0;
  // The writes that go with `change` into its transaction. Called with
  // JobService's lock maybe held: quick, and never calls JobService.
  virtual std::vector<db::Mutation> Writes(const JobStateChange& change) = 0;
  // Once that transaction is durable (OK) or failed; from the store's
  // thread: must not block.
  virtual void Committed(const JobStateChange& change, const absl::Status& status) = 0;
};

}  // namespace mle::service
