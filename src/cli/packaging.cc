#include "cli/packaging.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

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


// An archive entry as it goes into a reproducible sdist.
struct Member {
  std::string path;
  int type = AE_IFREG;  // AE_IFREG, AE_IFDIR, AE_IFLNK
  bool executable = false;
  std::string link;  // AE_IFLNK: its target
  std::string data;
};

// The time every member of a rebuilt sdist carries: SOURCE_DATE_EPOCH when
// set (the reproducible-builds convention), else 1980-01-01 (the earliest a
// zip can hold, should a tool convert it).
int64_t ReproducibleTime() {
  if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e != nullptr && *e != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end != e && *end == '\0' && v >= 0) return v;
  }
  return 315532800;
}

// Rewrites the .tar.gz at `path` so that the same sources give the same
// bytes: members in path order, one fixed time, owner root, modes 0644 or
// 0755, no time or name in the gzip header.
absl::Status MakeReproducible(const fs::path& path) {
  std::vector<Member> members;
  {
    std::unique_ptr<struct archive, decltype(&archive_read_free)> in(archive_read_new(), archive_read_free);
    archive_read_support_filter_all(in.get());
    archive_read_support_format_all(in.get());
    if (archive_read_open_filename(in.get(), path.c_str(), 64 * 1024) != ARCHIVE_OK) {
      return absl::DataLossError(absl::StrCat(path.string(), " is not a readable archive: ",
                                              archive_error_string(in.get())));
    }
    struct archive_entry* entry = nullptr;
    int rc;
    while ((rc = archive_read_next_header(in.get(), &entry)) == ARCHIVE_OK) {
      Member m;
      m.path = archive_entry_pathname(entry);
      m.type = static_cast<int>(archive_entry_filetype(entry));
      m.executable = (archive_entry_perm(entry) & 0111) != 0;
      if (m.type == AE_IFLNK && archive_entry_symlink(entry) != nullptr) m.link = archive_entry_symlink(entry);
      if (m.type == AE_IFREG) {
        char buf[64 * 1024];
        la_ssize_t n;
        while ((n = archive_read_data(in.get(), buf, sizeof buf)) > 0) m.data.append(buf, static_cast<size_t>(n));
        if (n < 0) {
          return absl::DataLossError(absl::StrCat(path.string(), ": ", archive_error_string(in.get())));
        }
      } else if (m.type != AE_IFDIR && m.type != AE_IFLNK) {
        continue;  // setuptools writes none; nothing else belongs in a package
      }
      members.push_back(std::move(m));
    }
    if (rc != ARCHIVE_EOF) {
      return absl::DataLossError(absl::StrCat(path.string(), " is a damaged archive: ", archive_error_string(in.get())));
    }
  }
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.path < b.path; });
  const fs::path tmp = path.string() + ".tmp";
  {
    std::unique_ptr<struct archive, decltype(&archive_write_free)> out(archive_write_new(), archive_write_free);
    archive_write_set_format_pax_restricted(out.get());
    archive_write_add_filter_gzip(out.get());
    if (archive_write_set_options(out.get(), "gzip:!timestamp") != ARCHIVE_OK ||
        archive_write_open_filename(out.get(), tmp.c_str()) != ARCHIVE_OK) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp.string(), ": ", archive_error_string(out.get())));
    }
    const int64_t when = ReproducibleTime();
    for (const Member& m : members) {
      std::unique_ptr<struct archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
      archive_entry_set_pathname(e.get(), m.path.c_str());
      archive_entry_set_filetype(e.get(), static_cast<unsigned int>(m.type));
      archive_entry_set_perm(e.get(), m.type == AE_IFDIR || m.executable ? 0755 : 0644);
      archive_entry_set_mtime(e.get(), when, 0);
      archive_entry_set_uid(e.get(), 0);
      archive_entry_set_gid(e.get(), 0);
      if (m.type == AE_IFLNK) archive_entry_set_symlink(e.get(), m.link.c_str());
      archive_entry_set_size(e.get(), m.type == AE_IFREG ? static_cast<la_int64_t>(m.data.size()) : 0);
      if (archive_write_header(out.get(), e.get()) != ARCHIVE_OK ||
          (m.type == AE_IFREG && !m.data.empty() &&
           archive_write_data(out.get(), m.data.data(), m.data.size()) != static_cast<la_ssize_t>(m.data.size()))) {
        return absl::InternalError(absl::StrCat("cannot write ", tmp.string(), ": ", archive_error_string(out.get())));
      }
    }
    if (archive_write_close(out.get()) != ARCHIVE_OK) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp.string(), ": ", archive_error_string(out.get())));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot replace ", path.string(), ": ", ec.message()));
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

absl::StatusOr<fs::path> WriteScriptPackage(const fs::path& dir, const std::string& script, const fs::path& out) {
  const fs::path relative(script);
  if (relative.empty() || relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const fs::path& part) { return part == ".."; })) {
    return absl::InvalidArgumentError(
        absl::StrCat("script ", script, " must be a path inside ", dir.string(), ", relative to it"));
  }
  std::error_code ec;
  if (!fs::is_regular_file(dir / relative, ec)) {
    return absl::NotFoundError(absl::StrCat("script ", script, " is not a file in ", dir.string()));
  }
  const fs::path package = out / kScriptPackage;
  if (auto s = CopyTree(dir, package); !s.ok()) return s;
  // Every file is package data, so that setuptools installs plain
  // directories too (the script's helpers, its data files).
  std::vector<std::string> data;
  for (auto it = fs::recursive_directory_iterator(package, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) data.push_back(PythonQuote(fs::relative(it->path(), package, ec).generic_string()));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot read ", package.string(), ": ", ec.message()));
  std::sort(data.begin(), data.end());
  const std::string name = PythonQuote(kScriptPackage);
  std::vector<std::pair<fs::path, std::string>> files = {
      {package / "_mlengine_run.py",
       absl::StrCat("# Generated by mlengine: runs ", script, " as `python ", script, "` would.\n",
                    "import os\nimport runpy\nimport sys\n\n",
                    "script = os.path.join(os.path.dirname(os.path.abspath(__file__)), ", PythonQuote(script), ")\n",
                    "sys.argv[0] = script\n", "sys.path.insert(0, os.path.dirname(script))\n",
                    "runpy.run_path(script, run_name='__main__')\n")},
      {out / "setup.py", absl::StrCat("# Generated by mlengine: the package of script ", script, ".\n",
                                      "from setuptools import setup\n\n", "setup(\n", "    name=", name, ",\n",
                                      "    version='0.0.0',\n", "    packages=[", name, "],\n",
                                      "    package_data={", name, ": [", absl::StrJoin(data, ", "), "]},\n", ")\n")},
      {out / "MANIFEST.in", absl::StrCat("graft ", kScriptPackage, "\nglobal-exclude *.py[co]\n")},
  };
  if (!fs::exists(package / "__init__.py", ec)) files.emplace_back(package / "__init__.py", "");
  for (const auto& [path, text] : files) {
    std::ofstream f(path);
    f << text;
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  }
  return package;
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
    // The same sources, the same bytes: the staging path (by SHA-256) and
    // mlengined's environment for the package are the same ones again.
    if (absl::EndsWith(fname, ".tar.gz") || absl::EndsWith(fname, ".tgz")) {
      if (auto s = MakeReproducible(file); !s.ok()) return s;
    }
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
