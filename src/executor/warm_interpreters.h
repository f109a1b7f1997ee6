// WarmInterpreters: warm starts (docs/design/warm_start.md). Per runtime
// that asks for it, one warm interpreter (`python3 -m mlengine._warm --serve
// SOCKET`, the zygote) that has imported the runtime's preloads and forks a
// replica for each mlengine-replica that connects (--warm SOCKET --spec
// FILE). A replica is then a fork (milliseconds, the preloaded pages shared)
// instead of an interpreter start and its imports.
//
// The interpreter serves while this object (its parent, mlengined) lives;
// let go (destructor, or the server's exit) it takes no new replicas and
// ends with the last one it runs, so running jobs go on across a restart.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mle::executor {

struct WarmRuntimeSpec {
  std::string python;                // the runtime's interpreter
  std::vector<std::string> preload;  // modules imported before any replica
};

class WarmInterpreters {
 public:
  // `dir`: where the sockets live (DATA/warm); `env`: the interpreters'
  // environment (mlengine's python/ on PYTHONPATH); `sandbox_lib`:
  // libmlengine-sandbox.so, with which a forked replica enters its sandbox
  // ("": the interpreters cannot, and sandboxed replicas start cold).
  WarmInterpreters(std::string dir, std::map<std::string, std::string> env,
                   std::map<std::string, WarmRuntimeSpec> runtimes, std::string sandbox_lib = "");
  ~WarmInterpreters();
  WarmInterpreters(const WarmInterpreters&) = delete;
  WarmInterpreters& operator=(const WarmInterpreters&) = delete;

  // Starts every runtime's interpreter (at server start; importing takes a
  // second or so: until its socket answers, replicas start cold).
  void Start();
  // The socket replicas of `runtime` connect to ("" when it has no warm
  // starts). Starts the interpreter again when it ended.
  std::string SocketFor(const std::string& runtime);
  // What `runtime` preloads (empty when none).
  std::vector<std::string> PreloadOf(const std::string& runtime) const;

 private:
  void StartLocked(const std::string& runtime);  // mu_ held

  const std::string dir_;
  const std::map<std::string, std::string> env_;
  const std::map<std::string, WarmRuntimeSpec> runtimes_;
  const std::string sandbox_lib_;
  mutable std::mutex mu_;
  std::map<std::string, pid_t> pids_;  // running interpreters, by runtime
};

}  // namespace mle::executor
