// The sandbox of a replica as a plan: from what the host offers and what
// the job may reach, the SandboxSpec (sandbox/spec.h) its process enters.
// Pure functions of their arguments; the host is read once, at start
// (DetectHostLayout, impure, in host.h).
//
// What a replica sees (docs/security.md):
//   /usr, /etc, the runtimes' and mlengine's own directories, read-only;
//     /bin, /lib... as the host has them (symlinks or binds); /sys, a
//     read-only sysfs of its own (nothing mounted below it: no cgroup trees)
//   /dev: null, zero, full, random, urandom, its GPUs; /dev/shm its own
//   /proc: its own processes only (hidepid); /tmp (and /var/tmp): its own
//   its run's work and hypertune directories, read-write
//   its package environment, read-only
//   $MLENGINE_GCS_ROOT/BUCKET for each bucket its account may read:
//     read-write where it may also create objects, read-only otherwise
//   /etc/passwd and /etc/group naming its identity
// and nothing else: no data directory, no other run, no token but its own.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "sandbox/spec.h"

namespace mle::sandbox {

// What the host offers every sandbox (DetectHostLayout).
struct HostLayout {
  // Top-level entries that are symlinks on the host (/bin -> usr/bin on a
  // merged-/usr system): made the same in the view.
  std::vector<std::pair<std::string, std::string>> links;  // path, link target
  // Directories bound read-only at the same path: the system's (/usr, /etc,
  // /sys, /lib... where they are directories) and the runtimes' and
  // mlengine's own (its python helpers, the warm-start library).
  std::vector<std::string> read_only;
  // Device nodes that exist (/dev/null, /dev/nvidia0...).
  std::vector<std::string> devices;
};

struct BucketAccess {
  std::string bucket;
  bool writable = false;

  bool operator==(const BucketAccess&) const = default;
};

struct ReplicaView {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string cwd;                     // the work directory (also bound rw)
  std::vector<std::string> writable;   // directories of the run bound rw at their path (work, hypertune)
  std::string tmp;                     // the host directory that is the replica's /tmp
  std::vector<std::string> read_only;  // more read-only directories (the job's package environment)
  std::string gcs_root;                // where buckets appear
  std::vector<BucketAccess> buckets;   // what the job's account may reach
  std::vector<int> gpus;               // its GPUs' indices (/dev/nvidiaN)
  std::vector<std::string> cgroups;    // directories to join
  std::string passwd;                  // the texts of its /etc/passwd and /etc/group ("": the host's)
  std::string group;
};

// The replica's spec: every entry of the view, parents before children.
SandboxSpec PlanReplicaSandbox(const HostLayout& host, const ReplicaView& view);

// /etc/passwd and /etc/group of the view: the host's text with the job's
// identity added ("mlengine-job", home /tmp, no shell).
std::string PasswdWithIdentity(const std::string& host_passwd, uid_t uid, gid_t gid);
std::string GroupWithIdentity(const std::string& host_group, gid_t gid);

}  // namespace mle::sandbox
