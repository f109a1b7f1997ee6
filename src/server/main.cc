// mlengined: the mlengine API server. Wiring only: read flags, open the data
// directory, recover state, start the scheduler and the HTTP API, wait for a
// signal, shut down in order. No application logic lives here.

#include <fcntl.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/strings/string_view.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/api_router.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "common/clock.h"
#include "db/store.h"
#include "scheduler/scheduler.h"
#include "service/job_service.h"
#include "validate/validate.h"

namespace fs = std::filesystem;

namespace {

int Fail(const std::string& message) {
  std::cerr << "mlengined: " << message << "\n";
  return 1;
}

// Reads DIR/admin.token, creating it (mode 0600) with a fresh random token on
// first start.
absl::StatusOr<std::string> LoadOrCreateAdminToken(const fs::path& dir) {
  const fs::path path = dir / "admin.token";
  std::ifstream in(path);
  if (in) {
    std::string token;
    std::getline(in, token);
    if (!token.empty()) return token;
  }
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return absl::InternalError("cannot generate a random token");
  std::string token = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", path.string(), ": ", strerror(errno)));
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return absl::UnavailableError(absl::StrCat("cannot write ", path.string()));
  return token;
}

bool SplitListen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  uint32_t p = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &p) || p > 65535) return false;
  *port = static_cast<uint16_t>(p);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mlengined: a self-hosted AI Platform Training (ml v1) API server.\n"
      "Keeps all state under --data-dir; on first start it writes an admin token to\n"
      "DATA_DIR/admin.token (mode 0600). Every request needs\n"
      "\"Authorization: Bearer <that token>\"."};
  std::string listen = "127.0.0.1:8080";
  std::string data_dir;
  int threads = 2;
  bool relaxed_sync = false;
  uint64_t body_limit = 1 << 20;
  app.add_option("--listen", listen, "Address and port to serve on; port 0 picks a free one and prints it")
      ->capture_default_str();
  app.add_option("--data-dir", data_dir, "Directory for all state (database, token, logs)")->required();
  app.add_option("--threads", threads, "HTTP worker threads")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", body_limit, "Largest request body accepted (larger: 413)")->capture_default_str();
  app.add_flag("--relaxed-sync", relaxed_sync,
               "Commit without fsync (SQLite synchronous=NORMAL): survives a crash of mlengined, "
               "not of the machine");
  CLI11_PARSE(app, argc, argv);

  std::string host;
  uint16_t port = 0;
  if (!SplitListen(listen, &host, &port)) return Fail("--listen must be HOST:PORT, e.g. 127.0.0.1:8080 (got " + listen + ")");

  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) return Fail("cannot create data directory " + data_dir + ": " + ec.message());
  ::chmod(data_dir.c_str(), 0700);

  auto token = LoadOrCreateAdminToken(data_dir);
  if (!token.ok()) return Fail(std::string(token.status().message()));

  // Block the signals we wait for before any thread starts, so they all inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto store = mle::db::OpenSqliteStore({(fs::path(data_dir) / "mlengine.db").string(), !relaxed_sync});
  if (!store.ok()) return Fail(std::string(store.status().message()));

  auto& clock = mle::common::RealClock::Get();
  mle::service::JobService jobs(**store, clock, mle::validate::Config::Defaults());
  mle::scheduler::Scheduler scheduler(clock, jobs);
  jobs.AttachScheduler(&scheduler);
  if (auto s = jobs.Recover(); !s.ok()) return Fail("cannot recover state: " + std::string(s.message()));
  scheduler.Start();

  mle::api::Authenticator auth(*token);
  mle::api::ApiRouter router(jobs, auth);
  mle::api::HttpServerOptions options;
  options.address = host;
  options.port = port;
  options.threads = threads;
  options.body_limit = body_limit;
  options.error_body = &mle::api::ApiRouter::ErrorBody;
  auto server = mle::api::HttpServer::Start(
      options, [&router](mle::api::HttpRequest req, mle::api::Responder respond) {
        router.Handle(std::move(req), std::move(respond));
      });
  if (!server.ok()) return Fail(std::string(server.status().message()));

  const std::string endpoint = absl::StrCat("http://", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                                            ":", (*server)->port());
  {
    // Where clients (the mlengine CLI) find this server.
    std::ofstream out(fs::path(data_dir) / "server.json");
    out << "{\"endpoint\": \"" << endpoint << "\", \"token_file\": \""
        << (fs::absolute(data_dir) / "admin.token").string() << "\", \"pid\": " << ::getpid() << "}\n";
  }
  std::cout << "mlengined listening on " << endpoint << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "mlengined: received signal " << sig << ", shutting down\n";
  (*server)->Stop();
  scheduler.Stop();
  return 0;
}
