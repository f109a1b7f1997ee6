// mlengine-replica --fork-server: see shim/fork_server.h.

#include "shim/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shim/fork_protocol.h"

extern char** environ;

namespace mle::shim {
namespace {

// A region of this process's initial stack (its arguments or its
// environment), as /proc/PID/cmdline and /proc/PID/environ read it, and how
// much of it from the start may hold something other than zeros.
struct Area {
  char* start = nullptr;
  size_t size = 0;
  size_t used = 0;
};

Area AreaOf(char** strings) {
  Area a;
  if (strings == nullptr || strings[0] == nullptr) return a;
  a.start = strings[0];
  char* end = strings[0];
  for (char** s = strings; *s != nullptr; ++s) {
    char* last = *s + std::strlen(*s) + 1;
    if (last > end) end = last;
  }
  a.size = static_cast<size_t>(end - a.start);
  a.used = a.size;
  return a;
}

// Lays `strings` out in `area` (NUL after each, zeros after the last) and
// returns pointers to them, then nullptr. Writes only the strings and the
// zeros over what was there before them: in a forked shim every page
// written is a copy-on-write fault, and on a virtual machine that backs
// guest memory lazily each costs 10-20 us (the areas are 150 KiB, the
// strings a few).
std::vector<char*> Place(Area* area, const std::vector<std::string>& strings) {
  std::vector<char*> out;
  char* at = area->start;
  for (const auto& s : strings) {
    std::memcpy(at, s.c_str(), s.size() + 1);
    out.push_back(at);
    at += s.size() + 1;
  }
  out.push_back(nullptr);
  const size_t placed = static_cast<size_t>(at - area->start);
  if (area->used > placed) std::memset(at, 0, area->used - placed);
  area->used = placed;
  return out;
}

void Answer(int sock, int32_t value, int fd) {
  while (SendWithDescriptors(sock, &value, sizeof(value), &fd, fd >= 0 ? 1 : 0) < 0 && errno == EINTR) {
  }
}

void ReapEnded() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

ssize_t SendWithDescriptors(int sock, const void* data, size_t size, const int* fds, size_t count) {
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(count > 0 ? CMSG_SPACE(sizeof(int) * count) : 0);
  if (count > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

int ServeForks(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mlengine-replica --fork-server ROOM   (stdin: mlengined's socket)\n");
    return 2;
  }
  // The areas a forked shim rewrites: this process's arguments (ROOM pads
  // them) and its environment (mlengined gives it a padding variable).
  Area args = AreaOf(argv);
  Area env = AreaOf(environ);
  const int sock = fcntl(0, F_DUPFD_CLOEXEC, 3);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (sock < 0 || devnull < 0 || dup2(devnull, 0) < 0) {
    fprintf(stderr, "mlengine-replica --fork-server: cannot set up its descriptors: %s\n", strerror(errno));
    return 1;
  }
  close(devnull);
  // What `ps` shows of the server itself (its padding, not its room, goes).
  std::vector<std::string> own_args = {argv[0], "--fork-server"};
  if (AreaBytes(own_args) <= args.size) Place(&args, own_args);
  if (env.size > 0) std::memset(env.start, 0, env.size);
  env.used = 0;
  environ = nullptr;

  sigset_t chld, before;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &before);
  const int reaps = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (reaps < 0) {
    fprintf(stderr, "mlengine-replica --fork-server: signalfd: %s\n", strerror(errno));
    return 1;
  }
  const std::string hello = std::string(kForkServerHello) + std::to_string(args.size) + " " +
                            std::to_string(env.size) + "\n";
  if (send(sock, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) return 1;

  std::vector<char> buf(1 << 18);
  for (;;) {
    pollfd fds[2] = {{sock, POLLIN, 0}, {reaps, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (read(reaps, &info, sizeof(info)) > 0) {
      }
      ReapEnded();
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // mlengined's end closed: the shims run on without us
    std::vector<std::string> shim_argv, shim_env;
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
      Answer(sock, -EMSGSIZE, -1);
      continue;
    }
    if (!DecodeForkRequest(buf.data(), static_cast<size_t>(n), &shim_argv, &shim_env)) {
      Answer(sock, -EINVAL, -1);
      continue;
    }
    if (AreaBytes(shim_argv) > args.size || AreaBytes(shim_env) > env.size) {
      Answer(sock, -E2BIG, -1);
      continue;
    }
    int started[2];
    if (pipe2(started, O_CLOEXEC) != 0) {
      Answer(sock, -errno, -1);
      continue;
    }
    const pid_t pid = fork();
    if (pid != 0) {
      // A request holds a replica's token: no later shim is forked with it
      // in its memory.
      std::memset(buf.data(), 0, static_cast<size_t>(n));
      for (auto* strings : {&shim_argv, &shim_env}) {
        for (auto& e : *strings) std::fill(e.begin(), e.end(), '\0');
      }
    }
    if (pid == 0) {
      close(sock);
      close(reaps);
      close(started[0]);
      sigprocmask(SIG_SETMASK, &before, nullptr);
      setsid();
      // Its command line and environment are its own before anyone hears
      // of it (`ps` or /proc read right after the answer see the shim's).
      std::vector<char*> child_argv = Place(&args, shim_argv);
      std::vector<char*> child_env = Place(&env, shim_env);
      environ = child_env.data();
      char one = 1;
      (void)!write(started[1], &one, 1);
      close(started[1]);
      // Ends as an executed shim would, without running this server's
      // exit handlers and destructors on pages that are still the server's
      // (each one written is a copy-on-write fault): stdio is flushed, the
      // rest goes with the process.
      const int status = RunShim(static_cast<int>(shim_argv.size()), child_argv.data());
      fflush(nullptr);
      _exit(status);
    }
    const int err = errno;
    close(started[1]);
    if (pid < 0) {
      close(started[0]);
      Answer(sock, -err, -1);
      continue;
    }
    // Its session, command line and environment exist before anyone hears
    // of it.
    char got;
    while (read(started[0], &got, 1) < 0 && errno == EINTR) {
    }
    close(started[0]);
    // Not reaped before this: the pid is still the child's.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      // Unwatchable: it goes (with whatever it started), and mlengined
      // executes the shim instead; never two shims for one replica.
      const int why = errno;
      kill(-pid, SIGKILL);
      Answer(sock, -why, -1);
      continue;
    }
    Answer(sock, static_cast<int32_t>(pid), pidfd);
    close(pidfd);
  }
  ReapEnded();
  return 0;
}

}  // namespace mle::shim
