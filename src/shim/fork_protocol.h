// The wire format between mlengined (executor/shim_forks.h) and the shim's
// fork server (`mlengine-replica --fork-server`, shim/fork_server.cc).
// Header-only and std-only: the shim is a small static binary.
//
// The server's stdin is one end of a SOCK_SEQPACKET socket pair; each
// message is one packet.
//   server -> client, once at start: "mlengine-fork-server 1 ARG_ROOM ENV_ROOM\n"
//     (bytes a forked shim's command line and environment may take: the
//     server's own argument and environment areas, which a forked shim
//     rewrites so that /proc/PID/cmdline and /proc/PID/environ show its
//     own, as an executed shim's would)
//   client -> server: a request, EncodeForkRequest(argv, env)
//   server -> client: an int32 (the forked shim's pid, or -errno) and, with
//     a pid, the shim's pidfd (SCM_RIGHTS)
// The server exits when the client's end closes; shims it forked run on.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace mle::shim {

inline constexpr const char kForkServerHello[] = "mlengine-fork-server 1 ";

// "ARGC\0" then each argument and each "NAME=VALUE" of the environment,
// each followed by a NUL (an argument may be empty; a variable may not).
inline std::string EncodeForkRequest(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string out = std::to_string(argv.size());
  out.push_back('\0');
  for (const auto& a : argv) out.append(a).push_back('\0');
  for (const auto& e : env) out.append(e).push_back('\0');
  return out;
}

// False for a request that is not one (no argument count, fewer arguments
// than it says, no argv[0], an empty variable or one without '=').
inline bool DecodeForkRequest(const char* data, size_t size, std::vector<std::string>* argv,
                              std::vector<std::string>* env) {
  argv->clear();
  env->clear();
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '\0') continue;
    parts.emplace_back(data + start, i - start);
    start = i + 1;
  }
  if (start != size || parts.empty() || parts[0].empty() || parts[0].size() > 6) return false;
  for (char c : parts[0]) {
    if (c < '0' || c > '9') return false;
  }
  const size_t argc = static_cast<size_t>(std::strtoul(parts[0].c_str(), nullptr, 10));
  if (argc == 0 || argc + 1 > parts.size()) return false;
  argv->assign(parts.begin() + 1, parts.begin() + 1 + static_cast<std::ptrdiff_t>(argc));
  env->assign(parts.begin() + 1 + static_cast<std::ptrdiff_t>(argc), parts.end());
  for (const auto& e : *env) {
    if (e.empty() || e.find('=') == std::string::npos || e[0] == '=') return false;
  }
  return true;
}

// The bytes strings take laid out NUL-terminated one after another, as in
// a process's argument or environment area.
inline size_t AreaBytes(const std::vector<std::string>& strings) {
  size_t n = 0;
  for (const auto& s : strings) n += s.size() + 1;
  return n;
}

}  // namespace mle::shim
