// Clock: the one source of "now" for mlengine. Production code takes a Clock&
// so tests can substitute FakeClock and advance time deterministically.
// Thread-safe: both implementations may be called from any thread.
#pragma once

#include <atomic>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace mle::common {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// Wall-clock time.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static RealClock& Get();
};

// A clock that only moves when told to. For tests.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000))
      : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ = t;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_;
};

}  // namespace mle::common
