#include "sandbox/attach_warmer.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

namespace mle::sandbox {

AttachWarmer::AttachWarmer(std::string procs_file, std::chrono::milliseconds keep, std::chrono::milliseconds every)
    : procs_file_(std::move(procs_file)), keep_(keep), every_(every), thread_([this] { Loop(); }) {}

AttachWarmer::~AttachWarmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void AttachWarmer::Kick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kicked_ = true;
  }
  changed_.notify_all();
}

bool AttachWarmer::AwaitMoves(int64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return moves_ >= n; });
}

int64_t AttachWarmer::moves() const {
  std::lock_guard<std::mutex> lock(mu_);
  return moves_;
}

bool AttachWarmer::AwaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return !active_ && !kicked_; });
}

void AttachWarmer::Loop() {
  const std::string pid = std::to_string(::getpid());
  auto until = std::chrono::steady_clock::time_point::min();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!active_) changed_.wait(lock, [&] { return stop_ || kicked_; });
    if (stop_) return;
    if (kicked_) {
      kicked_ = false;
      until = std::chrono::steady_clock::now() + keep_;
    }
    const bool was_active = active_;
    active_ = std::chrono::steady_clock::now() < until;
    if (!active_) {
      if (was_active) changed_.notify_all();
      continue;
    }
    lock.unlock();
    // This process into its own cgroup: nothing changes, but the move takes
    // the lock a replica's join takes. A failure only costs that start the
    // wait (there is nothing to report).
    const int fd = ::open(procs_file_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, pid.data(), pid.size());
      ::close(fd);
    }
    lock.lock();
    ++moves_;
    changed_.notify_all();
    changed_.wait_for(lock, every_, [&] { return stop_; });
  }
}

}  // namespace mle::sandbox
