// Packaging and staging of a trainer, as `gcloud ai-platform jobs submit
// training` does it:
//  * --package-path DIR is built into a source distribution with setuptools,
//    using DIR's parent as the context: the parent's setup.py if it has one,
//    else a generated one (name = DIR's name, version 0.0.0). The build runs
//    in a temporary copy, so the user's tree gets no build/ or *.egg-info.
//  * every file to upload (the sdist outputs, then local --packages) is
//    hashed together (common::Sha256HexOfFiles), and file F goes to
//    <staging>/<sha256 hex>/<basename of F>, where <staging> is
//    gs://STAGING_BUCKET/JOB_ID or, without --staging-bucket,
//    <--job-dir>/packages.
// Pure functions except BuildSdist (runs Python), WriteScriptPackage (writes
// files) and the file reads; none keeps state, all are thread-compatible.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/gcs_path.h"

namespace mle::cli {

// The staging location for local files: --staging-bucket + "/" + JOB, else
// --job-dir + "/packages". Error when neither is given.
absl::StatusOr<GcsPath> StagingLocation(const std::optional<std::string>& staging_bucket,
                                        const std::optional<std::string>& job_dir, const std::string& job_id);

struct StagedFile {
  std::filesystem::path local;
  GcsPath destination;
};

// Where each file goes: staging/digest/basename.
std::vector<StagedFile> UploadLayout(const GcsPath& staging, const std::string& digest,
                                     const std::vector<std::filesystem::path>& files);

// Refuses two packages (local paths or gs:// URIs) with the same basename.
absl::Status CheckDuplicateBasenames(const std::vector<std::string>& packages);

// The setup.py written when the package's parent has none.
std::string GeneratedSetupPy(const std::string& package_name);

struct SdistResult {
  std::vector<std::filesystem::path> files;  // every file setuptools wrote to out_dir, sorted
  bool generated_setup_py = false;
  std::string log;  // setuptools' output
};

// Builds `package_dir` (which must hold __init__.py) into out_dir with
// `python` (e.g. /usr/bin/python3), working in a copy made under `work_dir`.
// Checks with libarchive that each .tar.gz/.zip produced is a readable
// archive holding the package's __init__.py.
absl::StatusOr<SdistResult> BuildSdist(const std::filesystem::path& package_dir,
                                       const std::filesystem::path& work_dir,
                                       const std::filesystem::path& out_dir, const std::string& python);

// gcloud's `--worker-pool-spec=...,local-package-path=DIR,script=PATH` (gcloud
// runs the script in an image built from DIR) as a package: a copy of DIR as
// package kScriptPackage, every file in it package data, and the module
// kScriptModule that runs `script` (relative to DIR) as `python PATH` would:
// as __main__, with argv[0] the script and its directory first on sys.path.
// Written under `out` (out/setup.py, out/MANIFEST.in, out/mlengine_script/);
// returns the package's directory, for BuildSdist.
inline constexpr char kScriptPackage[] = "mlengine_script";
inline constexpr char kScriptModule[] = "mlengine_script._mlengine_run";
absl::StatusOr<std::filesystem::path> WriteScriptPackage(const std::filesystem::path& dir, const std::string& script,
                                                         const std::filesystem::path& out);

// The member names of an archive (tar.gz, zip, ...), via libarchive.
absl::StatusOr<std::vector<std::string>> ArchiveMembers(const std::filesystem::path& archive);

}  // namespace mle::cli
