#include "cli/packaging.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <algorithm>
#include <limits>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/subprocess.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;

std::string PythonQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out.push_back('\\');
    out.push_back(c);
  }
  return out + "'";
}

// Copies `from` into `to` recursively (symlinks copied as links), skipping
// VCS metadata and byte-code caches.
absl::Status CopyTree(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", to.string(), ": ", ec.message()));
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == ".git" || name == ".hg" || name == ".svn" || name == "__pycache__") continue;
    const fs::path dest = to / name;
    if (entry.is_symlink(ec)) {
      fs::copy_symlink(entry.path(), dest, ec);
    } else if (entry.is_directory(ec)) {
      if (auto s = CopyTree(entry.path(), dest); !s.ok()) return s;
      continue;
    } else {
      fs::copy_file(entry.path(), dest, fs::copy_options::overwrite_existing, ec);
    }
    if (ec) return absl::InternalError(absl::StrCat("cannot copy ", entry.path().string(), ": ", ec.message()));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot read ", from.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GcsPath> StagingLocation(const std::optional<std::string>& staging_bucket,
                                        const std::optional<std::string>& job_dir, const std::string& job_id) {
  if (staging_bucket && !staging_bucket->empty()) {
    auto bucket = ParseGcsPath(*staging_bucket);
    if (!bucket.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument --staging-bucket: must be a bucket URI like gs://my-bucket, got \"", *staging_bucket,
                       "\""));
    }
    return bucket->Child(job_id);
  }
  if (job_dir && !job_dir->empty()) {
    auto dir = ParseGcsPath(*job_dir);
    if (!dir.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local packages need a gs:// place to be staged: --job-dir \"", *job_dir,
          "\" is not a gs:// path, so give --staging-bucket gs://BUCKET"));
    }
    return dir->Child("packages");
  }
  return absl::InvalidArgumentError(
      "local packages need a gs:// place to be staged: give --staging-bucket gs://BUCKET or --job-dir gs://BUCKET/DIR");
}

absl::StatusOr<std::string> Sha256OfFiles(const std::vector<fs::path>& files) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("cannot initialise SHA-256");
  }
  std::vector<char> buf(1 << 16);
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", file.string()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) return absl::InternalError("cannot finish SHA-256");
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

std::vector<StagedFile> UploadLayout(const GcsPath& staging, const std::string& digest,
                                     const std::vector<fs::path>& files) {
  std::vector<StagedFile> out;
  const GcsPath dir = staging.Child(digest);
  for (const auto& f : files) out.push_back({f, dir.Child(f.filename().string())});
  return out;
}

absl::Status CheckDuplicateBasenames(const std::vector<std::string>& packages) {
  std::set<std::string> seen;
  std::set<std::string> duplicates;
  for (const auto& p : packages) {
    std::string base = BaseName(p);
    if (!seen.insert(base).second) duplicates.insert(base);
  }
  if (!duplicates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot upload two packages with the same file name: ",
                                                   absl::StrJoin(duplicates, ", ")));
  }
  return absl::OkStatus();
}

std::string GeneratedSetupPy(const std::string& package_name) {
  const std::string q = PythonQuote(package_name);
  return absl::StrCat(
      "# Generated by mlengine jobs submit training (no setup.py was found).\n"
      "from setuptools import find_packages, setup\n\n"
      "setup(\n"
      "    name=", q, ",\n",
      "    version='0.0.0',\n"
      "    packages=find_packages(include=[", q, ", ", PythonQuote(package_name + ".*"), "]),\n",
      ")\n");
}

absl::StatusOr<std::vector<std::string>> ArchiveMembers(const fs::path& path) {
  std::unique_ptr<struct archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return absl::DataLossError(absl::StrCat(path.string(), " is not a readable archive: ", archive_error_string(a.get())));
  }
  std::vector<std::string> members;
  struct archive_entry* entry = nullptr;
  int rc;
  while ((rc = archive_read_next_header(a.get(), &entry)) == ARCHIVE_OK) {
    members.emplace_back(archive_entry_pathname(entry));
    archive_read_data_skip(a.get());
  }
  if (rc != ARCHIVE_EOF) {
    return absl::DataLossError(absl::StrCat(path.string(), " is a damaged archive: ", archive_error_string(a.get())));
  }
  return members;
}

absl::StatusOr<SdistResult> BuildSdist(const fs::path& package_dir_in, const fs::path& work_dir, const fs::path& out_dir,
                                       const std::string& python) {
  std::error_code ec;
  fs::path package_dir = fs::weakly_canonical(fs::absolute(package_dir_in), ec);
  if (ec || !fs::is_directory(package_dir)) {
    return absl::NotFoundError(absl::StrCat("--package-path ", package_dir_in.string(), " is not a directory"));
  }
  if (!fs::exists(package_dir / "__init__.py")) {
    return absl::InvalidArgumentError(absl::StrCat("--package-path ", package_dir_in.string(),
                                                   " is not a Python package: it has no __init__.py"));
  }
  const std::string name = package_dir.filename().string();
  const fs::path parent = package_dir.parent_path();
  const fs::path src = work_dir / "src";
  SdistResult result;
  if (fs::exists(parent / "setup.py")) {
    if (auto s = CopyTree(parent, src); !s.ok()) return s;
  } else {
    if (auto s = CopyTree(package_dir, src / name); !s.ok()) return s;
    std::ofstream setup(src / "setup.py");
    setup << GeneratedSetupPy(name);
    if (!setup) return absl::InternalError(absl::StrCat("cannot write ", (src / "setup.py").string()));
    result.generated_setup_py = true;
  }
  fs::create_directories(out_dir, ec);
  const fs::path temp = work_dir / "build";
  fs::create_directories(temp, ec);

  // gcloud's invocations, most specific first.
  const std::vector<std::vector<std::string>> attempts = {
      {python, "setup.py", "-q", "egg_info", "--egg-base", temp.string(), "build", "--build-base", temp.string(),
       "--build-temp", temp.string(), "sdist", "--dist-dir", out_dir.string()},
      {python, "setup.py", "-q", "sdist", "--dist-dir", out_dir.string()},
  };
  bool built = false;
  for (const auto& argv : attempts) {
    common::CommandOptions options;
    options.cwd = src.string();
    options.env = common::CurrentEnvironmentWith({{"PYTHONDONTWRITEBYTECODE", "1"}});
    options.timeout = absl::InfiniteDuration();
    options.max_output = std::numeric_limits<size_t>::max();
    options.group = common::ProcessGroup::kInherit;  // Ctrl-C stops the build too
    auto run = common::RunCommand(argv, options);
    if (!run.ok()) return run.status();
    absl::StrAppend(&result.log, "$ ", absl::StrJoin(argv, " "), "\n", run->output);
    if (run->exit_code == 0) {
      built = true;
      break;
    }
    // Start the next attempt from an empty output directory.
    fs::remove_all(out_dir, ec);
    fs::create_directories(out_dir, ec);
  }
  if (!built) {
    return absl::FailedPreconditionError(absl::StrCat("building the package in ", parent.string(),
                                                      " with setuptools failed:\n", result.log));
  }
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    if (entry.is_regular_file()) result.files.push_back(entry.path());
  }
  std::sort(result.files.begin(), result.files.end());
  if (result.files.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("setuptools wrote no file to its --dist-dir when building ", parent.string(), ":\n", result.log));
  }
  for (const auto& file : result.files) {
    const std::string fname = file.filename().string();
    if (!absl::EndsWith(fname, ".tar.gz") && !absl::EndsWith(fname, ".tgz") && !absl::EndsWith(fname, ".zip")) continue;
    auto members = ArchiveMembers(file);
    if (!members.ok()) return members.status();
    if (result.generated_setup_py) {
      const std::string want = absl::StrCat("/", name, "/__init__.py");
      bool found = std::any_of(members->begin(), members->end(),
                               [&](const std::string& m) { return absl::EndsWith(m, want); });
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat("the built archive ", fname, " does not contain ", name,
                                                          "/__init__.py; setuptools said:\n", result.log));
      }
    }
  }
  return result;
}

}  // namespace mle::cli
