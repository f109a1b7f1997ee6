// mlengine-replica: runs one replica process and keeps its log and exit
// status on disk, so a replica outlives a restart of mlengined.
//
//   mlengine-replica --log FILE --exit FILE --cwd DIR -- PROGRAM ARGS...
//
// It starts a new session (its own process group, which the executor signals
// to stop the replica and everything it started), runs PROGRAM with stdout and
// stderr on pipes, and appends each line to FILE as
//   <RFC 3339 UTC timestamp> TAB <O|E> TAB <line>
// When PROGRAM ends it writes "exit N" or "signal N" to the exit file
// (atomically: temp file + rename), then ends whatever PROGRAM left behind in
// the process group (SIGKILL to the group, itself included): a replica's
// processes never outlive it. It ignores SIGTERM itself so it can record how
// PROGRAM ended; SIGKILL ends it too.
// Deliberately small and dependency-free: it is on the start-up path of
// every replica.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int log_fd = -1;

std::string Timestamp() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &t);
  snprintf(buf + n, sizeof(buf) - n, ".%06ldZ", ts.tv_nsec / 1000);
  return buf;
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

void EmitLine(char stream, const std::string& line) {
  std::string record = Timestamp();
  record.push_back('\t');
  record.push_back(stream);
  record.push_back('\t');
  for (char c : line) record.push_back(c == '\r' ? ' ' : c);
  record.push_back('\n');
  WriteAll(log_fd, record);
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

int Usage() {
  fprintf(stderr, "usage: mlengine-replica --log FILE --exit FILE --cwd DIR -- PROGRAM [ARGS...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string log_path, exit_path, cwd;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (i + 1 >= argc) return Usage();
    if (a == "--log") log_path = argv[++i];
    else if (a == "--exit") exit_path = argv[++i];
    else if (a == "--cwd") cwd = argv[++i];
    else return Usage();
  }
  if (log_path.empty() || exit_path.empty() || i >= argc) return Usage();
  std::vector<char*> program(argv + i, argv + argc);
  program.push_back(nullptr);

  setsid();  // a no-op when the executor already spawned us as a session leader
  log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    fprintf(stderr, "mlengine-replica: cannot open %s: %s\n", log_path.c_str(), strerror(errno));
    return 126;
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return 126;

  pid_t child = fork();
  if (child < 0) return 126;
  if (child == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      fprintf(stderr, "mlengine-replica: cannot enter working directory %s: %s\n", cwd.c_str(), strerror(errno));
      _exit(127);
    }
    execvp(program[0], program.data());
    fprintf(stderr, "mlengine-replica: cannot start %s: %s\n", program[0], strerror(errno));
    _exit(127);
  }
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  close(out[1]);
  close(err[1]);

  Stream streams[2] = {{out[0], 'O', {}}, {err[0], 'E', {}}};
  int status = 0;
  bool exited = false;
  int quiet_polls_after_exit = 0;
  while (streams[0].open || streams[1].open) {
    pollfd fds[2];
    int n = 0;
    Stream* which[2];
    for (auto& s : streams) {
      if (!s.open) continue;
      fds[n] = {s.fd, POLLIN, 0};
      which[n++] = &s;
    }
    int r = poll(fds, n, 200);
    if (r > 0) {
      for (int k = 0; k < n; ++k) {
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) Drain(*which[k]);
      }
    }
    if (!exited && waitpid(child, &status, WNOHANG) == child) exited = true;
    // The program is gone but something it started keeps the pipes open:
    // give it a moment, then stop waiting for the rest of the output.
    if (exited && r == 0 && ++quiet_polls_after_exit >= 5) break;
  }
  if (!exited) {
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }

  char text[64];
  int code;
  if (WIFSIGNALED(status)) {
    snprintf(text, sizeof(text), "signal %d\n", WTERMSIG(status));
    code = 128 + WTERMSIG(status);
  } else {
    code = WEXITSTATUS(status);
    snprintf(text, sizeof(text), "exit %d\n", code);
  }
  std::string tmp = exit_path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    WriteAll(fd, text);
    fsync(fd);
    close(fd);
    rename(tmp.c_str(), exit_path.c_str());
  }
  fsync(log_fd);
  // Leftovers (children that ignored SIGTERM, or outlived a successful
  // PROGRAM) die with the replica. This ends the shim too; the executor reads
  // the exit file, not the shim's status.
  kill(-getpgrp(), SIGKILL);
  return code;
}
