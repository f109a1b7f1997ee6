#include "server/maintenance.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backup/backup.h"
#include "buckets/bucket_store.h"
#include "db/store.h"
#include "rundir/file_io.h"

namespace mle::server {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using nlohmann::json;

void PrintSummary(const backup::Summary& s, const std::string& verb, const std::string& where) {
  std::cout << verb << " " << where << ": " << s.jobs << " jobs, " << s.projects << " projects, " << s.records
            << " records (users, tokens, policies, studies, ...), " << s.objects << " objects in " << s.buckets
            << " buckets (" << s.object_bytes << " bytes), " << s.run_files << " run files (" << s.run_bytes
            << " bytes); database schema " << s.schema_version << "; " << absl::FormatDuration(s.took) << "\n";
}

int Fail(const std::string& message) {
  std::cerr << "mlengined: " << message << "\n";
  return 1;
}

// POST /mlengine/v1/backups to the mlengined serving data_dir.
int AskServer(const std::string& data_dir, const std::string& to) {
  auto text = rundir::ReadFile((fs::path(data_dir) / "server.json").string());
  if (!text.ok()) {
    return Fail(absl::StrCat("an mlengined serves ", data_dir, " but its server.json cannot be read: ",
                             text.status().message()));
  }
  json server = json::parse(*text, nullptr, false);
  const std::string endpoint = server.is_object() ? server.value("endpoint", "") : "";
  auto token = rundir::ReadFile(server.is_object() ? server.value("token_file", "") : "");
  absl::string_view rest = endpoint;
  const size_t colon = rest.rfind(':');
  uint32_t port = 0;
  if (!absl::ConsumePrefix(&rest, "http://") || colon == absl::string_view::npos || !token.ok() ||
      !absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) {
    return Fail(absl::StrCat(data_dir, "/server.json does not say where its mlengined listens, with which token"));
  }
  const std::string host(rest.substr(0, rest.rfind(':')));
  try {
    boost::asio::io_context io;
    boost::beast::tcp_stream stream(io);
    boost::asio::ip::tcp::resolver resolver(io);
    stream.connect(resolver.resolve(host, std::to_string(port)));
    http::request<http::string_body> request{http::verb::post, "/mlengine/v1/backups", 11};
    request.set(http::field::host, host);
    request.set(http::field::authorization, "Bearer " + std::string(absl::StripAsciiWhitespace(*token)));
    request.set(http::field::content_type, "application/json");
    request.body() = json{{"destination", to}}.dump();
    request.prepare_payload();
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    http::read(stream, buffer, parser);
    const auto& response = parser.get();
    json body = json::parse(response.body(), nullptr, false);
    if (response.result_int() != 200) {
      const std::string message = body.is_object() && body.contains("error") && body["error"].is_object()
                                      ? body["error"].value("message", response.body())
                                      : response.body();
      return Fail(absl::StrCat("the backup failed: ", message));
    }
    const backup::Summary s = backup::SummaryFromJson(body);
    PrintSummary(s, "backed up (online, by the mlengined at " + endpoint + ") into", to);
    return 0;
  } catch (const std::exception& e) {
    return Fail(absl::StrCat("cannot reach the mlengined serving ", data_dir, " at ", endpoint, ": ", e.what()));
  }
}

}  // namespace

int RunBackup(const std::string& data_dir, const std::string& to) {
  const std::string lock_path = (fs::path(data_dir) / "lock").string();
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  if (lock_fd < 0) return Fail(absl::StrCat(data_dir, " is not an mlengine data directory (it has no lock file)"));
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return AskServer(data_dir, to);  // an mlengined serves it
  }
  // None serves it, and none starts while this holds the lock.
  auto store = db::OpenSqliteStore({(fs::path(data_dir) / "mlengine.db").string(), true});
  if (!store.ok()) {
    ::close(lock_fd);
    return Fail(std::string(store.status().message()));
  }
  auto objects = buckets::BucketStore::Open((fs::path(data_dir) / "buckets").string());
  if (!objects.ok()) {
    ::close(lock_fd);
    return Fail(std::string(objects.status().message()));
  }
  auto summary = backup::WriteBackup(**store, **objects, fs::absolute(data_dir).string(), to);
  store->reset();
  ::close(lock_fd);
  if (!summary.ok()) return Fail(absl::StrCat("the backup failed: ", summary.status().message()));
  PrintSummary(*summary, "backed up (no mlengined was serving it) into", to);
  return 0;
}

int RunRestore(const std::string& from, const std::string& data_dir) {
  auto summary = backup::RestoreBackup(from, data_dir);
  if (!summary.ok()) return Fail(absl::StrCat("the restore failed: ", summary.status().message()));
  PrintSummary(*summary, "restored " + from + " into", data_dir);
  std::cout << "start it with: mlengined --data-dir " << data_dir << " (the operator's token is "
            << (fs::path(data_dir) / "admin.token").string() << ")\n";
  return 0;
}

}  // namespace mle::server
