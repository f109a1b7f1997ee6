// StorageRouter: the subset of the Cloud Storage JSON API that mlengined
// serves beside `ml` v1 (docs/runtime-contract.md, "Storage HTTP API"), on a
// BucketStore:
//   POST   /upload/storage/v1/b/{bucket}/o?uploadType=media&name={object}
//   GET    /storage/v1/b/{bucket}/o/{object}[?alt=media]
//   GET    /storage/v1/b/{bucket}/o?prefix=&delimiter=&pageToken=&maxResults=
//   DELETE /storage/v1/b/{bucket}/o/{object}
//   POST   /storage/v1/b?project=P  {"name": ...}
//   GET    /storage/v1/b/{bucket},  GET /storage/v1/b
// The routes are a table (storage_router.cc, Routes()) naming the permission
// each needs on the bucket (whose project's policy governs it) or on the
// `project` parameter. Checks the bearer token and that permission
// (AccessGate), the route, query parameters and names (400 with
// fieldViolations), records changes in the audit log, and renders resources
// and errors in
// Google's format. Object names arrive percent-encoded ("%2F" for '/'; raw
// '/' after ".../o/" is accepted too).
//
// Store calls block on the disk (fsync, hashing, directory walks), so they
// run on the router's own worker threads, never on the HTTP io threads; the
// Responder is called from there.
//
// Thread-safe. Stop() (or the destructor) finishes the work already queued
// and joins the workers. Shut down in this order: HttpServer::Stop(), then
// StorageRouter::Stop(), then destroy the server: a worker still running
// would otherwise answer into a destroyed io_context.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "api/access.h"
#include "api/http_server.h"
#include "buckets/bucket_store.h"
#include "common/worker_pool.h"
#include "service/disk_watch.h"

namespace mle::api {

class StorageRouter {
 public:
  StorageRouter(buckets::BucketStore& store, iam::IamService& iam, int workers = 4);
  ~StorageRouter();
  StorageRouter(const StorageRouter&) = delete;
  StorageRouter& operator=(const StorageRouter&) = delete;

  // Whether `target` is one of this router's ("/storage/..." or "/upload/...").
  static bool Serves(absl::string_view target);

  void Handle(HttpRequest request, Responder respond) const;

  // Runs what is queued, then joins the workers; later requests get 503.
  // Idempotent.
  void Stop();

  // For HttpServerOptions::upload_check: refuses an upload from its head
  // alone (credentials, route, parameters, names) before its body is read,
  // through `done` (nullopt: read the body). A refusal of a known caller is
  // recorded in the audit log before `done` is called, as every refused
  // write is (Handle); `done` may be called on another thread.
  void CheckUpload(const HttpRequest& head, std::function<void(std::optional<HttpResponse>)> done) const;

  using Workers = common::WorkerPool;  // drains what is queued when stopped

  // Refuse writes of new objects (RESOURCE_EXHAUSTED) while the data
  // directory's disk is full. Before serving.
  void AttachDisk(const service::DiskWatch* disk) { disk_ = disk; }

 private:
  absl::Status CheckRoom(absl::string_view method) const;

  buckets::BucketStore& store_;
  iam::IamService& iam_;
  const AccessGate gate_;
  std::unique_ptr<Workers> workers_;
  const service::DiskWatch* disk_ = nullptr;
};

}  // namespace mle::api
