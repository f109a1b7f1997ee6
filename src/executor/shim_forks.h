// ShimForkServer: mlengined's end of the shim's fork server
// (`mlengine-replica --fork-server`, shim/fork_server.h): a local replica's
// shim forked from a small server rather than executed, which saves each
// replica an exec (about 1 ms of CPU on the test machine).
//
// Thread-safe (one request at a time). Any failure is a Status, and the
// caller executes the shim instead (common::Spawn): a request too large for
// the server's room, or a server that is gone (then it is not asked again).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace mle::executor {

class ShimForkServer {
 public:
  // Starts `shim --fork-server` and waits (up to a second) for its hello.
  static absl::StatusOr<std::unique_ptr<ShimForkServer>> Start(const std::string& shim);
  // Closes the server's socket (it exits; the shims it forked run on) and
  // reaps it.
  ~ShimForkServer();
  ShimForkServer(const ShimForkServer&) = delete;
  ShimForkServer& operator=(const ShimForkServer&) = delete;

  struct Forked {
    pid_t pid = -1;
    int pidfd = -1;  // the caller's to close
  };
  // A shim running `argv` (argv[0]: the shim's path) with exactly `env`, in
  // a session of its own; not this process's child (the server reaps it:
  // its end shows on `pidfd`, its status in its exit file).
  // FAILED_PRECONDITION: too large for the server's room; UNAVAILABLE: the
  // server could not (it is not asked again when it is gone).
  absl::StatusOr<Forked> Fork(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);

  bool usable() const;

 private:
  ShimForkServer(common::Subprocess server, int sock, size_t arg_room, size_t env_room)
      : server_(std::move(server)), sock_(sock), arg_room_(arg_room), env_room_(env_room) {}

  mutable std::mutex mu_;
  std::optional<common::Subprocess> server_;
  int sock_ = -1;
  size_t arg_room_ = 0;
  size_t env_room_ = 0;
  bool broken_ = false;
};

}  // namespace mle::executor
