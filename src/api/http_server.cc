#include "api/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"

namespace mle::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, const Handler& handler)
      : stream_(std::move(socket)), options_(options), handler_(handler) {}

  void Run() {
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.body_limit);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
        ec == beast::error::timeout || ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec == http::error::body_limit) {
      return WriteError(413, "INVALID_ARGUMENT",
                        absl::StrCat("The request body is larger than the limit of ", options_.body_limit, " bytes."));
    }
    if (ec) return WriteError(400, "INVALID_ARGUMENT", absl::StrCat("Malformed HTTP request: ", ec.message()));

    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.content_type = std::string(req[http::field::content_type]);
    r.body = std::move(req.body());
    auto self = shared_from_this();
    handler_(std::move(r), [self](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response)]() mutable { self->Write(std::move(response)); });
    });
  }

  void WriteError(int status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    HttpResponse r;
    r.status = status;
    r.body = options_.error_body ? options_.error_body(status, code, message) : message;
    Write(std::move(r));
  }

  void Write(HttpResponse response) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), 11);
    res->set(http::field::server, "mlengined");
    res->set(http::field::content_type, response.content_type);
    res->keep_alive(keep_alive_);
    res->body() = std::move(response.body);
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec || !self->keep_alive_) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const HttpServerOptions& options_;
  const Handler& handler_;
  bool keep_alive_ = true;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  uint16_t port = 0;

  void Accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), options, handler)->Run();
      }
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  beast::error_code ec;
  auto address = asio::ip::make_address(options.address, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address \"", options.address, "\": ", ec.message()));
  tcp::endpoint endpoint(address, options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.address, ":", options.port, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl->threads.emplace_back([raw = impl.get()] { raw->ioc.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
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
}

}  // namespace mle::api
