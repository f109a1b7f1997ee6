#include "executor/warm_interpreters.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/subprocess.h"
#include "obs/log.h"
#include "rundir/file_io.h"

namespace mle::executor {

WarmInterpreters::WarmInterpreters(std::string dir, std::map<std::string, std::string> env,
                                   std::map<std::string, WarmRuntimeSpec> runtimes, std::string sandbox_lib)
    : dir_(std::move(dir)), env_(std::move(env)), runtimes_(std::move(runtimes)), sandbox_lib_(std::move(sandbox_lib)) {}

WarmInterpreters::~WarmInterpreters() {
  std::lock_guard<std::mutex> lock(mu_);
  // Let them go: no new replicas; each ends with the last replica it runs.
  for (const auto& [runtime, pid] : pids_) ::kill(pid, SIGHUP);
}

void WarmInterpreters::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto s = rundir::CreateDirectories(dir_); !s.ok()) {
    obs::Log("warm").error("cannot create {}: {}", dir_, s.ToString());
    return;
  }
  for (const auto& [runtime, spec] : runtimes_) StartLocked(runtime);
}

void WarmInterpreters::StartLocked(const std::string& runtime) {
  const WarmRuntimeSpec& spec = runtimes_.at(runtime);
  common::SpawnOptions spawn;
  // --server-pid: the interpreter serves while we are its parent, from its
  // first instant (we may be killed while it still imports).
  spawn.argv = {spec.python, "-m", "mlengine._warm", "--serve", absl::StrCat(dir_, "/", runtime, ".sock"),
                "--preload", absl::StrJoin(spec.preload, ","), "--server-pid", absl::StrCat(::getpid())};
  if (!sandbox_lib_.empty()) spawn.argv.insert(spawn.argv.end(), {"--sandbox-lib", sandbox_lib_});
  spawn.env = env_;
  spawn.group = common::ProcessGroup::kNewSession;
  auto child = common::Spawn(spawn);
  if (!child.ok()) {
    obs::Log("warm").error("cannot start the warm {} interpreter: {}", runtime, child.status().ToString());
    return;
  }
  pids_[runtime] = child->Release();  // reaped in SocketFor once it ended
  obs::Log("warm").info("the {} interpreter for warm starts is starting (it imports {})", runtime, absl::StrJoin(spec.preload, ", "));
}

std::string WarmInterpreters::SocketFor(const std::string& runtime) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!runtimes_.count(runtime)) return "";
  auto it = pids_.find(runtime);
  int status = 0;
  if (it == pids_.end() || ::waitpid(it->second, &status, WNOHANG) == it->second) {
    obs::Log("warm").warn("the {} interpreter for warm starts ended; starting it again", runtime);
    StartLocked(runtime);
  }
  return absl::StrCat(dir_, "/", runtime, ".sock");
}

std::vector<std::string> WarmInterpreters::PreloadOf(const std::string& runtime) const {
  auto it = runtimes_.find(runtime);
  return it == runtimes_.end() ? std::vector<std::string>{} : it->second.preload;
}

}  // namespace mle::executor
