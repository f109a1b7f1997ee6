#include "api/console_endpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mle::api {
namespace {

constexpr absl::string_view kPrefix = "/console";
constexpr char kIndex[] = "index.html";
constexpr char kRoute[] = "console";
constexpr size_t kMaxNameLength = 255;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

HttpResponse Text(int status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(text);
  r.body.push_back('\n');
  return r;
}

HttpResponse NotFound() { return Text(404, "Not found."); }

}  // namespace

const std::vector<std::pair<std::string, std::string>>& ConsoleEndpoint::SecurityHeaders() {
  static const auto* headers = new std::vector<std::pair<std::string, std::string>>{
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
  };
  return *headers;
}

std::string ConsoleEndpoint::ContentTypeOf(absl::string_view name) {
  struct Type {
    absl::string_view extension;
    absl::string_view content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".webmanifest", "application/manifest+json"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const size_t dot = name.rfind('.');
  if (dot != absl::string_view::npos) {
    const std::string extension = absl::AsciiStrToLower(name.substr(dot));
    for (const Type& t : kTypes) {
      if (t.extension == extension) return std::string(t.content_type);
    }
  }
  return "application/octet-stream";
}

bool ConsoleEndpoint::ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength || !absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return !absl::StrContains(name, "..");
}

bool ConsoleEndpoint::Serves(absl::string_view target) {
  if (!absl::StartsWith(target, kPrefix)) return false;
  const absl::string_view rest = target.substr(kPrefix.size());
  return rest.empty() || rest[0] == '/' || rest[0] == '?';
}

std::string ConsoleEndpoint::Describe() const {
  if (dir_.empty()) return "the web console is disabled (console_dir is empty)";
  if (!IsDirectory(dir_)) {
    return absl::StrCat("the web console is not built (no directory ", dir_,
                        "; build it with `cmake --build build --target console`): /console/ answers 404");
  }
  return absl::StrCat("the web console is served at /console/ from ", dir_);
}

void ConsoleEndpoint::Handle(HttpRequest request, Responder respond) const {
  auto answer = [&respond](HttpResponse r) {
    r.route = kRoute;
    for (const auto& header : SecurityHeaders()) r.headers.push_back(header);
    respond(std::move(r));
  };
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = Text(405, absl::StrCat("Method ", request.method, " is not allowed: the console answers GET and HEAD."));
    r.headers.emplace_back("Allow", "GET, HEAD");
    return answer(std::move(r));
  }
  const absl::string_view target = request.target;
  const size_t query = target.find('?');
  const absl::string_view path = target.substr(0, query);
  if (path == kPrefix) {
    HttpResponse r = Text(301, "Moved to /console/.");
    r.headers.emplace_back("Location", absl::StrCat(kPrefix, "/",
                                                    query == absl::string_view::npos ? "" : target.substr(query)));
    return answer(std::move(r));
  }
  absl::string_view name = path.substr(kPrefix.size() + 1);  // after "/console/"
  if (name.empty()) name = kIndex;
  if (!ValidName(name)) return answer(NotFound());
  if (dir_.empty()) {
    return answer(Text(404,
                       "The web console is disabled on this server (console_dir is empty in mlengined's "
                       "configuration)."));
  }
  const bool index = name == kIndex;
  const std::string path_on_disk = absl::StrCat(dir_, "/", name);
  // O_NONBLOCK: a FIFO planted in the directory must not hang the open.
  const int fd = ::open(path_on_disk.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (index && (errno == ENOENT || errno == ENOTDIR)) {
      return answer(Text(404, absl::StrCat("The web console is not built: ", dir_,
                                           " has no index.html. Build it with `cmake --build build --target "
                                           "console`, or point console_dir in mlengined's configuration at its "
                                           "files.")));
    }
    return answer(NotFound());
  }
  auto owned = OwnBodyFd(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return answer(NotFound());
  HttpResponse r;
  r.content_type = ContentTypeOf(name);
  r.body_fd = std::move(owned);
  r.headers.emplace_back("Cache-Control", index ? "no-cache" : "public, max-age=31536000, immutable");
  answer(std::move(r));
}

}  // namespace mle::api
