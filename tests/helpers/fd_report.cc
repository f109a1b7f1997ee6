// fd_report REPORT: writes to the file REPORT what this process was given:
//   fd N TARGET      each open descriptor but its own (readlink of /proc/self/fd/N)
//   pid P / pgid G / sid S
//   SigBlk: HEX / SigIgn: HEX   (from /proc/self/status)
// A helper of subprocess_test; exits 0 once the report is written.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int report = ::open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (report < 0) return 3;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 4;
  std::string out;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == report || fd == ::dirfd(dir)) continue;
    char target[4096];
    const std::string link = "/proc/self/fd/" + std::string(e->d_name);
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    out += "fd " + std::string(e->d_name) + " " + std::string(target, n > 0 ? static_cast<size_t>(n) : 0) + "\n";
  }
  ::closedir(dir);
  out += "pid " + std::to_string(::getpid()) + "\n";
  out += "pgid " + std::to_string(::getpgrp()) + "\n";
  out += "sid " + std::to_string(::getsid(0)) + "\n";
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0 || line.rfind("SigIgn:", 0) == 0) out += line + "\n";
  }
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    const ssize_t w = ::write(report, p, left);
    if (w <= 0) return 5;
    p += w;
    left -= static_cast<size_t>(w);
  }
  return ::close(report) == 0 ? 0 : 6;
}
