// The two checksums Cloud Storage keeps for every object: MD5 (OpenSSL) and
// CRC32C (Castagnoli, Intel ISA-L), computed together in one pass, and their
// wire form (base64 of the digest bytes; for CRC32C the 4 bytes big-endian,
// as Google's JSON API and the x-goog-hash header carry them).
// A Checksummer is used by one thread at a time; the functions are
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace mle::common {

struct Checksums {
  std::string md5;      // the 16 raw digest bytes
  uint32_t crc32c = 0;  // the CRC32C value (standard: init and final xor ~0)
};

// CRC32C of `n` bytes continuing from `crc` (0 for the first piece), so
// Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t Crc32c(absl::string_view bytes, uint32_t crc = 0) { return Crc32c(bytes.data(), bytes.size(), crc); }

// Incremental MD5 + CRC32C. Move-only.
class Checksummer {
 public:
  Checksummer();
  ~Checksummer();
  Checksummer(Checksummer&& other) noexcept;
  Checksummer& operator=(Checksummer&& other) noexcept;
  Checksummer(const Checksummer&) = delete;
  Checksummer& operator=(const Checksummer&) = delete;

  void Update(const void* data, size_t size);
  void Update(absl::string_view bytes) { Update(bytes.data(), bytes.size()); }
  uint64_t size() const { return size_; }
  // The checksums of everything given so far; starts over afterwards.
  Checksums Finish();

 private:
  EVP_MD_CTX* ctx_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

Checksums ChecksumsOf(absl::string_view bytes);
// Of `length` bytes of `fd` from `offset` (pread; the file offset is left
// alone); length < 0: to the end of the file.
absl::StatusOr<Checksums> ChecksumsOfFd(int fd, int64_t offset = 0, int64_t length = -1);

// Wire forms: base64 of the MD5 digest, base64 of the CRC32C's 4 bytes
// big-endian; and back (nullopt when malformed).
std::string Md5Base64(const Checksums& c);
std::string Crc32cBase64(uint32_t crc);
std::optional<std::string> Md5FromBase64(absl::string_view b64);
std::optional<uint32_t> Crc32cFromBase64(absl::string_view b64);

}  // namespace mle::common
