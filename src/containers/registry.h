// A client of an OCI distribution registry (Debian's docker-registry), for
// what admission needs: the digest a tag names now, and what the registry
// holds (for the message when an image is missing). HTTP through libcurl.
// Thread-safe (each call uses its own handle).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::containers {

class RegistryClient {
 public:
  // `host`: "127.0.0.1:5000"; `insecure`: plain HTTP.
  RegistryClient(std::string host, bool insecure) : host_(std::move(host)), insecure_(insecure) {}

  // "sha256:..." for REPOSITORY:TAG (or @DIGEST), nullopt when the registry
  // does not have it; UNAVAILABLE when the registry cannot be reached.
  absl::StatusOr<std::optional<std::string>> Digest(const std::string& repository, const std::string& tag_or_digest) const;
  // "REPOSITORY:TAG" of what it holds (at most `limit`), sorted.
  absl::StatusOr<std::vector<std::string>> List(size_t limit = 50) const;

 private:
  std::string Url(const std::string& path) const;
  const std::string host_;
  const bool insecure_;
};

}  // namespace mle::containers
