#include "common/random.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace mle::common {

std::optional<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) return std::nullopt;
  return absl::BytesToHexString(raw);
}

}  // namespace mle::common
