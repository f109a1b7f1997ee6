// common/worker_pool: order with one thread, real parallelism with several,
// and what Stop() does with queued tasks (drain or discard), deterministically
// (latches, no sleeps).
#include "common/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <thread>
#include <vector>

namespace mle::common {
namespace {

TEST(WorkerPoolTest, OneThreadRunsTasksInOrderAndDrainsOnStop) {
  std::vector<int> ran;
  WorkerPool pool(1, WorkerPool::OnStop::kDrain);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Post([&ran, i] { ran.push_back(i); }));
  pool.Stop();
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_FALSE(pool.Post([&ran] { ran.push_back(-1); }));
  pool.Stop();  // idempotent
  EXPECT_EQ(ran.size(), 100u);
}

TEST(WorkerPoolTest, SeveralThreadsRunTasksAtOnce) {
  // Each task waits for the other: they finish only if both run together.
  std::latch both(2);
  std::atomic<int> done{0};
  {
    WorkerPool pool(2, WorkerPool::OnStop::kDrain);
    for (int i = 0; i < 2; ++i) {
      pool.Post([&] {
        both.arrive_and_wait();
        ++done;
      });
    }
  }  // the destructor drains and joins
  EXPECT_EQ(done.load(), 2);
}

// A pool whose one thread is held by a task until `release` is set, with
// `queued` tasks behind it; then stopped. Returns how many queued tasks ran.
int QueuedTasksRunAfterStop(WorkerPool& pool, int queued) {
  std::promise<void> started, release;
  std::atomic<int> ran{0};
  pool.Post([&] {
    started.set_value();
    release.get_future().wait();
  });
  started.get_future().wait();
  for (int i = 0; i < queued; ++i) pool.Post([&] { ++ran; });
  std::thread stopper([&] { pool.Stop(); });
  // Stop() refuses new tasks in the same step as it settles the queue.
  while (pool.Post([] {})) {
  }
  release.set_value();
  stopper.join();
  return ran.load();
}

TEST(WorkerPoolTest, StopDrainsOrDiscardsWhatIsQueued) {
  WorkerPool drain(1, WorkerPool::OnStop::kDrain);
  EXPECT_EQ(QueuedTasksRunAfterStop(drain, 5), 5);
  WorkerPool discard(1, WorkerPool::OnStop::kDiscard);
  EXPECT_EQ(QueuedTasksRunAfterStop(discard, 5), 0);
  SerialWorker serial;
  EXPECT_EQ(QueuedTasksRunAfterStop(serial, 5), 0);
}

}  // namespace
}  // namespace mle::common
