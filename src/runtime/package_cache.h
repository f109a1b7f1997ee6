// PackageCache: installs a job's trainer packages once per content digest
// into a virtual environment (system site packages visible, pip with no
// index), and hands the same environment to every later job with the same
// packages and runtime. Archives are checked before pip sees them: entries
// with absolute paths, ".." or links leaving the archive are refused.
//
// Layout: ROOT/<runtime>/<digest>/ (a venv) holding a ".ready" marker. It
// is built in ROOT/<runtime>/.<digest>.<pid>-<n>.staging and published by
// one rename, so a crash mid-install never leaves an environment that looks
// usable, and a build cut short (its pip left running after the server was
// killed) never writes into a later build. Leftover staging directories are
// removed by the next build of the same digest and by RemoveLeftovers.
// Retention removes environments no running job uses (Remove), under the
// same lock as Prepare's, so one is never removed while it is handed out.
// Thread-safe: concurrent installs of the same digest wait for one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "runtime/runtimes.h"

namespace mle::runtime {

// A package to install, already open: whoever may write its bucket (a
// running job) may replace its path meanwhile, with a symbolic link say,
// never the file read. `name` is the file name pip knows it by
// (trainer-0.1.tar.gz).
struct PackageFile {
  int fd = -1;  // the caller's, open until Prepare returns
  std::string name;
};

struct PreparedEnvironment {
  std::string python;  // interpreter to run the trainer with
  std::string dir;     // the environment's directory (python is its bin/python); empty without packages
  std::string digest;  // the SHA-256 of the packages' contents, in order (empty without packages)
  bool cache_hit = false;
};

// Runs a command of a package build (the venv, then pip, which runs the
// packages' setup.py) confined: it may write `writable` (the environment
// being built, made beforehand) and read `readable` (the packages'
// directories). executor/sandboxing.h runs it in a sandbox as an identity
// of its own (docs/security.md).
using BuildRunner = std::function<absl::StatusOr<common::CommandResult>(
    const std::vector<std::string>& argv, const common::CommandOptions& options, const std::string& writable,
    const std::vector<std::string>& readable)>;

// What identifies a file's contents without reading them: a write
// changes its ctime (which no caller can set back), a new file under the
// same inode number has a later one.
struct FileStamp {
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  auto operator<=>(const FileStamp&) const = default;
};

// The digests of package files already hashed, by their stamps: a job
// whose packages have not changed since an earlier one's is not charged a
// hash of every byte again (a 50 MB package: about 100 ms of CPU). Only a
// settled file is remembered, one whose ctime is at least kSettledNs
// before the hash began: filesystems keep ctime at a coarse clock, so a
// write in the same tick as the hash could leave the stamp as it was.
// Pure: the time the hash began is the caller's (Unix nanoseconds, the
// clock file times are kept in).
class DigestMemo {
 public:
  static constexpr int64_t kSettledNs = 2'000'000'000;
  static constexpr size_t kMaxEntries = 4096;

  std::optional<std::string> Find(const std::vector<FileStamp>& stamps) const;
  // Remembers `digest` for `stamps` when every one was settled at
  // `hashed_at_ns`, the time the hash began; forgets everything when full.
  void Remember(const std::vector<FileStamp>& stamps, int64_t hashed_at_ns, const std::string& digest);
  size_t size() const { return digests_.size(); }

 private:
  std::map<std::vector<FileStamp>, std::string> digests_;
};

class PackageCache {
 public:
  explicit PackageCache(std::string root) : root_(std::move(root)) {}

  // Builds run through `runner` from now on (none: as this process). Call
  // before the first Prepare.
  void SetBuildRunner(BuildRunner runner) { runner_ = std::move(runner); }
  // mlengine's python/ directory: each environment built from now on has
  // it on its path (a .pth file), so its helpers import without PYTHONPATH
  // and a package that declares `cloudml-hypertune` (whose metadata lies
  // there) installs. Call before the first Prepare.
  void SetHelpers(std::string python_dir) { helpers_ = std::move(python_dir); }

  // `packages`: sdists, wheels, tar.gz, each copied aside before it is
  // checked and built from. Without packages the runtime's own interpreter
  // is returned. FAILED_PRECONDITION with a message
  // for the user when a package is unsafe or pip cannot install it (a missing
  // dependency is named).
  absl::StatusOr<PreparedEnvironment> Prepare(const Runtime& runtime, const std::vector<PackageFile>& packages);

  // Removes, best effort, the staging directories builds cut short left
  // behind (a server killed mid-install). Call before the first Prepare.
  void RemoveLeftovers();

  // For retention (service/retention.h). An environment's last use is its
  // .ready marker's mtime: set when it is built, and again by each Prepare
  // that hands it out and by Touch.
  struct CachedEnvironment {
    std::string dir;
    absl::Time last_used;
  };
  std::vector<CachedEnvironment> Environments() const;
  // Marks an environment used now (one a running job uses).
  void Touch(const std::string& dir);
  // Removes the environment unless it was used after `last_used` (as
  // Environments gave it): true when removed, false when used since or
  // gone. Unpublished by one rename first, so a Prepare never hands out a
  // half-removed one; a later Prepare of the same packages builds it again.
  absl::StatusOr<bool> Remove(const std::string& dir, absl::Time last_used);

  // OK, or FAILED_PRECONDITION naming the first unsafe entry.
  static absl::Status CheckArchive(const std::string& path);

 private:
  std::mutex* LockFor(const std::string& key);
  static std::optional<absl::Time> LastUse(const std::filesystem::path& ready);
  static bool MarkUsed(const std::filesystem::path& ready);
  static std::string StagingName(const std::string& final_name);
  static void SweepStaging(const std::filesystem::path& parent, const std::string& final_name);
  absl::Status Build(const Runtime& runtime, const std::vector<std::string>& packages,
                     const std::filesystem::path& staging, const std::filesystem::path& final_dir) const;
  // What a runtime that is a venv gives a job's environment (package_cache.cc).
  struct RuntimeSite {
    std::string version;  // "3.12"
    std::string pth;      // the .pth line; "" when the runtime is not a venv
  };
  absl::StatusOr<RuntimeSite> ProbeRuntime(const Runtime& runtime, const std::filesystem::path& staging,
                                           const std::vector<std::string>& readable) const;
  absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv, const common::CommandOptions& options,
                                            const std::string& writable,
                                            const std::vector<std::string>& readable) const;

  const std::string root_;
  BuildRunner runner_;
  std::string helpers_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<std::mutex>> locks_;
  DigestMemo digests_;  // guarded by mu_
};

}  // namespace mle::runtime
