// The mlengine command tree (CLI11): global options live in Context, each
// command group registers its subcommands and runs them from CLI11 callbacks,
// leaving its exit code in Context::exit_code. Single-threaded.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/client.h"
#include "cli/config.h"
#include "cli/output.h"

namespace mle::cli {

struct Context {
  GlobalFlags flags;
  std::string format;  // --format: "", json or yaml
  int exit_code = 0;
  // What follows the first `--` of the command line, byte for byte (the
  // trainer's arguments; CLI11's copy splits `[1,2]` and commas).
  std::optional<std::vector<std::string>> trainer_args;

  // The client for the resolved endpoint/token (made on first use).
  absl::StatusOr<Client*> GetClient();

 private:
  std::unique_ptr<Client> client_;
};

// Prints "ERROR: (mlengine.COMMAND) MESSAGE" on stderr; returns 1.
int PrintError(const std::string& command, const absl::Status& status);
int PrintError(const std::string& command, const std::string& message);

// Prints a resource in the chosen format (YAML when none).
void PrintResource(const nlohmann::json& value, const Format& format);
// Prints a list in a chosen format (not kDefault: each command has its own
// table): a JSON array, YAML documents, or the projection's lines.
void PrintList(const std::vector<nlohmann::json>& items, const Format& format);

// Writes `text` to `path` readable by its owner alone (a token, the CLI's
// configuration): a temporary file of mode 0600 renamed into place.
absl::Status WritePrivateFile(const std::string& path, const std::string& text);

// Levenshtein distance (a mistyped command's nearest name).
size_t EditDistance(const std::string& a, const std::string& b);

void AddJobsCommands(CLI::App& app, Context& ctx);
void AddLocalCommands(CLI::App& app, Context& ctx);
void AddStorageCommands(CLI::App& app, Context& ctx);
void AddIamCommands(CLI::App& app, Context& ctx);
void AddConfigCommands(CLI::App& app, Context& ctx);
void AddAiCommands(CLI::App& app, Context& ctx);

// Help text: InstallHelpFormatter (on the root, before subcommands are
// added) lets Usage() replace CLI11's generated usage line; MoreHelp appends
// to the text shown after the options.
void InstallHelpFormatter(CLI::App& app);
void Usage(CLI::App* app, const std::string& synopsis);
void MoreHelp(CLI::App* app, const std::string& text);

// The placeholder shown in help for a flag's value ("--job-dir DIR").
std::string ValueName(const std::string& flag);

// Adds an option that stores into `out` only when given on the command line.
CLI::Option* AddOptional(CLI::App* app, const std::string& name, std::optional<std::string>* out,
                         const std::string& description);

}  // namespace mle::cli
