// HttpServer: a small HTTP/1.1 server on Boost.Beast (asynchronous, keep-alive,
// bounded request sizes). It knows nothing of the API: each request is handed
// to a Handler with a Responder that may be called later from any thread
// (e.g. after a durable write), exactly once.
//
// Large bodies never sit in memory: requests whose target starts with
// "/upload/" (when options.upload_dir is set) are streamed to a temporary
// file there (MD5 and CRC32C computed on the way, by worker threads) and handed over as
// HttpRequest::body_file; responses may name an open file to send
// (HttpResponse::body_fd / file_path), streamed in pieces. Both directions
// time out only when idle, never because a big transfer takes long.
// "Expect: 100-continue" is answered once the headers are accepted. HEAD
// requests get the headers of the response and never a body.
//
// A target "/_token/TOKEN/storage/..." or "/_token/TOKEN/upload/..." (the
// form Cloud Storage clients in emulator mode can carry a credential in) is
// served as "/storage/..." / "/upload/...", with TOKEN in
// HttpRequest::path_token; the token is never logged. "/b/..." (with or
// without that prefix) is served as "/storage/v1/b/...", the form the
// Node.js client sends in emulator mode.
//
// Every request gets an id (the client's X-Request-Id when acceptable, else
// a fresh one: obs/request_id.h), current while its handler runs and
// returned in the X-Request-Id response header. Each answer is logged (the
// "http" logger: method, path without the query, status, route, duration,
// peer; successful reads at debug, the rest at info, server errors at warn)
// and observed in obs::Metrics::Default()'s request latency.
//
// A response may also be a stream (HttpResponse::stream): its body is sent
// in pieces as the handler has them (chunked transfer coding), for
// server-sent events.
//
// Thread-safe. Owns its io threads; Stop() closes the listener and joins them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/checksums.h"

namespace mle::api {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string authorization;
  std::string content_type;
  std::string request_id;      // this request's id (see above)
  std::string remote_address;  // the peer's IP address
  bool from_loopback = false;  // the peer is on this machine (127.0.0.0/8, ::1)
  uint16_t remote_port = 0;    // the peer's port, and ours: with from_loopback,
  uint16_t local_port = 0;     // what finds the peer's socket (LoopbackPeerUid)
  std::string host;           // the Host header
  std::string path_token;     // from a "/_token/TOKEN" prefix (see above), else ""
  // Every header as sent (names lowercase), for the few routes that need
  // more than the fields above.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // empty when streamed to body_file
  // Streamed uploads only: the temporary file holding the body, its size and
  // checksums. The handler may move the file away (rename); the server
  // removes it, if still there, once the handler has responded.
  std::string body_file;
  uint64_t body_size = 0;
  common::Checksums body_checksums;

  // The first value of header `name` (lowercase), or "".
  std::string Header(std::string_view name) const;
};

// The body of a streamed response, written by the handler in pieces from
// any thread, before or after it answers with it. The server sends each
// piece as one chunk, in order, as soon as the connection takes it; after
// End, the last chunk, and then it reads the connection's next request.
// When the client goes away (or the server stops) the stream is closed:
// what is written is dropped. Thread-safe.
class BodyStream {
 public:
  BodyStream();
  // Queues `bytes`; false (dropped) once the stream is closed or ended.
  bool Write(std::shared_ptr<const std::string> bytes);
  void End();
  // Everything written so far has been sent: a writer that waits for this
  // before its next piece never queues more than one for a slow client.
  bool idle() const;
  bool closed() const;

  struct Impl;  // the server's side
  Impl& impl() { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=UTF-8";
  std::string body;
  // The body made where the response is written (the connection's own
  // thread) instead of where the handler answered: a create answers from
  // the store's single callback thread once its commit is done, and the
  // encoding of its answer is as costly as the commit; left to the
  // connection, it runs beside other requests, not in every commit's way.
  // Whoever reads the body before it is written calls Body().
  std::function<std::string()> deferred_body;
  // A file to send as the body instead of `body`, from its start: an open
  // descriptor (shared so responses stay copyable; the last owner closes it),
  // or else a path the server opens (O_NOFOLLOW on the last component only:
  // callers that must not follow symlinks pass a descriptor).
  std::shared_ptr<const int> body_fd;
  std::string file_path;
  // Only this part of the file: from body_offset, body_length bytes (-1: to
  // the end).
  uint64_t body_offset = 0;
  int64_t body_length = -1;
  // A body sent as the handler writes it, instead of `body` (see
  // BodyStream); `content_type` is its type, e.g. "text/event-stream".
  std::shared_ptr<BodyStream> stream;
  // More headers to send (Location, Range, x-goog-hash, ...).
  std::vector<std::pair<std::string, std::string>> headers;
  // The route that answered (e.g. "ml.projects.jobs.get"), for the access
  // log and the request metrics; "" when none did.
  std::string route;

  // `body`, made first where it was deferred.
  const std::string& Body();
};

// Takes ownership of `fd` for HttpResponse::body_fd.
std::shared_ptr<const int> OwnBodyFd(int fd);

using Responder = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest, Responder)>;
// Sees the head of an upload (body empty) before its body is read, and
// answers through its callback (from any thread, now or later): a response
// refuses it (e.g. 401), and the body is never read; nullopt reads it.
using UploadCheck =
    std::function<void(const HttpRequest&, std::function<void(std::optional<HttpResponse>)>)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0 = pick a free port
  int threads = 2;
  uint64_t body_limit = 1 << 20;  // bytes; larger bodies get 413
  // Where "/upload/..." bodies are streamed (empty: uploads are read into
  // memory like any request, within body_limit), and their own limit.
  std::string upload_dir;
  uint64_t upload_limit = uint64_t{8} << 30;
  UploadCheck upload_check;  // optional
  // Called to render errors the server produces itself (413, 400 malformed
  // HTTP): (http status, canonical status name, message) -> body.
  std::function<std::string(int, const std::string&, const std::string&)> error_body;
};

class HttpServer {
 public:
  // Binds and listens (connections wait in the backlog) without serving, so
  // a server can claim its port before it does anything else. port() is
  // the bound port. The listener is close-on-exec.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Bind(const HttpServerOptions& options);
  // Starts accepting and serving with `handler`. Once.
  void Serve(Handler handler);
  // Bind, then Serve.
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
