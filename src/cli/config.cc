#include "cli/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ConfigFile {
  std::string path;
  std::string endpoint;
  std::string token;
  std::string token_file;  // absolute, or relative to the working directory
  std::string project;
};

std::string StripSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// Reads a config file; nullopt when it does not exist.
absl::StatusOr<std::optional<ConfigFile>> ReadConfig(const std::string& path, const FileReader& files) {
  auto text = files(path);
  if (!text) return std::optional<ConfigFile>();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, " is not a JSON object like {\"endpoint\": \"http://HOST:PORT\", "
                     "\"token_file\": \"/path/to/admin.token\"}"));
  }
  ConfigFile c;
  c.path = path;
  auto str = [&](const char* key) -> absl::StatusOr<std::string> {
    if (!doc.contains(key) || doc[key].is_null()) return std::string();
    if (!doc[key].is_string()) return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": \"", key, "\" must be a string"));
    return doc[key].get<std::string>();
  };
  for (auto [key, out] : {std::pair{"endpoint", &c.endpoint}, std::pair{"token", &c.token},
                          std::pair{"token_file", &c.token_file}, std::pair{"project", &c.project}}) {
    auto v = str(key);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (!c.token_file.empty() && fs::path(c.token_file).is_relative()) {
    c.token_file = (fs::path(path).parent_path() / c.token_file).string();
  }
  return std::optional<ConfigFile>(c);
}

absl::StatusOr<std::string> ReadToken(const std::string& path, const FileReader& files, const std::string& what) {
  auto text = files(path);
  if (!text) return absl::NotFoundError(absl::StrCat("cannot read the token file ", path, " (", what, ")"));
  std::string token(absl::StripAsciiWhitespace(*text));
  if (auto nl = token.find('\n'); nl != std::string::npos) token = token.substr(0, nl);
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("the token file ", path, " (", what, ") is empty"));
  return token;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

FileReader RealFiles() {
  return [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
}

std::string DefaultConfigPath(const EnvLookup& env) {
  auto xdg = env("XDG_CONFIG_HOME");
  if (xdg && !xdg->empty()) return (fs::path(*xdg) / "mlengine" / "config.json").string();
  auto home = env("HOME");
  if (home && !home->empty()) return (fs::path(*home) / ".config" / "mlengine" / "config.json").string();
  return "";
}

std::string CredentialsPath(const EnvLookup& env) {
  const std::string config = DefaultConfigPath(env);
  return config.empty() ? "" : (fs::path(config).parent_path() / "credentials.json").string();
}

absl::StatusOr<std::optional<ActiveCredential>> ReadActiveCredential(const std::string& path,
                                                                     const FileReader& files) {
  auto text = files(path);
  if (!text) return std::optional<ActiveCredential>();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("token") || !doc["token"].is_string() ||
      !doc.value("account", json("")).is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the active credential ", path, " is damaged: run mlengine auth activate-service-account (or auth login) "
        "again, or mlengine auth revoke"));
  }
  return std::optional<ActiveCredential>(ActiveCredential{doc.value("account", ""), doc["token"].get<std::string>()});
}

absl::StatusOr<Connection> ResolveConnection(const GlobalFlags& flags, const EnvLookup& env,
                                             const FileReader& files) {
  std::vector<ConfigFile> configs;
  if (auto named = env("MLENGINE_CONFIG"); named && !named->empty()) {
    auto c = ReadConfig(*named, files);
    if (!c.ok()) return c.status();
    if (!c->has_value()) {
      return absl::NotFoundError(absl::StrCat("MLENGINE_CONFIG names ", *named,
                                              ", which does not exist (for a local server it is "
                                              "DATA_DIR/server.json, written when mlengined starts)"));
    }
    configs.push_back(**c);
  }
  if (std::string path = DefaultConfigPath(env); !path.empty()) {
    auto c = ReadConfig(path, files);
    if (!c.ok()) return c.status();
    if (c->has_value()) configs.push_back(**c);
  }
  auto env_value = [&](const char* name) -> std::string {
    auto v = env(name);
    return v ? *v : std::string();
  };

  Connection out;
  // Endpoint.
  if (!flags.endpoint.empty()) {
    out.endpoint = flags.endpoint;
    out.endpoint_source = "--endpoint";
  } else if (std::string e = env_value("MLENGINE_API_ENDPOINT"); !e.empty()) {
    out.endpoint = e;
    out.endpoint_source = "MLENGINE_API_ENDPOINT";
  } else {
    for (const auto& c : configs) {
      if (!c.endpoint.empty()) {
        out.endpoint = c.endpoint;
        out.endpoint_source = c.path;
        break;
      }
    }
  }
  if (out.endpoint.empty()) {
    out.endpoint = kDefaultEndpoint;
    out.endpoint_source = "default";
  }
  out.endpoint = StripSlash(out.endpoint);
  if (out.endpoint.rfind("http://", 0) != 0 && out.endpoint.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the endpoint \"", out.endpoint, "\" (from ", out.endpoint_source,
                                                   ") must start with http:// or https://"));
  }

  // Token.
  if (!flags.token.empty()) {
    out.token = flags.token;
    out.token_source = "--token";
  } else if (!flags.token_file.empty()) {
    auto t = ReadToken(flags.token_file, files, "--token-file");
    if (!t.ok()) return t.status();
    out.token = *t;
    out.token_source = "--token-file";
  } else if (std::string t = env_value("MLENGINE_TOKEN"); !t.empty()) {
    out.token = t;
    out.token_source = "MLENGINE_TOKEN";
  } else if (auto active = ReadActiveCredential(CredentialsPath(env), files); !active.ok()) {
    return active.status();
  } else if (active->has_value()) {
    out.token = (*active)->token;
    out.account = (*active)->account;
    out.token_source = CredentialsPath(env);
  } else {
    for (const auto& c : configs) {
      if (!c.token.empty()) {
        out.token = c.token;
        out.token_source = c.path;
        break;
      }
      if (!c.token_file.empty()) {
        auto t = ReadToken(c.token_file, files, absl::StrCat("token_file in ", c.path));
        if (!t.ok()) return t.status();
        out.token = *t;
        out.token_source = c.path;
        break;
      }
    }
  }

  // Project.
  if (!flags.project.empty()) {
    out.project = flags.project;
    out.project_source = "--project";
  } else if (std::string p = env_value("MLENGINE_PROJECT"); !p.empty()) {
    out.project = p;
    out.project_source = "MLENGINE_PROJECT";
  } else {
    for (const auto& c : configs) {
      if (!c.project.empty()) {
        out.project = c.project;
        out.project_source = c.path;
        break;
      }
    }
  }
  if (out.project.empty()) {
    out.project = kDefaultProject;
    out.project_source = "default";
  }
  return out;
}

}  // namespace mle::cli
