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
