#include "db/change_queue.h"

#include <utility>

namespace mle::db {

ChangeQueue::~ChangeQueue() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return !writing_; });  // the store outlives us: queued changes finish
}

void ChangeQueue::Write(Prepare prepare) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(prepare));
    if (writing_) return;  // the change in flight starts this one when durable
    writing_ = true;
  }
  WriteNext();
}

void ChangeQueue::WriteNext() {
  for (;;) {
    Prepare prepare;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) {
        writing_ = false;
        idle_.notify_all();
        return;
      }
      prepare = std::move(queue_.front());
      queue_.pop_front();
    }
    std::optional<Change> change = prepare();
    if (!change) continue;  // refused: it answered already
    std::vector<Mutation> writes = std::move(change->writes);  // before `change` moves into the callback
    const Sync sync = change->sync;
    store_.Commit(
        std::move(writes),
        [this, change = std::move(*change)](absl::Status s) {
          if (s.ok()) apply_locked_(change.apply);
          change.finish(s);
          WriteNext();
        },
        sync);
    return;
  }
}

}  // namespace mle::db
