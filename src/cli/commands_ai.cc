// mlengine ai {custom-jobs, hp-tuning-jobs} {create, describe, list, cancel,
// stream-logs}: Vertex AI's jobs through mlengined's aiplatform v1 API
// (docs/vertex.md), with gcloud ai's flags. A Vertex job's id is an ml v1
// job's too, so its log is read as `jobs stream-logs` reads one.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "cli/logs.h"
#include "cli/packaging.h"
#include "cli/staging.h"
#include "cli/vertex_flags.h"

namespace mle::cli {
namespace ai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Which of Vertex's two job collections a command group works on.
struct Collection {
  const char* group;  // the command: custom-jobs
  const char* path;   // in URLs and list replies: customJobs
  const char* title;  // in messages: CustomJob
  bool tuning;
};
constexpr Collection kCustomJobs{"custom-jobs", "customJobs", "CustomJob", false};
constexpr Collection kTuningJobs{"hp-tuning-jobs", "hyperparameterTuningJobs", "Hyperparameter tuning job", true};

std::string CommandName(const Collection& c, const char* verb) { return absl::StrCat("ai.", c.group, ".", verb); }

std::string CollectionPath(const Collection& c, const std::string& project, const std::string& location) {
  return absl::StrCat("/v1/projects/", UrlEncode(project), "/locations/", UrlEncode(location), "/", c.path);
}

std::string JobName(const Collection& c, const std::string& project, const std::string& location,
                    const std::string& id) {
  return absl::StrCat("projects/", project, "/locations/", location, "/", c.path, "/", id);
}

// --region, or CLOUDSDK_AI_REGION as gcloud reads it (CLI11 does).
void AddRegion(CLI::App* app, std::string* region) {
  app->add_option("--region", *region, "Region of the job(s), e.g. us-central1 (one this server serves)")
      ->envname("CLOUDSDK_AI_REGION")
      ->type_name("REGION");
}

absl::Status RequireRegion(const std::string& region) {
  if (!region.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "argument --region: must be given (or set CLOUDSDK_AI_REGION), e.g. --region us-central1");
}

// The job a JOB argument names. A whole name carries its project and
// region; an id is looked for in --region of the client's project.
struct Target {
  Client* client = nullptr;
  std::string project, location, id;
};

absl::StatusOr<Target> Resolve(Context& ctx, const Collection& c, const std::string& arg, const std::string& region) {
  auto ref = ParseVertexJobRef(arg, c.path);
  if (!ref.ok()) return ref.status();
  if (ref->location.empty()) {
    if (auto st = RequireRegion(region); !st.ok()) return st;
    ref->location = region;
  }
  if (!ref->project.empty()) ctx.flags.project = ref->project;  // before the client is made
  auto client = ctx.GetClient();
  if (!client.ok()) return client.status();
  return Target{*client, (*client)->connection().project, ref->location, ref->id};
}

absl::StatusOr<json> GetJob(const Collection& c, const Target& t) {
  return t.client->Call("GET", absl::StrCat(CollectionPath(c, t.project, t.location), "/", UrlEncode(t.id)));
}

// ---------------------------------------------------------------- create

struct CreateState {
  std::string region;
  VertexJobFlags job;
  TuningFlags tuning;
  std::optional<std::string> config, args, command, python_package_uris, staging_bucket;
  std::vector<std::string> worker_pool_specs;
};

// A local package to build: a package directory (BuildSdist's), or a script
// in a directory (WriteScriptPackage's), and the pools that run it.
struct LocalBuild {
  fs::path package_dir;  // empty for a script
  fs::path script_dir;
  std::string script;
  std::map<size_t, std::string> modules;  // pool -> the module it runs
  std::vector<std::string> uris;          // where it was staged
};

// What each pool's local-package-path becomes, known before anything is
// built: gcloud's DIR holds the module's top package (DIR/trainer for
// trainer.task), or is that package itself, or holds a top-level module or
// script (run from a generated package).
absl::StatusOr<std::vector<LocalBuild>> PlanLocalBuilds(const std::vector<WorkerPoolFlag>& pools) {
  std::vector<LocalBuild> builds;
  for (size_t i = 0; i < pools.size(); ++i) {
    const WorkerPoolFlag& pool = pools[i];
    if (!pool.local_package_path) continue;
    const std::string flag = absl::StrCat("argument --worker-pool-spec (workerPoolSpecs[", i, "])");
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(fs::absolute(*pool.local_package_path), ec);
    if (ec || !fs::is_directory(dir)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": local-package-path ", *pool.local_package_path, " is not a directory"));
    }
    LocalBuild build;
    std::string module;
    if (pool.script) {
      if (!fs::is_regular_file(dir / *pool.script)) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": script ", *pool.script, " is not a file in ", *pool.local_package_path));
      }
      build.script_dir = dir;
      build.script = *pool.script;
      module = kScriptModule;
    } else {
      module = *pool.python_module;
      const std::string top = module.substr(0, module.find('.'));
      if (fs::is_regular_file(dir / top / "__init__.py")) {
        build.package_dir = dir / top;
      } else if (dir.filename() == top && fs::is_regular_file(dir / "__init__.py")) {
        build.package_dir = dir;
      } else if (module == top && fs::is_regular_file(dir / (module + ".py"))) {
        build.script_dir = dir;
        build.script = module + ".py";
        module = kScriptModule;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": python-module ", module, " is not in local-package-path ", *pool.local_package_path,
                         ": it needs the package directory ", (dir / top).string(), " (with __init__.py)",
                         module == top ? absl::StrCat(", or the file ", (dir / (module + ".py")).string()) : "",
                         "; to run a single file, give script=PATH"));
      }
    }
    auto same = std::find_if(builds.begin(), builds.end(), [&](const LocalBuild& b) {
      return b.package_dir == build.package_dir && b.script_dir == build.script_dir && b.script == build.script;
    });
    if (same == builds.end()) same = builds.insert(builds.end(), std::move(build));
    same->modules[i] = module;
  }
  return builds;
}

std::map<size_t, StagedPackage> StagedPackages(const std::vector<LocalBuild>& builds) {
  std::map<size_t, StagedPackage> staged;
  for (const LocalBuild& b : builds) {
    for (const auto& [pool, module] : b.modules) staged[pool] = {b.uris, module};
  }
  return staged;
}

// Builds every package and stages it: each build's uris are set.
absl::Status BuildAndStage(Client& client, const GcsPath& staging, std::vector<LocalBuild>& builds) {
  auto temp = TempDir::Make();
  if (!temp.ok()) return temp.status();
  std::vector<fs::path> files;
  std::vector<size_t> built_by;  // files[k] is builds[built_by[k]]'s
  for (size_t k = 0; k < builds.size(); ++k) {
    LocalBuild& b = builds[k];
    const fs::path work = temp->path() / std::to_string(k);
    fs::path package_dir = b.package_dir;
    if (package_dir.empty()) {
      std::fprintf(stderr, "Building a Python package that runs %s (in %s) with setuptools...\n", b.script.c_str(),
                   b.script_dir.c_str());
      auto written = WriteScriptPackage(b.script_dir, b.script, work / "script");
      if (!written.ok()) return written.status();
      package_dir = *written;
    } else {
      std::fprintf(stderr, "Building the Python package in %s with setuptools...\n", package_dir.c_str());
    }
    auto built = BuildSdist(package_dir, work / "work", work / "dist", PythonFromEnv());
    if (!built.ok()) return built.status();
    for (const auto& f : built->files) {
      files.push_back(f);
      built_by.push_back(k);
    }
  }
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.string());
  if (auto st = CheckDuplicateBasenames(names); !st.ok()) return st;
  auto uris = UploadToStaging(client, staging, files);
  if (!uris.ok()) return uris.status();
  for (size_t k = 0; k < files.size(); ++k) builds[built_by[k]].uris.push_back((*uris)[k]);
  return absl::OkStatus();
}

absl::StatusOr<json> BuildBody(const Collection& c, const json& config, const CreateState& s,
                               const std::vector<LocalBuild>& builds) {
  return c.tuning ? BuildTuningJob(config, s.job, s.tuning, StagedPackages(builds))
                  : BuildCustomJob(config, s.job, StagedPackages(builds));
}

int RunCreate(Context& ctx, const Collection& c, CreateState& s) {
  const std::string cmd = CommandName(c, "create");
  auto format = ParseFormat(ctx.format);
  if (!format.ok()) return PrintError(cmd, format.status());
  if (auto st = RequireRegion(s.region); !st.ok()) return PrintError(cmd, st);

  JobSpecFlags& spec = s.job.spec;
  for (size_t i = 0; i < s.worker_pool_specs.size(); ++i) {
    auto pool = ParseWorkerPoolSpec(s.worker_pool_specs[i], i);
    if (!pool.ok()) return PrintError(cmd, pool.status());
    spec.worker_pools.push_back(*std::move(pool));
  }
  if (s.args) spec.args = SplitListFlag(*s.args);
  if (s.command) spec.command = SplitListFlag(*s.command);
  if (s.python_package_uris) {
    spec.python_package_uris.emplace();
    for (const auto& uri : SplitListFlag(*s.python_package_uris)) {
      if (!uri.empty()) spec.python_package_uris->push_back(uri);
    }
  }
  json config = json::object();
  if (s.config) {
    auto text = RealFiles()(*s.config);
    if (!text) return PrintError(cmd, absl::StrCat("--config ", *s.config, ": cannot read the file"));
    auto parsed = ParseVertexConfig(*text, *s.config, c.tuning ? kTuningJobSchema : kCustomJobSpecSchema);
    if (!parsed.ok()) return PrintError(cmd, parsed.status());
    config = *std::move(parsed);
  }

  // Everything the flags say is checked before anything is built or sent.
  auto builds = PlanLocalBuilds(spec.worker_pools);
  if (!builds.ok()) return PrintError(cmd, builds.status());
  auto body = BuildBody(c, config, s, *builds);
  if (!body.ok()) return PrintError(cmd, body.status());
  std::optional<GcsPath> staging;
  if (!builds->empty()) {
    const json& built_spec = c.tuning ? (*body)["trialJobSpec"] : (*body)["jobSpec"];
    auto where =
        VertexStagingLocation(s.staging_bucket, built_spec, s.job.display_name, c.tuning ? "trialJobSpec." : "");
    if (!where.ok()) return PrintError(cmd, where.status());
    staging = *where;
  }

  auto client = ctx.GetClient();
  if (!client.ok()) return PrintError(cmd, client.status());
  if (staging) {
    if (auto st = EnsureStagingBucket(**client, staging->bucket); !st.ok()) return PrintError(cmd, st);
    if (auto st = BuildAndStage(**client, *staging, *builds); !st.ok()) return PrintError(cmd, st);
    body = BuildBody(c, config, s, *builds);
    if (!body.ok()) return PrintError(cmd, body.status());
  }
  auto created = (*client)->Call("POST", CollectionPath(c, (*client)->connection().project, s.region), {}, *body);
  if (!created.ok()) return PrintError(cmd, created.status());
  const std::string name = created->value("name", "");
  std::fprintf(stderr,
               "%s [%s] submitted successfully.\n\n"
               "Your job is still active. You may view the status of your job with the command\n\n"
               "  $ mlengine ai %s describe %s\n\n"
               "or continue streaming the logs with the command\n\n"
               "  $ mlengine ai %s stream-logs %s\n",
               c.title, name.c_str(), c.group, name.c_str(), c.group, name.c_str());
  std::fflush(stderr);
  PrintResource(*created, *format);
  return 0;
}

void AddCreate(CLI::App* group, Context& ctx, const Collection& c) {
  auto s = std::make_shared<CreateState>();
  CLI::App* cmd = group->add_subcommand(
      "create", c.tuning
                    ? "Create a hyperparameter tuning job: trials of a training spec, each with other values of the "
                      "parameters,\nsearching for the best value of a metric the trainer reports. The study "
                      "(studySpec: metrics,\nparameters, algorithm) and the trials' spec (trialJobSpec) come from "
                      "--config; flags override it."
                    : "Create a custom job: worker pools of replicas running a Python package in a prebuilt "
                      "training image\n(executor-image-uri) or a container of your own "
                      "(container-image-uri). The spec comes from\n--worker-pool-spec flags or from --config (a "
                      "CustomJobSpec), flags overriding it.");
  if (c.tuning) {
    Usage(cmd,
          "mlengine ai hp-tuning-jobs create --region REGION --display-name NAME --config FILE\n"
          "         [--max-trial-count N] [--parallel-trial-count N] [--max-failed-trial-count N]\n"
          "         [--algorithm ALGORITHM] [--worker-pool-spec SPEC]... [FLAGS]");
    MoreHelp(cmd,
             "\nEXAMPLES\n"
             "  Tune the learning rate over 8 trials, 2 at a time, from a config file:\n"
             "    mlengine ai hp-tuning-jobs create --region us-central1 --display-name lr-search \\\n"
             "        --config study.yaml --max-trial-count 8 --parallel-trial-count 2\n\n"
             "  study.yaml holds a HyperparameterTuningJob's fields, e.g.:\n"
             "    studySpec:\n"
             "      metrics:\n"
             "      - metricId: accuracy\n"
             "        goal: MAXIMIZE\n"
             "      parameters:\n"
             "      - parameterId: lr\n"
             "        doubleValueSpec: {minValue: 0.0001, maxValue: 0.1}\n"
             "        scaleType: UNIT_LOG_SCALE\n"
             "    trialJobSpec:\n"
             "      workerPoolSpecs:\n"
             "      - machineSpec: {machineType: n1-standard-4}\n"
             "        replicaCount: 1\n"
             "        pythonPackageSpec:\n"
             "          executorImageUri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest\n"
             "          packageUris: [gs://my-bucket/trainer-0.1.tar.gz]\n"
             "          pythonModule: trainer.task\n\n"
             "  Each trial runs the trial spec with --lr=VALUE appended to its args; the trainer\n"
             "  reports accuracy with cloudml-hypertune. The trials' spec may come from\n"
             "  --worker-pool-spec instead, as for `mlengine ai custom-jobs create`, local packages\n"
             "  included.\n");
  } else {
    Usage(cmd,
          "mlengine ai custom-jobs create --region REGION --display-name NAME\n"
          "         (--worker-pool-spec SPEC... | --config FILE) [FLAGS]");
    MoreHelp(cmd,
             "\nWORKER POOLS\n"
             "  Each --worker-pool-spec is a pool, in order: the first is the chief (one replica),\n"
             "  the second the workers, the third the parameter servers, the fourth the evaluators;\n"
             "  an empty one (--worker-pool-spec=) skips a role. Its keys, separated by commas:\n"
             "    machine-type          required, e.g. n1-standard-4\n"
             "    replica-count         default 1\n"
             "    accelerator-type      e.g. nvidia-tesla-t4 (or NVIDIA_TESLA_T4); accelerator-count\n"
             "                          defaults to 1\n"
             "    container-image-uri   a container of your own, run with its entrypoint\n"
             "    executor-image-uri    a prebuilt training image to run a Python package in, with\n"
             "    python-module         the module to run (packages from --python-package-uris), or\n"
             "    local-package-path    a local directory built into a package and uploaded: with\n"
             "                          python-module (DIR/trainer/task.py for trainer.task), or\n"
             "    script                a script in that directory, run as `python SCRIPT`\n"
             "  A local package is built with setuptools (DIR's setup.py if it has one) and staged\n"
             "  under --staging-bucket, else under BASE/packages/ (BASE: the config's\n"
             "  baseOutputDirectory.outputUriPrefix).\n"
             "\nEXAMPLES\n"
             "  A chief and two workers running a staged package in a prebuilt image:\n"
             "    IMAGE=us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest\n"
             "    mlengine ai custom-jobs create --region us-central1 --display-name census \\\n"
             "        "
             "--worker-pool-spec=machine-type=n1-standard-4,executor-image-uri=$IMAGE,python-module=trainer.task \\\n"
             "        --worker-pool-spec=machine-type=n1-standard-4,replica-count=2,executor-image-uri=$IMAGE,"
             "python-module=trainer.task \\\n"
             "        --python-package-uris=gs://my-bucket/trainer-0.1.tar.gz --args=--epochs=5,--lr=0.01\n\n"
             "  Build ./src (holding trainer/task.py) into a package, stage it, and run it:\n"
             "    mlengine ai custom-jobs create --region us-central1 --display-name local-run \\\n"
             "        --staging-bucket gs://my-bucket \\\n"
             "        --worker-pool-spec=machine-type=n1-standard-4,executor-image-uri=$IMAGE,local-package-path=./src,"
             "python-module=trainer.task\n\n"
             "  A script in ./src, run as `python train.py`:\n"
             "    mlengine ai custom-jobs create --region us-central1 --display-name script-run \\\n"
             "        --staging-bucket gs://my-bucket \\\n"
             "        --worker-pool-spec=machine-type=n1-standard-4,executor-image-uri=$IMAGE,local-package-path=./src,"
             "script=train.py\n\n"
             "  A container, one GPU:\n"
             "    mlengine ai custom-jobs create --region us-central1 --display-name gpu \\\n"
             "        --worker-pool-spec=machine-type=n1-standard-8,accelerator-type=nvidia-tesla-t4,"
             "container-image-uri=gcr.io/my-project/trainer:1\n\n"
             "  From a config file (a CustomJobSpec), the flags overriding it:\n"
             "    mlengine ai custom-jobs create --region us-central1 --display-name from-config \\\n"
             "        --config spec.yaml --service-account trainer@my-project.iam.gserviceaccount.com\n\n"
             "  spec.yaml:\n"
             "    workerPoolSpecs:\n"
             "    - machineSpec: {machineType: n1-standard-4}\n"
             "      replicaCount: 1\n"
             "      containerSpec: {imageUri: gcr.io/my-project/trainer:1, args: [--epochs, '5']}\n"
             "    baseOutputDirectory: {outputUriPrefix: gs://my-bucket/out}\n"
             "    scheduling: {timeout: 7200s}\n");
  }
  cmd->add_option("--display-name", s->job.display_name, "Name of the job, for people (up to 128 characters)")
      ->required()
      ->type_name("NAME");
  AddRegion(cmd, &s->region);
  CLI::Option* config =
      AddOptional(cmd, "--config", &s->config,
                  c.tuning ? "YAML or JSON file holding a HyperparameterTuningJob's fields (studySpec, maxTrialCount, "
                             "parallelTrialCount, maxFailedTrialCount, trialJobSpec, labels); flags override it"
                           : "YAML or JSON file holding a CustomJobSpec (workerPoolSpecs, baseOutputDirectory, "
                             "serviceAccount, scheduling, ...): a CustomJob's jobSpec; flags override it");
  if (c.tuning) config->required();  // the study has no flags (gcloud's rule)
  cmd->add_option("--worker-pool-spec", s->worker_pool_specs,
                  absl::StrCat("A worker pool, as KEY=VALUE pairs (see WORKER POOLS",
                               c.tuning ? " in `mlengine ai custom-jobs create --help`" : " below",
                               "); repeat it for each pool, in order. Replaces the config's ",
                               c.tuning ? "trialJobSpec." : "", "workerPoolSpecs"))
      ->expected(0, 1)  // "--worker-pool-spec=" is an empty pool, not the next argument
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("KEY=VALUE,...");
  AddOptional(cmd, "--args", &s->args,
              "Arguments appended to every pool's args, comma-separated: --args=--epochs=5,--lr=0.01 (another "
              "separator: --args=^:^--list=a,b:--x)")
      ->type_name("ARG,...");
  AddOptional(cmd, "--command", &s->command, "The command of every container pool (replacing its entrypoint)")
      ->type_name("COMMAND,...");
  AddOptional(cmd, "--python-package-uris", &s->python_package_uris,
              "gs:// URIs of the Python packages the pools run (after a local package, if one is built)")
      ->type_name("URI,...");
  AddOptional(cmd, "--staging-bucket", &s->staging_bucket,
              "Bucket (gs://BUCKET) where local packages are staged, under DISPLAY_NAME/<sha256>/ (default: the "
              "base output directory's packages/)");
  AddOptional(cmd, "--labels", &s->job.labels, "Labels as KEY=VALUE,KEY2=VALUE2");
  AddOptional(cmd, "--service-account", &s->job.spec.service_account, "Service account the job runs as");
  AddOptional(cmd, "--network", &s->job.spec.network,
              "VPC network of the job (projects/P/global/networks/N); recorded: replicas reach what this "
              "cluster's hosts reach")
      ->type_name("NETWORK");
  cmd->add_flag("--enable-web-access", s->job.spec.enable_web_access,
                "Interactive shells into the replicas: not served here; the server refuses the job saying so");
  cmd->add_flag("--enable-dashboard-access", s->job.spec.enable_dashboard_access,
                "Dashboards of the replicas: not served here; the server refuses the job saying so");
  if (c.tuning) {
    cmd->add_option_function<int64_t>(
           "--max-trial-count", [s](const int64_t& n) { s->tuning.max_trial_count = n; },
           "Total number of trials (default: the config's, else 1)")
        ->check(CLI::PositiveNumber.description(""))
        ->type_name("N");
    cmd->add_option_function<int64_t>(
           "--parallel-trial-count", [s](const int64_t& n) { s->tuning.parallel_trial_count = n; },
           "Trials run at once (default: the config's, else 1)")
        ->check(CLI::PositiveNumber.description(""))
        ->type_name("N");
    cmd->add_option_function<int64_t>(
           "--max-failed-trial-count", [s](const int64_t& n) { s->tuning.max_failed_trial_count = n; },
           "Failed trials after which the job fails (default: the config's, else the server's)")
        ->check(CLI::NonNegativeNumber.description(""))
        ->type_name("N");
    AddOptional(cmd, "--algorithm", &s->tuning.algorithm,
                "Search algorithm: grid-search, random-search, or algorithm-unspecified (Bayesian optimisation; "
                "the default)")
        ->type_name("ALGORITHM");
  }
  cmd->callback([&ctx, &c, s] { ctx.exit_code = RunCreate(ctx, c, *s); });
}

// ---------------------------------------------------------------- others

struct JobArgs {
  std::string job;
  std::string region;
  StreamLogsOptions logs;
};

void AddDescribe(CLI::App* group, Context& ctx, const Collection& c) {
  auto s = std::make_shared<JobArgs>();
  CLI::App* cmd = group->add_subcommand(
      "describe", absl::StrCat("Show a ", c.tuning ? "hyperparameter tuning job (its trials too)" : "custom job",
                               ": its spec, state, times and error"));
  Usage(cmd, absl::StrCat("mlengine ai ", c.group, " describe JOB --region REGION [--format FORMAT]"));
  MoreHelp(cmd,
           absl::StrCat("\nEXAMPLES\n  mlengine ai ", c.group, " describe 1234567890123456789 --region us-central1\n",
                        "  mlengine ai ", c.group, " describe projects/my-project/locations/us-central1/", c.path,
                        "/1234567890123456789 --format json\n"));
  cmd->add_option("JOB", s->job, absl::StrCat("The job's id, or its name projects/P/locations/REGION/", c.path, "/ID"))
      ->required();
  AddRegion(cmd, &s->region);
  cmd->callback([&ctx, &c, s] {
    const std::string name = CommandName(c, "describe");
    auto format = ParseFormat(ctx.format);
    if (!format.ok()) return void(ctx.exit_code = PrintError(name, format.status()));
    auto target = Resolve(ctx, c, s->job, s->region);
    if (!target.ok()) return void(ctx.exit_code = PrintError(name, target.status()));
    auto job = GetJob(c, *target);
    if (!job.ok()) return void(ctx.exit_code = PrintError(name, job.status()));
    PrintResource(*job, *format);
  });
}

struct ListArgs {
  std::string region;
  std::string filter;
  std::string sort_by;
  int limit = 0;
  int page_size = 0;
};

void AddList(CLI::App* group, Context& ctx, const Collection& c) {
  auto s = std::make_shared<ListArgs>();
  CLI::App* cmd = group->add_subcommand(
      "list", absl::StrCat("List the project's ", c.tuning ? "hyperparameter tuning jobs" : "custom jobs",
                           " in a region (newest first): ID, DISPLAY_NAME, STATE, CREATE_TIME"));
  Usage(cmd, absl::StrCat("mlengine ai ", c.group,
                          " list --region REGION [--filter EXPR] [--sort-by KEY,...] [--limit N] [--page-size N]"));
  MoreHelp(cmd,
           absl::StrCat("\nEXAMPLES\n  mlengine ai ", c.group,
                        " list --region us-central1 --filter 'state=JOB_STATE_FAILED' --limit 10\n", "  mlengine ai ",
                        c.group, " list --region us-central1 --filter 'display_name:census* AND labels.team=vision'\n",
                        "  mlengine ai ", c.group,
                        " list --region us-central1 --sort-by displayName --format "
                        "'value(name)'\n"));
  AddRegion(cmd, &s->region);
  cmd->add_option("--filter", s->filter,
                  "Server-side filter in AIP-160's grammar on display_name, state, labels.KEY, create_time, "
                  "start_time, end_time, e.g. 'state=JOB_STATE_RUNNING AND display_name:census*'")
      ->type_name("EXPR");
  cmd->add_option("--sort-by", s->sort_by,
                  "Fields to sort by, e.g. displayName or ~createTime (~: descending); the server's order otherwise")
      ->type_name("KEY,...");
  cmd->add_option("--limit", s->limit, "Show at most this many jobs")
      ->check(CLI::Range(1, 1000000).description(""))
      ->type_name("N");
  cmd->add_option("--page-size", s->page_size, "Jobs fetched per request (the server allows at most 100)")
      ->check(CLI::Range(1, 1000000).description(""))
      ->type_name("N");
  cmd->callback([&ctx, &c, s] {
    const std::string name = CommandName(c, "list");
    auto format = ParseFormat(ctx.format);
    if (!format.ok()) return void(ctx.exit_code = PrintError(name, format.status()));
    if (auto st = RequireRegion(s->region); !st.ok()) return void(ctx.exit_code = PrintError(name, st));
    auto sort = ParseSortBy(s->sort_by);
    if (!sort.ok()) return void(ctx.exit_code = PrintError(name, sort.status()));
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(name, client.status()));
    // Sorted: every job first, then the limit (gcloud's order of the two).
    const size_t limit = sort->empty() ? static_cast<size_t>(s->limit) : 0;
    std::vector<json> all;
    std::string token;
    do {
      int page = s->page_size;
      if (limit > 0) {
        const int left = static_cast<int>(limit - all.size());
        if (page == 0 || page > left) page = std::min(left, 100);
      }
      Query query;
      if (!s->filter.empty()) query.emplace_back("filter", s->filter);
      if (page > 0) query.emplace_back("pageSize", std::to_string(page));
      if (!token.empty()) query.emplace_back("pageToken", token);
      auto reply = (*client)->Call("GET", CollectionPath(c, (*client)->connection().project, s->region), query);
      if (!reply.ok()) return void(ctx.exit_code = PrintError(name, reply.status()));
      if (reply->contains(c.path) && (*reply)[c.path].is_array()) {
        for (auto& job : (*reply)[c.path]) {
          if (limit > 0 && all.size() >= limit) break;
          all.push_back(std::move(job));
        }
      }
      token = reply->value("nextPageToken", "");
    } while (!token.empty() && (limit == 0 || all.size() < limit));
    SortResources(all, *sort);
    if (s->limit > 0 && all.size() > static_cast<size_t>(s->limit)) all.resize(s->limit);
    if (*format != Format::kDefault) {
      PrintList(all, *format);
    } else if (all.empty()) {
      std::fprintf(stderr, "Listed 0 items.\n");
    } else {
      std::vector<std::vector<std::string>> rows = {{"ID", "DISPLAY_NAME", "STATE", "CREATE_TIME"}};
      for (const auto& job : all) {
        const std::string job_name = job.value("name", "");
        rows.push_back({job_name.substr(job_name.rfind('/') + 1), job.value("displayName", ""), job.value("state", ""),
                        job.value("createTime", "")});
      }
      std::cout << Table(rows);
    }
    std::cout << std::flush;
  });
}

void AddCancel(CLI::App* group, Context& ctx, const Collection& c) {
  auto s = std::make_shared<JobArgs>();
  CLI::App* cmd = group->add_subcommand(
      "cancel",
      "Cancel a queued or running job (it goes to JOB_STATE_CANCELLING, then JOB_STATE_CANCELLED); a job "
      "that has ended is refused (FAILED_PRECONDITION, exit 1) and left as it is");
  Usage(cmd, absl::StrCat("mlengine ai ", c.group, " cancel JOB --region REGION"));
  MoreHelp(cmd,
           absl::StrCat("\nEXAMPLE\n  mlengine ai ", c.group, " cancel 1234567890123456789 --region us-central1\n"));
  cmd->add_option("JOB", s->job, absl::StrCat("The job's id, or its name projects/P/locations/REGION/", c.path, "/ID"))
      ->required();
  AddRegion(cmd, &s->region);
  cmd->callback([&ctx, &c, s] {
    const std::string name = CommandName(c, "cancel");
    auto target = Resolve(ctx, c, s->job, s->region);
    if (!target.ok()) return void(ctx.exit_code = PrintError(name, target.status()));
    auto reply = target->client->Call(
        "POST",
        absl::StrCat(CollectionPath(c, target->project, target->location), "/", UrlEncode(target->id), ":cancel"), {},
        json::object());
    if (!reply.ok()) return void(ctx.exit_code = PrintError(name, reply.status()));
    const std::string job_name = JobName(c, target->project, target->location, target->id);
    std::fprintf(stderr,
                 "Request to cancel %s [%s] has been sent.\n\n"
                 "You may view the status of your job with the command\n\n"
                 "  $ mlengine ai %s describe %s\n",
                 c.title, job_name.c_str(), c.group, job_name.c_str());
  });
}

void AddStreamLogs(CLI::App* group, Context& ctx, const Collection& c) {
  auto s = std::make_shared<JobArgs>();
  CLI::App* cmd = group->add_subcommand(
      "stream-logs",
      absl::StrCat("Print a job's log lines (\"TIMESTAMP TASK_NAME MESSAGE\", from every replica's stdout and "
                   "stderr)\nand follow new ones until the job ends",
                   c.tuning ? ". A tuning job's lines are its trials', each marked with its trial\n"
                              "(\"TIMESTAMP TASK_NAME trial=ID MESSAGE\")"
                            : ""));
  Usage(cmd, absl::StrCat("mlengine ai ", c.group, " stream-logs JOB --region REGION [--task-name NAME]",
                          c.tuning ? " [--trial ID]" : "", " [--polling-interval S] [--since-now]"));
  MoreHelp(cmd, absl::StrCat("\nEXAMPLE\n  mlengine ai ", c.group,
                             " stream-logs 1234567890123456789 --region us-central1 --task-name worker-replica-0\n"));
  cmd->add_option("JOB", s->job, absl::StrCat("The job's id, or its name projects/P/locations/REGION/", c.path, "/ID"))
      ->required();
  AddRegion(cmd, &s->region);
  cmd->add_option("--task-name", s->logs.task_name,
                  "Only this replica's lines: workerpool0's is master-replica-0, workerpool1's worker-replica-N, "
                  "workerpool2's ps-replica-N, workerpool3's evaluator-replica-N")
      ->type_name("NAME");
  if (c.tuning) {
    cmd->add_option("--trial", s->logs.trial_id, "Only this trial's lines, e.g. 3")->type_name("TRIAL_ID");
  }
  cmd->add_option("--polling-interval", s->logs.polling_interval_s,
                  "Accepted for gcloud's scripts; used only with a server that cannot stream logs: the longest\n"
                  "wait in seconds for new lines per request (1-30). Lines are otherwise printed as they are written")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600).description(""))
      ->type_name("SECONDS");
  cmd->add_flag("--since-now", s->logs.since_now, "Skip the lines written so far; print only new ones");
  cmd->callback([&ctx, &c, s] {
    const std::string name = CommandName(c, "stream-logs");
    auto target = Resolve(ctx, c, s->job, s->region);
    if (!target.ok()) return void(ctx.exit_code = PrintError(name, target.status()));
    // The job must be of this collection and region, as the other commands
    // find it: the log endpoint knows it by its id alone.
    if (auto job = GetJob(c, *target); !job.ok()) return void(ctx.exit_code = PrintError(name, job.status()));
    if (auto st = StreamLogs(*target->client, target->id, s->logs, stdout); !st.ok()) {
      ctx.exit_code = PrintError(name, st);
    }
  });
}

void AddGroup(CLI::App* ai, Context& ctx, const Collection& c, const std::string& description) {
  CLI::App* group = ai->add_subcommand(c.group, description);
  group->require_subcommand(1);
  AddCreate(group, ctx, c);
  AddDescribe(group, ctx, c);
  AddList(group, ctx, c);
  AddCancel(group, ctx, c);
  AddStreamLogs(group, ctx, c);
}

}  // namespace
}  // namespace ai

void AddAiCommands(CLI::App& app, Context& ctx) {
  CLI::App* group =
      app.add_subcommand("ai", "Vertex AI's custom jobs and hyperparameter tuning jobs, as `gcloud ai` has them");
  group->require_subcommand(1);
  ai::AddGroup(group, ctx, ai::kCustomJobs, "Create and manage custom training jobs (Vertex AI's CustomJobs)");
  ai::AddGroup(group, ctx, ai::kTuningJobs,
               "Create and manage hyperparameter tuning jobs (Vertex AI's HyperparameterTuningJobs)");
}

}  // namespace mle::cli
