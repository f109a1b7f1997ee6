#include "sandbox/attach_warmer.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace mle::sandbox {

AttachWarmer::AttachWarmer(std::string procs_file, absl::Duration keep, absl::Duration every)
    : procs_file_(std::move(procs_file)), keep_(keep), every_(every), thread_([this] { Loop(); }) {}

AttachWarmer::~AttachWarmer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void AttachWarmer::Kick() {
  absl::MutexLock lock(&mu_);
  kicked_ = true;
}

bool AttachWarmer::AwaitMoves(int64_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return moves_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

int64_t AttachWarmer::moves() const {
  absl::MutexLock lock(&mu_);
  return moves_;
}

bool AttachWarmer::AwaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !active_ && !kicked_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void AttachWarmer::Loop() {
  const std::string pid = absl::StrCat(::getpid());
  absl::Time until = absl::InfinitePast();
  absl::MutexLock lock(&mu_);
  auto stop_or_kick = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || kicked_; };
  for (;;) {
    if (!active_) mu_.Await(absl::Condition(&stop_or_kick));
    if (stop_) return;
    if (kicked_) {
      kicked_ = false;
      until = absl::Now() + keep_;
    }
    active_ = absl::Now() < until;
    if (!active_) continue;
    mu_.Unlock();
    // This process into its own cgroup: nothing changes, but the move takes
    // the lock a replica's join takes. A failure only costs that start the
    // wait (there is nothing to report).
    const int fd = ::open(procs_file_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, pid.data(), pid.size());
      ::close(fd);
    }
    mu_.Lock();
    ++moves_;
    mu_.AwaitWithTimeout(absl::Condition(&stop_), every_);
  }
}

}  // namespace mle::sandbox
