#include "logs/dir_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>
#include <vector>

namespace mle::logs {

namespace {
// A line appended (IN_MODIFY), a file made or renamed into place (an exit
// record), a replica's directory made. IN_ONLYDIR: never a file by mistake.
constexpr uint32_t kEvents = IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_ONLYDIR;
}  // namespace

DirWatch::DirWatch(OnChange on_change) : on_change_(std::move(on_change)) {
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  stop_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0 || stop_ < 0) {
    if (fd_ >= 0) ::close(fd_);
    if (stop_ >= 0) ::close(stop_);
    fd_ = stop_ = -1;
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

DirWatch::~DirWatch() {
  if (fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(stop_, &one, sizeof(one));
  thread_.join();
  ::close(fd_);
  ::close(stop_);
}

bool DirWatch::Add(const std::string& dir, bool* was_watched) {
  if (was_watched != nullptr) *was_watched = false;
  if (fd_ < 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_dir_.find(dir); it != by_dir_.end()) {
    ++it->second.count;
    if (was_watched != nullptr) *was_watched = true;
    return true;
  }
  // The kernel answers a directory already watched (under another path)
  // with its descriptor: events keep the first path's name.
  const int wd = ::inotify_add_watch(fd_, dir.c_str(), kEvents);
  if (wd < 0) return false;
  by_dir_[dir] = {wd, 1};
  by_wd_.emplace(wd, dir);
  return true;
}

void DirWatch::Remove(const std::string& dir) {
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_dir_.find(dir);
  if (it == by_dir_.end() || --it->second.count > 0) return;
  const int wd = it->second.wd;
  by_dir_.erase(it);
  // Another path of the same directory keeps the watch.
  for (const auto& [other, w] : by_dir_) {
    if (w.wd != wd) continue;
    by_wd_[wd] = other;
    return;
  }
  ::inotify_rm_watch(fd_, wd);  // a directory already gone: the kernel dropped it (EINVAL), fine
  by_wd_.erase(wd);
}

void DirWatch::Loop() {
  alignas(inotify_event) char buffer[16 * 1024];
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n <= 0) continue;  // EAGAIN: another wakeup took it
    struct Change {
      std::string dir, name;
      bool made_dir;
    };
    std::vector<Change> changes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buffer + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
        if (e->mask & IN_Q_OVERFLOW) {
          // Events were lost: tell every directory.
          for (const auto& [wd, dir] : by_wd_) changes.push_back({dir, "", false});
          continue;
        }
        auto it = by_wd_.find(e->wd);
        if (it == by_wd_.end()) continue;  // removed meanwhile
        if (e->mask & IN_IGNORED) {        // the directory went away
          std::erase_if(by_dir_, [wd = e->wd](const auto& kv) { return kv.second.wd == wd; });
          by_wd_.erase(it);
          continue;
        }
        changes.push_back({it->second, e->len > 0 ? std::string(e->name) : "",
                           (e->mask & IN_CREATE) != 0 && (e->mask & IN_ISDIR) != 0});
      }
    }
    // One call per directory and name (a burst of lines is one wakeup).
    std::set<std::tuple<std::string, std::string, bool>> told;
    for (const auto& c : changes) {
      if (told.emplace(c.dir, c.name, c.made_dir).second) on_change_(c.dir, c.name, c.made_dir);
    }
  }
}

}  // namespace mle::logs
