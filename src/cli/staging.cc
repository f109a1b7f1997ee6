#include "cli/staging.h"

#include <stdlib.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "cli/packaging.h"
#include "common/sha256.h"

namespace mle::cli {

namespace fs = std::filesystem;

std::string PythonFromEnv() {
  const char* p = std::getenv("MLENGINE_PYTHON");
  return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}

absl::StatusOr<TempDir> TempDir::Make() {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "mlengine-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a temporary directory in ", base.string()));
  }
  TempDir d;
  d.path_ = pattern;
  return d;
}

TempDir::~TempDir() {
  if (!path_.empty()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
}

absl::Status EnsureStagingBucket(Client& client, const std::string& bucket) {
  auto found = client.GetBucket(bucket);
  if (!absl::IsNotFound(found.status()) && !absl::IsPermissionDenied(found.status())) return absl::OkStatus();
  std::fprintf(stderr, "Creating the staging bucket gs://%s/ in project %s\n", bucket.c_str(),
               client.connection().project.c_str());
  auto made = client.CreateBucket(bucket);
  if (!made.ok() && !absl::IsAlreadyExists(made.status())) {
    return absl::Status(made.status().code(), absl::StrCat("creating the staging bucket gs://", bucket,
                                                           " failed: ", made.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> UploadToStaging(Client& client, const GcsPath& staging,
                                                         const std::vector<fs::path>& files) {
  std::vector<std::string> uris;
  if (files.empty()) return uris;
  auto digest = common::Sha256HexOfFiles(files);
  if (!digest.ok()) return digest.status();
  for (const auto& staged : UploadLayout(staging, *digest, files)) {
    std::fprintf(stderr, "Uploading %s to %s\n", staged.local.filename().c_str(), staged.destination.Uri().c_str());
    auto uploaded =
        client.UploadFile(staged.destination.bucket, staged.destination.object, staged.local.string(), Progress::kAuto);
    if (!uploaded.ok()) {
      return absl::Status(uploaded.status().code(),
                          absl::StrCat("uploading ", staged.local.string(), " to ", staged.destination.Uri(),
                                       " failed: ", uploaded.status().message()));
    }
    uris.push_back(staged.destination.Uri());
  }
  return uris;
}

}  // namespace mle::cli
