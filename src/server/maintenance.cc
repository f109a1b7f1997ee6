#include "server/maintenance.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "backup/backup.h"
#include "buckets/bucket_store.h"
#include "cli/client.h"
#include "cli/config.h"
#include "db/store.h"

namespace mle::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A backup copies every object and log: a day is no limit a healthy one meets.
constexpr long kBackupTimeoutSeconds = 24 * 3600;

void PrintSummary(const backup::Summary& s, const std::string& verb, const std::string& where) {
  std::cout << verb << " " << where << ": " << s.database.jobs << " jobs, " << s.database.projects << " projects, " << s.database.records
            << " records (users, tokens, policies, studies, ...), " << s.objects << " objects in " << s.buckets
            << " buckets (" << s.object_bytes << " bytes), " << s.run_files << " run files (" << s.run_bytes
            << " bytes); database schema " << s.database.schema_version << "; " << absl::FormatDuration(s.took) << "\n";
  if (!s.skipped_objects.empty()) {
    std::cout << s.skipped_objects.size() << " objects left out: each was rewritten while it was read, every time "
              << "(a job writing it); back up again once it is done:\n";
    for (const std::string& skipped : s.skipped_objects) std::cout << "  " << skipped << "\n";
  }
}

int Fail(const std::string& message) {
  std::cerr << "mlengined: " << message << "\n";
  return 1;
}

// POST /mlengine/v1/backups to the mlengined serving data_dir, found as
// the CLI finds it: through DATA_DIR/server.json, with its admin token.
int AskServer(const std::string& data_dir, const std::string& to) {
  const std::string server_json = (fs::path(data_dir) / "server.json").string();
  const cli::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "MLENGINE_CONFIG") return server_json;
    return std::nullopt;  // nothing of the caller's own configuration
  };
  auto connection = cli::ResolveConnection({}, env, cli::RealFiles());
  if (!connection.ok()) {
    return Fail(absl::StrCat("an mlengined serves ", data_dir, " but ", server_json,
                             " does not say where: ", connection.status().message()));
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  cli::Client client(*connection);
  auto answer = client.Call("POST", "/mlengine/v1/backups", {}, json{{"destination", to}}, kBackupTimeoutSeconds);
  if (!answer.ok()) return Fail(absl::StrCat("the backup failed: ", answer.status().message()));
  PrintSummary(backup::SummaryFromJson(*answer),
               "backed up (online, by the mlengined at " + connection->endpoint + ") into", to);
  return 0;
}

}  // namespace

int RunBackup(const std::string& data_dir, const std::string& to) {
  const std::string lock_path = (fs::path(data_dir) / "lock").string();
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  if (lock_fd < 0) return Fail(absl::StrCat(data_dir, " is not an mlengine data directory (it has no lock file)"));
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return AskServer(data_dir, to);  // an mlengined serves it
  }
  // None serves it, and none starts while this holds the lock.
  auto store = db::OpenSqliteStore({(fs::path(data_dir) / "mlengine.db").string(), true});
  if (!store.ok()) {
    ::close(lock_fd);
    return Fail(std::string(store.status().message()));
  }
  auto objects = buckets::BucketStore::Open((fs::path(data_dir) / "buckets").string());
  if (!objects.ok()) {
    ::close(lock_fd);
    return Fail(std::string(objects.status().message()));
  }
  auto summary = backup::WriteBackup(**store, **objects, fs::absolute(data_dir).string(), to);
  store->reset();
  ::close(lock_fd);
  if (!summary.ok()) return Fail(absl::StrCat("the backup failed: ", summary.status().message()));
  PrintSummary(*summary, "backed up (no mlengined was serving it) into", to);
  return 0;
}

int RunRestore(const std::string& from, const std::string& data_dir) {
  auto summary = backup::RestoreBackup(from, data_dir);
  if (!summary.ok()) return Fail(absl::StrCat("the restore failed: ", summary.status().message()));
  PrintSummary(*summary, "restored " + from + " into", data_dir);
  std::cout << "start it with: mlengined --data-dir " << data_dir << " (the operator's token is "
            << (fs::path(data_dir) / "admin.token").string() << ")\n";
  return 0;
}

}  // namespace mle::server
