// Bearer tokens: random, shown once, stored only as their SHA-256.
// "mle1." + 43 base64url characters (256 random bits), so a leaked token is
// recognisable in logs and secret scanners. Thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace mle::iam {

// A fresh token from the operating system's random source (OpenSSL's
// RAND_bytes; aborts if the generator fails, as an allocation failure would).
std::string NewToken();

// What is stored and looked up: the lowercase hex SHA-256 of the token.
std::string TokenHash(absl::string_view token);

// Whether two hashes are equal, in time independent of where they differ.
bool SameHash(absl::string_view a, absl::string_view b);

}  // namespace mle::iam
