// ApiRouter: the `ml` v1 REST surface. Maps each route of the discovery
// document to a JobService call through a route table (api_router.cc,
// Routes()): checks authentication, parses the path, query parameters and
// JSON body (through codec/), and renders results and errors in Google's
// format. No application logic lives here.
// Thread-safe (stateless beyond its collaborators).
#pragma once

#include <string>

#include "api/auth.h"
#include "api/http_server.h"
#include "service/job_service.h"
#include "service/log_service.h"

namespace mle::api {

class ApiRouter {
 public:
  // What the routes' handlers call.
  struct Services {
    service::JobService& jobs;
    service::LogService& logs;
  };

  ApiRouter(service::JobService& jobs, service::LogService& logs, const Authenticator& auth)
      : services_{jobs, logs}, auth_(auth) {}
  void Handle(HttpRequest request, Responder respond) const;

  // The body of an error the HTTP layer produces itself (413, malformed).
  static std::string ErrorBody(int http_status, const std::string& status, const std::string& message);

 private:
  const Services services_;
  const Authenticator& auth_;
};

}  // namespace mle::api
