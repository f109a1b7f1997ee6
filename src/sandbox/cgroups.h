// Cgroups: the kernel-enforced resource limits of job replicas. mlengined
// (root) gives each replica a cgroup with a CPU bandwidth limit, a memory
// limit (swap included where the kernel accounts it) and a limit on tasks,
// below its own cgroup in a subtree `mlengine/` it owns:
//   cgroup v1 (also hybrid hosts, where the v1 hierarchies hold the
//   controllers): `<own cgroup of the controller>/mlengine/NAME` in each of
//   the cpu, memory and pids hierarchies (the own cgroup differs per
//   hierarchy: /proc/self/cgroup says which);
//   cgroup v2: `<own>/mlengine/NAME` in the unified tree, mlengined itself
//   in the leaf `<own>/mlengined` (v2 allows no process in a group that
//   hands controllers to its children).
// A replica joins its group by writing "0" into `cgroup.procs` of every
// directory Create (or Dirs) returns (sandbox/enter.h does).
//
// Detect is pure but for reading cgroup.controllers files (v2: its own and the root's); the
// other methods act on the cgroup file systems and return every failure as
// a Status naming the file and the errno text. Every path is below
// `fs_prefix` (tests point it at a directory of plain files laid out as the
// kernel shows them; limit files are opened O_CREAT|O_TRUNC, which cgroupfs
// ignores, so the same code writes both).
//
// A Cgroups is an immutable value: copyable, and any thread may call any
// method. Calls for different groups are independent; callers serialize
// calls for one group (Create racing Remove of the same name ends as the
// kernel orders them).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mle::sandbox {

enum class CgroupVersion { kV1, kV2 };

struct CgroupLimits {
  int64_t cpu_milli = 0;   // CPU bandwidth in thousandths of a core; 0: none
  int64_t memory_mib = 0;  // memory limit (swap included where the kernel allows: v1 memory.memsw.limit_in_bytes when
                           // present, v2 memory.swap.max 0); 0: none
  int64_t pids = 0;        // most tasks (processes+threads) at once; 0: none
};

struct CgroupUsage {
  int64_t oom_kills = 0;          // processes the kernel killed for the memory limit (v1: "oom_kill N" in
                                  // memory.oom_control; v2: "oom_kill N" in memory.events); 0 on kernels
                                  // that do not count them
  int64_t memory_peak_bytes = 0;  // v1 memory.max_usage_in_bytes; v2 memory.peak when present, else 0
  int64_t pids_denied = 0;        // forks refused at the pids limit (v1 and v2: "max N" in pids.events)
  int64_t tasks = 0;              // processes and threads in the group and its subgroups now (pids.current)
};

// favordynmods: the kernel's cgroup option that makes moving a process into
// a cgroup cheap. Without it each write to cgroup.procs waits for an RCU
// grace period (about 10 ms here, once per replica start), which every
// replica pays before its first line; with it forks and exits cost a little
// more, host-wide. The kernel keeps one setting for every hierarchy (v1 and
// v2) and takes it from the cgroup2 root's mount options.
//
// The data string to mount cgroup2 with so that its root keeps the flags it
// has (nsdelegate, memory_recursiveprot, ...: a cgroup2 mount sets all of
// them) and gains favordynmods: the super options of the first cgroup2
// mount in `mountinfo` (the text of /proc/self/mountinfo) less rw/ro, plus
// favordynmods; just "favordynmods" when no cgroup2 is mounted. nullopt when
// that mount has it already.
std::optional<std::string> FavorDynmodsMountData(const std::string& mountinfo);

// Turns favordynmods on for the host when it is off: mounts cgroup2 at
// `scratch` (a directory it makes and removes; never seen by a job) with
// FavorDynmodsMountData, checks that the kernel took it, unmounts. OK(true)
// when it turned it on, OK(false) when it was on; FAILED_PRECONDITION naming
// the step and errno text otherwise (the kernel ignores the option outside
// the host's cgroup namespace, and kernels before 6.0 do not know it). Root.
absl::StatusOr<bool> TurnOnFavorDynmods(const std::string& scratch);

class Cgroups {
 public:
  // Where this process's cgroups are. `proc_self_cgroup` and `mountinfo` are
  // the texts of /proc/self/cgroup and /proc/self/mountinfo (pure parsing:
  // unit-testable); FAILED_PRECONDITION naming what is missing when neither
  // v1 (all of cpu, memory, pids mounted as v1 controllers) nor v2 (a
  // cgroup2 mount whose cgroup.controllers -- read from disk, the own
  // cgroup's, or else the hierarchy root's, where Prepare may then take a
  // group of its own -- lists cpu, memory and pids) can be used. Prefers v1 when the
  // three v1 controllers are mounted (hybrid hosts: that is where the
  // controllers are), else v2. The message tells an operator what to do
  // (mount or delegate the controllers, or turn the sandbox off).
  // A v2 process that Prepare already moved into its leaf `<own>/mlengined`
  // counts `<own>` as its own cgroup, so detecting again finds the same tree.
  // `fs_prefix` is prepended to every mount point ("" for the host).
  static absl::StatusOr<Cgroups> Detect(const std::string& proc_self_cgroup, const std::string& mountinfo,
                                        const std::string& fs_prefix = "");
  // Reads /proc/self/cgroup and /proc/self/mountinfo and calls the above.
  static absl::StatusOr<Cgroups> DetectHost();

  // v2: cgroup v2 forbids processes in a group that hands controllers to
  // children, so mlengined moves itself (the whole process) into
  // `<own>/mlengined` (a leaf), then enables +cpu +memory +pids in
  // `<own>/cgroup.subtree_control` and in `<own>/mlengine/cgroup.subtree_control`.
  // Other processes in `<own>` are never moved: they make the kernel refuse
  // (the error names them and says to run mlengined in a cgroup of its own).
  // When that is so, or `<own>` was given fewer controllers than the three
  // (a parent that delegates less), and `fallback` names a group (one
  // segment of [A-Za-z0-9._-]) and the hierarchy's root offers the three,
  // mlengined takes a cgroup of its own there instead, as a service manager
  // would give it: `<root>/<fallback>` becomes `<own>` (relocation() says
  // so and why). The same `fallback` after a restart finds the same tree.
  // v1: creates `<own>/mlengine` in each controller. Idempotent. Errors name
  // the file and errno text. Call once at start-up, before any Create or
  // copy.
  absl::Status Prepare(const std::string& fallback = "");

  // "" when `<own>` is the cgroup mlengined started in; else where Prepare
  // moved it and why ("in /sys/fs/cgroup/NAME, a cgroup of its own: ...").
  const std::string& relocation() const;

  CgroupVersion version() const;

  // Creates the group `name` (a relative path such as "proj/job/master-0";
  // each segment [A-Za-z0-9._-]+, no "." or ".." segments: INVALID_ARGUMENT
  // otherwise, and for a negative limit) below `<own>/mlengine` in every
  // controller (intermediate directories created without limits; v2 enables
  // the controllers in each intermediate's subtree_control), writes the
  // limits (v1: cpu.cfs_period_us 100000 and cpu.cfs_quota_us =
  // cpu_milli*100 (at least 1000, the kernel's least); memory.limit_in_bytes
  // (and memory.memsw.limit_in_bytes when that file exists, same value);
  // pids.max. v2: cpu.max "QUOTA 100000", memory.max, memory.swap.max "0"
  // when present, pids.max). A limit of 0 writes the kernel's "no limit"
  // (-1 or "max"), so an existing group's limits are all rewritten.
  // `<own>/mlengine` is made again when missing (v2 needs Prepare's move
  // first: without it the kernel refuses the controllers). Returns the
  // directories a process must write "0" into cgroup.procs of to join (v1:
  // one per controller, in the order cpu, memory, pids, a hierarchy holding
  // two of them named once; v2: one).
  absl::StatusOr<std::vector<std::string>> Create(const std::string& name, const CgroupLimits& limits) const;

  // The same directories, without creating anything; empty for an invalid
  // name.
  std::vector<std::string> Dirs(const std::string& name) const;

  // The group's counters (its own: v1 counts no descendant's events; v2's
  // memory.events includes its descendants'). NOT_FOUND when the group does
  // not exist; INTERNAL naming the file when one does not parse.
  absl::StatusOr<CgroupUsage> Usage(const std::string& name) const;

  // Renames the group `from` to `to` in every controller: the same group
  // (its limits, counters and charges), a new name. cgroup v1 only, and in
  // the same parent (the kernel renames a group nowhere else): UNIMPLEMENTED
  // on v2, INVALID_ARGUMENT for names with different parents. A controller
  // already renamed (an earlier call cut short) is skipped. Errors name the
  // directory and errno text (EEXIST: `to` exists).
  absl::Status Rename(const std::string& from, const std::string& to) const;

  // Starts the group's memory peak again from its current use (v1: "0" into
  // memory.max_usage_in_bytes; v2: "reset" into memory.peak where the
  // kernel takes it, else nothing).
  absl::Status ResetPeak(const std::string& name) const;

  // Pids of every process in the group and its descendants (cgroup.procs of
  // each dir, deduplicated, recursive into subgroups), ascending. Empty for a
  // group that does not exist or an invalid name.
  std::vector<pid_t> Processes(const std::string& name) const;

  // Removes the group's directories and its subgroups', deepest first, in
  // every controller; when one is busy (a process in it), first SIGKILLs
  // every process of the group (v2: through cgroup.kill too, when present)
  // repeatedly, bounded to ~5 s, until cgroup.procs is empty everywhere. A
  // group that does not exist is OK. Then removes the intermediate
  // directories above it that it left empty (a project's: the kernel keeps
  // one that holds a sibling, and Create makes one again that goes while it
  // runs). Never rmdir's anything outside `<own>/mlengine`, nor that itself.
  // UNAVAILABLE when processes survive the bound or a directory stays busy;
  // this process itself is never signalled. The group and `children` (the
  // subgroups the caller made) are removed first without listing the
  // group's directories (an empty group's rmdir proves it held nothing);
  // only when that is refused are its directories listed, and anything
  // else found there removed as above.
  absl::Status Remove(const std::string& name, const std::vector<std::string>& children = {}) const;

  // Names (relative to `<own>/mlengine`, as given to Create) of the leaf
  // groups that exist, found in the memory controller's (v1) or the unified
  // (v2) tree, in ascending order: for recovery sweeps.
  std::vector<std::string> List() const;

 private:
  Cgroups(CgroupVersion version, std::string cpu_own, std::string memory_own, std::string pids_own);

  // `<own>/mlengine` of each controller's hierarchy (v2: the same three).
  std::string CpuBase() const;
  std::string MemoryBase() const;
  std::string PidsBase() const;
  // The distinct bases, in the order cpu, memory, pids.
  std::vector<std::string> Bases() const;
  // v2: Prepare in `own`; `others_in_own` says which pids made the kernel
  // refuse the controllers ("" for any other outcome).
  absl::Status PrepareV2(const std::string& own, std::string* others_in_own) const;

  CgroupVersion version_;
  // This process's own cgroup directory in the hierarchy of each controller
  // (with fs_prefix; v2: one directory three times).
  std::string cpu_own_;
  std::string memory_own_;
  std::string pids_own_;
  // v2: the hierarchy's root directory when it offers cpu, memory and pids
  // (where Prepare may take a group of its own), else "".
  std::string v2_root_;
  // v2: why `<own>` cannot hold the groups (its controllers); "" when it
  // can. `unusable_`: what Prepare without a fallback then says (as Detect
  // says when neither `<own>` nor the root offers them).
  std::string own_problem_;
  absl::Status unusable_;
  std::string relocation_;
};

}  // namespace mle::sandbox
