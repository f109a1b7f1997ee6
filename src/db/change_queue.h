// ChangeQueue: a service's changes to durable state, made one at a time.
// Each change is prepared (under the owner's lock, from the state the
// previous change left), written through db::Store, applied to memory only
// once durable (under the owner's lock, through `apply_locked`), and then
// answered. A change that is refused answers its caller itself and writes
// nothing. IamService and StudyService keep their state this way.
//
// Thread-safe: Write may be called from any thread; a change's steps run on
// the caller's thread (the first) or the store's callback thread (the rest).
// The destructor waits until every queued change has finished.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "db/store.h"

namespace mle::db {

class ChangeQueue {
 public:
  struct Change {
    std::vector<Mutation> writes;
    std::function<void()> apply;                // once durable, under the owner's lock
    std::function<void(absl::Status)> finish;  // then: answers the caller (with the write's status)
    Sync sync = Sync::kDurable;                 // how far `writes` reach before `apply` (store.h)
  };
  // Returns the change, or nullopt once it has answered the caller (refused).
  using Prepare = std::function<std::optional<Change>()>;
  // Runs `apply` under the owner's (exclusive) lock.
  using ApplyLocked = std::function<void(const std::function<void()>& apply)>;

  ChangeQueue(Store& store, ApplyLocked apply_locked) : store_(store), apply_locked_(std::move(apply_locked)) {}
  ~ChangeQueue();
  ChangeQueue(const ChangeQueue&) = delete;
  ChangeQueue& operator=(const ChangeQueue&) = delete;

  // Queues `prepare`; it runs once every change queued before it is durable.
  void Write(Prepare prepare);

 private:
  void WriteNext();

  Store& store_;
  const ApplyLocked apply_locked_;
  std::mutex mu_;  // guards the three below
  std::condition_variable idle_;
  std::deque<Prepare> queue_;
  bool writing_ = false;  // a change is in flight
};

}  // namespace mle::db
