// Staging a job's local files in mlengined's gs:// store, shared by `jobs
// submit training` and `ai custom-jobs|hp-tuning-jobs create`: the build's
// temporary directory and Python, the staging bucket made when it is missing,
// and the uploads (to STAGING/<sha256 of all the files>/<basename>, as
// packaging.h's UploadLayout places them). Not thread-safe (uses the Client).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client.h"
#include "cli/gcs_path.h"

namespace mle::cli {

// The Python that builds packages: $MLENGINE_PYTHON, else /usr/bin/python3.
std::string PythonFromEnv();

// A temporary directory, removed with everything in it when this goes out
// of scope.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Make();
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  TempDir() = default;
  std::filesystem::path path_;
};

// As gcloud makes its staging bucket: one that does not exist yet is created
// in the client's project, so the project's jobs may read it (a bucket made
// by uploading into it belongs to no project). Call it before building: a
// caller who may not create it learns so first. A bucket this caller may not
// see answers as a missing one does (403, "or it may not exist"): creating
// it then says which it is.
absl::Status EnsureStagingBucket(Client& client, const std::string& bucket);

// Uploads `files` to staging/<sha256 of them all, in order>/<basename>,
// saying each on stderr; their gs:// URIs in the same order.
absl::StatusOr<std::vector<std::string>> UploadToStaging(Client& client, const GcsPath& staging,
                                                         const std::vector<std::filesystem::path>& files);

}  // namespace mle::cli
