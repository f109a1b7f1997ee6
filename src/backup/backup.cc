#include "backup/backup.h"

#include <sys/stat.h>

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

// Copies each object of `from` into `to`, whole and as it was described.
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
        auto opened = from.OpenObject(bucket.name, item.name, /*compute_checksums=*/true);
        if (absl::IsNotFound(opened.status())) continue;  // deleted since it was listed
        if (!opened.ok()) return opened.status();
        auto copied = to.Import(opened->info, opened->fd.get());
        if (!copied.ok()) {
          return absl::Status(copied.status().code(), absl::StrCat("gs://", bucket.name, "/", item.name, ": ",
                                                                   copied.status().message()));
        }
        ++summary->objects;
        summary->object_bytes += copied->size;
      }
      if (page->next_page_token.empty()) break;
      request.page_token = page->next_page_token;
    }
  }
  return absl::OkStatus();
}

// Copies the run records under `from` into `to`: every regular file and
// directory but each replica's work and tmp directories (RUNS/PROJECT/JOB/
// REPLICA/{work,tmp}: the trainer's scratch, not a record).
absl::Status CopyRuns(const std::string& from, const std::string& to, Summary* summary) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return absl::OkStatus();
  if (auto s = rundir::CreateDirectories(to); !s.ok()) return s;
  fs::recursive_directory_iterator it(from, fs::directory_options::skip_permission_denied, ec);
  if (ec) return IoError(from, ec);
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return IoError(from, ec);
    const fs::path relative = it->path().lexically_relative(from);
    const fs::path target = fs::path(to) / relative;
    const fs::file_status status = it->symlink_status(ec);
    if (ec) {
      ec.clear();  // gone since it was listed (a job's directory cleaned up)
      continue;
    }
    if (fs::is_directory(status)) {
      const std::string name = relative.filename().string();
      if (it.depth() == 3 && (name == "work" || name == "tmp")) {
        it.disable_recursion_pending();
        continue;
      }
      fs::create_directories(target, ec);
      if (ec) return IoError(target.string(), ec);
      continue;
    }
    if (!fs::is_regular_file(status)) continue;  // links, sockets, pipes
    if (!fs::copy_file(it->path(), target, fs::copy_options::overwrite_existing, ec)) {
      if (!fs::exists(it->path())) {
        ec.clear();
        continue;
      }
      return IoError(absl::StrCat("copy ", it->path().string()), ec);
    }
    ++summary->run_files;
    summary->run_bytes += static_cast<int64_t>(fs::file_size(target, ec));
    ec.clear();
  }
  return absl::OkStatus();
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

void CountDatabase(const db::DatabaseSummary& db, Summary* summary) {
  summary->schema_version = db.schema_version;
  summary->jobs = db.jobs;
  summary->projects = db.projects;
  summary->records = db.records;
}

}  // namespace

json SummaryJson(const Summary& s) {
  return {{"schemaVersion", s.schema_version},
          {"jobs", s.jobs},
          {"projects", s.projects},
          {"records", s.records},
          {"buckets", s.buckets},
          {"objects", s.objects},
          {"objectBytes", s.object_bytes},
          {"runFiles", s.run_files},
          {"runBytes", s.run_bytes},
          {"seconds", absl::ToDoubleSeconds(s.took)}};
}

Summary SummaryFromJson(const json& o) {
  Summary s;
  if (!o.is_object()) return s;
  s.schema_version = o.value("schemaVersion", 0);
  s.jobs = o.value("jobs", int64_t{0});
  s.projects = o.value("projects", int64_t{0});
  s.records = o.value("records", int64_t{0});
  s.buckets = o.value("buckets", int64_t{0});
  s.objects = o.value("objects", int64_t{0});
  s.object_bytes = o.value("objectBytes", int64_t{0});
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
  CountDatabase(*described, &summary);

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
  if (s.schema_version > db::LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the backup in ", from, " was made by a later mlengined (database schema ", s.schema_version,
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
  if (described->jobs != expected->jobs || described->schema_version != expected->schema_version) {
    return absl::DataLossError(absl::StrCat("the backup's database holds ", described->jobs, " jobs (schema ",
                                            described->schema_version, ") but its ", kSummaryFile, " says ",
                                            expected->jobs, " (schema ", expected->schema_version,
                                            "): the backup was changed or damaged"));
  }
  CountDatabase(*described, &summary);

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
