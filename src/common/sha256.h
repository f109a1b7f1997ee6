// SHA-256 with lowercase hex output: the one implementation behind package
// digests (server and CLI), object checksums and upload hashing. OpenSSL's
// EVP underneath; a failure inside OpenSSL (out of memory, a broken provider)
// aborts with a message, as an allocation failure would.
// A Sha256 object is used by one thread at a time; the functions are
// thread-safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace mle::common {

// Incremental SHA-256. Move-only.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(absl::string_view bytes) { Update(bytes.data(), bytes.size()); }
  // The digest of everything given so far, as 64 lowercase hex digits;
  // starts over afterwards.
  std::string HexDigest();

 private:
  EVP_MD_CTX* ctx_;
};

// The hex SHA-256 of `bytes`.
std::string Sha256Hex(absl::string_view bytes);

// The hex SHA-256 of the files' contents, concatenated in order (a package
// digest). The error names the file that cannot be read.
absl::StatusOr<std::string> Sha256HexOfFiles(const std::vector<std::filesystem::path>& files);

// The hex SHA-256 of the whole file open as `fd`, read with pread (the
// offset is left alone). `fd` stays the caller's.
absl::StatusOr<std::string> Sha256HexOfFd(int fd);

// Whether `s` is 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view s);

}  // namespace mle::common
