// mlengine config set|get|unset|list: the CLI's own settings, as gcloud's
// `config` keeps them (gcloud config set project P), in the JSON file the CLI
// already reads (${XDG_CONFIG_HOME:-~/.config}/mlengine/config.json; its
// format is in config.h and README.md).
//
//   project                  the project of commands without --project
//   endpoint                 mlengined's URL (gcloud: api_endpoint_overrides/ml)
//   token_file               a file holding the token to send
//   account                  read-only here: the active credential's account
//                            (auth login / activate-service-account set it)

#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"

namespace mle::cli {
namespace {

using json = nlohmann::json;

struct ConfigArgs {
  std::string property;
  std::string value;
};

// gcloud's names for the same settings.
std::string Canonical(const std::string& property) {
  static const auto* kAliases = new std::map<std::string, std::string>{
      {"core/project", "project"},   {"api_endpoint_overrides/ml", "endpoint"},
      {"core/account", "account"},   {"project", "project"},
      {"endpoint", "endpoint"},      {"account", "account"},
      {"token_file", "token_file"},
  };
  auto it = kAliases->find(property);
  return it == kAliases->end() ? "" : it->second;
}

absl::Status Unknown(const std::string& property) {
  return absl::InvalidArgumentError(absl::StrCat("there is no property \"", property,
                                                 "\": mlengine keeps project, endpoint (gcloud's "
                                                 "api_endpoint_overrides/ml), token_file and account"));
}

// The config file as a JSON object ({} when there is none).
absl::StatusOr<json> Load(const std::string& path) {
  auto text = RealFiles()(path);
  if (!text) return json::object();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object: fix or remove it"));
  }
  return doc;
}

// Where the value of `property` in force comes from (config.h's order:
// a flag, a variable, MLENGINE_CONFIG's file, this file, the default).
std::string SourceOf(const Connection& c, const std::string& property) {
  if (property == "project") return c.project_source;
  if (property == "endpoint") return c.endpoint_source;
  return c.token_source;  // token_file
}

}  // namespace

void AddConfigCommands(CLI::App& app, Context& ctx) {
  CLI::App* config = app.add_subcommand("config", "The CLI's settings: project, endpoint, token_file, account (gcloud config)");
  config->require_subcommand(1);
  MoreHelp(config,
           "\nThe settings live in ${XDG_CONFIG_HOME:-~/.config}/mlengine/config.json, e.g.\n"
           "  {\"endpoint\": \"http://mlengine.example.com:8080\", \"project\": \"team-a\"}\n"
           "Flags (--project, --endpoint, --token...) and MLENGINE_* variables win over it.\n");

  auto set_args = std::make_shared<ConfigArgs>();
  CLI::App* set = config->add_subcommand("set", "Set a property: project, endpoint, token_file (account: see auth login)");
  Usage(set, "mlengine config set PROPERTY VALUE");
  set->add_option("PROPERTY", set_args->property, "project, endpoint (api_endpoint_overrides/ml), token_file or account")
      ->required();
  set->add_option("VALUE", set_args->value, "Its value")->required();
  set->callback([&ctx, set_args] {
    const std::string cmd = "config.set";
    const std::string property = Canonical(set_args->property);
    if (property.empty()) return void(ctx.exit_code = PrintError(cmd, Unknown(set_args->property)));
    const std::string& value = set_args->value;
    if (property == "account") {
      // One credential is active at a time: the account is whoever's token
      // auth login / activate-service-account checked and stored.
      auto c = ctx.GetClient();
      if (c.ok() && (*c)->connection().account == value) {
        std::cerr << "[" << value << "] is the active account already.\n";
        return;
      }
      return void(ctx.exit_code = PrintError(
                      cmd, absl::StrCat("the account is the active credential's: run `mlengine auth login ", value,
                                        " --token-file=FILE` (or auth activate-service-account) to send ", value,
                                        "'s token")));
    }
    if (property == "endpoint" && !absl::StartsWith(value, "http://") && !absl::StartsWith(value, "https://")) {
      return void(ctx.exit_code = PrintError(cmd, absl::StrCat("endpoint \"", value,
                                                               "\" must start with http:// or https://")));
    }
    const std::string path = DefaultConfigPath(ProcessEnv());
    if (path.empty()) return void(ctx.exit_code = PrintError(cmd, "neither XDG_CONFIG_HOME nor HOME is set"));
    auto doc = Load(path);
    if (!doc.ok()) return void(ctx.exit_code = PrintError(cmd, doc.status()));
    (*doc)[property] = value;
    if (auto s = WritePrivateFile(path, doc->dump(2) + "\n"); !s.ok()) {
      return void(ctx.exit_code = PrintError(cmd, s));
    }
    std::cerr << "Updated property [" << property << "] in " << path << ".\n";
    // Something stronger may set it too (config.h's order).
    if (auto now = ResolveConnection(ctx.flags, ProcessEnv(), RealFiles()); now.ok()) {
      if (const std::string source = SourceOf(*now, property); source != path) {
        std::cerr << "Note: " << source << " sets " << property << " too, and wins over this file while it does.\n";
      }
    }
  });

  auto get_args = std::make_shared<ConfigArgs>();
  CLI::App* get = config->add_subcommand("get", "Print a property's value in force (from wherever it comes)");
  Usage(get, "mlengine config get PROPERTY");
  get->add_option("PROPERTY", get_args->property, "project, endpoint, token_file or account")->required();
  get->callback([&ctx, get_args] {
    const std::string cmd = "config.get";
    const std::string property = Canonical(get_args->property);
    if (property.empty()) return void(ctx.exit_code = PrintError(cmd, Unknown(get_args->property)));
    if (property == "token_file") {
      auto doc = Load(DefaultConfigPath(ProcessEnv()));
      if (!doc.ok()) return void(ctx.exit_code = PrintError(cmd, doc.status()));
      std::cout << doc->value("token_file", "") << "\n";
      return;
    }
    auto c = ctx.GetClient();
    if (!c.ok()) return void(ctx.exit_code = PrintError(cmd, c.status()));
    const Connection& conn = (*c)->connection();
    std::cout << (property == "project" ? conn.project : property == "endpoint" ? conn.endpoint : conn.account)
              << "\n";
  });

  auto unset_args = std::make_shared<ConfigArgs>();
  CLI::App* unset = config->add_subcommand("unset", "Remove a property from the config file");
  Usage(unset, "mlengine config unset PROPERTY");
  unset->add_option("PROPERTY", unset_args->property, "project, endpoint or token_file")->required();
  unset->callback([&ctx, unset_args] {
    const std::string cmd = "config.unset";
    const std::string property = Canonical(unset_args->property);
    if (property.empty() || property == "account") {
      return void(ctx.exit_code = PrintError(
                      cmd, property.empty() ? Unknown(unset_args->property)
                                            : absl::InvalidArgumentError("the account goes with `mlengine auth revoke`")));
    }
    const std::string path = DefaultConfigPath(ProcessEnv());
    auto doc = Load(path);
    if (!doc.ok()) return void(ctx.exit_code = PrintError(cmd, doc.status()));
    doc->erase(property);
    if (auto s = WritePrivateFile(path, doc->dump(2) + "\n"); !s.ok()) return void(ctx.exit_code = PrintError(cmd, s));
    std::cerr << "Unset property [" << property << "] in " << path << ".\n";
  });

  CLI::App* list = config->add_subcommand("list", "Show every property in force and where it comes from");
  list->callback([&ctx] {
    const std::string cmd = "config.list";
    auto c = ctx.GetClient();
    if (!c.ok()) return void(ctx.exit_code = PrintError(cmd, c.status()));
    const Connection& conn = (*c)->connection();
    std::cout << "project = " << conn.project << "    (" << conn.project_source << ")\n"
              << "endpoint = " << conn.endpoint << "    (" << conn.endpoint_source << ")\n"
              << "account = " << (conn.account.empty() ? "(none: no auth login)" : conn.account) << "\n"
              << "token = " << (conn.token.empty() ? "(none)" : "set") << "    ("
              << (conn.token_source.empty() ? "nowhere" : conn.token_source) << ")\n";
  });
}

}  // namespace mle::cli
