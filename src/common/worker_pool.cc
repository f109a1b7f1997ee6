#include "common/worker_pool.h"

#include <algorithm>
#include <utility>

namespace mle::common {

WorkerPool::WorkerPool(int threads, OnStop on_stop) : on_stop_(on_stop) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (on_stop_ == OnStop::kDiscard) tasks_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkerPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, with nothing (left) to drain
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace mle::common
