// Random identifiers and secrets from the operating system's source
// (OpenSSL's RAND_bytes). Thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace mle::common {

// `bytes` random bytes as lowercase hex (2 x bytes characters); nullopt
// when the generator fails (callers say what that means for them).
std::optional<std::string> RandomHex(size_t bytes);

}  // namespace mle::common
