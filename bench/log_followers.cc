// log_followers: N followers of one job's logs for bench/log_follow.py, in
// one thread on epoll, so that the client's own cost does not hide the
// server's (the Python client reads a thousand answers one by one).
//
//   log_followers HOST PORT TOKEN JOB FOLLOWERS LINES
//
// Each follower long-polls GET /v1/projects/bench/jobs/JOB/logs
// (waitSeconds=10) over its own kept-alive connection, as `mlengine jobs
// stream-logs` does, until it has seen LINES lines "tick I T" (T: when the
// trainer printed it) or the job ended. Prints "I LATENCY_MS" for every
// line every follower got.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

double Now() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

std::string Escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

struct Follower {
  int fd = -1;
  std::string token;  // the page token to ask from
  std::string in;     // what was read of the current answer
  int lines = 0;
  bool done = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: log_followers HOST PORT TOKEN JOB FOLLOWERS LINES\n");
    return 2;
  }
  const std::string host = argv[1], bearer = argv[3], job = argv[4];
  const int port = atoi(argv[2]), n = atoi(argv[5]), want = atoi(argv[6]);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    fprintf(stderr, "log_followers: %s is not an IPv4 address\n", host.c_str());
    return 2;
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Follower> followers(static_cast<size_t>(n));
  auto ask = [&](Follower& f) {
    const std::string request = "GET /v1/projects/bench/jobs/" + job +
                                "/logs?waitSeconds=10&prettyPrint=false&pageToken=" + Escape(f.token) +
                                " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + bearer + "\r\n\r\n";
    return send(f.fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
  };
  for (int i = 0; i < n; ++i) {
    Follower& f = followers[static_cast<size_t>(i)];
    f.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(f.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(f.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || !ask(f)) {
      fprintf(stderr, "log_followers: connect: %s\n", strerror(errno));
      return 1;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, f.fd, &ev);
  }
  std::string out;
  int active = n;
  std::vector<epoll_event> events(256);
  char buf[65536];
  while (active > 0) {
    const int ready = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 30000);
    if (ready <= 0) {
      fprintf(stderr, "log_followers: nothing for 30 s; %d followers still waiting\n", active);
      break;
    }
    for (int k = 0; k < ready; ++k) {
      Follower& f = followers[events[static_cast<size_t>(k)].data.u32];
      const ssize_t got = recv(f.fd, buf, sizeof(buf), 0);
      const double now = Now();  // when this answer (or its last part) arrived
      if (got <= 0) {
        fprintf(stderr, "log_followers: the server closed a connection\n");
        return 1;
      }
      f.in.append(buf, static_cast<size_t>(got));
      const size_t head_end = f.in.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      size_t length = 0;
      const size_t cl = f.in.find("Content-Length: ");
      const size_t cl_lower = f.in.find("content-length: ");
      const size_t at = cl != std::string::npos && cl < head_end ? cl : cl_lower;
      if (at == std::string::npos || at > head_end) {
        fprintf(stderr, "log_followers: an answer without Content-Length\n");
        return 1;
      }
      length = strtoul(f.in.c_str() + at + 16, nullptr, 10);
      if (f.in.size() < head_end + 4 + length) continue;
      const auto page = nlohmann::json::parse(f.in.substr(head_end + 4, length), nullptr, false);
      f.in.erase(0, head_end + 4 + length);
      if (!page.is_object()) {
        fprintf(stderr, "log_followers: an answer that is not JSON\n");
        return 1;
      }
      for (const auto& e : page.value("entries", nlohmann::json::array())) {
        const std::string message = e.value("message", "");
        int line = 0;
        double printed = 0;
        if (sscanf(message.c_str(), "tick %d %lf", &line, &printed) != 2) continue;
        out += std::to_string(line) + " " + std::to_string((now - printed) * 1000.0) + "\n";
        ++f.lines;
      }
      f.token = page.value("nextPageToken", f.token);
      if (f.lines >= want || page.value("jobEnded", false)) {
        f.done = true;
        --active;
        close(f.fd);
        continue;
      }
      if (!ask(f)) {
        fprintf(stderr, "log_followers: send: %s\n", strerror(errno));
        return 1;
      }
    }
  }
  fwrite(out.data(), 1, out.size(), stdout);
  return active == 0 ? 0 : 1;
}
