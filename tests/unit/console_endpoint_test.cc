// ConsoleEndpoint: paths as a table (status, type, caching), traversal in
// every spelling refused, the security headers on every answer, and HEAD
// through a real HttpServer (headers, no body).

#include "api/console_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mle::api {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexHtml[] = "<!doctype html><title>mlengine</title>\n";
constexpr char kScript[] = "console.log('hi');\n";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(out.size()))) > 0) out.append(buf, n);
  return out;
}

std::optional<std::string> HeaderOf(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

class ConsoleEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/console_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "console";
    fs::create_directories(dir_ / "assets");
    WriteFile(dir_ / "index.html", kIndexHtml);
    WriteFile(dir_ / "app-3f2a9c.js", kScript);
    WriteFile(dir_ / "app-3f2a9c.css", "body{}");
    WriteFile(dir_ / "app-3f2a9c.js.map", "{}");
    WriteFile(dir_ / "logo-1a2b.svg", "<svg/>");
    WriteFile(dir_ / "font-9d8e.woff2", "wOF2");
    WriteFile(dir_ / "blob-77aa.bin", "?");
    WriteFile(dir_ / ".hidden", "secret");
    WriteFile(dir_ / "a..b", "dots");
    WriteFile(root_ / "outside.txt", "outside");
    fs::create_symlink(root_ / "outside.txt", dir_ / "link.txt");
    fs::create_symlink("/etc/passwd", dir_ / "passwd");
    ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(root_); }

  HttpResponse Get(const ConsoleEndpoint& console, const std::string& target, const std::string& method = "GET") {
    HttpRequest request;
    request.method = method;
    request.target = target;
    std::optional<HttpResponse> got;
    console.Handle(std::move(request), [&got](HttpResponse r) { got = std::move(r); });
    EXPECT_TRUE(got.has_value()) << target;
    return got.value_or(HttpResponse{});
  }

  fs::path root_, dir_;
};

struct Row {
  std::string method;
  std::string target;
  int status;
  std::string content_type;       // "" = not checked
  std::string cache_control;      // "" = none expected
  std::string body;               // expected body (file or text); "" = not checked
};

TEST_F(ConsoleEndpointTest, PathsAsATable) {
  const std::string kImmutable = "public, max-age=31536000, immutable";
  const std::string kText = "text/plain; charset=utf-8";
  const Row rows[] = {
      {"GET", "/console/", 200, "text/html; charset=utf-8", "no-cache", kIndexHtml},
      {"GET", "/console/?tab=jobs", 200, "text/html; charset=utf-8", "no-cache", kIndexHtml},
      {"GET", "/console/index.html", 200, "text/html; charset=utf-8", "no-cache", kIndexHtml},
      {"HEAD", "/console/", 200, "text/html; charset=utf-8", "no-cache", ""},
      {"GET", "/console/app-3f2a9c.js", 200, "text/javascript; charset=utf-8", kImmutable, kScript},
      {"GET", "/console/app-3f2a9c.css", 200, "text/css; charset=utf-8", kImmutable, "body{}"},
      {"GET", "/console/app-3f2a9c.js.map", 200, "application/json", kImmutable, "{}"},
      {"GET", "/console/logo-1a2b.svg", 200, "image/svg+xml", kImmutable, "<svg/>"},
      {"GET", "/console/font-9d8e.woff2", 200, "font/woff2", kImmutable, "wOF2"},
      {"GET", "/console/blob-77aa.bin", 200, "application/octet-stream", kImmutable, "?"},
      {"GET", "/console/missing-1234.js", 404, kText, "", ""},
      // Traversal, in every spelling: never served.
      {"GET", "/console/../outside.txt", 404, kText, "", ""},
      {"GET", "/console/..", 404, kText, "", ""},
      {"GET", "/console/%2e%2e/outside.txt", 404, kText, "", ""},
      {"GET", "/console/%2E%2E%2Foutside.txt", 404, kText, "", ""},
      {"GET", "/console/..%2foutside.txt", 404, kText, "", ""},
      {"GET", "/console/assets%2f..%2f..%2foutside.txt", 404, kText, "", ""},
      {"GET", "/console/app-3f2a9c%2ejs", 404, kText, "", ""},
      {"GET", "/console/a..b", 404, kText, "", ""},
      {"GET", "/console/./index.html", 404, kText, "", ""},
      {"GET", "/console//index.html", 404, kText, "", ""},
      {"GET", "/console/assets/x.js", 404, kText, "", ""},
      {"GET", "/console/assets", 404, kText, "", ""},       // a directory
      {"GET", "/console/link.txt", 404, kText, "", ""},     // a symlink, out of the directory
      {"GET", "/console/passwd", 404, kText, "", ""},       // a symlink, absolute
      {"GET", "/console/pipe", 404, kText, "", ""},         // a FIFO: never blocks, never served
      {"GET", "/console/.hidden", 404, kText, "", ""},      // a dotfile
      {"GET", "/console/index.html\\..\\x", 404, kText, "", ""},
      // Redirect and methods.
      {"GET", "/console", 301, kText, "", ""},
      {"POST", "/console/", 405, kText, "", ""},
      {"DELETE", "/console/app-3f2a9c.js", 405, kText, "", ""},
  };
  ConsoleEndpoint console(dir_.string());
  for (const Row& row : rows) {
    SCOPED_TRACE(row.method + " " + row.target);
    HttpResponse r = Get(console, row.target, row.method);
    EXPECT_EQ(r.status, row.status);
    if (!row.content_type.empty()) {
      EXPECT_EQ(r.content_type, row.content_type);
    }
    EXPECT_EQ(HeaderOf(r, "Cache-Control").value_or(""), row.cache_control);
    for (const auto& [name, value] : ConsoleEndpoint::SecurityHeaders()) {
      EXPECT_EQ(HeaderOf(r, name).value_or("(absent)"), value) << name;
    }
    EXPECT_EQ(r.route, "console");
    if (r.status == 200) {
      ASSERT_TRUE(r.body_fd != nullptr);
      if (!row.body.empty()) {
        EXPECT_EQ(ReadFd(*r.body_fd), row.body);
      }
    } else {
      EXPECT_EQ(r.body_fd, nullptr);
      EXPECT_FALSE(absl::StrContains(r.body, "secret") || absl::StrContains(r.body, "outside") ||
                   absl::StrContains(r.body, "root:"));
    }
  }
}

TEST_F(ConsoleEndpointTest, RedirectKeepsTheQueryAndMethodsSayWhatIsAllowed) {
  ConsoleEndpoint console(dir_.string());
  EXPECT_EQ(HeaderOf(Get(console, "/console"), "Location"), "/console/");
  EXPECT_EQ(HeaderOf(Get(console, "/console?project=p1&x=%2F"), "Location"), "/console/?project=p1&x=%2F");
  EXPECT_EQ(HeaderOf(Get(console, "/console/", "PUT"), "Allow"), "GET, HEAD");
}

TEST_F(ConsoleEndpointTest, NotBuiltOrDisabledSaysSo) {
  ConsoleEndpoint missing((root_ / "nowhere").string());
  HttpResponse r = Get(missing, "/console/");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(absl::StrContains(r.body, "not built")) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "cmake --build build --target console")) << r.body;
  EXPECT_TRUE(absl::StrContains(missing.Describe(), "not built")) << missing.Describe();
  EXPECT_EQ(Get(missing, "/console/app-3f2a9c.js").status, 404);

  ConsoleEndpoint disabled("");
  r = Get(disabled, "/console/");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(absl::StrContains(r.body, "disabled")) << r.body;
  EXPECT_EQ(HeaderOf(r, "X-Frame-Options"), "DENY");
  EXPECT_TRUE(absl::StrContains(disabled.Describe(), "disabled"));

  ConsoleEndpoint served(dir_.string());
  EXPECT_TRUE(absl::StrContains(served.Describe(), dir_.string())) << served.Describe();
}

TEST(ConsoleEndpointServes, OnlyTheConsolesPaths) {
  EXPECT_TRUE(ConsoleEndpoint::Serves("/console"));
  EXPECT_TRUE(ConsoleEndpoint::Serves("/console/"));
  EXPECT_TRUE(ConsoleEndpoint::Serves("/console?x=1"));
  EXPECT_TRUE(ConsoleEndpoint::Serves("/console/app.js"));
  EXPECT_FALSE(ConsoleEndpoint::Serves("/consoles"));
  EXPECT_FALSE(ConsoleEndpoint::Serves("/v1/projects/console"));
  EXPECT_FALSE(ConsoleEndpoint::Serves("/"));
}

TEST(ConsoleEndpointNames, ValidNames) {
  for (const char* ok : {"index.html", "app-3f2a.js", "A_b.c-d", "x"}) EXPECT_TRUE(ConsoleEndpoint::ValidName(ok)) << ok;
  for (const char* bad : {"", ".", "..", ".env", "-x", "_x", "a/b", "a..b", "a%2e", "a b", "a\\b", "é"}) {
    EXPECT_FALSE(ConsoleEndpoint::ValidName(bad)) << bad;
  }
  EXPECT_FALSE(ConsoleEndpoint::ValidName(std::string(256, 'a')));
}

// What a real server sends: HEAD gets the GET's headers and no body; every
// response says nosniff once.
std::string Exchange(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  (void)!::write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  ::close(fd);
  return out;
}

TEST_F(ConsoleEndpointTest, HeadThroughTheServerHasHeadersAndNoBody) {
  ConsoleEndpoint console(dir_.string());
  auto server = HttpServer::Start({}, [&console](HttpRequest r, Responder respond) {
    console.Handle(std::move(r), std::move(respond));
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const uint16_t port = (*server)->port();

  const std::string head =
      Exchange(port, "HEAD /console/app-3f2a9c.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << head;
  EXPECT_TRUE(absl::StrContains(head, absl::StrCat("Content-Length: ", std::string(kScript).size(), "\r\n"))) << head;
  EXPECT_TRUE(absl::EndsWith(head, "\r\n\r\n")) << "a body after the headers: " << head;
  EXPECT_TRUE(absl::StrContains(head, "X-Content-Type-Options: nosniff\r\n")) << head;
  EXPECT_EQ(head.find("nosniff"), head.rfind("nosniff")) << "sent twice: " << head;

  const std::string get = Exchange(port, "GET /console/app-3f2a9c.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::EndsWith(get, std::string("\r\n\r\n") + kScript)) << get;

  const std::string missing = Exchange(port, "HEAD /console/nope.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(missing, "HTTP/1.1 404")) << missing;
  EXPECT_TRUE(absl::EndsWith(missing, "\r\n\r\n")) << missing;
  (*server)->Stop();
}

}  // namespace
}  // namespace mle::api
