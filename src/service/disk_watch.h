// DiskWatch: how full the disk of mlengine's data directory is
// (docs/operations.md, "A full disk"). It looks (statvfs) every few seconds
// on a thread of its own and says so to whoever asks: new jobs and uploads
// are refused (RESOURCE_EXHAUSTED) while less than the reserve is free, so
// that what runs keeps room for its state changes and log lines; /metrics
// and the console show it. The decision is pure (DiskState::Of). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mle::service {

struct DiskState {
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;     // what mlengined may still write (statvfs' f_bavail)
  uint64_t reserve_bytes = 0;
  bool known = false;          // looked at least once
  bool full = false;           // free below the reserve
  static DiskState Of(uint64_t size, uint64_t free, uint64_t reserve);
  // "12.0 MiB free of 96.0 MiB, below the 64.0 MiB kept for running jobs"
  std::string Describe() const;
};

class DiskWatch {
 public:
  // `on_check` (may be empty) is called after each look, on the watch's
  // thread: it must not block for long.
  DiskWatch(std::string path, uint64_t reserve_bytes, absl::Duration interval,
            std::function<void(const DiskState&)> on_check);
  ~DiskWatch();
  DiskWatch(const DiskWatch&) = delete;
  DiskWatch& operator=(const DiskWatch&) = delete;

  void Start();  // looks once at once, then every interval
  void Stop();

  DiskState State() const;
  const std::string& path() const { return path_; }
  // OK while there is room; RESOURCE_EXHAUSTED saying the disk is full and
  // that `refused` ("the job was not created") otherwise.
  absl::Status CheckRoom(absl::string_view refused) const;
  // Looks now (after a write failed for want of space, say).
  void Look();
  // A new reserve (mlengined's reload), from the next look on.
  void SetReserve(uint64_t reserve_bytes) { reserve_ = reserve_bytes; }

 private:
  const std::string path_;
  std::atomic<uint64_t> reserve_;
  const absl::Duration interval_;
  const std::function<void(const DiskState&)> on_check_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  DiskState state_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mle::service
