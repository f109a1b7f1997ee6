#include "iam/tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace mle::iam {

std::string NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    std::fprintf(stderr, "mlengine: the random number generator failed\n");
    std::abort();
  }
  return absl::StrCat("mle1.",
                      absl::WebSafeBase64Escape(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes)));
}

std::string TokenHash(absl::string_view token) { return common::Sha256Hex(token); }

bool SameHash(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace mle::iam
