// AttachWarmer: a replica's first step is to join its cgroups, and on a
// host where no process changed cgroups just before, that move waits for an
// RCU grace period (about 10 ms here): the kernel's cgroup_threadgroup_rwsem
// leaves its fast, per-CPU mode for a writer only after one. That wait was
// most of what the sandbox added to a warm start.
//
// Kick() says a replica will join soon. A thread of this process then moves
// this process into the cgroup it is already in: a move that changes
// nothing but takes the same lock, so the grace period runs while the start
// is still being prepared, and moves again every few milliseconds until a
// short while after the last kick, so the lock stays in its writer mode
// until the replica has joined. Between starts the lock returns to its fast
// mode: unlike the cgroup mount option favordynmods (docs/security.md), the
// host's forks and exits pay the slower mode only while jobs start.
//
// Thread-safe; the destructor stops and joins the thread.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mle::sandbox {

class AttachWarmer {
 public:
  // `procs_file`: cgroup.procs of the cgroup this process is in (see
  // Cgroups::OwnProcsFile). `keep`: how long after the last kick the moves
  // go on; `every`: the pause between them (well under a grace period).
  explicit AttachWarmer(std::string procs_file, absl::Duration keep = absl::Milliseconds(60),
                        absl::Duration every = absl::Milliseconds(3));
  ~AttachWarmer();
  AttachWarmer(const AttachWarmer&) = delete;
  AttachWarmer& operator=(const AttachWarmer&) = delete;

  // Never blocks (the moves are the thread's).
  void Kick();

  // For tests: waits until at least `n` moves were made, up to `timeout`;
  // whether they were.
  bool AwaitMoves(int64_t n, absl::Duration timeout);
  int64_t moves() const;
  // For tests: waits until the moves have stopped (the last kick is `keep`
  // old), up to `timeout`; whether they have.
  bool AwaitIdle(absl::Duration timeout);

 private:
  void Loop();

  const std::string procs_file_;
  const absl::Duration keep_;
  const absl::Duration every_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  int64_t moves_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace mle::sandbox
