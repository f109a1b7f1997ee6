// The host side of the sandbox, in mlengined: what the host offers every
// view (DetectHostLayout), whether the host can sandbox jobs at all
// (CheckHost, at start), the identities jobs run as (IdentityPool) and
// ending every process of one (KillIdentity).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sandbox/plan.h"

namespace mle::sandbox {

// The sandbox section of mlengined's configuration (`sandbox:`).
struct SandboxSettings {
  bool enabled = true;
  // Jobs run as uid (and gid) first_uid .. first_uid + uid_count - 1, one
  // per running job; no user or group of the host may hold one of them.
  uid_t first_uid = 524288;
  uint32_t uid_count = 65536;
  // Processes (threads included) one replica may have at once.
  int64_t pids_limit = 4096;
};

// The host's top-level links and system directories, the device nodes
// that exist, plus `extra_read_only` (runtimes, mlengine's python helpers;
// made canonical, missing ones skipped).
HostLayout DetectHostLayout(const std::vector<std::string>& extra_read_only);

// OK when jobs can be sandboxed here: a replica's sandbox is really entered
// (namespaces, mounts, the identity) in a child process, the uid range is
// free (no user or group of /etc/passwd or /etc/group in it), and
// `data_dir` is not inside a directory every view holds. Otherwise
// FAILED_PRECONDITION saying everything that is missing and how to turn the
// sandbox off (`sandbox: {enabled: false}`), for mlengined to refuse to
// start with. `scratch`: an empty directory it may use.
absl::Status CheckHost(const SandboxSettings& settings, const HostLayout& layout, const std::string& data_dir,
                       const std::string& scratch);

// Which uid a running job holds: one each, never two jobs the same, reused
// only after it was released (round-robin, so the last job's uid is taken
// last). Thread-safe.
class IdentityPool {
 public:
  IdentityPool(uid_t first, uint32_t count) : first_(first), count_(count) {}
  // A free uid; nullopt when every one is held.
  std::optional<uid_t> Acquire();
  // Marks `uid` held (a job found running at recovery); false when it is
  // outside the range.
  bool Hold(uid_t uid);
  void Release(uid_t uid);
  bool Contains(uid_t uid) const { return uid >= first_ && uid - first_ < count_; }

 private:
  const uid_t first_;
  const uint32_t count_;
  std::mutex mu_;
  std::set<uid_t> held_;  // guarded by mu_
  uint32_t next_ = 0;     // guarded by mu_
};

// SIGKILLs every process running as `uid` (as that uid: kill(-1) reaches
// exactly its own processes), until none is left (bounded). For a job's
// uid once the job ended: whatever escaped its shim goes too.
void KillIdentity(uid_t uid);

}  // namespace mle::sandbox
