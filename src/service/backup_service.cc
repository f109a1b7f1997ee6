#include "service/backup_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "obs/log.h"

namespace mle::service {

BackupService::~BackupService() {
  std::thread last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = std::move(thread_);
  }
  if (last.joinable()) last.join();
}

void BackupService::Start(const std::string& to, Done done) {
  std::thread previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) {
      done(absl::AbortedError("A backup is already being written; wait until it is done, then try again."));
      return;
    }
    running_ = true;
    previous = std::move(thread_);
    thread_ = std::thread([this, to, done = std::move(done)] {
      obs::Log("backup").info("backing up {} to {}", data_dir_, to);
      absl::StatusOr<backup::Summary> summary = backup::WriteBackup(store_, objects_, data_dir_, to);
      if (summary.ok()) {
        obs::Log("backup").info("backup in {} is whole: {} jobs, {} objects ({} bytes), {} run files, in {}", to,
                                summary->database.jobs, summary->objects, summary->object_bytes, summary->run_files,
                                absl::FormatDuration(summary->took));
        for (const std::string& skipped : summary->skipped_objects) {
          obs::Log("backup").warn("left out of the backup in {}: {}", to, skipped);
        }
      } else {
        obs::Log("backup").error("backup to {} failed: {}", to, summary.status().ToString());
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = false;
      }
      done(std::move(summary));
    });
  }
  if (previous.joinable()) previous.join();  // it ended: running_ was false
}

}  // namespace mle::service
