#include "api/http_server.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <array>
#include <cstdio>
#include <deque>
#include <optional>
#include <vector>
#include <limits>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checksums.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/request_id.h"

namespace mle::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);
// After refusing a request whose body was not read, the connection is kept
// reading (and discarding) for a while, so a client still sending its body
// reads our answer instead of a connection reset.
constexpr auto kLingerTimeout = std::chrono::seconds(5);
constexpr uint64_t kMaxLingerBytes = uint64_t{64} << 20;
constexpr absl::string_view kUploadPrefix = "/upload/";
// An upload in flight holds kUploadBuffers of kUploadBufferBytes.
constexpr size_t kUploadBufferBytes = 1 << 20;
constexpr int kUploadBuffers = 4;
// Downloads: the most one sendfile call sends, and how much one connection
// sends before others get a turn on its io thread.
constexpr uint64_t kSendFileBytes = uint64_t{8} << 20;
constexpr uint64_t kSendTurnBytes = uint64_t{64} << 20;

// Where an upload's bytes are received: a large buffer the parser frames in
// place. The body's bytes in it (all of them but chunk framing) are written
// to the upload's file at once, and checksummed later from this buffer on a
// worker thread (so it is reused only once they are).
struct UploadBuffer {
  explicit UploadBuffer(size_t capacity) : bytes(capacity) {}
  void Reset() {
    filled = parsed = 0;
    body.clear();
  }
  std::vector<char> bytes;
  size_t filled = 0;  // bytes received
  size_t parsed = 0;  // of those, bytes the parser has taken
  std::vector<asio::const_buffer> body;  // the body's bytes among them, in order
};

// A request body streamed to an open file, each piece noted in the current
// UploadBuffer for the checksums; never held in memory as a whole.
struct UploadBody {
  struct value_type {
    int fd = -1;  // not owned
    uint64_t size = 0;
    UploadBuffer* buffer = nullptr;  // where the parser's bytes are
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      ec = {};
      std::size_t total = 0;
      for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
        asio::const_buffer buffer = *it;
        const char* p = static_cast<const char*>(buffer.data());
        std::size_t n = buffer.size();
        while (n > 0) {
          ssize_t w = ::write(body_.fd, p, n);
          if (w < 0) {
            if (errno == EINTR) continue;
            ec.assign(errno, beast::system_category());
            return total;
          }
          Note(p, static_cast<std::size_t>(w));
          p += w;
          n -= static_cast<std::size_t>(w);
          total += static_cast<std::size_t>(w);
          body_.size += static_cast<uint64_t>(w);
        }
      }
      return total;
    }

    void finish(beast::error_code& ec) { ec = {}; }

   private:
    void Note(const char* p, std::size_t n) {
      auto& body = body_.buffer->body;
      if (!body.empty() && static_cast<const char*>(body.back().data()) + body.back().size() == p) {
        body.back() = asio::const_buffer(body.back().data(), body.back().size() + n);
      } else {
        body.emplace_back(p, n);
      }
    }

    value_type& body_;
  };
};

// MD5 + CRC32C of an upload computed on a worker thread while the io thread
// is still receiving it, from the receive buffers, in order. MD5 is the
// slowest step of an upload; this way it overlaps the transfer instead of
// following it. Add() and Finish() are called from one thread (the
// session's strand); the work runs serially on a strand of the pool.
class UploadChecksummer : public std::enable_shared_from_this<UploadChecksummer> {
 public:
  using GiveBack = std::function<void(std::shared_ptr<UploadBuffer>)>;

  // Starts writeback through its own descriptor (a duplicate of `fd`).
  UploadChecksummer(const asio::any_io_executor& pool, int fd)
      : pool_(pool), strand_(asio::make_strand(pool)), fd_(::fcntl(fd, F_DUPFD_CLOEXEC, 0)) {}
  ~UploadChecksummer() {
    if (fd_ >= 0) ::close(fd_);
  }

  // The file holds `size` bytes: starts writing to disk (on another pool
  // thread) what lies well behind that, so the fsync before the upload is
  // installed has little left to do. Kept behind the writer: starting
  // writeback where it still writes slows its writes down many times.
  void StartWriteback(uint64_t size) {
    if (fd_ < 0 || size < kWritebackLag || size - kWritebackLag < written_back_ + kWritebackStep) return;
    const uint64_t from = written_back_;
    written_back_ = (size - kWritebackLag) & ~(kWritebackStep - 1);
    asio::post(pool_, [self = shared_from_this(), from, to = written_back_] {
      if (self->cancelled_) return;
      // A hint: the fsync that follows reports any error.
      ::sync_file_range(self->fd_, static_cast<off_t>(from), static_cast<off_t>(to - from), SYNC_FILE_RANGE_WRITE);
    });
  }

  // Checksums the body's bytes in `buffer`, then hands it to `give_back` (on
  // the pool).
  void Add(std::shared_ptr<UploadBuffer> buffer, GiveBack give_back) {
    asio::post(strand_, [self = shared_from_this(), buffer = std::move(buffer), give_back = std::move(give_back)] {
      if (!self->cancelled_) {
        for (const auto& piece : buffer->body) self->sums_.Update(piece.data(), piece.size());
      }
      give_back(buffer);
    });
  }

  // Calls `done` (on the pool) once every buffer added is checksummed.
  void Finish(std::function<void(common::Checksums)> done) {
    asio::post(strand_, [self = shared_from_this(), done = std::move(done)] {
      if (!self->cancelled_) done(self->sums_.Finish());
    });
  }

  // The upload was abandoned: skip the work still queued.
  void Cancel() { cancelled_ = true; }

 private:
  static constexpr uint64_t kWritebackLag = uint64_t{64} << 20;
  static constexpr uint64_t kWritebackStep = uint64_t{16} << 20;

  asio::any_io_executor pool_;
  asio::strand<asio::any_io_executor> strand_;
  const int fd_;
  uint64_t written_back_ = 0;  // the session's side
  std::atomic<bool> cancelled_{false};
  common::Checksummer sums_;  // the strand's
};

constexpr std::string_view kRequestIdHeader = "X-Request-Id";
// What a client may send (a pipelined request) while a stream is open to it.
constexpr size_t kMaxBytesDuringStream = 1 << 20;

}  // namespace

// How a streamed body's piece goes out: as a chunk (RFC 9112 7.1: "SIZE\r\n",
// the bytes, "\r\n"), or, to an HTTP/1.0 client, as the bytes alone.
struct PieceFrame {
  char head[20];
  size_t head_size = 0;
  size_t tail_size = 0;
  PieceFrame(size_t size, bool chunked) {
    if (!chunked) return;
    head_size = static_cast<size_t>(std::snprintf(head, sizeof(head), "%zx\r\n", size));
    tail_size = 2;
  }
  std::array<asio::const_buffer, 3> Buffers(const std::string& bytes) const {
    return {asio::const_buffer(head, head_size), asio::const_buffer(bytes.data(), bytes.size()),
            asio::const_buffer("\r\n", tail_size)};
  }
};

struct BodyStream::Impl {
  struct Piece {
    std::shared_ptr<const std::string> bytes;
    size_t sent = 0;  // of its chunk, already sent
  };
  std::mutex mu;
  std::deque<Piece> queue;
  bool sending = false;  // the session is sending (or about to send) a piece
  bool ended = false;
  bool closed = false;
  // Each piece a chunk (HTTP/1.1); else (an HTTP/1.0 client) the bytes as
  // they are, the body ending when the connection does.
  bool chunked = true;
  // The connection's socket, while a writer may send to it directly (the
  // session clears it, under mu, before it closes the socket).
  int fd = -1;
  // Set by the session that sends the stream: has it send what is queued.
  std::function<void()> wake;

  // Takes the session's turn to send, if it is attached and idle; call the
  // result (outside the lock).
  std::function<void()> TakeTurn() {
    if (!wake || sending) return nullptr;
    sending = true;
    return wake;
  }
  // With mu held, nothing queued or being sent: sends what the socket takes
  // of `piece`'s chunk now, from the writer's thread (no hop to the
  // session's, the common case of a client that keeps up).
  // Whether it went whole.
  bool SendNow(Piece& piece) {
    const PieceFrame frame(piece.bytes->size(), chunked);
    const auto buffers = frame.Buffers(*piece.bytes);
    iovec iov[3];
    for (size_t i = 0; i < 3; ++i) {
      iov[i].iov_base = const_cast<void*>(buffers[i].data());
      iov[i].iov_len = buffers[i].size();
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 3;
    const ssize_t n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) piece.sent = static_cast<size_t>(n);  // an error: the session's write meets it too
    return piece.sent == asio::buffer_size(buffers);
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    fd = -1;
    queue.clear();
    wake = nullptr;
  }
};

BodyStream::BodyStream() : impl_(std::make_shared<Impl>()) {}

bool BodyStream::Write(std::shared_ptr<const std::string> bytes) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->closed || impl_->ended) return false;
    Impl::Piece piece{std::move(bytes), 0};
    if (impl_->fd >= 0 && !impl_->sending && impl_->queue.empty() && impl_->SendNow(piece)) return true;
    impl_->queue.push_back(std::move(piece));
    wake = impl_->TakeTurn();
  }
  if (wake) wake();
  return true;
}

void BodyStream::End() {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->closed || impl_->ended) return;
    impl_->ended = true;
    wake = impl_->TakeTurn();
  }
  if (wake) wake();
}

bool BodyStream::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->queue.empty() && !impl_->sending;
}

bool BodyStream::closed() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->closed;
}

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, const Handler& handler,
          const asio::any_io_executor& checksum_pool)
      : stream_(std::move(socket)), options_(options), handler_(handler), checksum_pool_(checksum_pool) {
    // Beast reads at most 512 bytes at a time into a buffer with less room:
    // a request of headers and a small JSON body over that (a Vertex AI
    // create, any call from Google's clients with their longer headers)
    // took two reads and two passes of the parser.
    buffer_.reserve(kReadBuffer);
    beast::error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      auto address = peer.address();
      if (address.is_v6() && address.to_v6().is_v4_mapped()) {
        address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
      }
      remote_address_ = address.to_string();
      from_loopback_ = address.is_loopback();
      remote_port_ = peer.port();
      local_port_ = stream_.socket().local_endpoint(ec).port();
    }
  }

  ~Session() {
    RemoveUpload();
    if (body_stream_) body_stream_->Close();
  }

  void Run() {
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  // ---- reading: the header first, then the body into memory or a file ----

  void Read() {
    body_read_ = false;
    answered_ = false;
    string_parser_.reset();
    upload_parser_.reset();
    header_parser_.emplace();
    header_parser_->header_limit(64 * 1024);
    // Checked once the route is known. (Not boost::none: Beast 1.74 compares
    // the Content-Length with the optional itself, and any length > none.)
    header_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    stream_.expires_after(kIdleTimeout);
    http::async_read_header(stream_, buffer_, *header_parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  static bool Disconnected(const beast::error_code& ec) {
    return ec == http::error::end_of_stream || ec == asio::error::connection_reset || ec == beast::error::timeout ||
           ec == asio::error::operation_aborted;
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    if (Disconnected(ec)) return Close();
    started_ = std::chrono::steady_clock::now();
    if (ec) {
      request_id_ = obs::NewRequestId();
      method_ = "-";
      path_ = "-";
      return WriteError(400, "INVALID_ARGUMENT", absl::StrCat("Malformed HTTP request: ", ec.message()));
    }

    auto& head = header_parser_->get();
    request_id_ = obs::AcceptRequestId(std::string(head[kRequestIdHeader]));
    method_ = std::string(head.method_string());
    path_token_ = TakePathToken(head);
    const auto full_target = head.target();
    // Neither the query (it may hold an access_token) nor a path token is logged.
    path_ = (path_token_.empty() ? std::string() : std::string("/_token/<redacted>")) +
            std::string(full_target.substr(0, full_target.find('?')));
    obs::ScopedRequestId scope(request_id_);
    keep_alive_ = head.keep_alive();
    head_request_ = head.method() == http::verb::head;
    http11_ = head.version() >= 11;
    const auto target = head.target();
    upload_ = !options_.upload_dir.empty() &&
              absl::StartsWith(absl::string_view(target.data(), target.size()), kUploadPrefix);
    limit_ = upload_ ? options_.upload_limit : options_.body_limit;
    if (auto length = header_parser_->content_length(); length && *length > limit_) return WriteTooLarge();
    const bool expects_continue = head.version() >= 11 && beast::iequals(head[http::field::expect], "100-continue");

    if (upload_ && options_.upload_check) {
      // The head is judged first (perhaps on another thread: a refusal is
      // recorded before it is answered); the body waits meanwhile.
      return options_.upload_check(
          HeadOf(head), [self = shared_from_this(), expects_continue](std::optional<HttpResponse> refusal) mutable {
            asio::post(self->stream_.get_executor(), [self, expects_continue, refusal = std::move(refusal)]() mutable {
              obs::ScopedRequestId scope(self->request_id_);
              if (refusal) {
                self->keep_alive_ = false;  // the body stays unread
                return self->Write(std::move(*refusal));
              }
              self->ReadAfterHeader(expects_continue);
            });
          });
    }
    ReadAfterHeader(expects_continue);
  }

  // The body, once the head is accepted: into a file (an upload) or memory.
  void ReadAfterHeader(bool expects_continue) {
    if (upload_) {
      if (auto s = StartUpload(); !s.empty()) return WriteError(500, "INTERNAL", s);
      upload_parser_.emplace(std::move(*header_parser_));
      upload_parser_->body_limit(limit_);
      upload_parser_->eager(true);
      upload_parser_->get().body().fd = upload_fd_;
    } else {
      string_parser_.emplace(std::move(*header_parser_));
      string_parser_->body_limit(limit_);
    }
    header_parser_.reset();

    if (expects_continue && !BodyDone()) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      stream_.expires_after(kIdleTimeout);
      return http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
    }
    ReadBody();
  }

  bool BodyDone() const { return upload_ ? upload_parser_->is_done() : string_parser_->is_done(); }

  void ReadBody() {
    if (BodyDone()) return OnBody({});
    stream_.expires_after(kIdleTimeout);
    if (!upload_) {
      return http::async_read(stream_, buffer_, *string_parser_,
                              [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
    }
    // Large reads straight into UploadBuffers, the parser only framing
    // them (Beast's own reads would be sized to the header's buffer, often
    // under 1 KiB); the bytes read with the header come first.
    recv_ = TakeBuffer();
    if (buffer_.size() > recv_->bytes.size()) return OnBody(http::error::header_limit);
    std::memcpy(recv_->bytes.data(), buffer_.data().data(), buffer_.size());
    recv_->filled = buffer_.size();
    buffer_.consume(buffer_.size());
    ParseUpload();
  }

  // Piece by piece, so the timeout is for idleness, not for the whole body.
  void ReadUploadSome() {
    stream_.expires_after(kIdleTimeout);
    auto& b = *recv_;
    stream_.async_read_some(asio::buffer(b.bytes.data() + b.filled, b.bytes.size() - b.filled),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec == asio::error::eof) ec = http::error::end_of_stream;  // the client left mid-body
                              if (ec) return self->OnBody(ec);
                              self->recv_->filled += n;
                              self->ParseUpload();
                            });
  }

  void ParseUpload() {
    auto& b = *recv_;
    auto& body = upload_parser_->get().body();
    body.buffer = &b;
    beast::error_code ec;
    while (b.parsed < b.filled && !upload_parser_->is_done()) {
      const size_t n = upload_parser_->put(asio::const_buffer(b.bytes.data() + b.parsed, b.filled - b.parsed), ec);
      b.parsed += n;
      if (ec == http::error::need_more) {
        ec = {};
        break;  // a partial chunk header
      }
      if (ec) return OnBody(ec);
      if (n == 0) break;
    }
    checksummer_->StartWriteback(body.size);
    if (upload_parser_->is_done()) {
      // What follows the body (a pipelined request) goes where Read() looks.
      auto room = buffer_.prepare(b.filled - b.parsed);
      std::memcpy(room.data(), b.bytes.data() + b.parsed, b.filled - b.parsed);
      buffer_.commit(b.filled - b.parsed);
      HandOver(std::move(recv_));
      return OnBody({});
    }
    if (b.filled < b.bytes.size()) return ReadUploadSome();
    if (b.parsed == 0) return OnBody(http::error::bad_chunk);  // no chunk header is that long
    NextBuffer();
  }

  // recv_ is full: on to a free buffer (or wait for the checksummer to free one).
  void NextBuffer() {
    auto next = TakeBuffer();
    if (!next) {
      waiting_for_buffer_ = true;  // GiveBack calls again
      return;
    }
    auto& b = *recv_;
    next->filled = b.filled - b.parsed;  // a partial chunk header
    std::memcpy(next->bytes.data(), b.bytes.data() + b.parsed, next->filled);
    HandOver(std::move(recv_));
    recv_ = std::move(next);
    ReadUploadSome();
  }

  // A spare buffer, a new one while fewer than kUploadBuffers exist, else null.
  std::shared_ptr<UploadBuffer> TakeBuffer() {
    if (spare_.empty()) {
      if (buffers_ >= kUploadBuffers) return nullptr;
      ++buffers_;
      return std::make_shared<UploadBuffer>(kUploadBufferBytes);
    }
    auto b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }

  void HandOver(std::shared_ptr<UploadBuffer> b) {
    checksummer_->Add(std::move(b), [self = shared_from_this()](std::shared_ptr<UploadBuffer> b) {
      asio::post(self->stream_.get_executor(), [self, b = std::move(b)]() mutable { self->GiveBack(std::move(b)); });
    });
  }

  void GiveBack(std::shared_ptr<UploadBuffer> b) {
    if (!checksummer_) return;  // from an abandoned upload: freed
    b->Reset();
    spare_.push_back(std::move(b));
    if (waiting_for_buffer_) {
      waiting_for_buffer_ = false;
      NextBuffer();
    }
  }

  void OnBody(beast::error_code ec) {
    if (Disconnected(ec)) {
      RemoveUpload();
      return Close();
    }
    if (ec == http::error::body_limit) return WriteTooLarge();
    if (ec == boost::system::errc::no_space_on_device ||
        (ec.category() == boost::system::system_category() && ec.value() == EDQUOT)) {
      RemoveUpload();  // nothing half written stays
      return WriteError(429, "RESOURCE_EXHAUSTED",
                        "The disk of mlengine's data directory is full: the upload was not stored. Objects already "
                        "stored are intact; uploads are taken again as soon as space is freed on that disk.");
    }
    if (ec) return WriteError(400, "INVALID_ARGUMENT", absl::StrCat("Malformed HTTP request: ", ec.message()));

    body_read_ = true;
    started_ = std::chrono::steady_clock::now();  // the request is read: from here on, the time is the server's
    if (upload_) {
      ::close(upload_fd_);
      upload_fd_ = -1;
      return checksummer_->Finish([self = shared_from_this()](common::Checksums sums) {
        asio::post(self->stream_.get_executor(),
                   [self, sums = std::move(sums)]() mutable { self->OnUploadChecksummed(std::move(sums)); });
      });
    }
    auto& req = string_parser_->get();
    HttpRequest r = HeadOf(req);
    r.body = std::move(req.body());
    Dispatch(std::move(r));
  }

  void OnUploadChecksummed(common::Checksums sums) {
    FreeBuffers();  // all given back by now: the checksummer hands them back in order
    auto& req = upload_parser_->get();
    HttpRequest r = HeadOf(req);
    r.body_file = upload_path_;
    r.body_size = req.body().size;
    r.body_checksums = std::move(sums);
    Dispatch(std::move(r));
  }

  // Hands a request, read in full, to the handler.
  void Dispatch(HttpRequest r) {
    auto self = shared_from_this();
    obs::ScopedRequestId scope(request_id_);
    handler_(std::move(r), [self](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response)]() mutable { self->Write(std::move(response)); });
    });
  }

  // Strips a "/_token/TOKEN" prefix before "/storage/" or "/upload/" from
  // the target; returns TOKEN (percent-decoding is not needed: tokens are
  // URL-safe), or "".
  // Also serves "/b..." as "/storage/v1/b...": the Node.js client in
  // emulator mode sends its JSON API calls to STORAGE_EMULATOR_HOST itself.
  template <class Header>
  static std::string TakePathToken(Header& head) {
    constexpr absl::string_view kPrefix = "/_token/";
    std::string target(head.target());
    std::string token;
    if (absl::StartsWith(target, kPrefix)) {
      const size_t end = target.find('/', kPrefix.size());
      if (end != std::string::npos) {
        token = target.substr(kPrefix.size(), end - kPrefix.size());
        target = target.substr(end);
      }
    }
    const bool bare_json_api =
        target == "/b" || absl::StartsWith(target, "/b/") || absl::StartsWith(target, "/b?");
    if (bare_json_api) target = "/storage/v1" + target;
    if (!absl::StartsWith(target, "/storage/") && !absl::StartsWith(target, "/upload/")) return "";
    if (!token.empty() || bare_json_api) head.target(target);
    return token;
  }

  template <class Fields>
  HttpRequest HeadOf(const http::request_header<Fields>& head) const {
    HttpRequest r;
    r.method = std::string(head.method_string());
    r.target = std::string(head.target());
    r.authorization = std::string(head[http::field::authorization]);
    r.content_type = std::string(head[http::field::content_type]);
    r.host = std::string(head[http::field::host]);
    r.path_token = path_token_;
    for (const auto& field : head) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    r.request_id = request_id_;
    r.remote_address = remote_address_;
    r.from_loopback = from_loopback_;
    r.remote_port = remote_port_;
    r.local_port = local_port_;
    return r;
  }

  // ---- the temporary file of an upload ----

  // "" or what went wrong.
  std::string StartUpload() {
    std::string path = options_.upload_dir + "/upload-XXXXXX";
    int fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) return absl::StrCat("Cannot store the upload: ", std::strerror(errno));
    struct stat st;
    ::fstat(fd, &st);
    upload_fd_ = fd;
    upload_path_ = std::move(path);
    upload_dev_ = st.st_dev;
    upload_ino_ = st.st_ino;
    checksummer_ = std::make_shared<UploadChecksummer>(checksum_pool_, fd);
    return "";
  }

  // An idle connection holds no upload buffers (those still with the
  // checksummer of an abandoned upload are freed when it is done with them).
  void FreeBuffers() {
    recv_.reset();
    spare_.clear();
    buffers_ = 0;
    waiting_for_buffer_ = false;
  }

  // Removes the upload's file unless the handler moved it away (a file now
  // at that path that is not ours is left alone).
  void RemoveUpload() {
    if (checksummer_) checksummer_->Cancel();
    checksummer_.reset();
    FreeBuffers();
    if (upload_fd_ >= 0) ::close(upload_fd_);
    upload_fd_ = -1;
    if (upload_path_.empty()) return;
    struct stat st;
    if (::lstat(upload_path_.c_str(), &st) == 0 && st.st_dev == upload_dev_ && st.st_ino == upload_ino_) {
      ::unlink(upload_path_.c_str());
    }
    upload_path_.clear();
  }

  // ---- writing ----

  void WriteTooLarge() {
    WriteError(413, "INVALID_ARGUMENT",
               absl::StrCat("The request body is larger than the limit of ", limit_, " bytes."));
  }

  void WriteError(int status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    HttpResponse r;
    r.status = status;
    r.body = options_.error_body ? options_.error_body(status, code, message) : message;
    Write(std::move(r));
  }

  // The access log line and the request metric, once per request.
  void Answered(int status, const std::string& route) {
    if (answered_) return;
    answered_ = true;
    const absl::Duration took = absl::FromChrono(std::chrono::steady_clock::now() - started_);
    obs::Metrics::Default().ObserveRequest(method_, route, status, took);
    // Successful requests at debug: what they changed is logged at info by
    // the service, naming the job, with this request's id (one line per
    // create, not two: logging is a fifth of the create path's cost).
    const auto level = status >= 500 ? spdlog::level::warn
                       : status >= 400 ? spdlog::level::info
                                       : spdlog::level::debug;
    static spdlog::logger& log = obs::Log("http");
    if (!log.should_log(level)) return;
    obs::ScopedRequestId scope(request_id_);
    log.log(level, "{} {} -> {} {} in {:.1f} ms from {}", method_, path_, status, route.empty() ? "-" : route,
            absl::ToDoubleMilliseconds(took), remote_address_.empty() ? "-" : remote_address_);
  }

  template <class Response>
  void SetCommonHeaders(Response& res, const HttpResponse* from = nullptr) const {
    res.set(http::field::server, "mlengined");
    res.set(kRequestIdHeader, request_id_);
    // No browser may guess a type other than the one sent (a JSON error, an
    // object's bytes): every response, whoever produced it.
    res.set("X-Content-Type-Options", "nosniff");
    if (from != nullptr) {
      for (const auto& [name, value] : from->headers) res.set(name, value);
    }
    res.keep_alive(keep_alive_);
  }

  void Write(HttpResponse response) {
    RemoveUpload();  // the handler has answered: it is done with the file
    Answered(response.status, response.route);
    if (response.stream) return WriteStream(std::move(response));
    if (response.body_fd || !response.file_path.empty()) return WriteFile(std::move(response));
    response.Body();
    if (head_request_) return WriteHeadersOnly(response, response.body.size());
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), 11);
    SetCommonHeaders(*res, &response);
    res->set(http::field::content_type, response.content_type);
    res->body() = std::move(response.body);
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec) return self->Close();
      if (!self->keep_alive_) return self->Finish();
      self->Read();
    });
  }

  // The answer to HEAD (RFC 9110 9.3.2): the headers a GET would have, never a body.
  void WriteHeadersOnly(const HttpResponse& response, uint64_t length) {
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(response.status), 11);
    SetCommonHeaders(*res, &response);
    res->set(http::field::content_type, response.content_type);
    res->content_length(length);
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec) return self->Close();
      if (!self->keep_alive_) return self->Finish();
      self->Read();
    });
  }

  void WriteFile(HttpResponse response) {
    std::shared_ptr<const int> fd = response.body_fd;
    if (!fd) {
      int opened = ::open(response.file_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (opened < 0) {
        return WriteError(500, "INTERNAL", absl::StrCat("Cannot read the file to send: ", std::strerror(errno)));
      }
      fd = OwnBodyFd(opened);
    }
    struct stat st;
    if (::fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return WriteError(500, "INTERNAL", "Cannot send the file: it is not a regular file.");
    }
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);
    const uint64_t offset = std::min(response.body_offset, file_size);
    const uint64_t length = response.body_length < 0
                                ? file_size - offset
                                : std::min(static_cast<uint64_t>(response.body_length), file_size - offset);
    if (head_request_) return WriteHeadersOnly(response, length);
    // The headers through Beast, then the bytes with sendfile: no copy
    // through this process, in pieces as large as the socket takes.
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(response.status), 11);
    SetCommonHeaders(*res, &response);
    res->set(http::field::content_type, response.content_type);
    res->content_length(length);
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, fd = std::move(fd), offset, length](beast::error_code ec,
                                                                                           std::size_t) {
                        if (ec) return self->Close();
                        self->stream_.expires_never();  // SendFileSome keeps its own idle timer
                        self->SendFileSome(fd, offset, length);
                      });
  }

  // ---- a streamed body (BodyStream) ----

  void WriteStream(HttpResponse response) {
    std::shared_ptr<BodyStream::Impl> stream(response.stream, &response.stream->impl());
    if (head_request_) {
      stream->Close();  // no body will be sent
      return WriteHeadersOnly(response, 0);
    }
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(response.status), 11);
    SetCommonHeaders(*res, &response);
    res->set(http::field::content_type, response.content_type);
    res->set(http::field::cache_control, "no-cache");
    if (http11_) {
      res->chunked(true);
    } else {
      keep_alive_ = false;
      res->keep_alive(false);
      std::lock_guard<std::mutex> lock(stream->mu);
      stream->chunked = false;
    }
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    stream_.expires_after(kIdleTimeout);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), res, serializer, stream = std::move(stream)](beast::error_code ec, std::size_t) {
          if (ec) {
            stream->Close();
            return self->Close();
          }
          self->stream_.expires_never();  // open for as long as the handler writes; each piece has its timeout
          self->body_stream_ = stream;
          ++self->stream_generation_;
          self->WatchPeer(self->stream_generation_);
          std::function<void()> turn;
          {
            std::lock_guard<std::mutex> lock(stream->mu);
            stream->wake = [weak = std::weak_ptr<Session>(self)] {
              if (auto s = weak.lock()) asio::post(s->stream_.get_executor(), [s] { s->SendPiece(); });
            };
            stream->fd = self->stream_.socket().native_handle();
            if (!stream->queue.empty() || stream->ended) turn = stream->TakeTurn();
          }
          if (turn) self->SendPiece();
        });
  }

  // On the strand, holding the stream's turn: sends the next piece, or the
  // last chunk once it has ended, or gives the turn back.
  void SendPiece() {
    auto stream = body_stream_;
    if (!stream) return;
    std::optional<BodyStream::Impl::Piece> piece;
    bool chunked = true;
    {
      std::lock_guard<std::mutex> lock(stream->mu);
      if (stream->closed) return;
      chunked = stream->chunked;
      if (!stream->queue.empty()) {
        piece = std::move(stream->queue.front());
        stream->queue.pop_front();
      } else if (!stream->ended) {
        stream->sending = false;
        return;
      }
    }
    stream_.expires_after(kIdleTimeout);
    if (!piece && !chunked) {  // ended: an HTTP/1.0 body ends with the connection
      EndStream();
      return Finish();
    }
    if (!piece) {  // ended
      return asio::async_write(stream_, http::make_chunk_last(),
                               [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 self->EndStream();
                                 if (ec) return self->Close();
                                 if (!self->keep_alive_) return self->Finish();
                                 self->Read();
                               });
    }
    auto frame = std::make_shared<PieceFrame>(piece->bytes->size(), chunked);
    beast::buffers_suffix<std::array<asio::const_buffer, 3>> rest(frame->Buffers(*piece->bytes));
    rest.consume(piece->sent);
    asio::async_write(stream_, rest,
                      [self = shared_from_this(), bytes = piece->bytes, frame](beast::error_code ec, std::size_t) {
                        if (ec) {
                          self->EndStream();
                          return self->Abort();
                        }
                        self->stream_.expires_never();
                        self->SendPiece();
                      });
  }

  // The stream is over (sent in full, or the client went): writes to it are dropped.
  void EndStream() {
    if (body_stream_) body_stream_->Close();
    body_stream_.reset();
    ++stream_generation_;
  }

  // While a stream is open, watches the connection for the client going
  // away (its end of the connection closed) without reading what it may
  // send meanwhile (a pipelined request, kept for after the stream).
  void WatchPeer(uint64_t generation) {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation](
                                                            beast::error_code ec) {
      if (generation != self->stream_generation_) return;  // that stream is over
      if (ec) {
        self->EndStream();
        return self->Abort();
      }
      // Readable: the client's end, or bytes it sent.
      auto buf = self->buffer_.prepare(64 * 1024);
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
          self->buffer_.size() > kMaxBytesDuringStream) {
        self->EndStream();
        return self->Abort();
      }
      if (n > 0) self->buffer_.commit(static_cast<size_t>(n));
      self->WatchPeer(generation);
    });
  }

  // Sends `left` bytes of `fd` from `offset`, as fast as the socket takes
  // them; waits (idle timeout kIdleTimeout) when it takes none. A file that
  // shrinks while it is sent ends the connection (the Content-Length can no
  // longer be met).
  void SendFileSome(std::shared_ptr<const int> fd, uint64_t offset, uint64_t left) {
    auto& socket = stream_.socket();
    beast::error_code ec;
    socket.native_non_blocking(true, ec);
    if (ec) return Close();
    uint64_t turn = 0;  // bytes sent before other connections get a turn
    while (left > 0) {
      off_t at = static_cast<off_t>(offset);
      const ssize_t n = ::sendfile(socket.native_handle(), *fd, &at,
                                   static_cast<size_t>(std::min<uint64_t>(left, kSendFileBytes)));
      if (n > 0) {
        offset += static_cast<uint64_t>(n);
        left -= static_cast<uint64_t>(n);
        turn += static_cast<uint64_t>(n);
        if (left > 0 && turn >= kSendTurnBytes) {
          return asio::post(stream_.get_executor(), [self = shared_from_this(), fd, offset, left] {
            self->SendFileSome(fd, offset, left);
          });
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        send_timer_.expires_after(kIdleTimeout);
        send_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
          if (!ec) self->Abort();  // idle too long
        });
        socket.async_wait(tcp::socket::wait_write, [self = shared_from_this(), fd, offset, left](beast::error_code ec) {
          self->send_timer_.cancel();
          if (ec) return self->Close();
          self->SendFileSome(fd, offset, left);
        });
        return;
      }
      return Abort();  // an error, or the file shrank
    }
    if (!keep_alive_) return Finish();
    Read();
  }

  // Ends the connection at once (a response that cannot be completed).
  void Abort() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  // Ends a connection that will not be reused.
  void Finish() {
    Close();
    if (!body_read_) Drain(std::make_shared<std::vector<char>>(64 * 1024));
  }

  void Drain(std::shared_ptr<std::vector<char>> scratch) {
    if (drained_ >= kMaxLingerBytes) return;
    stream_.expires_after(kLingerTimeout);
    stream_.async_read_some(asio::buffer(*scratch),
                            [self = shared_from_this(), scratch](beast::error_code ec, std::size_t n) {
                              if (ec) return;  // the client closed, or went quiet
                              self->drained_ += n;
                              self->Drain(scratch);
                            });
  }

  beast::tcp_stream stream_;
  asio::steady_timer send_timer_{stream_.get_executor()};  // SendFileSome's idle timeout
  // Room for a request's headers and a small body in one read.
  static constexpr size_t kReadBuffer = 8 * 1024;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> header_parser_;
  std::optional<http::request_parser<http::string_body>> string_parser_;
  std::optional<http::request_parser<UploadBody>> upload_parser_;
  const HttpServerOptions& options_;
  const Handler& handler_;
  // The peer, and the request being served: its id, what to log of it, and
  // when it was read.
  std::string remote_address_;
  bool from_loopback_ = false;
  uint16_t remote_port_ = 0;
  uint16_t local_port_ = 0;
  std::string request_id_;
  std::string method_;
  std::string path_;
  std::chrono::steady_clock::time_point started_;
  bool answered_ = false;  // logged and observed
  bool keep_alive_ = true;
  bool head_request_ = false;
  bool http11_ = true;  // the request's version: an HTTP/1.0 client gets no chunked body
  bool body_read_ = false;  // the current request's body was read in full
  uint64_t drained_ = 0;
  bool upload_ = false;
  uint64_t limit_ = 0;
  // The upload in flight, if any.
  int upload_fd_ = -1;
  std::string upload_path_;
  dev_t upload_dev_ = 0;
  ino_t upload_ino_ = 0;
  std::shared_ptr<UploadChecksummer> checksummer_;
  std::shared_ptr<UploadBuffer> recv_;  // receiving the upload's bytes
  std::vector<std::shared_ptr<UploadBuffer>> spare_;
  int buffers_ = 0;  // allocated for this upload (recv_, spare_, with the checksummer)
  bool waiting_for_buffer_ = false;
  asio::any_io_executor checksum_pool_;
  std::string path_token_;  // the current request's (never logged)
  // The streamed body being sent, if any, and a count of the streams this
  // connection has sent (what a watch of an earlier one checks).
  std::shared_ptr<BodyStream::Impl> body_stream_;
  uint64_t stream_generation_ = 0;
};

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

const std::string& HttpResponse::Body() {
  if (deferred_body) {
    body = deferred_body();
    deferred_body = nullptr;
  }
  return body;
}

std::shared_ptr<const int> OwnBodyFd(int fd) {
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    if (*p >= 0) ::close(*p);
    delete p;
  });
}

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  asio::io_context ioc;
  // Checksums uploads while they arrive (after ioc: destroyed, and joined, first).
  asio::thread_pool checksum_pool{2};
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  uint16_t port = 0;

  void Accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);  // see Bind
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), options, handler, checksum_pool.get_executor())->Run();
      }
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(const HttpServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  beast::error_code ec;
  auto address = asio::ip::make_address(options.address, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address \"", options.address, "\": ", ec.message()));
  tcp::endpoint endpoint(address, options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  // Asio opens sockets without close-on-exec: a replica or pip must never
  // inherit the listener (a restarted server could not listen again).
  if (!ec && ::fcntl(impl->acceptor.native_handle(), F_SETFD, FD_CLOEXEC) != 0) {
    ec = beast::error_code(errno, beast::system_category());
  }
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address, ":", options.port, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

void HttpServer::Serve(Handler handler) {
  if (!impl_->threads.empty()) return;
  impl_->handler = std::move(handler);
  impl_->Accept();
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
    impl_->threads.emplace_back([raw = impl_.get()] { raw->ioc.run(); });
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, Handler handler) {
  auto server = Bind(options);
  if (!server.ok()) return server.status();
  (*server)->Serve(std::move(handler));
  return server;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  if (impl_->threads.empty()) return;
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->checksum_pool.stop();
  impl_->checksum_pool.join();
}

}  // namespace mle::api
