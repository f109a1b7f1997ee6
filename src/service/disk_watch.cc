#include "service/disk_watch.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "obs/log.h"

namespace mle::service {
namespace {

std::string Bytes(uint64_t n) { return common::HumanBytes(static_cast<int64_t>(n)); }

}  // namespace

DiskState DiskState::Of(uint64_t size, uint64_t free, uint64_t reserve) {
  DiskState s;
  s.size_bytes = size;
  s.free_bytes = free;
  s.reserve_bytes = reserve;
  s.known = true;
  s.full = free < reserve || free == 0;
  return s;
}

std::string DiskState::Describe() const {
  return absl::StrCat(Bytes(free_bytes), " free of ", Bytes(size_bytes), full ? ", below the " : ", above the ",
                      Bytes(reserve_bytes), " kept for running jobs");
}

DiskWatch::DiskWatch(std::string path, uint64_t reserve_bytes, absl::Duration interval,
                     std::function<void(const DiskState&)> on_check)
    : path_(std::move(path)), reserve_(reserve_bytes), interval_(interval), on_check_(std::move(on_check)) {}

DiskWatch::~DiskWatch() { Stop(); }

void DiskWatch::Start() {
  Look();
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, absl::ToChronoMilliseconds(interval_));
      if (stopping_) break;
      lock.unlock();
      Look();
      lock.lock();
    }
  });
}

void DiskWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DiskWatch::Look() {
  struct statvfs vfs {};
  if (::statvfs(path_.c_str(), &vfs) != 0) {
    obs::Log("disk").warn("cannot read how full {} is: {}", path_, std::strerror(errno));
    return;
  }
  const uint64_t unit = vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize;
  const DiskState now = DiskState::Of(uint64_t{vfs.f_blocks} * unit, uint64_t{vfs.f_bavail} * unit, reserve_);
  bool was_full = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_full = state_.full;
    state_ = now;
  }
  if (now.full && !was_full) {
    obs::Log("disk").error("the disk of {} is full ({}): new jobs and uploads are refused until space is freed",
                           path_, now.Describe());
  } else if (!now.full && was_full) {
    obs::Log("disk").info("the disk of {} has room again ({}): new jobs and uploads are taken", path_,
                          now.Describe());
  }
  if (on_check_) on_check_(now);
}

DiskState DiskWatch::State() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

absl::Status DiskWatch::CheckRoom(absl::string_view refused) const {
  const DiskState s = State();
  if (!s.full) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "The disk of mlengine's data directory is full (", s.Describe(), "): ", refused,
      ". Jobs already running go on; this is taken again as soon as space is freed on that disk, without a "
      "restart (the operator: docs/operations.md, \"A full disk\")."));
}

}  // namespace mle::service
