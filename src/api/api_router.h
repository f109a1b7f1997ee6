// ApiRouter: the Google-style REST surface of mlengined beside storage: ml
// v1, and the identity APIs the TPU guide's access steps use
// (cloudresourcemanager v1, iam v1, iamcredentials v1, serviceusage
// v1beta1), plus mlengine's own admin API. One route table (api_router.cc,
// Routes()) names each route's handler, the permission it needs on which
// resource, and whether the audit log records it; one gate authenticates
// every call and checks that permission before the handler runs. Handlers
// parse the query and JSON body (through codec/) and render results and
// errors in Google's format. No application logic lives here.
// Thread-safe (stateless beyond its collaborators).
#pragma once

#include <string>

#include "api/access.h"
#include "api/api_call.h"
#include "api/http_server.h"
#include "service/operation_log.h"

namespace mle::api {

class ApiRouter {
 public:
  ApiRouter(service::JobService& jobs, service::LogService& logs, iam::IamService& iam,
            service::QuotaService& quotas, service::StudyService& studies, const service::JobRuns& runs,
            const service::ClusterService& cluster)
      : services_{jobs, logs, iam, quotas, studies, operations_, runs, cluster}, gate_(iam) {}
  void Handle(HttpRequest request, Responder respond) const;
  // Serve POST /mlengine/v1/backups with `backups` (before serving).
  void ServeBackups(service::BackupService* backups) { services_.backups = backups; }
  // Serve a project's webhooks with `webhooks` (before serving).
  void ServeWebhooks(service::WebhookService* webhooks) { services_.webhooks = webhooks; }
  // Say how full the data directory's disk is (GET mlengine/v1/status).
  void AttachDisk(const service::DiskWatch* disk) { services_.disk = disk; }

  // The body of an error the HTTP layer produces itself (413, malformed).
  static std::string ErrorBody(int http_status, const std::string& status, const std::string& message);

 private:
  // Vertex AI's done operations (a job's deletion): the router's own,
  // for its operations methods.
  mutable service::OperationLog operations_;
  Services services_;
  const AccessGate gate_;
};

}  // namespace mle::api
