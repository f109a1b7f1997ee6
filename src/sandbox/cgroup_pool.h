// CgroupPool: replica cgroups used again instead of made and removed for
// every replica (cgroup v1).
//
// Making a group costs the kernel each controller's state and dozens of
// control files, and removing it costs taking them down again, part of it
// later in the kernel's workers (docs/security.md, "What a start costs").
// So a group whose replica ended cleanly is not removed: it is renamed to a
// spare name in its parent (`PARENT/.spare-N`, PARENT being a project's
// group) and renamed again for the next replica of that parent, its limits
// rewritten only where they differ. cgroup v1 renames a group within its
// parent only, and v2 renames none: on v2 the pool makes and removes every
// group as Cgroups does.
//
// A group goes back to the pool only when it is clean: no task is left in
// it, the kernel never killed a process of it at its memory limit and never
// refused it a fork (Usage counts those for the group's whole life, and
// MemoryFailure reads them: a group used again starts with zeros). Its
// memory peak is started again when it is used again. What the previous
// replica left charged to it (page cache of files it wrote, reclaimable)
// stays charged to it until the kernel reclaims it. Anything else (a busy
// group, a failed rename, more than `max_spares` spares) is removed as
// Cgroups::Remove does (its processes killed).
//
// Thread-safe. Callers serialize calls for one name (as for Cgroups).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sandbox/cgroups.h"

namespace mle::sandbox {

class CgroupPool {
 public:
  // `cgroups` outlives the pool. At most `max_spares` spare groups are kept
  // (all parents together).
  explicit CgroupPool(const Cgroups& cgroups, size_t max_spares = 64);

  // Cgroups::Create's contract: the group `name` with `limits`, the
  // directories to join. A spare of name's parent becomes it when there is
  // one (falling back to Create when that fails).
  absl::StatusOr<std::vector<std::string>> Acquire(const std::string& name, const CgroupLimits& limits);

  // The replica of `name` has ended: its group becomes a spare when clean,
  // else is removed (Cgroups::Remove: what is left in it killed). A group
  // that does not exist is OK. Errors as Cgroups::Remove's.
  absl::Status Release(const std::string& name);

  // Removes every spare below `<own>/mlengine` (found in the memory
  // hierarchy): this pool's, and those an earlier mlengined left. Returns
  // how many. mlengined calls it as it starts and as it stops.
  size_t RemoveSpares();

  // Spares held now, all parents together.
  size_t spares() const;

 private:
  struct Spare {
    std::string name;     // PARENT/.spare-N
    CgroupLimits limits;  // as last written
  };

  const Cgroups& cgroups_;
  const size_t max_spares_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Spare>> free_;  // parent -> its spares (the newest last)
  std::map<std::string, CgroupLimits> limits_;      // a group in use -> its limits, to carry to its spare
  size_t count_ = 0;                                // spares in free_
  uint64_t next_ = 0;                               // the next spare's number
};

// The spare-name prefix: a group whose last segment starts with it is a
// spare (never a replica's: task names and job ids start with a letter).
inline constexpr char kSparePrefix[] = ".spare-";

}  // namespace mle::sandbox
