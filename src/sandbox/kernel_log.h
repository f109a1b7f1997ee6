// What the kernel logged about a process it killed at a memory limit: its
// "oom-kill:" record in the kernel log (/dev/kmsg), for a replica whose
// memory cgroup is gone by the time it is asked about (a container's:
// runc removes it as the container ends) or whose kill its own group did
// not count (cgroup v1 counts a kill only in the victim's own group).
//
// FindOomKill is pure; ReadKernelLog reads /dev/kmsg (root).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mle::sandbox {

struct OomKill {
  std::string task;       // the killed process's command name ("python3")
  int64_t pid = 0;        // its pid, in the host's pid namespace
  std::string oom_memcg;  // the memory cgroup whose limit was reached

  bool operator==(const OomKill&) const = default;
};

// The last "oom-kill:" record among `messages` (the kernel log's texts,
// one record each) whose oom_memcg or task_memcg path contains `cgroup_part`
// (a container's id, say); nullopt when none does or `cgroup_part` is
// empty. The record's fields are comma-separated key=value pairs:
//   oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/a/b,task_memcg=/a/b,task=python3,pid=14778,uid=0
std::optional<OomKill> FindOomKill(const std::vector<std::string>& messages, std::string_view cgroup_part);

// The message texts of every record /dev/kmsg still holds, oldest first;
// empty when it cannot be read (not root, or a kernel that restricts it).
std::vector<std::string> ReadKernelLog();

}  // namespace mle::sandbox
