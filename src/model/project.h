// A project: the namespace jobs live in, with the service identities that
// projects.getConfig reports. Plain value, not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace mle::model {

struct Project {
  std::string id;                   // the {p} of projects/{p}
  int64_t number = 0;               // stable 12-digit project number
  std::string service_account;      // runs the training replicas
  std::string tpu_service_account;  // acts for the project on TPU hosts
  absl::Time create_time;
};

}  // namespace mle::model
