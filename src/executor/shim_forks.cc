#include "executor/shim_forks.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "shim/fork_protocol.h"

namespace mle::executor {
namespace {

// The room a forked shim's command line and environment may take: the
// server's padding (an argument, and a variable, each under the kernel's
// 128 KiB limit on one string). A shim's command line is the paths of its
// run and the trainer's arguments; its environment the replica's, with a
// sandbox spec of a few KiB. Larger ones are executed.
constexpr size_t kArgRoom = 32 * 1024;
constexpr size_t kEnvRoom = 120 * 1024;
constexpr int kAnswerTimeoutMs = 5000;

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat("the shim's fork server: ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShimForkServer>> ShimForkServer::Start(const std::string& shim) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return Errno("socketpair");
  const int buffer = 1 << 20;  // a request is one packet: room for the largest
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  common::SpawnOptions options;
  options.argv = {shim, "--fork-server", std::string(kArgRoom, '.')};
  options.env = std::map<std::string, std::string>{{"MLENGINE_FORK_ROOM", std::string(kEnvRoom, '.')}};
  options.in = common::Stdio::Fd(sv[1]);
  auto server = common::Spawn(options);
  ::close(sv[1]);
  if (!server.ok()) {
    ::close(sv[0]);
    return server.status();
  }
  pollfd p{sv[0], POLLIN, 0};
  char hello[128];
  ssize_t n = -1;
  if (::poll(&p, 1, 1000) == 1) n = ::recv(sv[0], hello, sizeof(hello), 0);
  const std::string text = n > 0 ? std::string(hello, static_cast<size_t>(n)) : std::string();
  size_t arg_room = 0, env_room = 0;
  std::vector<std::string> rooms =
      absl::StrSplit(absl::StripSuffix(absl::StripPrefix(text, shim::kForkServerHello), "\n"), ' ');
  if (!absl::StartsWith(text, shim::kForkServerHello) || rooms.size() != 2 ||
      !absl::SimpleAtoi(rooms[0], &arg_room) || !absl::SimpleAtoi(rooms[1], &env_room)) {
    ::close(sv[0]);
    return absl::UnavailableError(absl::StrCat("the shim's fork server (", shim, ") did not start: it said \"",
                                               absl::CEscape(text), "\""));
  }
  return std::unique_ptr<ShimForkServer>(new ShimForkServer(*std::move(server), sv[0], arg_room, env_room));
}

ShimForkServer::~ShimForkServer() {
  ::close(sock_);  // it ends at once; the shims it forked run on
  if (server_) server_->Wait();
}

bool ShimForkServer::usable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !broken_;
}

absl::StatusOr<ShimForkServer::Forked> ShimForkServer::Fork(const std::vector<std::string>& argv,
                                                            const std::map<std::string, std::string>& env) {
  std::vector<std::string> vars;
  vars.reserve(env.size());
  for (const auto& [k, v] : env) vars.push_back(absl::StrCat(k, "=", v));
  if (argv.empty() || shim::AreaBytes(argv) > arg_room_ || shim::AreaBytes(vars) > env_room_) {
    return absl::FailedPreconditionError("the shim's command line or environment is larger than its fork server's room");
  }
  const std::string request = shim::EncodeForkRequest(argv, vars);
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return absl::UnavailableError("the shim's fork server is gone");
  auto fail = [this](absl::Status s) {
    broken_ = true;  // out of step with it now: not asked again
    return s;
  };
  if (::send(sock_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    if (errno == EMSGSIZE) return absl::FailedPreconditionError("the request is larger than a packet");
    return fail(Errno("send"));
  }
  pollfd p{sock_, POLLIN, 0};
  int ready;
  while ((ready = ::poll(&p, 1, kAnswerTimeoutMs)) < 0 && errno == EINTR) {
  }
  if (ready != 1) return fail(absl::UnavailableError("the shim's fork server did not answer"));
  int32_t value = 0;
  iovec iov{&value, sizeof(value)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC);
  if (n != static_cast<ssize_t>(sizeof(value))) return fail(Errno("receive"));
  int pidfd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&pidfd, CMSG_DATA(c), sizeof(int));
  }
  if (value <= 0) {
    if (pidfd >= 0) ::close(pidfd);
    return absl::UnavailableError(
        absl::StrCat("the shim's fork server could not fork it: ", std::strerror(value < 0 ? -value : EPROTO)));
  }
  if (pidfd < 0) {
    ::kill(-value, SIGKILL);  // unwatchable: never two shims for one replica
    return fail(absl::UnavailableError("the shim's fork server sent a pid without its pidfd"));
  }
  return Forked{static_cast<pid_t>(value), pidfd};
}

}  // namespace mle::executor
