#include "backup/backup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/run_layout.h"
#include "common/time_format.h"
#include "rundir/file_io.h"
#include "rundir/replica_files.h"

namespace mle::backup {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSummaryFile[] = "backup.json";
constexpr char kDatabase[] = "mlengine.db";
constexpr char kToken[] = "admin.token";

absl::Status IoError(const std::string& what, const std::error_code& ec) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ec.message()));
}

// `dir` is absolute and missing or an empty directory: made (mode 0700).
absl::Status PrepareEmptyDirectory(const std::string& dir, const char* role) {
  if (dir.empty() || dir.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("the ", role, " must be an absolute path (got \"", dir, "\")"));
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory; the ", role,
                                                        " must be a new or empty directory"));
    }
    if (!fs::is_empty(dir, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " is not empty; the ", role,
                                                        " must be a new or empty directory, so nothing in it is "
                                                        "overwritten or mixed in"));
    }
  }
  if (ec) return IoError(dir, ec);
  if (auto s = rundir::CreateDirectories(dir); !s.ok()) return s;
  if (::chmod(dir.c_str(), 0700) != 0) return absl::UnavailableError(absl::StrCat("chmod ", dir));
  return absl::OkStatus();
}

// Whether `inner` is `outer` or lies below it (after resolving links of
// what exists).
bool Within(const std::string& inner, const std::string& outer) {
  std::error_code ec;
  const std::string a = fs::weakly_canonical(inner, ec).string();
  const std::string b = fs::weakly_canonical(outer, ec).string();
  return a == b || absl::StartsWith(a, b + "/");
}

// How often an object that changed while it was read is read again.
constexpr int kObjectTries = 3;

// One object into `to`, whole and as it was described. A trainer may write
// a bucket's files in place: an object rewritten while it is read reads
// as other bytes than described (Import refuses them), one swapped for a
// link is refused. Each is read again; one that never holds still is left
// out and named, and the backup goes on. An error of `to` ends it.
absl::Status CopyObject(const buckets::BucketStore& from, buckets::BucketStore& to, const std::string& bucket,
                        const std::string& name, Summary* summary) {
  absl::Status last;
  for (int attempt = 0; attempt < kObjectTries; ++attempt) {
    auto opened = from.OpenObject(bucket, name, /*compute_checksums=*/true);
    if (absl::IsNotFound(opened.status())) return absl::OkStatus();  // deleted since it was listed
    if (!opened.ok()) {
      last = opened.status();
      continue;
    }
    auto copied = to.Import(opened->info, opened->fd.get());
    if (copied.ok()) {
      ++summary->objects;
      summary->object_bytes += copied->size;
      return absl::OkStatus();
    }
    if (!absl::IsInvalidArgument(copied.status())) {
      return absl::Status(copied.status().code(),
                          absl::StrCat("gs://", bucket, "/", name, ": ", copied.status().message()));
    }
    last = copied.status();
  }
  summary->skipped_objects.push_back(absl::StrCat("gs://", bucket, "/", name, " (", last.message(), ")"));
  return absl::OkStatus();
}

// Copies each object of `from` into `to` (CopyObject).
absl::Status CopyObjects(const buckets::BucketStore& from, buckets::BucketStore& to, Summary* summary) {
  auto list = from.ListBuckets();
  if (!list.ok()) return list.status();
  for (const buckets::BucketInfo& bucket : *list) {
    if (auto made = to.EnsureBucket(bucket.name); !made.ok()) return made.status();
    ++summary->buckets;
    buckets::ListObjectsRequest request;
    while (true) {
      auto page = from.List(bucket.name, request);
      if (!page.ok()) return page.status();
      for (const buckets::ObjectInfo& item : page->items) {
        if (auto s = CopyObject(from, to, bucket.name, item.name, summary); !s.ok()) return s;
      }
      if (page->next_page_token.empty()) break;
      request.page_token = page->next_page_token;
    }
  }
  return absl::OkStatus();
}

// The bytes of the open file `from` into a new file `to`.
absl::Status CopyFile(int from, const std::string& to, int64_t* bytes) {
  buckets::ScopedFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out.valid()) return absl::UnavailableError(absl::StrCat("cannot create ", to, ": ", std::strerror(errno)));
  std::vector<char> buf(1 << 16);
  while (true) {
    const ssize_t n = ::read(from, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("cannot read for ", to, ": ", std::strerror(errno)));
    if (n == 0) return absl::OkStatus();
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return absl::UnavailableError(absl::StrCat("cannot write ", to, ": ", std::strerror(errno)));
      done += w;
    }
    *bytes += n;
  }
}

// Copies the run records in the directory open as `from` into `to` (made):
// every regular file and directory but each replica's work and tmp
// directories (RUNS/PROJECT/JOB/REPLICA/{work,tmp}, `depth` 3: the
// trainer's scratch, not a record). Through descriptors only, each name
// opened without following a link: part of a run (its hypertune
// directory) is the job's own, and its trainer may swap a name for a link
// or a pipe at any moment; the copy never leaves the tree, reads only
// regular files and never waits on one.
absl::Status CopyTree(int from, const fs::path& to, int depth, Summary* summary) {
  if (auto s = rundir::CreateDirectories(to.string()); !s.ok()) return s;
  DIR* dir = ::fdopendir(::dup(from));
  if (dir == nullptr) return absl::UnavailableError(absl::StrCat("cannot list for ", to.string()));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : names) {
    struct stat st;
    if (::fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone since it was listed
    if (S_ISDIR(st.st_mode)) {
      if (depth == 3 && (name == "work" || name == "tmp")) continue;
      buckets::ScopedFd sub(::openat(from, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) continue;  // gone, or no longer a directory
      if (auto s = CopyTree(sub.get(), to / name, depth + 1, summary); !s.ok()) return s;
    } else if (S_ISREG(st.st_mode)) {
      buckets::ScopedFd file(::openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!file.valid() || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (auto s = CopyFile(file.get(), (to / name).string(), &summary->run_bytes); !s.ok()) return s;
      ++summary->run_files;
    }
  }
  return absl::OkStatus();
}

absl::Status CopyRuns(const std::string& from, const std::string& to, Summary* summary) {
  buckets::ScopedFd runs(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!runs.valid()) {
    if (errno == ENOENT) return absl::OkStatus();  // no job ever ran
    return absl::UnavailableError(absl::StrCat("cannot open ", from, ": ", std::strerror(errno)));
  }
  return CopyTree(runs.get(), to, 0, summary);
}

// The restored runs name no process of the machine the backup was taken
// on: a job running then is, to the restored mlengined, one whose start was
// undone (its replicas that had not ended are gone), so it runs again from
// the start; its pids and uid, which may name another program here, or
// the still running original, are dropped from its manifest.
absl::Status ForgetProcesses(const std::string& runs) {
  std::error_code ec;
  if (!fs::exists(runs, ec)) return absl::OkStatus();
  std::vector<std::string> run_dirs;
  for (fs::recursive_directory_iterator it(runs, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && rundir::ManifestPath(it->path().parent_path().string()) == it->path().string()) {
      run_dirs.push_back(it->path().parent_path().string());
    }
  }
  if (ec) return IoError(runs, ec);
  for (const std::string& dir : run_dirs) {
    auto read = rundir::ReadManifest(dir);
    if (!read.ok() || !read->has_value()) continue;  // not a local run's (a Slurm job's has its own records)
    rundir::RunManifest manifest = **read;
    bool all_ended = true;
    for (auto& replica : manifest.replicas) {
      replica.pid = 0;
      all_ended = all_ended && fs::exists(common::ReplicaExitPath(dir, replica.task), ec);
    }
    manifest.uid = 0;
    if (!all_ended) manifest.stage = rundir::RunManifest::Stage::kStarting;
    if (auto s = rundir::WriteManifest(dir, manifest); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CopyPrivateFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return absl::OkStatus();
  if (!fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec)) return IoError("copy " + from, ec);
  if (::chmod(to.c_str(), 0600) != 0) return absl::UnavailableError(absl::StrCat("chmod ", to));
  return absl::OkStatus();
}

}  // namespace

json SummaryJson(const Summary& s) {
  return {{"schemaVersion", s.database.schema_version},
          {"jobs", s.database.jobs},
          {"projects", s.database.projects},
          {"records", s.database.records},
          {"buckets", s.buckets},
          {"objects", s.objects},
          {"objectBytes", s.object_bytes},
          {"skippedObjects", s.skipped_objects},
          {"runFiles", s.run_files},
          {"runBytes", s.run_bytes},
          {"seconds", absl::ToDoubleSeconds(s.took)}};
}

Summary SummaryFromJson(const json& o) {
  Summary s;
  if (!o.is_object()) return s;
  s.database.schema_version = o.value("schemaVersion", 0);
  s.database.jobs = o.value("jobs", int64_t{0});
  s.database.projects = o.value("projects", int64_t{0});
  s.database.records = o.value("records", int64_t{0});
  s.buckets = o.value("buckets", int64_t{0});
  s.objects = o.value("objects", int64_t{0});
  s.object_bytes = o.value("objectBytes", int64_t{0});
  if (auto it = o.find("skippedObjects"); it != o.end() && it->is_array()) {
    for (const auto& name : *it) {
      if (name.is_string()) s.skipped_objects.push_back(name.get<std::string>());
    }
  }
  s.run_files = o.value("runFiles", int64_t{0});
  s.run_bytes = o.value("runBytes", int64_t{0});
  s.took = absl::Seconds(o.value("seconds", 0.0));
  return s;
}

absl::StatusOr<Summary> WriteBackup(db::Store& store, const buckets::BucketStore& objects,
                                    const std::string& data_dir, const std::string& to) {
  const absl::Time start = absl::Now();
  if (!to.empty() && to.front() == '/' && Within(to, data_dir)) {
    return absl::InvalidArgumentError(absl::StrCat("the backup's directory ", to, " lies in the data directory ",
                                                   data_dir, "; put it elsewhere (another disk, ideally)"));
  }
  if (auto s = PrepareEmptyDirectory(to, "backup's directory"); !s.ok()) return s;
  Summary summary;
  const std::string db_copy = (fs::path(to) / kDatabase).string();
  if (auto s = store.BackupTo(db_copy); !s.ok()) return s;
  if (::chmod(db_copy.c_str(), 0600) != 0) return absl::UnavailableError(absl::StrCat("chmod ", db_copy));
  auto described = db::DescribeDatabase(db_copy);
  if (!described.ok()) return described.status();
  summary.database = *described;

  auto copy = buckets::BucketStore::Open((fs::path(to) / "buckets").string());
  if (!copy.ok()) return copy.status();
  if (auto s = CopyObjects(objects, **copy, &summary); !s.ok()) return s;
  if (auto s = CopyRuns((fs::path(data_dir) / "runs").string(), (fs::path(to) / "runs").string(), &summary);
      !s.ok()) {
    return s;
  }
  if (auto s = CopyPrivateFile((fs::path(data_dir) / kToken).string(), (fs::path(to) / kToken).string()); !s.ok()) {
    return s;
  }
  // Whole once this is there: everything before it on disk first.
  if (auto s = rundir::SyncFilesystemOf(to); !s.ok()) return s;
  summary.took = absl::Now() - start;
  json described_json = SummaryJson(summary);
  described_json["format"] = kFormat;
  described_json["createTime"] = common::FormatRfc3339(absl::Now());
  if (auto s = rundir::WriteFileAtomically((fs::path(to) / kSummaryFile).string(), described_json.dump(2) + "\n",
                                           0600);
      !s.ok()) {
    return s;
  }
  return summary;
}

absl::StatusOr<Summary> ReadSummary(const std::string& from) {
  const std::string path = (fs::path(from) / kSummaryFile).string();
  auto text = rundir::ReadFile(path);
  if (!text.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(from, " is not a whole mlengine backup: it has no ",
                                                      kSummaryFile, " (a backup writes it last)"));
  }
  json o = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object() || o.value("format", "") != kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " does not describe a backup this mlengined reads (format ", kFormat, ")"));
  }
  Summary s = SummaryFromJson(o);
  if (s.database.schema_version > db::LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the backup in ", from, " was made by a later mlengined (database schema ", s.database.schema_version,
        "; this one knows up to ", db::LatestSchemaVersion(), "): restore it with that mlengined or a later one"));
  }
  return s;
}

absl::StatusOr<Summary> RestoreBackup(const std::string& from, const std::string& data_dir) {
  const absl::Time start = absl::Now();
  auto expected = ReadSummary(from);
  if (!expected.ok()) return expected.status();
  if (auto s = PrepareEmptyDirectory(data_dir, "data directory to restore into"); !s.ok()) return s;
  Summary summary;
  const std::string db_path = (fs::path(data_dir) / kDatabase).string();
  if (auto s = CopyPrivateFile((fs::path(from) / kDatabase).string(), db_path); !s.ok()) return s;
  auto described = db::DescribeDatabase(db_path);
  if (!described.ok()) return described.status();
  if (described->jobs != expected->database.jobs || described->schema_version != expected->database.schema_version) {
    return absl::DataLossError(absl::StrCat("the backup's database holds ", described->jobs, " jobs (schema ",
                                            described->schema_version, ") but its ", kSummaryFile, " says ",
                                            expected->database.jobs, " (schema ", expected->database.schema_version,
                                            "): the backup was changed or damaged"));
  }
  summary.database = *described;

  auto source = buckets::BucketStore::Open((fs::path(from) / "buckets").string());
  if (!source.ok()) return source.status();
  auto target = buckets::BucketStore::Open((fs::path(data_dir) / "buckets").string());
  if (!target.ok()) return target.status();
  if (auto s = CopyObjects(**source, **target, &summary); !s.ok()) return s;
  if (summary.objects != expected->objects) {
    return absl::DataLossError(absl::StrCat("the backup holds ", summary.objects, " objects but its ", kSummaryFile,
                                            " says ", expected->objects, ": the backup was changed or damaged"));
  }
  if (auto s = CopyRuns((fs::path(from) / "runs").string(), (fs::path(data_dir) / "runs").string(), &summary);
      !s.ok()) {
    return s;
  }
  if (auto s = ForgetProcesses((fs::path(data_dir) / "runs").string()); !s.ok()) return s;
  if (auto s = CopyPrivateFile((fs::path(from) / kToken).string(), (fs::path(data_dir) / kToken).string()); !s.ok()) {
    return s;
  }
  if (auto s = rundir::SyncFilesystemOf(data_dir); !s.ok()) return s;
  summary.took = absl::Now() - start;
  return summary;
}

}  // namespace mle::backup
