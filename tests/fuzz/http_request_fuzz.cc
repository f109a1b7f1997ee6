// Fuzzes the HTTP request path of mlengined without sockets: the input is the
// byte stream of one keep-alive connection. Each request in it is parsed by
// Boost.Beast's request parser with the server's limits (64 KiB of header,
// 1 MiB of body, 413 past it), turned into an HttpRequest as the server does
// (uploads written to the bucket store's temporary directory with their
// SHA-256, after the storage router's early check), and handed to Dispatch:
// the ml v1 ApiRouter over a real JobService, Scheduler (no executor: jobs
// stay queued) and LogService, the StorageRouter over a real BucketStore in
// a temporary directory, /metrics and /console/ (an absent directory). Only
// the store of jobs is a fake: MemoryStore keeps them in memory and makes a
// commit durable when the harness drains it. Requests come from loopback (as the tests' clients).
//
// Not covered: the socket, timeouts, 100-continue, request ids, the access
// log and writing responses (HttpServer's Session).
//
// Every input starts from an empty server, so a crash replays alone.
// Properties: each request gets exactly one response (by the end of the
// input, when the services shut down and answer long polls), with an HTTP
// status from 200 to 599, and a JSON body that parses; an error's body is
// Google's {"error": {"code": <the HTTP status>, ...}}.
#include <stdlib.h>
#include <unistd.h>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <algorithm>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "api/api_router.h"
#include "iam/iam_service.h"
#include "service/quota_service.h"
#include "service/study_service.h"
#include "api/console_endpoint.h"
#include "api/dispatch.h"
#include "api/metrics_endpoint.h"
#include "api/storage_router.h"
#include "buckets/bucket_store.h"
#include "common/checksums.h"
#include "common/clock.h"
#include "db/store.h"
#include "logs/log_store.h"
#include "scheduler/scheduler.h"
#include "service/cluster_view.h"
#include "service/job_runs.h"
#include "service/job_service.h"
#include "service/log_service.h"
#include "validate/validate.h"

namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using mle::api::HttpRequest;
using mle::api::HttpResponse;

constexpr size_t kHeaderLimit = 64 * 1024;  // as HttpServer
constexpr uint64_t kBodyLimit = 1 << 20;    // HttpServerOptions' default
constexpr int kMaxRequests = 16;
const char kToken[] = "fuzz-token";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "http_request_fuzz: %s\n", what.c_str());
  std::abort();
}

// Keeps projects and jobs in memory. A commit is queued and becomes durable
// (its callback runs, with OK) when Drain() is called, as the SQLite writer
// thread would complete it later: callers may hold their own locks in Commit.
class MemoryStore final : public mle::db::Store {
 public:
  absl::StatusOr<mle::db::Snapshot> Load() override {
    std::lock_guard<std::mutex> lock(mu_);
    mle::db::Snapshot s;
    for (const auto& [id, p] : projects_) s.projects.push_back(p);
    for (const auto& [key, j] : jobs_) s.jobs.push_back(j);
    std::sort(s.jobs.begin(), s.jobs.end(), [](const auto& a, const auto& b) { return a.sequence < b.sequence; });
    return s;
  }
  absl::StatusOr<std::vector<mle::db::Record>> LoadRecords(const std::string&) override { return std::vector<mle::db::Record>{}; }
  absl::StatusOr<std::vector<mle::db::AuditRecord>> ReadAudit(const mle::db::AuditQuery&) override {
    return std::vector<mle::db::AuditRecord>{};
  }
  // The fuzzer never routes a backup to a store (POST /mlengine/v1/backups
  // needs a BackupService, which this harness has none of).
  absl::Status BackupTo(const std::string&) override {
    return absl::UnimplementedError("the fuzz harness's store keeps no backups");
  }
  using mle::db::Store::Commit;
  void Commit(std::vector<mle::db::Mutation> mutations, std::function<void(absl::Status)> done,
              mle::db::Sync) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({std::move(mutations), std::move(done)});
  }
  // Applies and acknowledges what was committed; false when nothing was.
  bool Drain() {
    std::vector<Pending> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(pending_);
      for (auto& p : batch) {
        for (auto& m : p.mutations) {
          if (auto* j = std::get_if<mle::db::PutJob>(&m)) jobs_[j->job.project + "/" + j->job.job_id] = j->Row();
          if (auto* d = std::get_if<mle::db::DeleteJob>(&m)) jobs_.erase(d->project + "/" + d->job_id);
          if (auto* pr = std::get_if<mle::db::PutProject>(&m)) projects_[pr->project.id] = pr->project;
        }
      }
    }
    for (auto& p : batch) p.done(absl::OkStatus());
    return !batch.empty();
  }

 private:
  struct Pending {
    std::vector<mle::db::Mutation> mutations;
    std::function<void(absl::Status)> done;
  };
  std::mutex mu_;
  std::vector<Pending> pending_;
  std::map<std::string, mle::model::Project> projects_;
  std::map<std::string, mle::db::StoredJob> jobs_;
};

// One request's response, answered from any thread, exactly once.
struct Slot {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<HttpResponse> response;
  std::string request;  // method and target, for messages
};

void Respond(const std::shared_ptr<Slot>& slot, HttpResponse response) {
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->response) Fail("a second response to " + slot->request);
  slot->response = std::move(response);
  slot->cv.notify_all();
}

void CheckResponse(const Slot& slot) {
  if (!slot.response) Fail("no response to " + slot.request);
  const HttpResponse& r = *slot.response;
  if (r.status < 200 || r.status > 599) Fail("HTTP status " + std::to_string(r.status) + " for " + slot.request);
  if (!absl::StartsWith(r.content_type, "application/json") || r.body.empty()) return;
  const auto body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) Fail("a JSON response that does not parse, for " + slot.request + ":\n" + r.body);
  if (r.status >= 400) {
    if (!body.is_object() || !body.contains("error") || !body["error"].is_object() ||
        body["error"].value("code", 0) != r.status) {
      Fail("an error body without {\"error\": {\"code\": " + std::to_string(r.status) + "}}, for " + slot.request +
           ":\n" + r.body);
    }
  }
}

// A directory for the whole run, removed at exit.
const fs::path& Root() {
  static const fs::path* root = [] {
    std::string tmpl = (fs::temp_directory_path() / "mle_http_fuzz_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) Fail("mkdtemp");
    auto* p = new fs::path(tmpl);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(Root(), ec);
    });
    return p;
  }();
  return *root;
}

// An empty mlengined: every part a test of the API would start.
class Server {
 public:
  Server()
      : service_(store_, clock_, mle::validate::Config::Defaults()),
        scheduler_(clock_, service_, nullptr),
        logs_(service_, mle::logs::LogReader((Root() / "runs").string())),
        iam_(store_, clock_, kToken),
        quotas_(store_, scheduler_, {}),
        studies_(store_, clock_, mle::validate::Config::Defaults().regions,
                 mle::validate::Config::Defaults().tpu_regions),
        runs_(service_, (Root() / "runs").string()),
        cluster_(scheduler_, {"none", {}, (Root() / "runs").string(), nullptr}),
        api_(service_, logs_, iam_, quotas_, studies_, runs_, cluster_),
        metrics_(service_, iam_, mle::api::MetricsAccess::kLoopback),
        console_((Root() / "console").string()) {
    std::error_code ec;
    fs::remove_all(Root() / "buckets", ec);
    auto buckets = mle::buckets::BucketStore::Open((Root() / "buckets").string());
    if (!buckets.ok()) Fail("BucketStore::Open: " + buckets.status().ToString());
    buckets_ = *std::move(buckets);
    storage_ = std::make_unique<mle::api::StorageRouter>(*buckets_, iam_, /*workers=*/1);
    handler_ = mle::api::Dispatch(api_, *storage_, metrics_, console_);
    service_.AttachScheduler(&scheduler_);
    service_.AttachIam(&iam_);
    iam_.AttachProjects(&service_);
    if (auto s = service_.Recover(); !s.ok()) Fail("Recover: " + s.ToString());
    if (auto s = iam_.Recover(); !s.ok()) Fail("Recover: " + s.ToString());
    if (auto s = studies_.Recover(); !s.ok()) Fail("Recover: " + s.ToString());
  }

  // Serves one parsed request and waits until it is answered (or, for a long
  // poll, until nothing more can happen before the shutdown answers it).
  void Serve(HttpRequest request, const std::shared_ptr<Slot>& slot) {
    const bool storage = mle::api::StorageRouter::Serves(request.target);
    handler_(std::move(request), [slot](HttpResponse r) { Respond(slot, std::move(r)); });
    do {
      scheduler_.RunPending();
    } while (store_.Drain());
    if (storage) {
      // A storage worker may commit (a bucket's owner, an audit line) before
      // it answers: keep making commits durable while waiting.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      for (;;) {
        while (store_.Drain()) {
        }
        std::unique_lock<std::mutex> lock(slot->mu);
        if (slot->cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return slot->response.has_value(); })) break;
        if (std::chrono::steady_clock::now() > deadline) {
          Fail("the storage router did not answer " + slot->request + " within 5 s");
        }
      }
    }
  }

  // The upload check's answer, waited for: a refusal is audited first, so
  // the commits are made durable meanwhile, as Serve does.
  std::optional<HttpResponse> CheckUpload(const HttpRequest& head) {
    auto answer = std::make_shared<std::promise<std::optional<HttpResponse>>>();
    auto got = answer->get_future();
    storage_->CheckUpload(head, [answer](std::optional<HttpResponse> r) { answer->set_value(std::move(r)); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
      store_.Drain();
      if (std::chrono::steady_clock::now() > deadline) Fail("the upload check did not answer within 5 s");
    }
    return got.get();
  }
  std::string UploadDir() const { return buckets_->upload_dir(); }
  void Stop() { storage_->Stop(); }

 private:
  mle::common::FakeClock clock_;
  MemoryStore store_;
  mle::service::JobService service_;
  mle::scheduler::Scheduler scheduler_;
  mle::service::LogService logs_;
  mle::iam::IamService iam_;
  mle::service::QuotaService quotas_;
  mle::service::StudyService studies_;
  mle::service::JobRuns runs_;
  mle::service::ClusterService cluster_;
  mle::api::ApiRouter api_;
  mle::api::MetricsEndpoint metrics_;
  mle::api::ConsoleEndpoint console_;
  std::unique_ptr<mle::buckets::BucketStore> buckets_;
  std::unique_ptr<mle::api::StorageRouter> storage_;
  mle::api::Handler handler_;
};

template <class Fields>
HttpRequest HeadOf(const http::request_header<Fields>& head) {
  HttpRequest r;
  r.method = std::string(head.method_string());
  r.target = std::string(head.target());
  r.authorization = std::string(head[http::field::authorization]);
  r.content_type = std::string(head[http::field::content_type]);
  r.request_id = "fuzz";
  r.remote_address = "127.0.0.1";
  r.from_loopback = true;
  return r;
}

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = mle::api::ApiRouter::ErrorBody(status, code, message);
  return r;
}

// Parses the next request of `in` into the server, as HttpServer's Session
// does. Returns the bytes consumed, or 0 when the connection ends (malformed
// or incomplete request, an answer that closes it).
size_t ServeNext(Server& server, const char* in, size_t size, std::vector<std::shared_ptr<Slot>>* slots) {
  boost::beast::error_code ec;
  http::request_parser<http::empty_body> head_parser;
  head_parser.header_limit(kHeaderLimit);
  head_parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  size_t used = head_parser.put(boost::asio::buffer(in, size), ec);
  if (ec || !head_parser.is_header_done()) return 0;  // the server answers 400 or waits

  auto slot = std::make_shared<Slot>();
  const auto& head = head_parser.get();
  slot->request = std::string(head.method_string()) + " " + std::string(head.target());
  slots->push_back(slot);
  const bool keep_alive = head.keep_alive();
  const bool upload = absl::StartsWith(std::string(head.target()), "/upload/");
  const uint64_t limit = upload ? (uint64_t{8} << 30) : kBodyLimit;
  if (auto length = head_parser.content_length(); length && *length > limit) {
    Respond(slot, ErrorResponse(413, "INVALID_ARGUMENT", "too large"));
    return 0;
  }
  if (upload) {
    if (auto refusal = server.CheckUpload(HeadOf(head))) {
      Respond(slot, std::move(*refusal));
      return 0;  // the body stays unread; the connection closes
    }
  }
  http::request_parser<http::string_body> parser(std::move(head_parser));
  parser.body_limit(limit);
  parser.eager(true);
  while (!parser.is_done() && used < size) {
    const size_t n = parser.put(boost::asio::buffer(in + used, size - used), ec);
    used += n;
    if (ec == http::error::need_more) {
      if (n == 0) break;  // the rest is an incomplete piece: the server would wait for more
      ec = {};
      continue;
    }
    if (ec == http::error::body_limit) {
      Respond(slot, ErrorResponse(413, "INVALID_ARGUMENT", "too large"));
      return 0;
    }
    if (ec) {
      Respond(slot, ErrorResponse(400, "INVALID_ARGUMENT", "Malformed HTTP request: " + ec.message()));
      return 0;
    }
  }
  if (!parser.is_done()) {
    slots->pop_back();  // the client never finished it: no answer is due
    return 0;
  }

  HttpRequest request = HeadOf(parser.get());
  std::string body = std::move(parser.get().body());
  std::string upload_file;
  if (upload) {
    upload_file = server.UploadDir() + "/upload-XXXXXX";
    const int fd = ::mkstemp(upload_file.data());
    if (fd < 0) Fail("mkstemp in the upload directory");
    const bool written = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
    ::close(fd);
    if (!written) Fail("writing the upload");
    request.body_file = upload_file;
    request.body_size = body.size();
    request.body_checksums = mle::common::ChecksumsOf(body);
  } else {
    request.body = std::move(body);
  }
  server.Serve(std::move(request), slot);
  if (!upload_file.empty()) ::unlink(upload_file.c_str());  // as the server does once answered (if still there)
  return keep_alive ? used : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::shared_ptr<Slot>> slots;
  {
    Server server;
    const char* in = reinterpret_cast<const char*>(data);
    size_t offset = 0;
    for (int i = 0; i < kMaxRequests && offset < size; ++i) {
      const size_t used = ServeNext(server, in + offset, size - offset, &slots);
      if (used == 0) break;
      offset += used;
    }
    server.Stop();
  }  // the log service answers its long polls as it shuts down
  for (const auto& slot : slots) CheckResponse(*slot);
  return 0;
}
