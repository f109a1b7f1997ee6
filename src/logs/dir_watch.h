// DirWatch: says, on a thread of its own, when a file in one of the
// directories it watches is written, made or renamed into place, or a
// directory is made there (inotify). For followers of a job's logs
// (service/log_service.h): a replica's log line wakes them at once instead
// of at the next tick. Watches are counted: a directory watched by several
// followers is one inotify watch, dropped when the last one lets go.
//
// What it cannot see: writes made by another machine to a network file
// system (a Slurm replica's log on NFS), a directory that does not exist
// yet, more watches than the kernel allows (fs.inotify.max_user_watches).
// Add says so by returning false; callers keep a tick for those.
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace mle::logs {

class DirWatch {
 public:
  // `dir`: the watched directory; `name`: the entry in it that changed;
  // `made_dir`: a directory was made there (a new replica's directory).
  // Called on the watch's thread, without its lock held: keep it short.
  using OnChange = std::function<void(const std::string& dir, const std::string& name, bool made_dir)>;

  explicit DirWatch(OnChange on_change);
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // False when inotify could not be set up: every Add then fails.
  bool ok() const { return fd_ >= 0; }

  // Watches `dir` once more; false when it cannot (absent, not a directory,
  // out of watches, no inotify). Each true takes one Remove. `was_watched`
  // (optional) tells whether it was watched already (nothing written there
  // since can have been missed).
  bool Add(const std::string& dir, bool* was_watched = nullptr);
  void Remove(const std::string& dir);

 private:
  void Loop();

  const OnChange on_change_;
  int fd_ = -1;    // inotify
  int stop_ = -1;  // eventfd: wakes Loop to end
  std::mutex mu_;  // guards the two maps
  struct Watched {
    int wd = -1;
    int count = 0;
  };
  std::map<std::string, Watched> by_dir_;
  std::map<int, std::string> by_wd_;
  std::thread thread_;
};

}  // namespace mle::logs
