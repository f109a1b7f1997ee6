// Online backups of the data directory, on the operator's request
// (POST /mlengine/v1/backups; `mlengined backup`): one at a time, each on a
// thread of its own so that no request thread waits for it.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "backup/backup.h"
#include "buckets/bucket_store.h"
#include "db/store.h"

namespace mle::service {

class BackupService {
 public:
  BackupService(db::Store& store, const buckets::BucketStore& objects, std::string data_dir)
      : store_(store), objects_(objects), data_dir_(std::move(data_dir)) {}
  ~BackupService();  // waits for a backup under way

  using Done = std::function<void(absl::StatusOr<backup::Summary>)>;
  // Writes a backup into `to` (backup/backup.h) and calls `done` with what
  // it holds, on the backup's thread. ABORTED at once while another runs.
  void Start(const std::string& to, Done done);

 private:
  db::Store& store_;
  const buckets::BucketStore& objects_;
  const std::string data_dir_;
  std::mutex mu_;
  bool running_ = false;  // guarded by mu_
  std::thread thread_;    // the last backup's; guarded by mu_
};

}  // namespace mle::service
