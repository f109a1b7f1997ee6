// The request handler of mlengined's HTTP server: the Cloud Storage routes
// ("/storage/...", "/upload/...") go to the StorageRouter, "/metrics" to the
// MetricsEndpoint, "/console" and "/console/..." to the ConsoleEndpoint,
// everything else to the ApiRouter (ml v1 and the identity APIs).
// Thread-safe; the routers must outlive the server.
#pragma once

#include "api/api_router.h"
#include "api/console_endpoint.h"
#include "api/http_server.h"
#include "api/metrics_endpoint.h"
#include "api/storage_router.h"

namespace mle::api {

Handler Dispatch(const ApiRouter& api, const StorageRouter& storage, const MetricsEndpoint& metrics,
                 const ConsoleEndpoint& console);

}  // namespace mle::api
