// The host side of the sandbox, in mlengined: what the host offers every
// view (DetectHostLayout), whether the host can sandbox jobs at all
// (CheckHost, at start), the identities jobs run as (IdentityPool, leased
// host-wide).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <map>
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
  // Turn on the kernel's cgroup favordynmods at start (sandbox/cgroups.h):
  // a replica then joins its cgroups in microseconds instead of waiting
  // ~10 ms for an RCU grace period; forks and exits cost a little more,
  // host-wide. false leaves the host's setting as it is.
  bool favordynmods = true;
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
// last). Each uid is held by an owner (a job's "project/job"): only its
// owner releases it, and only its owner may act on its processes, so a
// stale record naming a uid another job now holds (a start undone at
// recovery) can neither free nor kill it. Thread-safe.
//
// With a `lease_file` (mlengined uses /run/mlengine/uids.lock), a held uid
// is also leased host-wide: a lock on byte UID of that one file (an open
// file description lock, fcntl F_OFD_SETLK), held while the job holds the
// uid and dropped by the kernel when the server's process ends, so two
// mlengined on one host (tests run several) never give one uid to two jobs.
// One file for every uid: a lease creates nothing on disk. Each pool starts
// its round at a random place, so a uid whose server died (its jobs may
// still run, to be adopted) is rarely next.
class IdentityPool {
 public:
  IdentityPool(uid_t first, uint32_t count, const std::string& lease_file = "");
  ~IdentityPool();
  IdentityPool(const IdentityPool&) = delete;
  IdentityPool& operator=(const IdentityPool&) = delete;
  // The uid `owner` holds, or else a free one for it; nullopt when every
  // one is held (a job resubmitted keeps its identity).
  std::optional<uid_t> Acquire(const std::string& owner);
  // The uid `owner` holds, if any.
  std::optional<uid_t> HeldBy(const std::string& owner) const;
  // Marks `uid` held by `owner` (a job found running at recovery, a job
  // keeping its identity); false when it is outside the range or another
  // owner holds it.
  bool Hold(uid_t uid, const std::string& owner);
  // Whether `owner` holds `uid`.
  bool Owns(uid_t uid, const std::string& owner) const;
  // Releases `uid` if `owner` holds it.
  void Release(uid_t uid, const std::string& owner);
  bool Contains(uid_t uid) const { return uid >= first_ && uid - first_ < count_; }
  // Not OK when the lease file could not be opened: no uid can be had.
  const absl::Status& status() const { return lease_status_; }

 private:
  // Takes the host-wide lease of `uid`; false when another process holds it.
  std::optional<uid_t> HeldByLocked(const std::string& owner) const;  // mu_ held
  bool Lease(uid_t uid);    // mu_ held
  void Unlease(uid_t uid);  // mu_ held

  const uid_t first_;
  const uint32_t count_;
  int lease_fd_ = -1;  // the lease file; -1: none (see lease_status_)
  absl::Status lease_status_;
  mutable std::mutex mu_;
  std::map<uid_t, std::string> held_;  // uid -> owner; guarded by mu_
  uint32_t next_ = 0;                  // guarded by mu_
};


}  // namespace mle::sandbox
