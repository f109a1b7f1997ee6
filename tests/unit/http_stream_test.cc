// BodyStream: a response whose body the handler writes in pieces, through a
// real HttpServer and a client reading the chunked body as it comes.
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "api/http_server.h"

namespace mle::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A server whose "/stream" answers with a BodyStream (its first piece
// "first", written before the answer) handed to the test; anything else
// answers "ok".
class StreamServer {
 public:
  StreamServer() {
    auto server = HttpServer::Start({}, [this](HttpRequest r, Responder respond) {
      HttpResponse response;
      if (r.target != "/stream") {
        response.content_type = "text/plain";
        response.body = "ok";
        return respond(std::move(response));
      }
      auto stream = std::make_shared<BodyStream>();
      stream->Write(std::make_shared<const std::string>("first"));
      response.content_type = "text/event-stream";
      response.stream = stream;
      respond(std::move(response));
      std::lock_guard<std::mutex> lock(mu_);
      streams_.set_value(stream);
    });
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  uint16_t port() const { return server_->port(); }
  std::shared_ptr<BodyStream> NextStream() { return future_.get(); }

 private:
  std::mutex mu_;
  std::promise<std::shared_ptr<BodyStream>> streams_;
  std::future<std::shared_ptr<BodyStream>> future_ = streams_.get_future();
  std::unique_ptr<HttpServer> server_;
};

struct Client {
  asio::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;

  explicit Client(uint16_t port) { socket.connect({asio::ip::make_address("127.0.0.1"), port}); }
  void Send(http::verb verb, const std::string& target, int version = 11) {
    http::request<http::empty_body> req(verb, target, version);
    req.set(http::field::host, "localhost");
    http::write(socket, req);
  }
};

// Reads from `parser` until its body holds `want` (or the body ends).
void ReadUntil(Client& c, http::response_parser<http::string_body>& parser, const std::string& want) {
  while (parser.get().body().find(want) == std::string::npos && !parser.is_done()) {
    http::read_some(c.socket, c.buffer, parser);
  }
}

TEST(BodyStreamTest, PiecesArriveAsWrittenAndTheConnectionServesTheNextRequest) {
  StreamServer server;
  Client client(server.port());
  client.Send(http::verb::get, "/stream");
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  http::read_header(client.socket, client.buffer, parser);
  EXPECT_EQ(parser.get().result_int(), 200);
  EXPECT_TRUE(parser.chunked());
  EXPECT_EQ(parser.get()[http::field::content_type], "text/event-stream");
  auto stream = server.NextStream();
  // The piece written before the answer arrives before any other is written.
  ReadUntil(client, parser, "first");
  EXPECT_FALSE(parser.is_done());
  EXPECT_TRUE(stream->Write(std::make_shared<const std::string>(" second")));
  ReadUntil(client, parser, "second");
  EXPECT_FALSE(parser.is_done());
  stream->End();
  http::read(client.socket, client.buffer, parser);
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(parser.get().body(), "first second");
  EXPECT_FALSE(stream->Write(std::make_shared<const std::string>("late")));  // after End: dropped
  // The same connection serves the next request.
  client.Send(http::verb::get, "/plain");
  http::response<http::string_body> next;
  http::read(client.socket, client.buffer, next);
  EXPECT_EQ(next.result_int(), 200);
  EXPECT_EQ(next.body(), "ok");
}

TEST(BodyStreamTest, AClientThatGoesAwayClosesTheStream) {
  StreamServer server;
  std::shared_ptr<BodyStream> stream;
  {
    Client client(server.port());
    client.Send(http::verb::get, "/stream");
    http::response_parser<http::string_body> parser;
    http::read_header(client.socket, client.buffer, parser);
    stream = server.NextStream();
    ReadUntil(client, parser, "first");
    EXPECT_FALSE(stream->closed());
  }  // the client closes its connection
  // The server sees the connection end (a bounded wait for the kernel's news).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!stream->closed() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->Write(std::make_shared<const std::string>("nobody")));
}

TEST(BodyStreamTest, AnHttp10ClientGetsThePiecesUnchunkedUntilTheConnectionEnds) {
  StreamServer server;
  Client client(server.port());
  client.Send(http::verb::get, "/stream", 10);
  auto stream = server.NextStream();
  EXPECT_TRUE(stream->Write(std::make_shared<const std::string>(" second")));
  stream->End();
  http::response<http::string_body> res;
  http::read(client.socket, client.buffer, res);  // to the end of the connection
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_FALSE(res.chunked());
  EXPECT_FALSE(res.keep_alive());
  EXPECT_EQ(res.body(), "first second");
}

TEST(BodyStreamTest, HeadGetsTheHeadersAndNoBody) {
  StreamServer server;
  Client client(server.port());
  client.Send(http::verb::head, "/stream");
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // a HEAD answer has no body
  http::read(client.socket, client.buffer, parser);
  EXPECT_EQ(parser.get().result_int(), 200);
  EXPECT_TRUE(server.NextStream()->closed());
  client.Send(http::verb::get, "/plain");
  http::response<http::string_body> next;
  http::read(client.socket, client.buffer, next);
  EXPECT_EQ(next.body(), "ok");
}

}  // namespace
}  // namespace mle::api
