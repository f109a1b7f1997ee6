#include "runtime/runtimes.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mle::runtime {

absl::StatusOr<RuntimeCatalog> RuntimeCatalog::FromYaml(const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    std::vector<Runtime> out;
    YAML::Node list = root["runtimes"];
    if (!list || !list.IsSequence()) return absl::InvalidArgumentError("the configuration's `runtimes:` must be a list of runtimes");
    for (const auto& n : list) {
      Runtime r;
      r.name = n["name"].as<std::string>("");
      r.python = n["python"].as<std::string>("");
      r.python_version = n["python_version"].as<std::string>("");
      r.tpu_capable = n["tpu_capable"].as<bool>(false);
      r.description = n["description"].as<std::string>("");
      if (YAML::Node warm = n["warm_start"]) {
        r.warm_start = warm["enabled"].as<bool>(true);
        for (const auto& m : warm["preload"]) r.warm_preload.push_back(m.as<std::string>());
      }
      for (const auto& image : n["executor_images"]) r.executor_images.push_back(image.as<std::string>());
      if (r.name.empty() || r.python.empty()) {
        return absl::InvalidArgumentError("every runtime of the configuration's `runtimes:` needs `name` and `python`");
      }
      out.push_back(std::move(r));
    }
    return RuntimeCatalog(std::move(out));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the configuration's `runtimes:`: ", e.what()));
  }
}

absl::StatusOr<RuntimeCatalog> RuntimeCatalog::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read runtimes file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto catalog = FromYaml(ss.str());
  if (!catalog.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", catalog.status().message()));
  return catalog;
}

const Runtime* RuntimeCatalog::Find(const std::string& name) const {
  for (const auto& r : runtimes_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string RuntimeCatalog::Describe() const {
  if (runtimes_.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& r : runtimes_) {
    parts.push_back(r.description.empty() ? r.name : absl::StrCat(r.name, " (", r.description, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace mle::runtime
