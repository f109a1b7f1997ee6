// The request handler of mlengined's HTTP server: the Cloud Storage routes
// ("/storage/...", "/upload/...") go to the StorageRouter, "/metrics" to the
// MetricsEndpoint, everything else to the ApiRouter (ml v1). Also fills the HttpServer options the storage
// routes need (upload directory, early refusal of uploads).
// Thread-safe; the routers must outlive the server.
#pragma once

#include "api/api_router.h"
#include "api/http_server.h"
#include "api/metrics_endpoint.h"
#include "api/storage_router.h"

namespace mle::api {

Handler Dispatch(const ApiRouter& api, const StorageRouter& storage, const MetricsEndpoint& metrics);

// Streams uploads to `upload_dir` (the BucketStore's, so installing an
// object is a rename) and lets `storage` refuse them before their body.
void ConfigureUploads(HttpServerOptions* options, const StorageRouter& storage, const std::string& upload_dir);

}  // namespace mle::api
