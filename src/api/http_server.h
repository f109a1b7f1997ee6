// HttpServer: a small HTTP/1.1 server on Boost.Beast (asynchronous, keep-alive,
// bounded request sizes). It knows nothing of the API: each request is handed
// to a Handler with a Responder that may be called later from any thread
// (e.g. after a durable write), exactly once.
//
// Thread-safe. Owns its io threads; Stop() closes the listener and joins them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::api {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string authorization;
  std::string content_type;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=UTF-8";
  std::string body;
};

using Responder = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest, Responder)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0 = pick a free port
  int threads = 2;
  uint64_t body_limit = 1 << 20;  // bytes; larger bodies get 413
  // Called to render errors the server produces itself (413, 400 malformed
  // HTTP): (http status, canonical status name, message) -> body.
  std::function<std::string(int, const std::string&, const std::string&)> error_body;
};

class HttpServer {
 public:
  // Binds and starts serving. The bound port is port().
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, Handler handler);
  ~HttpServer();
  uint16_t port() const;
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mle::api
