// The sandbox of one replica, as mlengined hands it to the process that
// enters it (mlengine-replica for a cold start, the warm interpreter's
// forked child for a warm one, mlengine-sandbox for a package build): who
// the replica runs as, the cgroups it joins, and every path of its file
// system view. Written by mlengined (sandbox/plan.h), read by EnterSandbox
// (sandbox/enter.h); the file is mode 0600, root's.
//
// The format, `mlengine.sandbox/v1`: a first line naming it, then one
// record a line, fields separated by tabs (paths never hold a tab or a
// newline: EncodeSpec refuses them):
//   uid N | gid N | umask OCTAL | cwd PATH
//   cgroup DIR                    join DIR (write 0 to DIR/cgroup.procs)
//   bind ro|rw SOURCE TARGET      SOURCE of the host at TARGET in the view
//   device SOURCE TARGET          a device node (read-write, no exec)
//   symlink LINK_TARGET PATH      PATH -> LINK_TARGET
//   tmpfs OPTIONS PATH            a fresh tmpfs (mount options, e.g. size=)
//   proc PATH                     procfs showing the replica's own uid only
//   dir PATH                      an empty directory (read-only in the root)
//   file PATH TEXT                a read-only file holding TEXT at PATH (over
//                                 what the host has there: /etc/passwd);
//                                 TEXT escapes \\ \n and \t as C does
// Records apply in their order; a target's parent directories are made in
// the view as needed (never through a symlink).
//
// Plain values and pure functions; std only (the shim links it).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace mle::sandbox {

struct ViewEntry {
  enum class Kind { kBind, kDevice, kSymlink, kTmpfs, kProc, kDir, kSysfs, kFile };
  Kind kind = Kind::kBind;
  bool writable = false;  // kBind
  std::string source;     // kBind, kDevice: the host path; kSymlink: the link's target; kTmpfs: mount options;
                          // kDir: its mode in octal ("" for 0755); kFile: its contents
  std::string target;     // the path in the view

  bool operator==(const ViewEntry&) const = default;
};

struct SandboxSpec {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t umask = 022;
  std::string cwd;                   // the working directory, in the view
  std::vector<std::string> cgroups;  // directories to join
  std::vector<ViewEntry> view;

  bool operator==(const SandboxSpec&) const = default;
};

inline constexpr char kSpecFormat[] = "mlengine.sandbox/v1";

// The spec's text; false (with `error`) for a uid or gid of 0, a relative
// path, or a field holding a tab or a newline.
bool EncodeSpec(const SandboxSpec& spec, std::string* text, std::string* error);
// The spec of `text`; false (with `error` naming the line) otherwise.
bool ParseSpec(const std::string& text, SandboxSpec* spec, std::string* error);
// Reads and parses the file at `path`.
bool ReadSpec(const std::string& path, SandboxSpec* spec, std::string* error);
// The environment variable that carries a spec to `mlengine-replica
// --sandbox -` (which removes it before anything of the replica starts).
inline constexpr char kSpecVariable[] = "MLENGINE_SANDBOX_SPEC";

}  // namespace mle::sandbox
