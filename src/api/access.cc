#include "api/access.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace mle::api {

absl::StatusOr<iam::Principal> AccessGate::Authenticate(absl::string_view authorization,
                                                        absl::string_view access_token) const {
  absl::string_view token = access_token;
  if (!authorization.empty()) {
    if (!absl::StartsWithIgnoreCase(authorization, "Bearer ")) {
      return absl::UnauthenticatedError(
          "Request had an Authorization header that is not a bearer token. Send \"Authorization: Bearer <token>\": "
          "a token from `mlengine auth print-access-token`, or the operator's admin.token.");
    }
    token = absl::StripAsciiWhitespace(authorization.substr(7));
  }
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "Request is missing required authentication credential. Send \"Authorization: Bearer <token>\": a token "
        "from `mlengine auth print-access-token`, or the operator's admin.token.");
  }
  return iam_.Authenticate(token);
}

}  // namespace mle::api
