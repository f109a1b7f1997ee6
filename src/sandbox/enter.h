// EnterSandbox: turns the calling process into a sandboxed replica. Called
// as root, in the process that then runs the job's code: mlengine-replica's
// child before it execs the trainer (a cold start), the warm interpreter's
// forked child before it becomes the replica (through
// libmlengine-sandbox.so's mle_sandbox_enter), mlengine-sandbox before it
// execs a package build.
//
// On success the process
//  - is in the spec's cgroups (its limits: CPU, memory, processes);
//  - has mount and IPC namespaces of its own, whose root is a read-only
//    tmpfs holding only the spec's view (binds read-only unless the spec
//    says rw, all nosuid and nodev but devices; a procfs with hidepid=2,
//    which shows processes of its own uid only); nothing of the host's
//    file system outside the view can be reached, mlengined's data
//    directory included;
//  - runs as the spec's uid and gid, no supplementary groups, no
//    capabilities (the bounding set emptied), no_new_privs (setuid and file
//    capabilities raise nothing), the spec's umask, in the spec's cwd.
// On failure it returns why; the caller must not run the job then (it ends
// the process: nothing ever runs half-sandboxed or open).
//
// Single-threaded callers only (a forked child): it uses raw set*id system
// calls, which change the calling thread alone.
#pragma once

#include <string>

#include "sandbox/spec.h"

namespace mle::sandbox {

// "" on success, otherwise what failed ("cannot bind /x at /y: ...").
std::string EnterSandbox(const SandboxSpec& spec);

}  // namespace mle::sandbox

// For the warm interpreter (ctypes): reads the spec at `spec_path` and
// enters it. 0 on success; otherwise -1 with the reason in `error`
// (NUL-terminated, truncated to `error_size`).
extern "C" int mle_sandbox_enter(const char* spec_path, char* error, unsigned long error_size);
