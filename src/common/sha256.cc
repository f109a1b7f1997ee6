#include "common/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace mle::common {
namespace {

constexpr size_t kReadBytes = size_t{1} << 20;

void CheckOpenSsl(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "mlengine: OpenSSL SHA-256 failed in %s\n", what);
  std::abort();
}

// Hashes everything `read_some` returns until it returns 0; the first
// negative return is an errno.
template <typename ReadSome>
absl::Status HashAll(Sha256& sha, ReadSome read_some, absl::string_view what) {
  // Not zeroed first: a read fills what is hashed, and zeroing a MiB a
  // call cost more than hashing a small package.
  const auto buf = std::make_unique_for_overwrite<char[]>(kReadBytes);
  while (true) {
    const ssize_t got = read_some(buf.get(), kReadBytes);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", what));
    }
    if (got == 0) return absl::OkStatus();
    sha.Update(buf.get(), static_cast<size_t>(got));
  }
}

// The SHA-256 implementation, fetched from OpenSSL's provider once: an
// implicit fetch (EVP_sha256()) on every digest costs more than hashing a
// token does.
const EVP_MD* Sha256Md() {
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    CheckOpenSsl(fetched != nullptr, "EVP_MD_fetch");
    return fetched;
  }();
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  CheckOpenSsl(ctx_ != nullptr, "EVP_MD_CTX_new");
  CheckOpenSsl(EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr) == 1, "EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  std::swap(ctx_, other.ctx_);
  return *this;
}

void Sha256::Update(const void* data, size_t size) {
  CheckOpenSsl(EVP_DigestUpdate(ctx_, data, size) == 1, "EVP_DigestUpdate");
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  CheckOpenSsl(EVP_DigestFinal_ex(ctx_, digest, &size) == 1, "EVP_DigestFinal_ex");
  CheckOpenSsl(EVP_DigestInit_ex(ctx_, Sha256Md(), nullptr) == 1, "EVP_DigestInit_ex");
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  CheckOpenSsl(EVP_Digest(bytes.data(), bytes.size(), md, &len, Sha256Md(), nullptr) == 1, "EVP_Digest");
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), len));
}

absl::StatusOr<std::string> Sha256HexOfFiles(const std::vector<std::filesystem::path>& files) {
  Sha256 sha;
  for (const auto& file : files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", file.string()));
    absl::Status read = HashAll(sha, [fd](char* buf, size_t n) { return ::read(fd, buf, n); }, file.string());
    ::close(fd);
    if (!read.ok()) return read;
  }
  return sha.HexDigest();
}

absl::StatusOr<std::string> Sha256HexOfFd(int fd) {
  Sha256 sha;
  off_t offset = 0;
  absl::Status read = HashAll(
      sha,
      [fd, &offset](char* buf, size_t n) {
        const ssize_t got = ::pread(fd, buf, n, offset);
        if (got > 0) offset += got;
        return got;
      },
      absl::StrCat("descriptor ", fd));
  if (!read.ok()) return read;
  return sha.HexDigest();
}

bool IsSha256Hex(absl::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

}  // namespace mle::common
