// WarmPool: pre-started replicas for warm starts (docs/design/warm_start.md).
// Per runtime it keeps `size` pooled mlengine-replica shims (--pool), each
// already running the runtime's warm interpreter (python3 -m mlengine._warm
// with the runtime's preloads imported). Claim hands one to a replica: the
// shim opens the replica's log and exit file and its interpreter becomes the
// replica; from then on it is an ordinary replica of the caller (its child:
// the pool spawned it from this process). Fill starts new ones.
//
// A pooled shim that is not ready (still importing) is skipped: Claim then
// says UNAVAILABLE and the caller starts the replica cold.
//
// Thread-safe. The destructor stops every unclaimed shim.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::executor {

struct WarmRuntime {
  std::vector<std::string> program;  // the warm interpreter's command (its control/ready fds are 3 and 4)
  int size = 1;                      // pooled shims kept ready
};

struct WarmPoolOptions {
  std::string shim;  // mlengine-replica
  std::string dir;   // where the claim sockets live (DATA/warm)
  std::map<std::string, std::string> env;  // the pooled processes' environment
  std::map<std::string, WarmRuntime> runtimes;  // by runtime name
};

// What a replica's claim says (mlengine-replica's claim format).
struct WarmClaim {
  std::string log_path;
  std::string exit_path;
  int grace_seconds = 10;
  std::string spec;  // one JSON line for mlengine._warm
  std::string note;  // the replica log's first line (which start it got)
};

class WarmPool {
 public:
  explicit WarmPool(WarmPoolOptions options);
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // Reaps pooled shims that ended and starts new ones up to each runtime's size.
  void Fill();
  // After a restart: stops the unclaimed shims an earlier server left (a
  // claimed one removed its socket and is a replica now, adopted by the
  // executor). Call before Fill.
  void RemoveLeftovers();
  // A ready shim of `runtime`, claimed: its pid (a child of this process,
  // the caller's to watch and reap). UNAVAILABLE when none is ready (start
  // cold); NOT_FOUND when the runtime has no pool.
  absl::StatusOr<pid_t> Claim(const std::string& runtime, const WarmClaim& claim);
  // Pooled shims (unclaimed) of `runtime`, for tests and metrics.
  int Pooled(const std::string& runtime) const;

 private:
  struct Entry {
    pid_t pid = 0;
    std::string socket;
  };

  const WarmPoolOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Entry>> idle_;  // by runtime
  int64_t next_ = 0;
};

}  // namespace mle::executor
