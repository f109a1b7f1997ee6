#include "containers/images.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mle::containers {

namespace {

bool ValidChars(const std::string& s, absl::string_view extra) {
  for (char ch : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && extra.find(ch) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

// The first component names a registry when it looks like a host.
bool HasRegistryHost(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) return false;
  const std::string first = name.substr(0, slash);
  return first == "localhost" || first.find('.') != std::string::npos || first.find(':') != std::string::npos;
}

}  // namespace

absl::StatusOr<ImageName> ParseImageName(const std::string& uri) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", uri, "\" is not an image name: ", why,
                                                   " (expected [REGISTRY/]NAME[:TAG][@sha256:DIGEST])"));
  };
  if (uri.empty()) return bad("it is empty");
  if (uri.size() > 512) return bad("it is longer than 512 characters");
  ImageName out;
  std::string rest = uri;
  if (auto at = rest.find('@'); at != std::string::npos) {
    out.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!absl::StartsWith(out.digest, "sha256:") || out.digest.size() != 7 + 64 ||
        !ValidChars(out.digest.substr(7), "")) {
      return bad("its digest is not sha256: followed by 64 hex digits");
    }
  }
  const auto slash = rest.rfind('/');
  const auto colon = rest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    out.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (out.tag.empty() || out.tag.size() > 128 || !ValidChars(out.tag, "_.-")) {
      return bad("its tag must be 1-128 letters, digits, '_', '.' or '-'");
    }
  }
  out.name = rest;
  if (rest.empty() || rest.front() == '/' || rest.back() == '/' || absl::StrContains(rest, "//")) {
    return bad("its name has an empty path component");
  }
  if (!ValidChars(rest, "/._-:")) return bad("its name may hold only letters, digits and / . _ - :");
  return out;
}

std::string ImageSource::Reference(const std::string& registry) const {
  std::string ref = kind == Kind::kRegistry ? absl::StrCat(registry, "/", repository) : repository;
  if (!digest.empty()) return absl::StrCat(ref, "@", digest);
  return absl::StrCat(ref, ":", tag.empty() ? "latest" : tag);
}

const Mirror* ImageTable::FindMirror(const std::string& uri) const {
  auto named = [&](const std::string& name) -> const Mirror* {
    for (const auto& m : settings_.mirrors) {
      if (m.name == name) return &m;
    }
    return nullptr;
  };
  // A mirror may name an image with or without its tag.
  if (const Mirror* exact = named(uri)) return exact;
  auto parsed = ParseImageName(uri);
  return parsed.ok() && parsed->digest.empty() ? named(parsed->name) : nullptr;
}

absl::StatusOr<ImageSource> ImageTable::Locate(const std::string& uri) const {
  auto parsed = ParseImageName(uri);
  if (!parsed.ok()) return absl::FailedPreconditionError(parsed.status().message());
  const Mirror* mirror = FindMirror(uri);
  ImageSource src;
  src.mirror = mirror;
  ImageName where = *parsed;
  if (mirror != nullptr) {
    auto target = ParseImageName(mirror->image);
    if (!target.ok()) return absl::FailedPreconditionError(target.status().message());
    where = *target;
    if (where.tag.empty() && where.digest.empty()) where.tag = parsed->tag;  // the job's tag, unless pinned
  }
  src.tag = where.tag.empty() ? "latest" : where.tag;
  src.digest = where.digest;
  const std::string& registry = settings_.registry;
  if (absl::StartsWith(where.name, "localhost/")) {
    if (mirror == nullptr && !settings_.allow_local_images) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Image ", uri, " would come from each node's own image store, which this cluster does not allow "
          "(containers.allow_local_images). Push it to the registry ", registry, " instead."));
    }
    src.kind = ImageSource::Kind::kLocalStore;
    src.repository = where.name;
    return src;
  }
  if (mirror != nullptr && !HasRegistryHost(where.name)) {
    src.kind = ImageSource::Kind::kRegistry;
    src.repository = where.name;
  } else if (!registry.empty() && absl::StartsWith(where.name, registry + "/") &&
             (mirror != nullptr || settings_.allow_registry_images)) {
    src.kind = ImageSource::Kind::kRegistry;
    src.repository = where.name.substr(registry.size() + 1);
  } else {
    std::string available = DescribeMirrors();
    return absl::FailedPreconditionError(absl::StrCat(
        "Image ", uri, " is not available on this cluster: it has no internet access, so an image must be ",
        registry.empty() ? std::string()
                         : absl::StrCat("in its registry (name it ", registry, "/NAME:TAG), or "),
        "mapped by the operator to a local image (containers.mirrors in the server configuration)",
        available.empty() ? "" : absl::StrCat(". Mirrored images: ", available), "."));
  }
  if (registry.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Image ", uri, " comes from a registry, but this cluster names none (containers.registry)."));
  }
  return src;
}

absl::Status ImageTable::CheckTpuTfVersion(const std::string& uri, const std::string& tpu_tf_version) const {
  const Mirror* mirror = FindMirror(uri);
  if (mirror == nullptr || mirror->tpu_tf_versions.empty()) return absl::OkStatus();
  for (const auto& v : mirror->tpu_tf_versions) {
    if (v == tpu_tf_version) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("Image ", uri, " goes with tpuTfVersion ",
                                                    absl::StrJoin(mirror->tpu_tf_versions, " or "),
                                                    " on this cluster, not ", tpu_tf_version,
                                                    ": set workerConfig.tpuTfVersion to match the image."));
}

std::string SimulatedImageNote(const ContainerSettings& settings, const std::string& uri) {
  const ImageTable table(settings);
  auto src = table.Locate(uri);
  if (!src.ok() || src->mirror == nullptr || !src->mirror->simulated) return "";
  return absl::StrCat(uri, " (simulated here by ", src->mirror->image,
                      src->mirror->description.empty() ? "" : absl::StrCat(": ", src->mirror->description), ")");
}

std::string ImageTable::DescribeMirrors() const {
  std::vector<std::string> parts;
  for (const auto& m : settings_.mirrors) {
    std::string what = m.description;
    if (m.simulated) what = what.empty() ? "simulated" : absl::StrCat(what, ", simulated");
    parts.push_back(what.empty() ? m.name : absl::StrCat(m.name, " (", what, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace mle::containers
