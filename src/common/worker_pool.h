// WorkerPool: a fixed number of threads running posted tasks, in the order
// posted (with one thread, one at a time: an executor's preparation queue;
// with several, the StorageRouter's disk-bound calls).
//
// Stop() refuses later tasks (Post returns false and drops them), then,
// by the pool's OnStop: kDrain runs every task already queued, kDiscard
// drops those not yet started; it waits for the running ones and joins.
// Idempotent; the destructor stops. A task must not call Stop() of its own
// pool. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mle::common {

class WorkerPool {
 public:
  enum class OnStop { kDrain, kDiscard };

  // At least one thread.
  WorkerPool(int threads, OnStop on_stop);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and `task` dropped) once stopping.
  bool Post(std::function<void()> task);
  void Stop();

 private:
  void Loop();

  const OnStop on_stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once the rest is ready
};

// One thread, tasks in order; Stop() drops what has not started (an
// executor's package preparation and submission queue).
class SerialWorker : public WorkerPool {
 public:
  SerialWorker() : WorkerPool(1, OnStop::kDiscard) {}
};

}  // namespace mle::common
