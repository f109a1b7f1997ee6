// Where the CLI finds mlengined and which token it presents.
//
// Resolution order, each setting on its own (the first that gives a value
// wins):
//   1. flags: --endpoint, --token / --token-file, --project
//   2. environment: MLENGINE_API_ENDPOINT, MLENGINE_TOKEN, MLENGINE_PROJECT
//   2a. the token only: the active credential, CONFIG_DIR/credentials.json
//      ({"account": ..., "token": ...}, mode 0600), which
//      `mlengine auth activate-service-account` / `auth login` write
//   3. the JSON file named by MLENGINE_CONFIG
//   4. ${XDG_CONFIG_HOME:-$HOME/.config}/mlengine/config.json
//   5. defaults: endpoint http://127.0.0.1:8080, no token, project "default"
// A config file looks like mlengined's DATA_DIR/server.json, so
// MLENGINE_CONFIG=DATA_DIR/server.json points the CLI at a local server:
//   {"endpoint": "http://127.0.0.1:8080", "token_file": "/path/admin.token"}
// ("token" and "project" keys are accepted too; a relative token_file is
// relative to the config file's directory.)
// Pure functions of their inputs (environment and file reads are injected).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mle::cli {

inline constexpr char kDefaultEndpoint[] = "http://127.0.0.1:8080";
inline constexpr char kDefaultProject[] = "default";

// What the global flags said (empty = not given).
struct GlobalFlags {
  std::string endpoint;
  std::string token;
  std::string token_file;
  std::string project;
};

struct Connection {
  std::string endpoint;  // e.g. http://127.0.0.1:8080, no trailing slash
  std::string token;     // empty: send no Authorization header
  std::string project;
  std::string endpoint_source;  // where the endpoint came from, for messages
  std::string project_source;   // likewise: --project, MLENGINE_PROJECT, a config file's path, or "default"
  std::string token_source;     // --token, --token-file, MLENGINE_TOKEN, credentials.json, a config file, or 
  std::string account;          // the active credential's account, when its token is sent
};

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// Returns a file's contents, or nullopt when it does not exist.
using FileReader = std::function<std::optional<std::string>(const std::string&)>;

EnvLookup ProcessEnv();
FileReader RealFiles();

// The default config file path, or "" when neither XDG_CONFIG_HOME nor HOME
// is set.
std::string DefaultConfigPath(const EnvLookup& env);
// The active credential's file beside it ("" likewise).
std::string CredentialsPath(const EnvLookup& env);

// The active credential: whose token the CLI sends.
struct ActiveCredential {
  std::string account;
  std::string token;
};
// nullopt when there is none; INVALID_ARGUMENT for a damaged file.
absl::StatusOr<std::optional<ActiveCredential>> ReadActiveCredential(const std::string& path,
                                                                     const FileReader& files);

absl::StatusOr<Connection> ResolveConnection(const GlobalFlags& flags, const EnvLookup& env,
                                             const FileReader& files);

}  // namespace mle::cli
