// Authentication of API requests: one place decides who may call.
// Today: a bearer token compared (in constant time) with the admin token
// mlengined creates at first start. IAM will replace the comparison, not the
// call sites. Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"

namespace mle::api {

class Authenticator {
 public:
  explicit Authenticator(std::string admin_token) : admin_token_(std::move(admin_token)) {}
  // `authorization` is the Authorization header ("Bearer <token>");
  // `access_token` the access_token query parameter (either may be empty).
  // UNAUTHENTICATED with a message saying what to send, or OK.
  absl::Status Check(absl::string_view authorization, absl::string_view access_token) const;

 private:
  std::string admin_token_;
};

}  // namespace mle::api
