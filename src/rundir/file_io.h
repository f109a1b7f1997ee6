// Durable file primitives for everything mlengine keeps on disk outside the
// database (run directories, tokens, markers). Every failure comes back as a
// Status naming the path and errno. What a write survives is the caller's
// choice (Durability):
//
//   kMachineCrash (the default): a write is complete only when the file and
//     the directory entry are on disk (fsync of both): tokens, markers, what
//     Slurm's jobs, which outlive this host, are adopted by.
//   kProcessCrash: the same atomic rename, no fsync. A restarted server (its
//     process killed, even with -9) reads it whole; a crash of the machine
//     may lose it. For what describes local processes, which end with the
//     machine anyway (a local run's manifest and directories): a start
//     costs no disk flushes.
//
//   WriteFileAtomically: temp file beside the target (`mode` exactly, whatever
//   the umask), write, (fsync,) rename
//   over the target, (fsync the directory.) Readers see the old contents or
//   the new, never a mix.
//   ReadFile: NOT_FOUND when absent, UNAVAILABLE on other errors.
//
// Thread-safe (no shared state); two writers of one path must not race
// (their temp files would collide).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mle::rundir {

enum class Durability { kMachineCrash, kProcessCrash };

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode = 0644,
                                 Durability durability = Durability::kMachineCrash);

// fsync of a directory: makes creations, renames and removals in it durable.
absl::Status SyncDirectory(const std::string& dir);

// Creates `dir` and its missing parents (kMachineCrash: each made durable in
// its parent).
absl::Status CreateDirectories(const std::string& dir, Durability durability = Durability::kMachineCrash);

// Marks the directory `dir` as the top of unrelated trees for the file
// system's allocator (ext2/3/4's FS_TOPDIR_FL, `chattr +T`), as /home is:
// each directory made in it goes to a block group of its own choosing, not
// beside its siblings. For the run directories (DATA/runs and each
// project's): on ext4 without a journal a new inode costs 100+ us instead of
// ~25 when its group holds inodes freed in the last half minute to five
// minutes (the allocator steps over each, reading its inode table block),
// which is where a job's files would go after runs were deleted or a package
// was built nearby; spread out, a job's eight new inodes land in a quiet
// group. OK where the file system has no such flag (xfs, tmpfs, btrfs...).
absl::Status MarkTopDirectory(const std::string& dir);

// CreateDirectories of `dir` whose parent holds unrelated siblings (a run
// directory in its project's directory of runs): a parent it has to make is
// made a top directory (MarkTopDirectory) before `dir` is made in it.
absl::Status CreateSpreadDirectory(const std::string& dir, Durability durability = Durability::kMachineCrash);

// syncfs() of the filesystem holding `path`: for trees written by other
// programs (pip) that must be on disk before a marker says they are complete.
absl::Status SyncFilesystemOf(const std::string& path);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// A file a sandboxed job may have written or replaced (its hypertune
// reports), read by root: never through a symbolic link as its last
// component, a regular file only (a FIFO would stall the reader), at most
// `max_bytes` (RESOURCE_EXHAUSTED beyond). NOT_FOUND when absent.
absl::StatusOr<std::string> ReadJobFile(const std::string& path, size_t max_bytes);

// True when `path` exists; an error other than "absent" is a Status.
absl::StatusOr<bool> FileExists(const std::string& path);

}  // namespace mle::rundir
