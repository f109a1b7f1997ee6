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
#include "absl/strings/str_join.h"
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

// What wins over the config file for `property`, if something does now.
std::string Shadowed(const std::string& property, const Context& ctx) {
  const EnvLookup env = ProcessEnv();
  auto set = [&](const char* name) {
    auto v = env(name);
    return v && !v->empty();
  };
  if (property == "project") {
    if (!ctx.flags.project.empty()) return "--project";
    if (set("MLENGINE_PROJECT")) return "MLENGINE_PROJECT";
  } else if (property == "endpoint") {
    if (!ctx.flags.endpoint.empty()) return "--endpoint";
    if (set("MLENGINE_API_ENDPOINT")) return "MLENGINE_API_ENDPOINT";
  } else if (property == "token_file") {
    if (set("MLENGINE_TOKEN")) return "MLENGINE_TOKEN";
  }
  if (set("MLENGINE_CONFIG") && property != "account") {
    auto named = Load(*env("MLENGINE_CONFIG"));
    if (named.ok() && named->contains(property)) return absl::StrCat("MLENGINE_CONFIG (", *env("MLENGINE_CONFIG"), ")");
  }
  return "";
}

}  // namespace

void AddConfigCommands(CLI::App& app, Context& ctx) {
  CLI::App* config = app.add_subcommand("config", "The CLI's settings: project, endpoint, token_file (gcloud config)");
  config->require_subcommand(1);
  MoreHelp(config,
           "\nThe settings live in ${XDG_CONFIG_HOME:-~/.config}/mlengine/config.json, e.g.\n"
           "  {\"endpoint\": \"http://mlengine.example.com:8080\", \"project\": \"team-a\"}\n"
           "Flags (--project, --endpoint, --token...) and MLENGINE_* variables win over it.\n");

  auto set_args = std::make_shared<ConfigArgs>();
  CLI::App* set = config->add_subcommand("set", "Set a property: project, endpoint or token_file");
  Usage(set, "mlengine config set PROPERTY VALUE");
  set->add_option("PROPERTY", set_args->property, "project, endpoint (api_endpoint_overrides/ml) or token_file")
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
    if (const std::string over = Shadowed(property, ctx); !over.empty()) {
      std::cerr << "Note: " << over << " sets " << property << " too, and wins over this file while it does.\n";
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
    auto doc = Load(DefaultConfigPath(ProcessEnv()));
    const std::string file = DefaultConfigPath(ProcessEnv());
    auto where = [&](const std::string& property) {
      const std::string over = Shadowed(property, ctx);
      if (!over.empty()) return over;
      if (doc.ok() && doc->contains(property)) return file;
      return std::string("default");
    };
    std::cout << "project = " << conn.project << "    (" << where("project") << ")\n"
              << "endpoint = " << conn.endpoint << "    (" << (conn.endpoint_source.empty() ? where("endpoint")
                                                                                           : conn.endpoint_source)
              << ")\n"
              << "account = " << (conn.account.empty() ? "(none: no auth login)" : conn.account) << "\n";
  });
}

}  // namespace mle::cli
