// mlengine: the command-line client of mlengined, shaped like
// `gcloud ai-platform` (jobs submit training / describe / list / cancel /
// update / stream-logs, local train) plus `storage` for the gs:// store.
// Wiring only: global options, the command tree, exit codes.

#include <curl/curl.h>
#include <signal.h>

#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "absl/strings/str_join.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  mle::cli::Context ctx;

  CLI::App app{
      "mlengine: the command line of mlengine, a self-hosted AI Platform Training service.\n\n"
      "Submit and follow training jobs on an mlengined server, run trainers locally, and move\n"
      "files in and out of the server's gs:// buckets. Commands and flags follow\n"
      "`gcloud ai-platform`.\n\n"
      "Which server: --endpoint/--token flags, else MLENGINE_API_ENDPOINT/MLENGINE_TOKEN,\n"
      "else the JSON file named by MLENGINE_CONFIG, else\n"
      "${XDG_CONFIG_HOME:-~/.config}/mlengine/config.json, else http://127.0.0.1:8080.\n"
      "A local server writes such a file as DATA_DIR/server.json, so\n"
      "  export MLENGINE_CONFIG=DATA_DIR/server.json\n"
      "points mlengine at it."};
  app.set_version_flag("--version", "mlengine " MLE_VERSION);
  app.name("mlengine");
  app.fallthrough();
  app.require_subcommand(1);
  // gcloud (argparse): a flag given twice takes its last value, so a script
  // may override what a wrapper put first. Every subcommand inherits this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  mle::cli::InstallHelpFormatter(app);

  auto* token = app.add_option("--token", ctx.flags.token, "Bearer token for the server (see also MLENGINE_TOKEN)")
      ->type_name(mle::cli::ValueName("--token"));
  auto* token_file =
      app.add_option("--token-file", ctx.flags.token_file, "File holding the token, e.g. DATA_DIR/admin.token")
      ->type_name(mle::cli::ValueName("--token-file"));
  token->excludes(token_file);
  app.add_option("--endpoint", ctx.flags.endpoint,
                 "Server URL, e.g. http://127.0.0.1:8080 (see also MLENGINE_API_ENDPOINT)")
      ->type_name(mle::cli::ValueName("--endpoint"));
  app.add_option("--project", ctx.flags.project, "Project of the jobs (default: $MLENGINE_PROJECT or \"default\")")
      ->type_name(mle::cli::ValueName("--project"));
  app.add_option("--format", ctx.format,
                 "Output format: json, yaml, or gcloud's value(...), table(...), csv(...), get(...) projections (default: yaml; a table for list)")
      ->type_name(mle::cli::ValueName("--format"));

  // gcloud's global flags that shape only its output: accepted, so that
  // scripts written for gcloud run (mlengine never prompts; its messages
  // are its messages).
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Accepted for gcloud scripts: mlengine asks no questions");
  std::string verbosity;
  app.add_option("--verbosity", verbosity, "Accepted for gcloud scripts (debug, info, warning, error, critical, none)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "critical", "none"}))
      ->type_name(mle::cli::ValueName("--verbosity"));

  mle::cli::AddJobsCommands(app, ctx);
  mle::cli::AddAiCommands(app, ctx);
  mle::cli::AddLocalCommands(app, ctx);
  mle::cli::AddStorageCommands(app, ctx);
  mle::cli::AddIamCommands(app, ctx);
  mle::cli::AddConfigCommands(app, ctx);
  app.footer(
      "\nGlobal options (--endpoint, --token, --token-file, --project, --format) may be given\n"
      "before or after the command.\n\nEXAMPLES\n"
      "  mlengined --data-dir ~/mlengine-data &\n"
      "  export MLENGINE_CONFIG=~/mlengine-data/server.json\n"
      "  mlengine jobs submit training my_job --package-path ./trainer --module-name trainer.task \\\n"
      "      --staging-bucket gs://my-bucket --region us-central1 --runtime-version pytorch-1.13-cpu -- --epochs 3\n"
      "  mlengine jobs stream-logs my_job\n"
      "  mlengine jobs list\n"
      "  mlengine local train --module-name trainer.task --package-path ./trainer\n"
      "  mlengine storage ls gs://my-bucket/my_job/\n\n"
      "Run `mlengine COMMAND --help` (e.g. `mlengine jobs submit training --help`) for details.\n");

  // The trainer's arguments, after the first `--`, reach it as they were
  // typed (gcloud passes them through): CLI11 splits a bracketed `[1,2]`
  // and commas in what it collects, so the commands that take them use
  // this copy (CLI11 still sees them: other commands refuse them).
  for (int i = 1; i < argc; ++i) {
    if (ctx.trainer_args) {
      ctx.trainer_args->push_back(argv[i]);
    } else if (std::string_view(argv[i]) == "--") {
      ctx.trainer_args.emplace();
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    // Name the (sub)command being parsed, and point at its own help.
    CLI::App* at = &app;
    std::string dotted = "mlengine", spaced = "mlengine";
    while (true) {
      auto chosen = at->get_subcommands();
      if (chosen.empty()) break;
      at = chosen.front();
      dotted += "." + at->get_name();
      spaced += " " + at->get_name();
    }
    const bool needs_subcommand = at->get_require_subcommand_min() > 0 && at->get_subcommands().empty() &&
                                  dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
    if (needs_subcommand) {
      // A word that names no command: say so and what it may have meant,
      // as gcloud does, rather than print the whole help.
      for (const std::string& word : app.remaining()) {
        if (word.empty() || word[0] == '-') continue;
        std::string best;
        size_t best_distance = 3;  // at most two edits away
        std::vector<std::string> names;
        for (const CLI::App* sub : at->get_subcommands({})) {
          names.push_back(sub->get_name());
          const size_t d = mle::cli::EditDistance(word, sub->get_name());
          if (d < best_distance) best_distance = d, best = sub->get_name();
        }
        std::cerr << "ERROR: (" << dotted << ") Invalid choice: '" << word << "'.";
        if (!best.empty()) std::cerr << " Maybe you meant: " << spaced << " " << best;
        std::cerr << "\nThe commands of `" << spaced << "` are: " << absl::StrJoin(names, ", ") << ". Run `"
                  << spaced << " --help` for usage.\n";
        return 2;
      }
      std::cerr << at->help();
      std::cerr << "\nERROR: (" << dotted << ") choose a command, e.g. `" << spaced << " "
                << at->get_subcommands({}).front()->get_name() << "`\n";
      return 2;
    }
    std::cerr << "ERROR: (" << dotted << ") " << e.what() << "\n"
              << "Run `" << spaced << " --help` for usage.\n";
    return 2;
  }
  curl_global_cleanup();
  return ctx.exit_code;
}
