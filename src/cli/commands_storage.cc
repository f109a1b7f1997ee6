// mlengine storage {cp, ls, cat, rm, mb}: the server's gs:// object store.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/gcs_path.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every object under `prefix` (no delimiter), across pages.
absl::StatusOr<std::vector<json>> ListAll(Client& client, const std::string& bucket, const std::string& prefix) {
  std::vector<json> out;
  std::string token;
  do {
    auto page = client.ListObjects(bucket, prefix, "", token);
    if (!page.ok()) return page.status();
    if (page->contains("items") && (*page)["items"].is_array()) {
      for (auto& item : (*page)["items"]) out.push_back(item);
    }
    token = page->value("nextPageToken", "");
  } while (!token.empty());
  return out;
}

// Whether any object lives under "prefix/".
absl::StatusOr<bool> PrefixExists(Client& client, const GcsPath& path) {
  if (path.object.empty()) return true;
  std::string prefix = path.object;
  if (prefix.back() != '/') prefix.push_back('/');
  auto page = client.ListObjects(path.bucket, prefix, "/", "");
  if (!page.ok()) return page.status();
  return (page->contains("items") && !(*page)["items"].empty()) ||
         (page->contains("prefixes") && !(*page)["prefixes"].empty());
}

// An object name relative to a prefix must stay inside the destination.
bool SafeRelative(const std::string& rel) {
  if (rel.empty() || rel.front() == '/') return false;
  for (absl::string_view seg : absl::StrSplit(rel, '/')) {
    if (seg == "..") return false;
  }
  return true;
}

absl::Status DownloadToFile(Client& client, const GcsPath& src, const fs::path& dest) {
  std::error_code ec;
  if (dest.has_parent_path()) fs::create_directories(dest.parent_path(), ec);
  const fs::path part = dest.string() + ".mlengine-part";
  std::FILE* file = std::fopen(part.c_str(), "wb");
  if (file == nullptr) return absl::PermissionDeniedError(absl::StrCat("cannot write ", part.string()));
  absl::Status s = client.Download(
      src.bucket, src.object,
      [file](const char* data, size_t n) { return std::fwrite(data, 1, n, file) == n; }, Progress::kAuto);
  if (std::fclose(file) != 0 && s.ok()) s = absl::DataLossError(absl::StrCat("cannot write ", part.string()));
  if (!s.ok()) {
    fs::remove(part, ec);
    return s;
  }
  fs::rename(part, dest, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dest.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status Upload(Client& client, const fs::path& src, const GcsPath& dest) {
  std::fprintf(stderr, "Copying file://%s to %s\n", src.c_str(), dest.Uri().c_str());
  auto r = client.UploadFile(dest.bucket, dest.object, src.string(), Progress::kAuto);
  return r.status();
}

absl::Status CopyLocalToGcs(Client& client, const std::string& src, const GcsPath& dst, bool recursive) {
  std::error_code ec;
  if (fs::is_directory(src, ec)) {
    if (!recursive) return absl::InvalidArgumentError(absl::StrCat(src, " is a directory; use -r to copy directories"));
    const std::string name = fs::weakly_canonical(fs::absolute(src), ec).filename().string();
    GcsPath base = dst;
    const bool into = dst.object.empty() || dst.object.back() == '/';
    if (into) {
      base = dst.Child(name);
    } else {
      auto exists = PrefixExists(client, dst);
      if (!exists.ok()) return exists.status();
      if (*exists) base = dst.Child(name);
    }
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(src, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", src, ": ", ec.message()));
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string rel = fs::relative(f, src, ec).generic_string();
      if (auto s = Upload(client, f, base.Child(rel)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!fs::is_regular_file(src, ec)) return absl::NotFoundError(absl::StrCat("No such file: ", src));
  GcsPath dest = dst;
  if (dst.object.empty() || dst.object.back() == '/') dest = dst.Child(fs::path(src).filename().string());
  return Upload(client, src, dest);
}

absl::Status CopyGcsToLocal(Client& client, const GcsPath& src, const std::string& dst, bool recursive) {
  std::error_code ec;
  if (recursive) {
    std::string prefix = src.object;
    if (!prefix.empty() && prefix.back() != '/') prefix.push_back('/');
    auto objects = ListAll(client, src.bucket, prefix);
    if (!objects.ok()) return objects.status();
    if (objects->empty()) return absl::NotFoundError(absl::StrCat("No URLs matched: ", src.Uri()));
    fs::path base = dst;
    if (fs::is_directory(dst, ec)) base = fs::path(dst) / (src.object.empty() ? src.bucket : BaseName(src.object));
    for (const auto& o : *objects) {
      const std::string name = o.value("name", "");
      if (name.empty() || name.back() == '/') continue;
      const std::string rel = name.substr(prefix.size());
      if (!SafeRelative(rel)) {
        return absl::InvalidArgumentError(absl::StrCat("refusing to write object ", name, " outside ", base.string()));
      }
      std::fprintf(stderr, "Copying gs://%s/%s to file://%s\n", src.bucket.c_str(), name.c_str(),
                   (base / rel).c_str());
      if (auto s = DownloadToFile(client, GcsPath{src.bucket, name}, base / rel); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (src.object.empty() || src.object.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat(src.Uri(), " names no object; use -r to copy a whole prefix"));
  }
  fs::path dest = dst;
  if (fs::is_directory(dst, ec) || absl::EndsWith(dst, "/")) dest = fs::path(dst) / BaseName(src.object);
  std::fprintf(stderr, "Copying %s to file://%s\n", src.Uri().c_str(), dest.c_str());
  return DownloadToFile(client, src, dest);
}

absl::Status CopyGcsToGcs(Client& client, const GcsPath& src, const GcsPath& dst) {
  if (src.object.empty() || src.object.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat(src.Uri(), " names no object (gs:// to gs:// copies one object)"));
  }
  GcsPath dest = dst;
  if (dst.object.empty() || dst.object.back() == '/') dest = dst.Child(BaseName(src.object));
  char pattern[] = "/tmp/mlengine-cp-XXXXXX";
  int fd = ::mkstemp(pattern);
  if (fd < 0) return absl::InternalError("cannot create a temporary file");
  ::close(fd);
  std::fprintf(stderr, "Copying %s to %s\n", src.Uri().c_str(), dest.Uri().c_str());
  absl::Status s = DownloadToFile(client, src, pattern);
  if (s.ok()) s = client.UploadFile(dest.bucket, dest.object, pattern, Progress::kAuto).status();
  std::error_code ec;
  fs::remove(pattern, ec);
  return s;
}

std::string ObjectLine(const std::string& bucket, const json& item, bool long_format, int64_t* total) {
  const std::string uri = absl::StrCat("gs://", bucket, "/", item.value("name", ""));
  if (!long_format) return uri;
  int64_t size = 0;
  if (item.contains("size")) {
    if (item["size"].is_string()) {
      size = std::strtoll(item["size"].get<std::string>().c_str(), nullptr, 10);
    } else if (item["size"].is_number()) {
      size = item["size"].get<int64_t>();
    }
  }
  *total += size;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%10lld", static_cast<long long>(size));
  return absl::StrCat(buf, "  ", item.value("updated", ""), "  ", uri);
}

struct StorageArgs {
  std::string src;
  std::string dst;
  std::vector<std::string> urls;
  bool recursive = false;
  bool long_format = false;
};

}  // namespace

void AddStorageCommands(CLI::App& app, Context& ctx) {
  CLI::App* storage = app.add_subcommand(
      "storage", "Copy, list, print and remove gs:// objects in the server's object store");
  storage->require_subcommand(1);
  MoreHelp(storage, 
      "\nBuckets and objects live in mlengined; inside a running job, gs://BUCKET/PATH is the\n"
      "file $MLENGINE_GCS_ROOT/BUCKET/PATH.\n");

  // cp
  auto cp_args = std::make_shared<StorageArgs>();
  CLI::App* cp = storage->add_subcommand("cp", "Copy files to or from gs:// (local -> gs://, gs:// -> local, gs:// -> gs://)");
  Usage(cp, "mlengine storage cp [-r] SRC DST");
  MoreHelp(cp, 
      "\nA destination ending in '/' (or a bare bucket) receives the source under its own name.\n\n"
      "EXAMPLES\n"
      "  mlengine storage cp data.csv gs://my-bucket/data/\n"
      "  mlengine storage cp -r ./dataset gs://my-bucket/datasets/\n"
      "  mlengine storage cp gs://my-bucket/my_job/model/saved_model.pb .\n"
      "  mlengine storage cp -r gs://my-bucket/my_job/output ./output\n");
  cp->add_flag("-r,--recursive", cp_args->recursive, "Copy directories / every object under a prefix");
  cp->add_option("SRC", cp_args->src, "Source: a local path or gs://BUCKET/OBJECT")->required();
  cp->add_option("DST", cp_args->dst, "Destination: a local path or gs://BUCKET/OBJECT")->required();
  cp->callback([&ctx, cp_args] {
    const std::string cmd = "storage.cp";
    const bool src_gs = IsGcsUri(cp_args->src), dst_gs = IsGcsUri(cp_args->dst);
    if (!src_gs && !dst_gs) return void(ctx.exit_code = PrintError(cmd, "one of SRC and DST must be a gs:// URI"));
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    absl::Status s;
    if (!src_gs) {
      auto dst = ParseGcsPath(cp_args->dst);
      s = dst.ok() ? CopyLocalToGcs(**client, cp_args->src, *dst, cp_args->recursive) : dst.status();
    } else {
      auto src = ParseGcsPath(cp_args->src);
      if (!src.ok()) {
        s = src.status();
      } else if (!dst_gs) {
        s = CopyGcsToLocal(**client, *src, cp_args->dst, cp_args->recursive);
      } else if (cp_args->recursive) {
        s = absl::UnimplementedError("-r between two gs:// URIs is not supported; copy through a local directory");
      } else {
        auto dst = ParseGcsPath(cp_args->dst);
        s = dst.ok() ? CopyGcsToGcs(**client, *src, *dst) : dst.status();
      }
    }
    if (!s.ok()) ctx.exit_code = PrintError(cmd, s);
  });

  // ls
  auto ls_args = std::make_shared<StorageArgs>();
  CLI::App* ls = storage->add_subcommand(
      "ls", "List buckets (no argument, or gs://), or the objects and sub-directories under gs://BUCKET[/PREFIX]");
  Usage(ls, "mlengine storage ls [-l] [-r] [gs://BUCKET[/PREFIX]...]");
  ls->add_flag("-l,--long", ls_args->long_format, "Show size and update time");
  ls->add_flag("-r,--recursive", ls_args->recursive, "List every object below the prefix, not one level");
  ls->add_option("URL", ls_args->urls, "gs:// URLs to list");
  ls->callback([&ctx, ls_args] {
    const std::string cmd = "storage.ls";
    auto format = ParseFormat(ctx.format);
    if (!format.ok()) return void(ctx.exit_code = PrintError(cmd, format.status()));
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    // With --format, what is listed is printed as resources (the storage
    // API's, with the `url` gcloud storage ls gives them; a sub-directory
    // as {url, type: prefix}) once everything is listed.
    const bool as_resources = *format != Format::kDefault;
    std::vector<json> listed;
    auto with_url = [](json resource, const std::string& url) {
      resource["url"] = url;
      return resource;
    };
    auto flush = [&] {
      if (as_resources) PrintList(listed, *format);
    };
    // The project's buckets: no URL, or `gs://` alone (as gsutil takes it).
    auto list_buckets = [&]() -> absl::Status {
      std::string token;
      do {
        auto page = (*client)->ListBuckets(token);
        if (!page.ok()) return page.status();
        if (page->contains("items") && (*page)["items"].is_array()) {
          for (const auto& b : (*page)["items"]) {
            const std::string url = "gs://" + b.value("name", "") + "/";
            if (as_resources) {
              listed.push_back(with_url(b, url));
            } else {
              std::cout << url << "\n";
            }
          }
        }
        token = page->value("nextPageToken", "");
      } while (!token.empty());
      std::cout << std::flush;
      return absl::OkStatus();
    };
    if (ls_args->urls.empty()) {
      if (auto s = list_buckets(); !s.ok()) return void(ctx.exit_code = PrintError(cmd, s));
      return flush();
    }
    for (const auto& url : ls_args->urls) {
      if (url == "gs://" || url == "gs:///") {
        if (auto s = list_buckets(); !s.ok()) return void(ctx.exit_code = PrintError(cmd, s));
        continue;
      }
      auto path = ParseGcsPath(url);
      if (!path.ok()) return void(ctx.exit_code = PrintError(cmd, path.status()));
      std::string prefix = path->object;
      if (!prefix.empty() && prefix.back() != '/') prefix.push_back('/');
      int64_t total = 0, count = 0;
      std::string token;
      do {
        auto page = (*client)->ListObjects(path->bucket, prefix, ls_args->recursive ? "" : "/", token);
        if (!page.ok()) return void(ctx.exit_code = PrintError(cmd, page.status()));
        if (page->contains("prefixes") && (*page)["prefixes"].is_array()) {
          for (const auto& p : (*page)["prefixes"]) {
            const std::string url = "gs://" + path->bucket + "/" + p.get<std::string>();
            if (as_resources) {
              listed.push_back({{"url", url}, {"type", "prefix"}});
            } else {
              std::cout << (ls_args->long_format ? std::string(12, ' ') + std::string(22, ' ') : "") << url << "\n";
            }
            ++count;
          }
        }
        if (page->contains("items") && (*page)["items"].is_array()) {
          for (const auto& item : (*page)["items"]) {
            if (as_resources) {
              listed.push_back(with_url(item, "gs://" + path->bucket + "/" + item.value("name", "")));
            } else {
              std::cout << ObjectLine(path->bucket, item, ls_args->long_format, &total) << "\n";
            }
            ++count;
          }
        }
        token = page->value("nextPageToken", "");
      } while (!token.empty());
      if (count == 0 && !path->object.empty() && path->object.back() != '/') {
        // Not a directory: perhaps one object.
        auto object = (*client)->GetObject(path->bucket, path->object);
        if (object.ok()) {
          if (as_resources) {
            listed.push_back(with_url(*object, "gs://" + path->bucket + "/" + path->object));
          } else {
            std::cout << ObjectLine(path->bucket, *object, ls_args->long_format, &total) << "\n";
          }
          ++count;
        } else if (object.status().code() != absl::StatusCode::kNotFound) {
          return void(ctx.exit_code = PrintError(cmd, object.status()));
        }
      }
      if (count == 0 && !path->object.empty()) {
        ctx.exit_code = PrintError(cmd, absl::StrCat("One or more URLs matched no objects: ", url));
        continue;
      }
      if (ls_args->long_format && !as_resources) {
        std::cout << "TOTAL: " << count << " objects, " << total << " bytes\n";
      }
    }
    flush();
    std::cout << std::flush;
  });

  // cat
  auto cat_args = std::make_shared<StorageArgs>();
  CLI::App* cat = storage->add_subcommand("cat", "Write an object's contents to stdout");
  Usage(cat, "mlengine storage cat gs://BUCKET/OBJECT...");
  cat->add_option("URL", cat_args->urls, "Objects to print")->required();
  cat->callback([&ctx, cat_args] {
    const std::string cmd = "storage.cat";
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    for (const auto& url : cat_args->urls) {
      auto path = ParseGcsPath(url);
      if (!path.ok()) return void(ctx.exit_code = PrintError(cmd, path.status()));
      std::cout << std::flush;
      auto s = (*client)->Download(
          path->bucket, path->object, [](const char* data, size_t n) { return std::fwrite(data, 1, n, stdout) == n; },
          Progress::kNever);
      std::fflush(stdout);
      if (!s.ok()) return void(ctx.exit_code = PrintError(cmd, s));
    }
  });

  // rm
  auto rm_args = std::make_shared<StorageArgs>();
  CLI::App* rm = storage->add_subcommand("rm", "Delete objects (with -r, every object under a prefix)");
  Usage(rm, "mlengine storage rm [-r] gs://BUCKET/OBJECT...");
  rm->add_flag("-r,--recursive", rm_args->recursive, "Delete every object under the prefix");
  rm->add_option("URL", rm_args->urls, "Objects to delete")->required();
  rm->callback([&ctx, rm_args] {
    const std::string cmd = "storage.rm";
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    for (const auto& url : rm_args->urls) {
      auto path = ParseGcsPath(url);
      if (!path.ok()) return void(ctx.exit_code = PrintError(cmd, path.status()));
      std::vector<std::string> names;
      if (rm_args->recursive) {
        std::string prefix = path->object;
        if (!prefix.empty() && prefix.back() != '/') prefix.push_back('/');
        auto objects = ListAll(**client, path->bucket, prefix);
        if (!objects.ok()) return void(ctx.exit_code = PrintError(cmd, objects.status()));
        for (const auto& o : *objects) names.push_back(o.value("name", ""));
        if (names.empty()) {
          ctx.exit_code = PrintError(cmd, absl::StrCat("No URLs matched: ", url));
          continue;
        }
      } else {
        if (path->object.empty()) return void(ctx.exit_code = PrintError(cmd, absl::StrCat(url, " names no object")));
        names.push_back(path->object);
      }
      for (const auto& name : names) {
        std::fprintf(stderr, "Removing gs://%s/%s\n", path->bucket.c_str(), name.c_str());
        if (auto s = (*client)->DeleteObject(path->bucket, name); !s.ok()) {
          return void(ctx.exit_code = PrintError(cmd, s));
        }
      }
    }
  });

  // mb
  auto mb_args = std::make_shared<StorageArgs>();
  CLI::App* mb = storage->add_subcommand("mb", "Create a bucket");
  Usage(mb, "mlengine storage mb gs://BUCKET");
  mb->add_option("URL", mb_args->urls, "Buckets to create")->required();
  mb->callback([&ctx, mb_args] {
    const std::string cmd = "storage.mb";
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    for (const auto& url : mb_args->urls) {
      auto path = ParseGcsPath(url);
      if (!path.ok()) return void(ctx.exit_code = PrintError(cmd, path.status()));
      if (!path->object.empty() && path->object != "/") {
        return void(ctx.exit_code = PrintError(cmd, absl::StrCat(url, ": a bucket URL has no object path")));
      }
      std::fprintf(stderr, "Creating gs://%s/...\n", path->bucket.c_str());
      auto r = (*client)->CreateBucket(path->bucket);
      if (!r.ok()) return void(ctx.exit_code = PrintError(cmd, r.status()));
    }
  });
}

}  // namespace mle::cli
