#include "common/checksums.h"

#include <isa-l/crc.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mle::common {
namespace {

constexpr size_t kChecksumReadBytes = 1 << 20;

void Check(int ok, const char* what) {
  if (ok != 1) {
    std::cerr << "OpenSSL failed in " << what << "\n";
    std::abort();
  }
}

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  // ISA-L's crc32_iscsi neither inverts its seed nor its result: the
  // standard CRC32C (init ~0, final xor ~0) is ~crc32_iscsi(data, n, ~crc).
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(n), ~crc);
}

Checksummer::Checksummer() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) Check(0, "EVP_MD_CTX_new");
  Check(EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr), "EVP_DigestInit_ex");
}

Checksummer::~Checksummer() {
  if (ctx_ != nullptr) EVP_MD_CTX_free(ctx_);
}

Checksummer::Checksummer(Checksummer&& other) noexcept
    : ctx_(other.ctx_), crc_(other.crc_), size_(other.size_) {
  other.ctx_ = nullptr;
}

Checksummer& Checksummer::operator=(Checksummer&& other) noexcept {
  if (this != &other) {
    if (ctx_ != nullptr) EVP_MD_CTX_free(ctx_);
    ctx_ = other.ctx_;
    crc_ = other.crc_;
    size_ = other.size_;
    other.ctx_ = nullptr;
  }
  return *this;
}

void Checksummer::Update(const void* data, size_t size) {
  // ISA-L takes an int length: feed it in pieces below 1 GiB.
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const size_t n = std::min<size_t>(left, size_t{1} << 30);
    crc_ = Crc32c(p, n, crc_);
    p += n;
    left -= n;
  }
  Check(EVP_DigestUpdate(ctx_, data, size), "EVP_DigestUpdate");
  size_ += size;
}

Checksums Checksummer::Finish() {
  Checksums out;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  Check(EVP_DigestFinal_ex(ctx_, digest, &len), "EVP_DigestFinal_ex");
  out.md5.assign(reinterpret_cast<char*>(digest), len);
  out.crc32c = crc_;
  Check(EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr), "EVP_DigestInit_ex");
  crc_ = 0;
  size_ = 0;
  return out;
}

Checksums ChecksumsOf(absl::string_view bytes) {
  Checksummer c;
  c.Update(bytes);
  return c.Finish();
}

absl::StatusOr<Checksums> ChecksumsOfFd(int fd, int64_t offset, int64_t length) {
  Checksummer c;
  std::vector<char> buf(kChecksumReadBytes);
  int64_t left = length;
  while (length < 0 || left > 0) {
    const size_t want = length < 0 ? buf.size() : static_cast<size_t>(std::min<int64_t>(left, buf.size()));
    ssize_t n = ::pread(fd, buf.data(), want, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("cannot read a file to checksum it: ", std::strerror(errno)));
    }
    if (n == 0) {
      if (length < 0) break;
      return absl::InternalError("a file shrank while it was being checksummed");
    }
    c.Update(buf.data(), static_cast<size_t>(n));
    offset += n;
    left -= n;
  }
  return c.Finish();
}

std::string Md5Base64(const Checksums& c) { return absl::Base64Escape(c.md5); }

std::string Crc32cBase64(uint32_t crc) {
  const char bytes[4] = {static_cast<char>(crc >> 24), static_cast<char>(crc >> 16), static_cast<char>(crc >> 8),
                         static_cast<char>(crc)};
  return absl::Base64Escape(absl::string_view(bytes, 4));
}

std::optional<std::string> Md5FromBase64(absl::string_view b64) {
  std::string raw;
  if (!absl::Base64Unescape(b64, &raw) || raw.size() != 16) return std::nullopt;
  return raw;
}

std::optional<uint32_t> Crc32cFromBase64(absl::string_view b64) {
  std::string raw;
  if (!absl::Base64Unescape(b64, &raw) || raw.size() != 4) return std::nullopt;
  uint32_t v = 0;
  for (char ch : raw) v = (v << 8) | static_cast<unsigned char>(ch);
  return v;
}

}  // namespace mle::common
