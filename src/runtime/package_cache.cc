#include "runtime/package_cache.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "rundir/file_io.h"

namespace mle::runtime {

namespace fs = std::filesystem;

namespace {

bool UnsafePath(const std::string& p) {
  if (p.empty()) return false;
  if (p[0] == '/') return true;
  for (absl::string_view part : absl::StrSplit(p, '/')) {
    if (part == "..") return true;
  }
  return false;
}

// Turns pip's output into one sentence a user can act on.
std::string ExplainPipFailure(const std::string& output) {
  std::smatch m;
  static const std::regex kMissing(R"(Could not find a version that satisfies the requirement ([^\s(]+)(?: \(from ([^\s)]+)\))?)");
  if (std::regex_search(output, m, kMissing)) {
    return absl::StrCat("a dependency is missing: ", m[1].str(),
                        m[2].matched ? absl::StrCat(" (required by ", m[2].str(), ")") : "",
                        ". mlengine installs packages without an index: list the dependency's own archive in "
                        "--packages, or use a runtime that has it installed.");
  }
  static const std::regex kNoMatching(R"(No matching distribution found for ([^\s]+))");
  if (std::regex_search(output, m, kNoMatching)) {
    return absl::StrCat("a dependency is missing: ", m[1].str(),
                        ". mlengine installs packages without an index: list the dependency's own archive in "
                        "--packages, or use a runtime that has it installed.");
  }
  // Otherwise the last lines pip printed.
  std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipWhitespace());
  size_t from = lines.size() > 6 ? lines.size() - 6 : 0;
  std::string tail;
  for (size_t i = from; i < lines.size(); ++i) absl::StrAppend(&tail, "\n  ", lines[i]);
  return absl::StrCat("pip failed:", tail);
}

// Rewrites FROM/bin/ to TO/bin/ in the scripts (files starting "#!") in
// `bin`. pip names the interpreter in the first line, or, for a path too long
// for one, in a /bin/sh line that execs it.
absl::Status RepointScripts(const fs::path& bin, const std::string& from, const std::string& to) {
  const std::string old_bin = absl::StrCat(from, "/bin/"), new_bin = absl::StrCat(to, "/bin/");
  std::error_code ec;
  for (fs::directory_iterator it(bin, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file() || it->is_symlink()) continue;
    auto text = rundir::ReadFile(it->path().string());
    if (!text.ok() || !absl::StartsWith(*text, "#!") || !absl::StrContains(*text, old_bin)) continue;
    const std::string rewritten = absl::StrReplaceAll(*text, {{old_bin, new_bin}});
    if (auto s = rundir::WriteFileAtomically(it->path().string(), rewritten, 0755); !s.ok()) return s;
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot list ", bin.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status PackageCache::CheckArchive(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (absl::EndsWith(name, ".py")) return absl::OkStatus();  // a plain module, pip refuses it itself
  archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  if (archive_read_open_filename(a, path.c_str(), 1 << 16) != ARCHIVE_OK) {
    std::string err = archive_error_string(a) ? archive_error_string(a) : "unknown format";
    archive_read_free(a);
    return absl::FailedPreconditionError(absl::StrCat("The package ", name, " is not a readable archive: ", err));
  }
  absl::Status result = absl::OkStatus();
  archive_entry* entry;
  int r;
  // ARCHIVE_WARN still gives an entry (e.g. an odd pax header); it is checked
  // like any other. Anything but the end of the archive after the loop means
  // entries were left unread: pip might still unpack them, so it is refused.
  while ((r = archive_read_next_header(a, &entry)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    const char* p = archive_entry_pathname(entry);
    std::string entry_path = p ? p : "";
    const char* link = archive_entry_symlink(entry);
    const char* hard = archive_entry_hardlink(entry);
    if (UnsafePath(entry_path)) {
      result = absl::FailedPreconditionError(absl::StrCat(
          "The package ", name, " contains the unsafe path \"", entry_path,
          "\" (absolute, or leaving the archive with \"..\"); mlengine refuses to install it."));
      break;
    }
    if ((link && (link[0] == '/' || UnsafePath(link) ||
                  UnsafePath((fs::path(entry_path).parent_path() / link).lexically_normal().string()))) ||
        (hard && UnsafePath(hard))) {
      result = absl::FailedPreconditionError(absl::StrCat("The package ", name, " contains the link \"", entry_path,
                                                          "\" pointing outside the archive; mlengine refuses to "
                                                          "install it."));
      break;
    }
    archive_read_data_skip(a);
  }
  if (result.ok() && r != ARCHIVE_EOF) {
    result = absl::FailedPreconditionError(
        absl::StrCat("The package ", name, " is not a readable archive: ",
                     archive_error_string(a) ? archive_error_string(a) : "it ends in the middle of an entry"));
  }
  archive_read_free(a);
  return result;
}

// The mtime of an environment's .ready, nullopt when it has none.
std::optional<absl::Time> PackageCache::LastUse(const fs::path& ready) {
  struct stat st {};
  if (::stat(ready.c_str(), &st) != 0) return std::nullopt;
  return absl::TimeFromTimespec(st.st_mtim);
}

// Sets .ready's mtime to now: false when there is none (not built).
bool PackageCache::MarkUsed(const fs::path& ready) {
  if (::utimensat(AT_FDCWD, ready.c_str(), nullptr, 0) == 0) return true;
  return errno != ENOENT && fs::exists(ready);  // marked or not, it is there (a read-only cache)
}

std::mutex* PackageCache::LockFor(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& m = locks_[key];
  if (!m) m = std::make_unique<std::mutex>();
  return m.get();
}

std::string PackageCache::StagingName(const std::string& final_name) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(".", final_name, ".", ::getpid(), "-", counter.fetch_add(1), ".staging");
}

// `final_name` empty: every environment's.
void PackageCache::SweepStaging(const fs::path& parent, const std::string& final_name) {
  // Best effort: an orphan still writing into one makes removal fail now;
  // the next build of the same packages, or the next start, tries again.
  const std::string prefix = final_name.empty() ? "." : absl::StrCat(".", final_name, ".");
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".staging")) continue;
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

std::vector<PackageCache::CachedEnvironment> PackageCache::Environments() const {
  std::vector<CachedEnvironment> out;
  std::error_code ec;
  for (fs::directory_iterator runtimes(root_, ec), end; !ec && runtimes != end; runtimes.increment(ec)) {
    std::error_code ec2;
    if (!runtimes->is_directory(ec2) || runtimes->is_symlink(ec2)) continue;
    for (fs::directory_iterator it(runtimes->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
      if (it->path().filename().string().front() == '.') continue;  // staging
      if (auto used = LastUse(it->path() / ".ready")) out.push_back({it->path().string(), *used});
    }
  }
  return out;
}

void PackageCache::Touch(const std::string& dir) {
  std::lock_guard<std::mutex> guard(*LockFor(dir));
  MarkUsed(fs::path(dir) / ".ready");
}

absl::StatusOr<bool> PackageCache::Remove(const std::string& dir, absl::Time last_used) {
  const fs::path path(dir);
  if (path.parent_path().parent_path() != fs::path(root_)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, " is not an environment of ", root_));
  }
  std::lock_guard<std::mutex> guard(*LockFor(dir));
  if (LastUse(path / ".ready") != last_used) return false;
  const fs::path aside = path.parent_path() / StagingName(path.filename().string());
  std::error_code ec;
  fs::rename(path, aside, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot move aside ", dir, ": ", ec.message()));
  fs::remove_all(aside, ec);  // what is left is swept with the staging directories
  return true;
}

void PackageCache::RemoveLeftovers() {
  std::error_code ec;
  for (fs::directory_iterator runtimes(root_, ec), end; !ec && runtimes != end; runtimes.increment(ec)) {
    if (runtimes->is_directory()) SweepStaging(runtimes->path(), "");
  }
}

absl::StatusOr<common::CommandResult> PackageCache::Run(const std::vector<std::string>& argv,
                                                        const common::CommandOptions& options,
                                                        const std::string& writable,
                                                        const std::vector<std::string>& readable) const {
  if (runner_) return runner_(argv, options, writable, readable);
  return common::RunCommand(argv, options);
}

// A runtime that is itself a virtual environment (a venv holding torch, as
// on many GPU hosts): a venv made from it is based on its base interpreter
// and `--system-site-packages` would show the base's packages, not the
// runtime's. So the job's environment is made without them, and a .pth file
// adds the site directories the runtime itself sees (its own, and the
// base's when it includes them), through site.addsitedir so that their own
// .pth files count too: after the job's packages, in the runtime's order
// (those that exist: site lists some that need not, and adds only those).
// Empty `pth` for a runtime that is not a venv.
absl::StatusOr<PackageCache::RuntimeSite> PackageCache::ProbeRuntime(const Runtime& runtime,
                                                                     const fs::path& staging,
                                                                     const std::vector<std::string>& readable) const {
  common::CommandOptions options;
  options.timeout = absl::Minutes(1);
  auto probe = Run({runtime.python, "-I", "-c",
                    "import os, site, sys\n"
                    "print('%d.%d' % sys.version_info[:2])\n"
                    "if sys.prefix != sys.base_prefix:\n"
                    "    dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]\n"
                    "    print('import site; list(map(site.addsitedir, %r))' % (dirs,))\n"},
                   options, staging.string(), readable);
  if (!probe.ok()) return probe.status();
  if (probe->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Creating the job's Python environment failed: ", runtime.python, " -c: ", probe->output));
  }
  RuntimeSite site;
  const std::vector<std::string> lines = absl::StrSplit(probe->output, '\n', absl::SkipWhitespace());
  if (!lines.empty()) site.version = lines[0];
  if (lines.size() == 2 && absl::StartsWith(lines[1], "import site;")) site.pth = lines[1] + "\n";
  return site;
}

absl::Status PackageCache::Build(const Runtime& runtime, const std::vector<std::string>& packages,
                                 const fs::path& staging, const fs::path& final_dir) const {
  if (auto s = rundir::CreateDirectories(staging.string()); !s.ok()) return s;
  std::vector<std::string> readable;
  for (const auto& p : packages) readable.push_back(fs::path(p).parent_path().string());
  if (!helpers_.empty()) readable.push_back(helpers_);
  common::CommandOptions venv_options;
  venv_options.timeout = absl::Minutes(2);
  absl::StatusOr<RuntimeSite> site = ProbeRuntime(runtime, staging, readable);
  if (!site.ok()) return site.status();
  std::vector<std::string> make_venv = {runtime.python, "-m", "venv", "--without-pip"};
  if (site->pth.empty()) make_venv.push_back("--system-site-packages");
  make_venv.push_back(staging.string());
  auto venv = Run(make_venv, venv_options, staging.string(), readable);
  if (!venv.ok()) return venv.status();
  if (venv->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat("Creating the job's Python environment failed: ", venv->output));
  }
  if (!site->pth.empty()) {
    const fs::path pth = staging / "lib" / ("python" + site->version) / "site-packages" / "_mlengine_runtime.pth";
    if (auto s = rundir::WriteFileAtomically(pth.string(), site->pth); !s.ok()) return s;
  }
  if (!helpers_.empty() && !site->version.empty()) {
    // After the runtime's own (.pth files are read in name order): a
    // runtime's own hypertune comes first.
    const fs::path pth = staging / "lib" / ("python" + site->version) / "site-packages" / "mlengine_helpers.pth";
    if (auto s = rundir::WriteFileAtomically(pth.string(), helpers_ + "\n"); !s.ok()) return s;
  }
  const fs::path python = staging / "bin" / "python";
  std::vector<std::string> pip = {python.string(), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                                  "--disable-pip-version-check", "--no-input", "--no-warn-script-location"};
  // Dependencies a package declares must come from the other packages given.
  for (const auto& p : packages) pip.push_back("--find-links=" + fs::path(p).parent_path().string());
  for (const auto& p : packages) pip.push_back(p);
  auto env_vars = common::CurrentEnvironment();
  env_vars["PIP_NO_CACHE_DIR"] = "1";
  env_vars["PYTHONDONTWRITEBYTECODE"] = "1";
  common::CommandOptions pip_options;
  pip_options.cwd = staging.string();
  pip_options.env = env_vars;
  auto install = Run(pip, pip_options, staging.string(), readable);
  if (!install.ok()) return install.status();
  if (install->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Installing the job's packages failed: ", ExplainPipFailure(install->output)));
  }
  // A venv runs from wherever it lies, but the scripts pip wrote name their
  // interpreter by the staging path: point them at the published one.
  if (auto s = RepointScripts(staging / "bin", staging.string(), final_dir.string()); !s.ok()) return s;
  // Durable before it can be marked ready.
  return rundir::SyncFilesystemOf(staging.string());
}

namespace {

// The stamps of the open package files; none when one cannot be read.
std::optional<std::vector<FileStamp>> StampsOf(const std::vector<PackageFile>& packages) {
  std::vector<FileStamp> out;
  for (const auto& p : packages) {
    struct stat st;
    if (::fstat(p.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    out.push_back({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
                   int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                   int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec});
  }
  return out;
}

}  // namespace

std::optional<std::string> DigestMemo::Find(const std::vector<FileStamp>& stamps) const {
  auto it = digests_.find(stamps);
  if (it == digests_.end()) return std::nullopt;
  return it->second;
}

void DigestMemo::Remember(const std::vector<FileStamp>& stamps, int64_t hashed_at_ns, const std::string& digest) {
  for (const auto& s : stamps) {
    if (s.ctime_ns > hashed_at_ns - kSettledNs) return;
  }
  if (digests_.size() >= kMaxEntries) digests_.clear();
  digests_[stamps] = digest;
}

absl::StatusOr<PreparedEnvironment> PackageCache::Prepare(const Runtime& runtime,
                                                          const std::vector<PackageFile>& packages) {
  PreparedEnvironment env;
  env.python = runtime.python;
  if (packages.empty()) return env;
  std::vector<fs::path> opened;  // each open file, whatever its path now holds
  for (const auto& p : packages) opened.push_back(absl::StrCat("/proc/self/fd/", p.fd));
  auto stamps = StampsOf(packages);
  std::optional<std::string> known;
  if (stamps) {
    std::lock_guard<std::mutex> guard(mu_);
    known = digests_.Find(*stamps);
  }
  absl::StatusOr<std::string> digest;
  if (known) {
    digest = *std::move(known);
  } else {
    const int64_t hashed_at = absl::ToUnixNanos(absl::Now());  // the clock file times are kept in
    digest = common::Sha256HexOfFiles(opened);
    if (!digest.ok()) return digest.status();
    // Still as they were when hashed (a write during the hash would show):
    // then the digest is theirs.
    if (stamps && StampsOf(packages) == stamps) {
      std::lock_guard<std::mutex> guard(mu_);
      digests_.Remember(*stamps, hashed_at, *digest);
    }
  }
  env.digest = *digest;
  const fs::path dir = fs::path(root_) / runtime.name / digest->substr(0, 32);
  env.dir = dir.string();
  env.python = (dir / "bin" / "python").string();
  // Handed out under the environment's lock, marked used (its .ready's
  // mtime): retention's Remove takes the same lock and spares one used
  // since it looked.
  std::lock_guard<std::mutex> guard(*LockFor(dir.string()));
  if (MarkUsed(dir / ".ready")) {
    env.cache_hit = true;
    return env;
  }
  // Built aside, published by one rename: a build cut short (the server
  // killed, its pip left running as an orphan) only ever writes into its own
  // staging directory, never into the one a later build or a job uses.
  if (auto s = rundir::CreateDirectories(dir.parent_path().string()); !s.ok()) return s;
  SweepStaging(dir.parent_path(), dir.filename().string());
  // The packages are checked and built from copies of what was hashed, in
  // a staging directory of their own (root's: no job writes there).
  const fs::path inputs = dir.parent_path() / StagingName(dir.filename().string());
  std::error_code ec;
  absl::Status copied = absl::OkStatus();
  std::vector<std::string> copies;
  for (size_t i = 0; i < packages.size() && copied.ok(); ++i) {
    const fs::path to = inputs / std::to_string(i) / packages[i].name;
    copied = rundir::CreateDirectories(to.parent_path().string(), rundir::Durability::kProcessCrash);
    if (copied.ok() && !fs::copy_file(opened[i], to, ec)) {
      copied = absl::UnavailableError(absl::StrCat("cannot copy the package ", packages[i].name, ": ", ec.message()));
    }
    if (copied.ok()) copied = CheckArchive(to.string());
    copies.push_back(to.string());
  }
  // What was copied is what was hashed, or the environment named by the
  // digest would hold other code: a job that may write the package's
  // bucket could rewrite it in place between the two reads, and every
  // later job whose packages have that digest would run what it wrote.
  if (copied.ok()) {
    auto copied_digest = common::Sha256HexOfFiles(std::vector<fs::path>(copies.begin(), copies.end()));
    if (!copied_digest.ok()) {
      copied = copied_digest.status();
    } else if (*copied_digest != *digest) {
      copied = absl::FailedPreconditionError(
          "A package changed while it was being installed (something rewrote it in its bucket); submit the job "
          "again once it no longer changes.");
    }
  }
  auto built = copied;
  const fs::path staging = dir.parent_path() / StagingName(dir.filename().string());
  if (built.ok()) built = Build(runtime, copies, staging, dir);
  fs::remove_all(inputs, ec);
  if (built.ok()) built = rundir::WriteFileAtomically((staging / ".ready").string(), *digest + "\n");
  if (built.ok() && fs::exists(dir, ec)) {
    // Left by a version that built in place: never marked ready, so unused.
    fs::rename(dir, dir.parent_path() / StagingName(dir.filename().string()), ec);
    if (ec) built = absl::UnavailableError(absl::StrCat("cannot move aside ", dir.string(), ": ", ec.message()));
  }
  if (built.ok()) {
    fs::rename(staging, dir, ec);
    if (ec) built = absl::UnavailableError(absl::StrCat("cannot publish ", dir.string(), ": ", ec.message()));
  }
  if (built.ok()) built = rundir::SyncFilesystemOf(dir.string());
  if (!built.ok()) {
    fs::remove_all(staging, ec);
    return built;
  }
  SweepStaging(dir.parent_path(), dir.filename().string());  // what was moved aside
  return env;
}

}  // namespace mle::runtime
