#include "absl/strings/string_view.h"
#include "api/auth.h"

#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace mle::api {

absl::Status Authenticator::Check(absl::string_view authorization, absl::string_view access_token) const {
  absl::string_view token = access_token;
  if (!authorization.empty()) {
    if (!absl::StartsWithIgnoreCase(authorization, "Bearer ")) {
      return absl::UnauthenticatedError(
          "Request had an Authorization header that is not a bearer token. Send "
          "\"Authorization: Bearer <token>\" with the token from the server's admin.token file.");
    }
    token = absl::StripAsciiWhitespace(authorization.substr(7));
  }
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "Request is missing required authentication credential. Send \"Authorization: Bearer <token>\" "
        "with the token from the server's admin.token file.");
  }
  if (token.size() != admin_token_.size() ||
      CRYPTO_memcmp(token.data(), admin_token_.data(), token.size()) != 0) {
    return absl::UnauthenticatedError("Request had invalid authentication credentials: the bearer token is not valid.");
  }
  return absl::OkStatus();
}

}  // namespace mle::api
