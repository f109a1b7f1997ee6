#include "api/dispatch.h"

namespace mle::api {

Handler Dispatch(const ApiRouter& api, const StorageRouter& storage, const MetricsEndpoint& metrics,
                 const ConsoleEndpoint& console) {
  return [&api, &storage, &metrics, &console](HttpRequest request, Responder respond) {
    if (StorageRouter::Serves(request.target)) return storage.Handle(std::move(request), std::move(respond));
    if (MetricsEndpoint::Serves(request.target)) return metrics.Handle(std::move(request), std::move(respond));
    if (ConsoleEndpoint::Serves(request.target)) return console.Handle(std::move(request), std::move(respond));
    api.Handle(std::move(request), std::move(respond));
  };
}

}  // namespace mle::api
