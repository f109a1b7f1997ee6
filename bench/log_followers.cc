// log_followers: N followers of one job's logs for bench/log_follow.py, in
// one thread on epoll, so that the client's own cost does not hide the
// server's (the Python client reads a thousand answers one by one).
//
//   log_followers HOST PORT TOKEN JOB FOLLOWERS LINES [sse|poll]
//
// Each follower, over its own connection, follows GET
// /v1/projects/bench/jobs/JOB/logs: with sse (the default), in one streamed
// response (alt=sse), as `mlengine jobs stream-logs` and the console do;
// with poll, long-polled (waitSeconds=10) as they did before. It stops when
// it has seen LINES lines "tick I T" (T: when the trainer printed it) or
// the job ended. Prints "I LATENCY_MS" for every line every follower got.
//
//   log_followers --floor FOLLOWERS LINES EVERY_MS BYTES
//
// The floor of this machine, for comparison: no server, no HTTP, no log.
// FOLLOWERS loopback connections; every EVERY_MS, two threads write BYTES
// (a line's event is about 330) to each (half each, as mlengined's two
// sending threads do), and this reader takes them as it takes the server's
// events. Prints the same "I LATENCY_MS" lines.
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
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/beast/http.hpp>
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

namespace http = boost::beast::http;

struct Follower {
  int fd = -1;
  std::string token;  // the page token to ask from
  std::string in;     // what was read of the current answer
  int lines = 0;
  bool done = false;
  // sse: the streamed response, parsed as it comes (its body holds the
  // events not yet taken).
  std::unique_ptr<http::response_parser<http::string_body>> stream;
};

// See --floor above.
int Floor(int n, int lines, int every_ms, size_t bytes) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 4096) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    fprintf(stderr, "log_followers: listen: %s\n", strerror(errno));
    return 1;
  }
  const int one = 1;
  std::vector<int> readers(static_cast<size_t>(n)), writers(static_cast<size_t>(n));
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  for (int i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    readers[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(readers[k], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(readers[k], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        (writers[k] = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) < 0) {
      fprintf(stderr, "log_followers: connect: %s\n", strerror(errno));
      return 1;
    }
    setsockopt(writers[k], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, readers[k], &ev);
  }
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int line = 0; line < lines && !stop; ++line) {
      std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
      char stamp[64];
      const int m = snprintf(stamp, sizeof(stamp), "%d %.6f ", line, Now());
      std::string msg(stamp, static_cast<size_t>(m));
      msg.resize(std::max(bytes, msg.size()), 'x');
      auto write = [&](size_t from, size_t to) {
        for (size_t k = from; k < to; ++k) send(writers[k], msg.data(), msg.size(), MSG_NOSIGNAL);
      };
      std::thread half(write, 0, writers.size() / 2);
      write(writers.size() / 2, writers.size());
      half.join();
    }
  });
  std::vector<std::pair<double, std::string>> arrived;
  std::vector<epoll_event> events(1024);
  char buf[65536];
  const size_t want = static_cast<size_t>(n) * static_cast<size_t>(lines);
  while (arrived.size() < want) {
    const int ready = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 30000);
    if (ready <= 0) break;
    for (int k = 0; k < ready; ++k) {
      const ssize_t got = recv(readers[events[static_cast<size_t>(k)].data.u32], buf, sizeof(buf), 0);
      const double now = Now();
      // Each write arrives whole here (a few hundred bytes on loopback).
      if (got > 0) arrived.emplace_back(now, std::string(buf, static_cast<size_t>(std::min<ssize_t>(got, 64))));
    }
  }
  stop = true;
  writer.join();
  std::string out;
  for (const auto& [when, head] : arrived) {
    int line = 0;
    double sent = 0;
    if (sscanf(head.c_str(), "%d %lf", &line, &sent) == 2) {
      out += std::to_string(line) + " " + std::to_string((when - sent) * 1000.0) + "\n";
    }
  }
  fwrite(out.data(), 1, out.size(), stdout);
  return arrived.size() == want ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--floor") {
    return Floor(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), static_cast<size_t>(atoi(argv[5])));
  }
  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: log_followers HOST PORT TOKEN JOB FOLLOWERS LINES [sse|poll]\n");
    return 2;
  }
  const std::string host = argv[1], bearer = argv[3], job = argv[4];
  const bool sse = argc == 7 || std::string(argv[7]) == "sse";
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
    const std::string request = "GET /v1/projects/bench/jobs/" + job + "/logs?" +
                                (sse ? "alt=sse" : "waitSeconds=10&prettyPrint=false") +
                                "&pageToken=" + Escape(f.token) + " HTTP/1.1\r\nHost: " + host +
                                "\r\nAuthorization: Bearer " + bearer + "\r\n\r\n";
    if (sse) {
      f.stream = std::make_unique<http::response_parser<http::string_body>>();
      f.stream->body_limit(boost::none);
      f.stream->eager(true);
    }
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
  // Takes a page's lines; whether the follower is done.
  auto take = [&](Follower& f, const nlohmann::json& page, double now) {
    for (const auto& e : page.value("entries", nlohmann::json::array())) {
      const std::string message = e.value("message", "");
      int line = 0;
      double printed = 0;
      if (sscanf(message.c_str(), "tick %d %lf", &line, &printed) != 2) continue;
      out += std::to_string(line) + " " + std::to_string((now - printed) * 1000.0) + "\n";
      ++f.lines;
    }
    f.token = page.value("nextPageToken", f.token);
    return f.lines >= want || page.value("jobEnded", false);
  };
  std::vector<std::pair<double, std::string>> arrived;  // sse: (when, event)
  int active = n;
  std::vector<epoll_event> events(1024);
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
      if (sse) {
        // The stream's bytes through Beast's parser (what it leaves, an
        // unfinished chunk, waits in f.in); each event is "data: JSON\n\n".
        f.in.append(buf, static_cast<size_t>(got));
        boost::beast::error_code ec;
        while (!f.in.empty() && !f.stream->is_done()) {
          const size_t used = f.stream->put(boost::asio::buffer(f.in), ec);
          f.in.erase(0, used);
          if (ec == http::error::need_more) {
            ec = {};
            break;
          }
          if (ec || used == 0) break;
        }
        if (f.stream->is_header_done() && f.stream->get().result_int() != 200) {
          fprintf(stderr, "log_followers: HTTP %u\n", f.stream->get().result_int());
          return 1;
        }
        if (ec) {
          fprintf(stderr, "log_followers: %s\n", ec.message().c_str());
          return 1;
        }
        // The events are kept with when they came and parsed at the end:
        // this one thread stands for a thousand clients, and parsing here
        // would delay the reads of the others. Until then, a cheap look for
        // the lines and the job's end.
        std::string& body = f.stream->get().body();
        bool done = false;
        size_t end;
        while ((end = body.find("\n\n")) != std::string::npos) {
          std::string event = body.substr(0, end);
          body.erase(0, end + 2);
          for (size_t at = event.find("\"tick "); at != std::string::npos; at = event.find("\"tick ", at + 1)) ++f.lines;
          done = done || f.lines >= want || event.find("\"jobEnded\":true") != std::string::npos;
          arrived.emplace_back(now, std::move(event));
        }
        if (done || f.stream->is_done()) {
          f.done = true;
          --active;
          close(f.fd);
        }
        continue;
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
      if (take(f, page, now)) {
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
  for (const auto& [when, event] : arrived) {
    if (event.rfind("data: ", 0) != 0) continue;
    const auto page = nlohmann::json::parse(event.substr(6), nullptr, false);
    if (!page.is_object()) {
      fprintf(stderr, "log_followers: an event that is not JSON\n");
      return 1;
    }
    Follower scratch;
    take(scratch, page, when);
  }
  fwrite(out.data(), 1, out.size(), stdout);
  return active == 0 ? 0 : 1;
}
