// mlengine-replica's two modes (shim/main.cc).
//
// RunShim: runs one replica (the usage in main.cc's header).
//
// ServeForks (`mlengine-replica --fork-server ROOM`): a fork server for
// shims. mlengined starts one, with one end of a SOCK_SEQPACKET socket pair
// as its stdin, and sends it each local replica's shim command line and
// environment (shim/fork_protocol.h). For each, the server forks; the child
// starts a session of its own (before the server answers: a stop signalled
// to the shim's group right after cannot miss it), writes its command line
// and environment over the server's own argument and environment areas (so
// /proc/PID/cmdline and /proc/PID/environ show the shim's, which is how a
// restarted mlengined and an operator find a run's shims), and runs
// RunShim. The server answers with the shim's pid and a pidfd of it, and
// reaps the shims it forked when they end. ROOM pads its command line (the
// room a shim's takes; its environment carries the room for a shim's).
//
// It saves a replica the exec of the shim (a process's exec and start-up
// cost about 1 ms of CPU here, and the trainer pays another). It holds
// nothing but its socket: it exits when mlengined's end closes (mlengined
// ended, even killed), and the shims it forked run on, as executed ones do.
// A request it cannot serve (too large, a fork that fails) is answered with
// an error, and mlengined executes that shim instead.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace mle::shim {

int RunShim(int argc, char** argv);
int ServeForks(int argc, char** argv);

// One sendmsg of `size` bytes with `count` descriptors attached
// (SCM_RIGHTS; none when 0), without SIGPIPE: sendmsg's result.
ssize_t SendWithDescriptors(int sock, const void* data, size_t size, const int* fds, size_t count);

}  // namespace mle::shim
