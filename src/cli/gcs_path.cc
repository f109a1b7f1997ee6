#include "cli/gcs_path.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mle::cli {

std::string GcsPath::Uri() const { return object.empty() ? absl::StrCat("gs://", bucket) : absl::StrCat("gs://", bucket, "/", object); }

GcsPath GcsPath::Child(const std::string& name) const {
  GcsPath out = *this;
  if (out.object.empty() || out.object.back() == '/') {
    out.object += name;
  } else {
    out.object = absl::StrCat(out.object, "/", name);
  }
  return out;
}

bool IsGcsUri(const std::string& s) { return s.rfind("gs://", 0) == 0; }

absl::StatusOr<GcsPath> ParseGcsPath(const std::string& uri) {
  if (!IsGcsUri(uri)) return absl::InvalidArgumentError(absl::StrCat("\"", uri, "\" is not a gs://BUCKET/PATH URI"));
  std::string rest = uri.substr(5);
  GcsPath out;
  auto slash = rest.find('/');
  out.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) out.object = rest.substr(slash + 1);
  if (out.bucket.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", uri, "\" names no bucket"));
  return out;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (!p.empty() && p.back() == '/') p.pop_back();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace mle::cli
