// mlengine-sandbox: runs a program inside a sandbox mlengined described.
//
//   mlengine-sandbox --spec FILE -- PROGRAM [ARGS...]
//
// Enters the sandbox of FILE (sandbox/spec.h: identity, cgroups, file
// system view; see sandbox/enter.h) and execs PROGRAM there, with the
// environment it was given. mlengined builds a job's packages through it
// (setup.py runs as the job's identity, seeing only its build directory),
// and an operator can use it to look at a job's view from inside
// (docs/security.md). Exits 126 when the sandbox cannot be entered (saying
// why on stderr) and 127 when PROGRAM cannot be started. Needs root.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "sandbox/enter.h"
#include "sandbox/spec.h"

int main(int argc, char** argv) {
  if (argc < 5 || std::string(argv[1]) != "--spec" || std::string(argv[3]) != "--") {
    std::fprintf(stderr, "usage: mlengine-sandbox --spec FILE -- PROGRAM [ARGS...]\n");
    return 2;
  }
  mle::sandbox::SandboxSpec spec;
  std::string error;
  if (!mle::sandbox::ReadSpec(argv[2], &spec, &error) || !(error = mle::sandbox::EnterSandbox(spec)).empty()) {
    std::fprintf(stderr, "mlengine-sandbox: cannot enter the sandbox: %s\n", error.c_str());
    return 126;
  }
  ::execvp(argv[4], argv + 4);
  std::fprintf(stderr, "mlengine-sandbox: cannot start %s: %s\n", argv[4], std::strerror(errno));
  return 127;
}
