#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"

namespace mle::cli {

absl::StatusOr<Client*> Context::GetClient() {
  if (client_) return client_.get();
  auto connection = ResolveConnection(flags, ProcessEnv(), RealFiles());
  if (!connection.ok()) return connection.status();
  client_ = std::make_unique<Client>(*std::move(connection));
  return client_.get();
}

int PrintError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "ERROR: (mlengine.%s) %s\n", command.c_str(), message.c_str());
  std::fflush(stderr);
  return 1;
}

int PrintError(const std::string& command, const absl::Status& status) {
  return PrintError(command, std::string(status.message()));
}

void PrintResource(const nlohmann::json& value, const Format& format) {
  if (format == Format::kProjection) {
    std::cout << Project(format.projection, {value}) << std::flush;
    return;
  }
  std::cout << (format == Format::kJson ? ToJson(value) : ToYaml(value)) << std::flush;
}

void PrintList(const std::vector<nlohmann::json>& items, const Format& format) {
  if (format == Format::kProjection) {
    std::cout << Project(format.projection, items);
  } else if (format == Format::kJson) {
    std::cout << ToJson(nlohmann::json(items));
  } else {
    bool first = true;
    for (const auto& item : items) {
      if (!first) std::cout << "---\n";
      first = false;
      std::cout << ToYaml(item);
    }
  }
  std::cout << std::flush;
}

namespace {

std::map<const CLI::App*, std::string>& Synopses() {
  static auto* synopses = new std::map<const CLI::App*, std::string>();
  return *synopses;
}

// CLI11's help, with our hand-written usage line where a command has one.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (auto it = Synopses().find(app); it != Synopses().end()) return absl::StrCat("Usage: ", it->second, "\n");
    return CLI::Formatter::make_usage(app, std::move(name));
  }
  // A command's help lists the flags every command takes (CLI11 shows them
  // only on the root's), as gcloud lists its global flags.
  std::string make_footer(const CLI::App* app) const override {
    std::string footer = CLI::Formatter::make_footer(app);
    if (app->get_parent() == nullptr) return footer;
    return absl::StrCat(footer, footer.empty() ? "" : "\n",
                        "\nGLOBAL FLAGS (every command)\n"
                        "  --project PROJECT     the project (default: $MLENGINE_PROJECT, the config file's, or "
                        "\"default\")\n"
                        "  --format FORMAT       json, yaml, or gcloud's value(...), table(...), csv(...), get(...)\n"
                        "  --endpoint URL, --token TOKEN, --token-file FILE   which server, as whom\n"
                        "  --quiet, --verbosity LEVEL                         accepted for gcloud scripts\n");
  }
};

}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void InstallHelpFormatter(CLI::App& app) { app.formatter(std::make_shared<HelpFormatter>()); }

void Usage(CLI::App* app, const std::string& synopsis) {
  Synopses()[app] = synopsis;
  app->footer("");  // not the parent's
}

void MoreHelp(CLI::App* app, const std::string& text) { app->footer(app->get_footer() + text); }

CLI::Option* AddOptional(CLI::App* app, const std::string& name, std::optional<std::string>* out,
                         const std::string& description) {
  return app->add_option_function<std::string>(name, [out](const std::string& value) { *out = value; }, description)
      ->type_name(ValueName(name));
}

std::string ValueName(const std::string& flag) {
  static const auto* kNames = new std::map<std::string, std::string>{
      {"--package-path", "DIR"},          {"--module-name", "MODULE"},
      {"--packages", "PACKAGE,..."},      {"--staging-bucket", "gs://BUCKET"},
      {"--job-dir", "DIR"},               {"--config", "FILE"},
      {"--region", "REGION"},             {"--runtime-version", "VERSION"},
      {"--python-version", "VERSION"},    {"--scale-tier", "TIER"},
      {"--labels", "KEY=VALUE,..."},      {"--update-labels", "KEY=VALUE,..."},
      {"--remove-labels", "KEY,..."},     {"--use-chief-in-tf-config", "true|false"},
      {"--service-account", "EMAIL"},     {"--tpu-tf-version", "VERSION"},
      {"--worker-count", "N"},            {"--parameter-server-count", "N"},
      {"--evaluator-count", "N"},         {"--start-port", "PORT"},
      {"--task-name", "NAME"},            {"--polling-interval", "SECONDS"},
      {"--trial", "TRIAL_ID"},
      {"--filter", "EXPR"},               {"--limit", "N"},
      {"--page-size", "N"},               {"--endpoint", "URL"},
      {"--token", "TOKEN"},               {"--token-file", "FILE"},
      {"--project", "PROJECT"},           {"--format", "FORMAT"},
  };
  if (auto it = kNames->find(flag); it != kNames->end()) return it->second;
  if (flag.find("accelerator") != std::string::npos) return "type=TYPE,count=N";
  if (flag.find("machine-type") != std::string::npos) return "MACHINE_TYPE";
  if (flag.find("image-uri") != std::string::npos) return "IMAGE";
  return "VALUE";
}

}  // namespace mle::cli
