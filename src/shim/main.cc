// mlengine-replica: runs one replica process and keeps its log and exit
// status on disk, so a replica outlives a restart of mlengined.
//
//   mlengine-replica --log FILE --exit FILE --cwd DIR [--grace SECONDS]
//                    [--container NAME --podman PODMAN]
//                    [--progress FILE --progress-every-ms N [--join-ports P,...]]
//                    -- PROGRAM ARGS...
//
// It starts a new session, becomes a child subreaper (PR_SET_CHILD_SUBREAPER:
// whatever PROGRAM starts stays its descendant even after a double fork or a
// setsid, because orphans are re-parented to it, not to init), runs PROGRAM
// with stdout and stderr on pipes, and appends each line to FILE as
//   <RFC 3339 UTC timestamp> TAB <O|E> TAB <line>
//
// How a replica ends, whatever the reason:
//  - PROGRAM exits or is killed: "exit N" or "signal N" goes to the exit file
//    (atomically, durably), then every descendant still running (daemons,
//    helpers in their own sessions, children that ignored SIGTERM) is
//    SIGKILLed and reaped; only then does the shim exit. So when the executor
//    sees the shim gone, nothing of the replica is left.
//  - The shim gets SIGTERM/SIGINT/SIGHUP (cancel, timeout, another replica
//    ended the job): it sends SIGTERM to every descendant, waits up to
//    --grace seconds (default 10) for PROGRAM to end, then SIGKILLs them all,
//    and ends as above.
//
// A replica in a container (--container NAME: PROGRAM is `podman run --name
// NAME ...`) is stopped and removed through podman, so podman's own state
// (the container, its mounts, conmon) goes with it: on a stop signal the
// shim runs `PODMAN stop -t GRACE NAME` (podman signals the container's init,
// which forwards the signal, and kills it after the grace period) instead of
// signalling processes itself; once PROGRAM has ended, whatever the reason,
// `PODMAN rm -f -t 0 --ignore NAME` removes the container if it may still be
// there (podman run --rm removes it itself when it ends on its own), and only then is every descendant left killed as above. podman's
// configuration comes from the environment (CONTAINERS_CONF).
//
// Forked warm starts (--warm SOCKET --spec FILE [--note TEXT]): instead of
// starting PROGRAM, the shim asks the runtime's warm interpreter (the
// zygote, `python3 -m mlengine._warm --serve SOCKET`) to fork the replica:
// it sends FILE's one-line spec with the replica's stdin, stdout and stderr
// attached, gets "pid N", and later "status S" (the wait status) on the same
// connection, which it keeps open while the replica runs (closing it makes
// the zygote kill the replica). Stop signals go to the replica's tree. When
// the zygote does not answer, PROGRAM is started as usual (a cold start);
// the log's first line says which start the replica got (TEXT, or why cold).
//
// Sandboxed replicas (--sandbox FILE, docs/security.md): the child enters
// the sandbox FILE describes (sandbox/enter.h: the job's identity, cgroups
// and file system view) before it execs PROGRAM (`--sandbox -`: the spec is
// the variable MLENGINE_SANDBOX_SPEC, which PROGRAM never sees); a forked
// warm start's child enters the same sandbox inside the warm interpreter
// (its spec names FILE). A sandbox that cannot be entered ends the replica
// with status 126 and the reason in its log; PROGRAM never runs outside it. The shim itself
// stays outside, as root: it must be able to end everything the replica
// starts.
//
// Progress (--progress FILE --progress-every-ms N: the stall watch of an
// executor that cannot see the replica's processes, Slurm's): every N ms
// the CPU time of every process of the replica (clock ticks: user and
// system, with their reaped children's) goes to FILE as "cpu_ticks T\n",
// replaced atomically; its log's modification time says the rest. With
// --join-ports, a line "joined 1" follows once a process of the replica
// has held an established TCP connection on one of those ports (the job's
// rendezvous: the join deadline), "joined 0" until then.
//
// Forked, not executed (mlengine-replica --fork-server, shim/fork_server.h):
// mlengined starts one fork server and asks it for each local replica's
// shim, which then runs exactly as an executed one (its command line and
// environment in /proc are its own), without the cost of an exec.
//
// Deliberately small and dependency-free (libc, and the sandbox's own
// std-only code): it is on the start-up path of every replica.

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sandbox/enter.h"
#include "sandbox/spec.h"
#include "shim/fork_server.h"

namespace {

int log_fd = -1;
int signal_pipe[2] = {-1, -1};

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// RFC 3339 in UTC, from the calendar of <chrono>: gmtime_r and strftime
// would read the time zone file first (/etc/localtime: a file opened,
// read and parsed in every shim, for a zone that UTC never uses).
std::string Timestamp() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const std::chrono::sys_seconds at{std::chrono::seconds(ts.tv_sec)};
  const auto day = std::chrono::floor<std::chrono::days>(at);
  const std::chrono::year_month_day date{day};
  const std::chrono::hh_mm_ss time{at - day};
  char buf[64];
  snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02lld.%06ldZ", static_cast<int>(date.year()),
           static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()), static_cast<int>(time.hours().count()),
           static_cast<int>(time.minutes().count()), static_cast<long long>(time.seconds().count()), ts.tv_nsec / 1000);
  return buf;
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

void EmitLine(char stream, const std::string& line) {
  std::string record = Timestamp();
  record.push_back('\t');
  record.push_back(stream);
  record.push_back('\t');
  for (char c : line) record.push_back(c == '\r' ? ' ' : c);
  record.push_back('\n');
  if (!WriteAll(log_fd, record)) {
    static bool said = false;
    if (!said) fprintf(stderr, "mlengine-replica: cannot write the log: %s\n", strerror(errno));
    said = true;
  }
}

struct Stream {
  int fd;
  char tag;
  std::string partial;
  bool open = true;
};

void Drain(Stream& s) {
  char buf[65536];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!s.partial.empty()) EmitLine(s.tag, s.partial);
    s.partial.clear();
    s.open = false;
    close(s.fd);
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    EmitLine(s.tag, s.partial.substr(start, nl - start));
  }
  s.partial.erase(0, start);
  if (s.partial.size() > 64 * 1024) {  // a very long line: emit it in pieces
    EmitLine(s.tag, s.partial);
    s.partial.clear();
  }
}

void Flush(Stream& s) {
  if (!s.partial.empty()) EmitLine(s.tag, s.partial);
  s.partial.clear();
  if (s.open) close(s.fd);
  s.open = false;
}

// /proc/PID/stat past the command ("state ppid ..."; the command may hold
// spaces and parentheses), in `buf`; null when it cannot be read.
const char* ReadStatFields(long pid, char* buf, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return nullptr;
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');
  return paren == nullptr ? nullptr : paren + 1;
}

// Every process below this one: children, their children, and orphans that
// were re-parented to us (we are their subreaper). Read from /proc.
std::vector<pid_t> Descendants(pid_t root = 0) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      char* end = nullptr;
      long pid = strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      char buf[512];
      const char* paren = ReadStatFields(pid, buf, sizeof(buf));
      if (paren == nullptr) continue;
      char state = 0;
      long ppid = 0;
      if (sscanf(paren, " %c %ld", &state, &ppid) != 2) continue;
      children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
    closedir(proc);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {root > 0 ? root : getpid()};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    auto [lo, hi] = children.equal_range(parent);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return out;
}

// The CPU time of the replica, in clock ticks: every process below `root`
// (0: the shim) and `root` itself, user and system time and what their
// reaped children used; of the shim only what its reaped children used (its
// own work, this count included, is not the replica's).
int64_t TreeCpuTicks(pid_t root = 0) {
  std::vector<pid_t> pids = Descendants(root);
  pids.push_back(root > 0 ? root : getpid());
  int64_t total = 0;
  for (pid_t pid : pids) {
    const bool shim = root <= 0 && pid == getpid();
    char buf[1024];
    const char* paren = ReadStatFields(pid, buf, sizeof(buf));
    if (paren == nullptr) continue;
    // After the command: state ppid pgrp session tty tpgid flags minflt
    // cminflt majflt cmajflt utime stime cutime cstime.
    long long f[15] = {};
    char state = 0;
    if (sscanf(paren, " %c %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &state, &f[0],
               &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13]) == 15) {
      total += (shim ? 0 : f[10] + f[11]) + f[12] + f[13];
    }
  }
  return total;
}

// Whether a process of `root`'s tree (0: the shim's) holds an established
// TCP connection on one of `ports` (local or remote end), from /proc.
bool TreeConnectedOn(pid_t root, const std::vector<int>& ports) {
  std::set<unsigned long> sockets;  // inodes of established connections on those ports
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    FILE* f = fopen(table, "re");
    if (f == nullptr) continue;
    char line[512];
    bool header = true;
    while (fgets(line, sizeof(line), f) != nullptr) {
      if (header) {
        header = false;
        continue;
      }
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      unsigned local = 0, remote = 0, state = 0;
      unsigned long inode = 0;
      if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %x %*s %*s %*s %*d %*d %lu", &local, &remote, &state,
                 &inode) != 4) {
        continue;
      }
      if (state != 1 || inode == 0) continue;  // 01: ESTABLISHED
      for (int p : ports) {
        if (static_cast<unsigned>(p) == local || static_cast<unsigned>(p) == remote) sockets.insert(inode);
      }
    }
    fclose(f);
  }
  if (sockets.empty()) return false;
  std::vector<pid_t> pids = Descendants(root);
  pids.push_back(root > 0 ? root : getpid());
  for (pid_t pid : pids) {
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", static_cast<int>(pid));
    DIR* d = opendir(dir);
    if (d == nullptr) continue;
    bool found = false;
    while (dirent* e = readdir(d)) {
      char path[384], target[64];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      const ssize_t n = readlink(path, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      unsigned long inode = 0;
      if (sscanf(target, "socket:[%lu]", &inode) == 1 && sockets.count(inode)) {
        found = true;
        break;
      }
    }
    closedir(d);
    if (found) return true;
  }
  return false;
}

// "cpu_ticks T" (and "joined J" when `joined` is 0 or 1) to `path`, replaced
// atomically (best effort: a missed sample only delays the watch).
void WriteProgress(const std::string& path, int64_t ticks, int joined) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char text[96];
  const int len = joined < 0 ? snprintf(text, sizeof(text), "cpu_ticks %lld\n", static_cast<long long>(ticks))
                             : snprintf(text, sizeof(text), "cpu_ticks %lld\njoined %d\n",
                                        static_cast<long long>(ticks), joined);
  const bool ok = write(fd, text, static_cast<size_t>(len)) == len;
  close(fd);
  if (ok) rename(tmp.c_str(), path.c_str());
}

// `root` 0: everything below the shim; otherwise `root` (a replica forked
// by the warm interpreter, not our child) and everything below it.
void SignalDescendants(int sig, pid_t root = 0) {
  if (root > 0) kill(root, sig);
  for (pid_t p : Descendants(root)) kill(p, sig);
}

struct ChildStatus {
  pid_t child = 0;
  bool exited = false;
  int status = 0;
};

// Reaps every child that has ended (PROGRAM, or orphans we adopted) without
// blocking; records PROGRAM's status. False once we have no children at all.
bool ReapEnded(ChildStatus& c) {
  for (;;) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      if (p == c.child) {
        c.exited = true;
        c.status = st;
      }
      continue;
    }
    if (p < 0 && errno == EINTR) continue;
    return !(p < 0 && errno == ECHILD);
  }
}

// SIGKILLs everything below us until nothing is left (a process forking
// while we kill is caught on the next round). Bounded: a process stuck in
// the kernel cannot hold the shim forever.
void KillAllDescendants(ChildStatus& c) {
  const int64_t give_up = NowMs() + 30000;
  while (ReapEnded(c) && NowMs() < give_up) {
    SignalDescendants(SIGKILL);
    usleep(5000);
  }
}

void OnStopSignal(int) {
  const int saved = errno;
  const char b = 's';
  (void)!write(signal_pipe[1], &b, 1);
  errno = saved;
}

// The exit record's file, made with its block allocated as the replica
// starts: recording how the replica ended then needs no free space (on a
// full disk the record, and with it how the job ended, would be lost). -1
// when it cannot be made; WriteExitFile then makes the file as it writes.
int ReserveExitFile(const std::string& exit_path) {
  const std::string tmp = exit_path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (posix_fallocate(fd, 0, 4096) != 0) {
    close(fd);
    unlink(tmp.c_str());
    return -1;
  }
  return fd;
}

// Atomic (a reader sees no file or the whole of it), not fsynced: what it
// records ends with the machine, and a server that restarts on the same
// machine reads the page cache. Writes into `reserved` (ReserveExitFile's;
// closed here) when there is one.
bool WriteExitFile(const std::string& exit_path, const std::string& text, int reserved) {
  const std::string tmp = exit_path + ".tmp";
  int fd = reserved >= 0 ? reserved : open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = lseek(fd, 0, SEEK_SET) == 0 && WriteAll(fd, text) &&
            ftruncate(fd, static_cast<off_t>(text.size())) == 0;
  ok = close(fd) == 0 && ok;
  return ok && rename(tmp.c_str(), exit_path.c_str()) == 0;
}

int Usage() {
  fprintf(stderr,
          "usage: mlengine-replica --log FILE --exit FILE --cwd DIR [--grace SECONDS] "
          "[--container NAME --podman PODMAN] [--sandbox FILE|-] [--progress FILE --progress-every-ms N "
          "[--join-ports P,...]] "
          "-- PROGRAM [ARGS...]\n"
          "       mlengine-replica --log FILE --exit FILE --cwd DIR [--grace SECONDS] --warm SOCKET --spec FILE "
          "[--note TEXT] [--sandbox FILE] -- PROGRAM [ARGS...]   (forked by the warm interpreter; PROGRAM if it "
          "cannot)\n"
          "       mlengine-replica --fork-server ROOM   (stdin: mlengined's socket; see shim/fork_server.h)\n");
  return 2;
}

// Starts a helper command (podman stop/rm) with no input or output.
pid_t StartHelper(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Runs a helper to its end (at most `timeout_ms`; then it is killed).
void RunHelper(const std::vector<std::string>& args, int64_t timeout_ms) {
  const pid_t pid = StartHelper(args);
  if (pid < 0) return;
  const int64_t give_up = NowMs() + timeout_ms;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    if (NowMs() >= give_up) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return;
    }
    usleep(5000);
  }
}

#if defined(__SANITIZE_THREAD__)
#define MLE_SHIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MLE_SHIM_TSAN 1
#endif
#endif
#ifndef MLE_SHIM_TSAN
#define MLE_SHIM_TSAN 0
#endif

// Whether the kernel leaves a process that changes its uid open to ptrace
// by its new uid (fs.suid_dumpable = 1, "debug"; unknown counts as yes).
// PROGRAM's process becomes the job's identity a moment before its exec:
// sharing our memory then would let another process of the job write into
// a root process through ptrace. With 0 or 2 the uid change makes it
// undumpable, which only CAP_SYS_PTRACE overrides.
bool UidChangeLeavesDumpable() {
  const int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char c = 0;
  const bool dumpable = read(fd, &c, 1) != 1 || c == '1';
  close(fd);
  return dumpable;
}

// What PROGRAM's process does between its clone and its exec (RunShim).
struct ProgramStart {
  const sigset_t* mask;  // the signal mask to restore
  int out, err;          // its stdout and stderr
  const std::string* sandbox_path;
  const mle::sandbox::SandboxSpec* sandbox;
  const std::string* sandbox_error;  // why the spec could not be read
  const std::string* cwd;
  char* const* program;
};

// Runs in PROGRAM's process, in the shim's memory (CLONE_VM): it changes
// only what is its own (dispositions, descriptors, namespaces, identity) and
// never returns.
[[noreturn]] int StartProgram(void* arg) {
  const auto& p = *static_cast<const ProgramStart*>(arg);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  sigprocmask(SIG_SETMASK, p.mask, nullptr);
  dup2(p.out, 1);
  dup2(p.err, 2);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);  // dup2 makes fd 0 inheritable
  if (devnull >= 0) dup2(devnull, 0);
  if (!p.sandbox_path->empty()) {
    const std::string error = p.sandbox_error->empty() ? mle::sandbox::EnterSandbox(*p.sandbox) : *p.sandbox_error;
    if (!error.empty()) {
      fprintf(stderr, "mlengine-replica: cannot start the replica in its sandbox: %s\n", error.c_str());
      _exit(126);
    }
  } else if (!p.cwd->empty() && chdir(p.cwd->c_str()) != 0) {
    fprintf(stderr, "mlengine-replica: cannot enter working directory %s: %s\n", p.cwd->c_str(), strerror(errno));
    _exit(127);
  }
  execvp(p.program[0], p.program);
  fprintf(stderr, "mlengine-replica: cannot start %s: %s\n", p.program[0], strerror(errno));
  _exit(127);
}

// Asks the zygote on `socket_path` to fork the replica described by the
// spec in `spec_path`, with `in`, `out` and `err` as its stdio. The open
// connection (the caller reads "status S" from it), or -1 with `why`.
int ForkFromZygote(const std::string& socket_path, const std::string& spec_path, int in, int out, int err,
                   pid_t* pid, std::string* why) {
  std::string spec;
  {
    const int fd = open(spec_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *why = "cannot read " + spec_path + ": " + strerror(errno);
      return -1;
    }
    char buf[65536];
    ssize_t got;
    while ((got = read(fd, buf, sizeof(buf))) > 0) spec.append(buf, static_cast<size_t>(got));
    close(fd);
    while (!spec.empty() && (spec.back() == '\n' || spec.back() == '\r')) spec.pop_back();
    spec.push_back('\n');
  }
  sockaddr_un addr{};
  const int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  if (conn < 0 || socket_path.size() >= sizeof(addr.sun_path)) {
    *why = "no warm interpreter socket";
    if (conn >= 0) close(conn);
    return -1;
  }
  memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (connect(conn, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *why = std::string("the runtime's warm interpreter is not running (") + strerror(errno) + ")";
    close(conn);
    return -1;
  }
  // The spec's first bytes carry the three descriptors.
  const int fds[3] = {in, out, err};
  ssize_t sent = mle::shim::SendWithDescriptors(conn, spec.data(), spec.size(), fds, 3);
  while (sent >= 0 && static_cast<size_t>(sent) < spec.size()) {
    const ssize_t more = send(conn, spec.data() + sent, spec.size() - static_cast<size_t>(sent), MSG_NOSIGNAL);
    if (more <= 0) {
      sent = -1;
      break;
    }
    sent += more;
  }
  if (sent < 0) {
    *why = std::string("cannot hand the replica to the warm interpreter: ") + strerror(errno);
    close(conn);
    return -1;
  }
  std::string answer;
  const int64_t deadline = NowMs() + 10000;
  while (answer.find('\n') == std::string::npos && NowMs() < deadline) {
    pollfd p = {conn, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[128];
    const ssize_t got = read(conn, buf, sizeof(buf));
    if (got <= 0) break;
    answer.append(buf, static_cast<size_t>(got));
  }
  long value = 0;
  if (answer.rfind("pid ", 0) != 0 || (value = strtol(answer.c_str() + 4, nullptr, 10)) <= 1) {
    answer = answer.substr(0, answer.find('\n'));
    // "cold: WHY": what the warm interpreter cannot make fresh.
    *why = answer.rfind("cold: ", 0) == 0 ? answer.substr(6)
                                          : "the warm interpreter did not start the replica" +
                                                (answer.empty() ? std::string() : ": " + answer);
    close(conn);
    return -1;
  }
  *pid = static_cast<pid_t>(value);
  return conn;
}

}  // namespace

namespace mle::shim {

int RunShim(int argc, char** argv) {
  std::string log_path, exit_path, cwd, container, podman, warm_socket, spec_path, note, sandbox_path, progress_path;
  long grace_seconds = 10;
  long progress_every_ms = 0;
  std::vector<int> join_ports;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (i + 1 >= argc) return Usage();
    if (a == "--log") log_path = argv[++i];
    else if (a == "--exit") exit_path = argv[++i];
    else if (a == "--cwd") cwd = argv[++i];
    else if (a == "--container") container = argv[++i];
    else if (a == "--podman") podman = argv[++i];
    else if (a == "--warm") warm_socket = argv[++i];
    else if (a == "--spec") spec_path = argv[++i];
    else if (a == "--note") note = argv[++i];
    else if (a == "--sandbox") sandbox_path = argv[++i];
    else if (a == "--progress") progress_path = argv[++i];
    else if (a == "--join-ports") {
      for (char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        const long port = strtol(p, &end, 10);
        if (end == p || port <= 0 || port > 65535) return Usage();
        join_ports.push_back(static_cast<int>(port));
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return Usage();
      }
    }
    else if (a == "--progress-every-ms") {
      char* end = nullptr;
      progress_every_ms = strtol(argv[++i], &end, 10);
      if (*end != '\0' || progress_every_ms < 100) return Usage();
    }
    else if (a == "--grace") {
      char* end = nullptr;
      grace_seconds = strtol(argv[++i], &end, 10);
      if (*end != '\0' || grace_seconds < 0) return Usage();
    } else {
      return Usage();
    }
  }
  if (log_path.empty() || exit_path.empty() || i >= argc) return Usage();
  if (container.empty() != podman.empty()) return Usage();
  if (warm_socket.empty() != spec_path.empty() || (!warm_socket.empty() && !container.empty())) {
    return Usage();
  }
  if (!sandbox_path.empty() && !container.empty()) return Usage();  // podman runs as root; the container is confined
  if (progress_path.empty() != (progress_every_ms == 0)) return Usage();
  if (!join_ports.empty() && progress_path.empty()) return Usage();
  std::vector<char*> program(argv + i, argv + argc);
  program.push_back(nullptr);
  // Read while we are root and before anything starts; a spec that cannot
  // be read fails the replica in its child (its reason in the log).
  mle::sandbox::SandboxSpec sandbox;
  std::string sandbox_error;
  if (sandbox_path == "-") {
    // The spec came in our environment (executor/sandboxing.h): it is
    // taken out before anything of the replica starts.
    using mle::sandbox::kSpecVariable;
    const char* text = getenv(kSpecVariable);
    if (text == nullptr) {
      sandbox_error = std::string("--sandbox -: ") + kSpecVariable + " is not set";
    } else if (!mle::sandbox::ParseSpec(text, &sandbox, &sandbox_error)) {
      sandbox_error = std::string("the sandbox spec in ") + kSpecVariable + ": " + sandbox_error;
    }
    unsetenv(kSpecVariable);
  } else if (!sandbox_path.empty()) {
    mle::sandbox::ReadSpec(sandbox_path, &sandbox, &sandbox_error);
  }

  setsid();  // a no-op when the executor already spawned us as a session leader
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    fprintf(stderr, "mlengine-replica: cannot become a subreaper: %s\n", strerror(errno));
    return 126;
  }
  log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    fprintf(stderr, "mlengine-replica: cannot open %s: %s\n", log_path.c_str(), strerror(errno));
    return 126;
  }
  const int exit_reserved = ReserveExitFile(exit_path);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, "mlengine-replica: cannot create pipes: %s\n", strerror(errno));
    return 126;
  }
  // Handlers (not SIG_IGN) so PROGRAM starts with default dispositions.
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  // The child must not run our handler (a stop signal in the moment between
  // fork and exec would be swallowed): stop signals stay blocked across the
  // fork; the child restores their default action before unblocking them.
  sigset_t stop_signals, before;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop_signals, &before);
  // An accelerator the operator declared simulated: the log says so before
  // the trainer's first line, as its environment does.
  if (const char* simulated = getenv("MLENGINE_SIMULATED_ACCELERATOR"); simulated != nullptr && *simulated != '\0') {
    std::string name = simulated;
    if (const size_t mark = name.find(" (simulated)"); mark != std::string::npos) name.resize(mark);
    EmitLine('O', "mlengine: the accelerator " + name +
                      " is simulated (declared by the operator; none on this host): the trainer runs on the CPU");
  }
  ChildStatus c;
  int zygote = -1;  // a forked warm start: the connection its status comes on
  if (!warm_socket.empty()) {
    std::string why;
    int devnull_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    zygote = ForkFromZygote(warm_socket, spec_path, devnull_in, out[1], err[1], &c.child, &why);
    if (devnull_in >= 0) close(devnull_in);
    EmitLine('O', zygote >= 0 ? (note.empty() ? std::string("mlengine: warm start") : note)
                              : "mlengine: cold start: " + why);
  }
  if (zygote < 0) {
    // The child shares our memory until its exec (CLONE_VM|CLONE_VFORK, as
    // posix_spawn does): a fork would copy our page tables and then fault
    // in a copy of every page either side writes, each fault 10-20 us on a
    // virtual machine that backs guest memory lazily; this costs neither.
    // We are single-threaded and stay suspended until the exec (or its
    // _exit), so the child may use our heap; it runs on a stack of its own.
    // It forks where sharing is unsafe (UidChangeLeavesDumpable) and in
    // ThreadSanitizer's builds (the sanitizer takes every clone for a fork
    // and cannot follow a child that shares its memory).
    ProgramStart start{&before, out[1], err[1], &sandbox_path, &sandbox, &sandbox_error, &cwd, program.data()};
    const bool share = !MLE_SHIM_TSAN && (sandbox_path.empty() || !UidChangeLeavesDumpable());
    alignas(64) char stack[128 * 1024];
    if (share) {
      c.child = clone(StartProgram, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
    } else if ((c.child = fork()) == 0) {
      StartProgram(&start);
    }
  }
  if (c.child < 0) return 126;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  close(out[1]);
  close(err[1]);
  // PROGRAM's end wakes the loop at once: its pipes reach EOF a moment
  // before it can be reaped (a process closes its files, then its mount
  // and pid namespaces go, then it becomes a zombie), and without this
  // the loop slept out its poll timeout (up to 100 ms a replica) in that
  // moment. A forked warm start says its end on the zygote's connection.
  int child_fd = zygote < 0 ? static_cast<int>(syscall(SYS_pidfd_open, c.child, 0)) : -1;

  Stream streams[2] = {{out[0], 'O', {}}, {err[0], 'E', {}}};
  int64_t next_progress = progress_every_ms > 0 ? NowMs() : -1;  // when to sample the replica's CPU next
  int joined = join_ports.empty() ? -1 : 0;  // with --join-ports: whether it connected (sticky)
  int64_t kill_at = -1;     // after a stop request: when the grace period ends
  int64_t output_deadline = -1;  // after PROGRAM ended: how long to wait for its last output
  std::string zygote_answer;
  for (;;) {
    pollfd fds[5];
    Stream* which[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    int n = 0;
    for (auto& s : streams) {
      if (!s.open) continue;
      fds[n] = {s.fd, POLLIN, 0};
      which[n++] = &s;
    }
    const int zygote_at = zygote >= 0 ? n : -1;
    if (zygote >= 0) fds[n++] = {zygote, POLLIN, 0};
    const int child_at = child_fd >= 0 ? n : -1;
    if (child_fd >= 0) fds[n++] = {child_fd, POLLIN, 0};
    fds[n++] = {signal_pipe[0], POLLIN, 0};
    // Without a pidfd (a kernel before 5.3), poll often once the output is
    // over, when only the reaping is left.
    const bool output_over = !streams[0].open && !streams[1].open;
    int r = poll(fds, n, child_fd < 0 && output_over && !c.exited ? 5 : 100);
    if (r > 0) {
      for (int k = 0; k < n; ++k) {
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (which[k] != nullptr) {
          Drain(*which[k]);
        } else if (k == child_at) {
          close(child_fd);  // it ended: reaped below
          child_fd = -1;
        } else if (k == zygote_at) {
          // "status S" once the forked replica ends; nothing (the zygote
          // died) counts as the replica killed.
          char buf[128];
          const ssize_t got = read(zygote, buf, sizeof(buf));
          if (got > 0) zygote_answer.append(buf, static_cast<size_t>(got));
          const bool done = zygote_answer.find('\n') != std::string::npos;
          if (done || got <= 0) {
            c.exited = true;
            c.status = done && zygote_answer.rfind("status ", 0) == 0
                           ? static_cast<int>(strtol(zygote_answer.c_str() + 7, nullptr, 10))
                           : SIGKILL;
            close(zygote);
            zygote = -1;
          }
        } else {
          char drain[16];
          while (read(signal_pipe[0], drain, sizeof(drain)) > 0) {
          }
          if (kill_at < 0 && !c.exited) {
            if (container.empty()) {
              SignalDescendants(SIGTERM, zygote >= 0 ? c.child : 0);
              kill_at = NowMs() + grace_seconds * 1000;
            } else {
              // podman stops it (TERM, then KILL after the grace period);
              // killing processes ourselves is the last resort.
              StartHelper({podman, "stop", "-t", std::to_string(grace_seconds), container});
              kill_at = NowMs() + (grace_seconds + 15) * 1000;
            }
          }
        }
      }
    }
    ReapEnded(c);
    const int64_t now = NowMs();
    if (next_progress >= 0 && now >= next_progress && !c.exited) {
      const pid_t root = zygote >= 0 ? c.child : 0;
      if (joined == 0 && TreeConnectedOn(root, join_ports)) joined = 1;
      WriteProgress(progress_path, TreeCpuTicks(root), joined);
      next_progress = now + progress_every_ms;
    }
    if (kill_at >= 0 && now >= kill_at && !c.exited) {
      SignalDescendants(SIGKILL, zygote >= 0 ? c.child : 0);
      kill_at = now + 1000;  // and again, for stragglers
    }
    if (c.exited) {
      if (!streams[0].open && !streams[1].open) break;
      // Something PROGRAM started still holds the pipes: keep what is
      // already written, but stop waiting for more after a moment.
      if (output_deadline < 0) output_deadline = now + 1000;
      if (now >= output_deadline) break;
    }
  }
  for (auto& s : streams) Flush(s);
  if (child_fd >= 0) close(child_fd);

  char text[64];
  int code;
  if (WIFSIGNALED(c.status)) {
    snprintf(text, sizeof(text), "signal %d\n", WTERMSIG(c.status));
    code = 128 + WTERMSIG(c.status);
  } else {
    code = WEXITSTATUS(c.status);
    snprintf(text, sizeof(text), "exit %d\n", code);
  }
  bool recorded = WriteExitFile(exit_path, text, exit_reserved);
  if (!recorded) {
    fprintf(stderr, "mlengine-replica: cannot record the exit status in %s: %s; trying again every second\n",
            exit_path.c_str(), strerror(errno));
  }
  // Leftovers (daemons, helpers in their own sessions, children that
  // ignored SIGTERM or outlived a successful PROGRAM) end with the replica,
  // before the shim does: once the executor sees the shim gone, nothing is.
  // `podman run --rm` removed its container if it ended by itself (125: a
  // podman error, after which a created container may remain); otherwise
  // (stopped, killed) make sure it is gone.
  const bool client_removed = !WIFSIGNALED(c.status) && WEXITSTATUS(c.status) != 125 && kill_at < 0;
  if (!container.empty() && !client_removed) {
    RunHelper({podman, "rm", "-f", "-t", "0", "--ignore", container}, 60000);
  }
  KillAllDescendants(c);
  // How the replica ended is owed to mlengined (without it the job's end is
  // unknown and it would be run again): on a full disk, wait for room. The
  // shim stays (the job shows RUNNING) until then, or until it is stopped.
  while (!recorded) {
    pollfd stop{signal_pipe[0], POLLIN, 0};
    if (poll(&stop, 1, 1000) > 0) break;  // stopped (SIGTERM): give up the record
    recorded = WriteExitFile(exit_path, text, -1);
  }
  return code;
}

}  // namespace mle::shim

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--fork-server") == 0) return mle::shim::ServeForks(argc, argv);
  return mle::shim::RunShim(argc, argv);
}
