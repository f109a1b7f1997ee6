// gs://BUCKET/OBJECT paths: parsing, joining and printing. Pure; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace mle::cli {

struct GcsPath {
  std::string bucket;
  std::string object;  // may be empty (the bucket itself) or end with '/'

  std::string Uri() const;  // gs://bucket/object
  // This path with `name` appended as a sub-path ("a/b" + "c" = "a/b/c").
  GcsPath Child(const std::string& name) const;
};

bool IsGcsUri(const std::string& s);

// Parses gs://BUCKET[/OBJECT]. Refuses other schemes and empty buckets.
absl::StatusOr<GcsPath> ParseGcsPath(const std::string& uri);

// The last path segment of an object name ("a/b/c.tar.gz" -> "c.tar.gz"),
// ignoring a trailing '/'.
std::string BaseName(const std::string& path);

}  // namespace mle::cli
