// Fuzzes the check mlengine runs on a trainer package before pip sees it
// (PackageCache::CheckArchive, libarchive with every filter and format). The
// bytes are handed over as a file (a memfd, as /proc/self/fd/N). Property:
// an archive the check accepts is read to its end by libarchive, and no entry
// of it, link or hard link, would land outside the directory it is unpacked
// in (judged here independently, by lexical normalization).
#include <archive.h>
#include <archive_entry.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/package_cache.h"

namespace {

namespace fs = std::filesystem;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "package_archive_fuzz: %s\n", what.c_str());
  std::abort();
}

// Whether `p`, relative to the directory `dir` inside the unpack root, stays
// inside the root.
bool Inside(const fs::path& dir, const std::string& p) {
  if (p.empty()) return true;
  if (p[0] == '/') return false;
  const fs::path full = (fs::path("/root") / dir / p).lexically_normal();
  const std::string s = full.string();
  return s == "/root" || s == "/root/" || s.rfind("/root/", 0) == 0;
}

// The independent judgement of an accepted archive.
void CheckAccepted(const std::string& path) {
  archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  if (archive_read_open_filename(a, path.c_str(), 1 << 16) != ARCHIVE_OK) {
    archive_read_free(a);
    Fail("an archive libarchive cannot open was accepted");
  }
  archive_entry* entry;
  int r;
  while ((r = archive_read_next_header(a, &entry)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    const char* p = archive_entry_pathname(entry);
    const std::string name = p ? p : "";
    const char* link = archive_entry_symlink(entry);
    const char* hard = archive_entry_hardlink(entry);
    if (!Inside("", name)) Fail("an accepted archive has the entry " + name);
    if (link && !Inside(fs::path(name).parent_path(), link)) Fail("an accepted archive links " + name + " to " + link);
    if (hard && !Inside("", hard)) Fail("an accepted archive hard-links " + name + " to " + hard);
    archive_read_data_skip(a);
  }
  const std::string error = archive_error_string(a) ? archive_error_string(a) : "";
  archive_read_free(a);
  if (r != ARCHIVE_EOF) Fail("an archive libarchive cannot read to its end was accepted: " + error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("package", MFD_CLOEXEC);
  if (fd < 0) Fail("memfd_create failed");
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) Fail("writing the memfd");
  const absl::Status s = mle::runtime::PackageCache::CheckArchive(path);
  if (s.ok()) {
    CheckAccepted(path);
  } else if (s.code() != absl::StatusCode::kFailedPrecondition) {
    Fail("CheckArchive failed with " + s.ToString());
  }
  return 0;
}
