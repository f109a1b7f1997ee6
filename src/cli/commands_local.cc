// mlengine local train.

#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/local_train.h"

namespace mle::cli {

void AddLocalCommands(CLI::App& app, Context& ctx) {
  CLI::App* local = app.add_subcommand("local", "Run a trainer on this machine, without a server");
  local->require_subcommand(1);
  auto options = std::make_shared<LocalTrainOptions>();
  auto job_dir = std::make_shared<std::optional<std::string>>();
  CLI::App* t = local->add_subcommand(
      "train",
      "Run a training package locally, as the service would: `python3 -m MODULE ARGS` in the\n"
      "package's parent directory, with TF_CONFIG set. With --distributed, a chief, parameter\n"
      "servers, workers and evaluators run as local processes on ports from --start-port up,\n"
      "each with its TF_CONFIG (and MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK for\n"
      "torch.distributed); their output lines are prefixed with the task name.");
  Usage(t, "mlengine local train --module-name MODULE [--package-path DIR] [--job-dir DIR] [--distributed ...] [-- ARGS...]");
  MoreHelp(t, 
      "\nThe run ends when the chief has finished (after the workers and evaluators finish;\n"
      "parameter servers are then stopped). If any task fails, the others are stopped and\n"
      "the exit status is non-zero. Python is $MLENGINE_PYTHON (default /usr/bin/python3);\n"
      "mlengine's python/ directory is put on PYTHONPATH.\n\n"
      "EXAMPLES\n"
      "  mlengine local train --module-name trainer.task --package-path ./trainer -- --epochs 1\n"
      "  mlengine local train --module-name trainer.task --package-path ./trainer \\\n"
      "      --distributed --worker-count 1 --parameter-server-count 1\n");
  t->add_option("--module-name", options->module_name, "Python module to run, e.g. trainer.task")->required()
      ->type_name(ValueName("--module-name"));
  t->add_option("--package-path", options->package_path,
                "Directory of the Python package (default: the current directory); its parent is the working "
                "directory")
      ->type_name(ValueName("--package-path"));
  AddOptional(t, "--job-dir", job_dir.get(), "Passed to the trainer as --job-dir DIR");
  t->add_flag("--distributed", options->distributed, "Run a chief, parameter servers, workers and evaluators");
  t->add_option("--worker-count", options->worker_count, "Workers (with --distributed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 512).description(""))
      ->type_name(ValueName("--worker-count"));
  t->add_option("--parameter-server-count", options->parameter_server_count, "Parameter servers (with --distributed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 512).description(""))
      ->type_name(ValueName("--parameter-server-count"));
  t->add_option("--evaluator-count", options->evaluator_count, "Evaluators (with --distributed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 512).description(""))
      ->type_name(ValueName("--evaluator-count"));
  t->add_option("--start-port", options->start_port, "First port of the local cluster; free ports are taken upward")
      ->capture_default_str()
      ->check(CLI::Range(1024, 65535).description(""))
      ->type_name(ValueName("--start-port"));
  t->add_option("USER_ARGS", options->user_args, "Arguments passed to the trainer (after `--`)");
  t->callback([&ctx, options, job_dir] {
    LocalTrainOptions o = *options;
    if (ctx.trainer_args) o.user_args = *ctx.trainer_args;
    o.job_dir = *job_dir;
    if (o.package_path.empty()) o.package_path = std::filesystem::current_path().string();
    if (const char* p = std::getenv("MLENGINE_PYTHON"); p != nullptr && *p != '\0') o.python = p;
    o.mlengine_pythonpath = FindMlenginePythonPath();
    ctx.exit_code = RunLocalTrain(o);
  });
}

}  // namespace mle::cli
