// mlengine jobs {submit training, describe, list, cancel, update, stream-logs}.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "cli/logs.h"
#include "cli/packaging.h"
#include "cli/staging.h"

namespace mle::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json Summary(const json& job, bool with_error) {
  json out = json::object();
  for (const char* key : {"jobId", "state", "startTime", "endTime"}) {
    if (job.contains(key)) out[key] = job[key];
  }
  if (with_error && job.contains("errorMessage")) out["errorMessage"] = job["errorMessage"];
  return out;
}

// ---------------------------------------------------------------- submit

struct SubmitState {
  SubmitFlags flags;
  std::optional<std::string> package_path;
  std::optional<std::string> packages;
  std::optional<std::string> staging_bucket;
  std::optional<std::string> config;
  std::string worker_count;
  std::string ps_count;
  bool stream_logs = false;
  bool async = false;
};

absl::StatusOr<int64_t> ParseCount(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    long long v = std::stoll(value, &used);
    if (used == value.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return absl::InvalidArgumentError(absl::StrCat("argument ", flag, ": expected an integer, got \"", value, "\""));
}

int RunSubmit(Context& ctx, SubmitState& s) {
  const std::string cmd = "jobs.submit.training";
  auto format = ParseFormat(ctx.format);
  if (!format.ok()) return PrintError(cmd, format.status());
  if (s.stream_logs && s.async) return PrintError(cmd, "--async and --stream-logs cannot be used together");
  if (!s.worker_count.empty()) {
    auto n = ParseCount("--worker-count", s.worker_count);
    if (!n.ok()) return PrintError(cmd, n.status());
    s.flags.worker_count = *n;
  }
  if (!s.ps_count.empty()) {
    auto n = ParseCount("--parameter-server-count", s.ps_count);
    if (!n.ok()) return PrintError(cmd, n.status());
    s.flags.parameter_server_count = *n;
  }

  json config = json::object();
  if (s.config) {
    auto text = RealFiles()(*s.config);
    if (!text) return PrintError(cmd, absl::StrCat("--config ", *s.config, ": cannot read the file"));
    auto parsed = ParseJobConfig(*text, *s.config);
    if (!parsed.ok()) return PrintError(cmd, parsed.status());
    config = *parsed;
  }
  if (s.flags.kms_key && !s.flags.kms_project) {  // --kms-key as an id: the key is in the job's project
    auto client = ctx.GetClient();
    if (!client.ok()) return PrintError(cmd, client.status());
    s.flags.project = (*client)->connection().project;
  }
  auto job = BuildJob(config, s.flags);
  if (!job.ok()) return PrintError(cmd, job.status());
  const std::string job_id = s.flags.job_id;

  // Packages: local archives are uploaded, gs:// ones passed through.
  std::vector<std::string> local_packages, remote_packages;
  if (s.packages) {
    for (const auto& p : ParseKeyList(*s.packages)) {
      if (p.empty()) continue;
      if (IsGcsUri(p)) {
        remote_packages.push_back(p);
      } else {
        if (!fs::is_regular_file(p)) return PrintError(cmd, absl::StrCat("--packages: ", p, " is not a file"));
        local_packages.push_back(p);
      }
    }
  }
  // Where local files go, known before anything is built.
  std::optional<GcsPath> staging;
  if (s.package_path || !local_packages.empty()) {
    auto where = StagingLocation(s.staging_bucket, s.flags.job_dir, job_id);
    if (!where.ok()) return PrintError(cmd, where.status());
    staging = *where;
  }
  // A job the server would refuse (its id, region, runtime, quota, a
  // permission) is refused before anything is built or uploaded: the
  // server checks it with the packages' names as they will be staged.
  if (staging) {
    json planned = *job;
    std::vector<std::string> names;
    if (s.package_path) names.push_back(fs::path(*s.package_path).filename().string() + ".tar.gz");
    for (const auto& p : local_packages) names.push_back(fs::path(p).filename().string());
    std::vector<std::string> planned_uris;
    for (const auto& n : names) {
      planned_uris.push_back(staging->Child(std::string(64, '0')).Child(n).Uri());
    }
    for (const auto& p : remote_packages) planned_uris.push_back(p);
    if (auto st = SetPackageUris(planned, planned_uris); !st.ok()) return PrintError(cmd, st);
    auto client = ctx.GetClient();
    if (!client.ok()) return PrintError(cmd, client.status());
    if (auto checked = (*client)->ValidateJob(planned); !checked.ok()) return PrintError(cmd, checked);
    if (auto st = EnsureStagingBucket(**client, staging->bucket); !st.ok()) return PrintError(cmd, st);
  }
  std::optional<TempDir> temp;
  std::vector<fs::path> to_upload;
  if (s.package_path) {
    auto t = TempDir::Make();
    if (!t.ok()) return PrintError(cmd, t.status());
    temp.emplace(*std::move(t));
    std::fprintf(stderr, "Building the Python package in %s with setuptools...\n", s.package_path->c_str());
    auto built = BuildSdist(*s.package_path, temp->path() / "work", temp->path() / "dist", PythonFromEnv());
    if (!built.ok()) return PrintError(cmd, built.status());
    to_upload = built->files;
  }
  for (const auto& p : local_packages) to_upload.emplace_back(p);
  {
    std::vector<std::string> names;
    for (const auto& f : to_upload) names.push_back(f.string());
    for (const auto& p : remote_packages) names.push_back(p);
    if (auto st = CheckDuplicateBasenames(names); !st.ok()) return PrintError(cmd, st);
  }

  std::vector<std::string> uris;
  if (!to_upload.empty()) {
    auto client = ctx.GetClient();
    if (!client.ok()) return PrintError(cmd, client.status());
    auto staged = UploadToStaging(**client, *staging, to_upload);
    if (!staged.ok()) return PrintError(cmd, staged.status());
    uris = *std::move(staged);
  }
  for (const auto& p : remote_packages) uris.push_back(p);
  if (auto st = SetPackageUris(*job, uris); !st.ok()) return PrintError(cmd, st);

  auto client = ctx.GetClient();
  if (!client.ok()) return PrintError(cmd, client.status());
  auto created = (*client)->CreateJob(*job);
  if (!created.ok()) return PrintError(cmd, created.status());
  const std::string id = created->value("jobId", job_id);
  std::fprintf(stderr, "Job [%s] submitted successfully.\n", id.c_str());

  if (!s.stream_logs) {
    // The commands as they work from here: with the project when it was
    // given on this command line (a flag is not remembered).
    const std::string where =
        ctx.flags.project.empty() ? "" : absl::StrCat(" --project ", (*client)->connection().project);
    std::fprintf(stderr,
                 "Your job is still active. You may view the status of your job with the command\n\n"
                 "  $ mlengine jobs describe %s%s\n\n"
                 "or continue streaming the logs with the command\n\n"
                 "  $ mlengine jobs stream-logs %s%s\n",
                 id.c_str(), where.c_str(), id.c_str(), where.c_str());
    std::fflush(stderr);
    PrintResource(Summary(*created, false), *format);
    return 0;
  }
  StreamLogsOptions options;
  options.polling_interval_s = 10;
  if (auto st = StreamLogs(**client, id, options, stdout); !st.ok()) return PrintError(cmd, st);
  auto final_job = (*client)->GetJob(id);
  if (!final_job.ok()) return PrintError(cmd, final_job.status());
  const std::string state = final_job->value("state", "");
  PrintResource(Summary(*final_job, state != "SUCCEEDED"), *format);
  if (state != "SUCCEEDED") {
    return PrintError(cmd, absl::StrCat("Job [", id, "] ended in state ", state,
                                        final_job->contains("errorMessage")
                                            ? absl::StrCat(": ", final_job->value("errorMessage", ""))
                                            : std::string()));
  }
  return 0;
}

void AddSubmitTraining(CLI::App* submit, Context& ctx) {
  auto state = std::make_shared<SubmitState>();
  CLI::App* t = submit->add_subcommand(
      "training",
      "Submit an AI Platform Training job.\n\n"
      "Builds the trainer package (--package-path), uploads local packages to\n"
      "--staging-bucket (or --job-dir/packages), then creates the job from the\n"
      "flags and the --config file. Arguments after `--` are passed to the trainer.");
  Usage(t, "mlengine jobs submit training JOB [FLAGS] [-- USER_ARGS...]");
  MoreHelp(t, 
      "\nEXAMPLES\n"
      "  Build ./trainer into a package, stage it and run trainer.task:\n"
      "    mlengine jobs submit training my_job_1 --package-path ./trainer \\\n"
      "        --module-name trainer.task --staging-bucket gs://my-bucket \\\n"
      "        --region us-central1 --runtime-version pytorch-1.13-cpu --python-version 3.11 \\\n"
      "        -- --epochs 5\n\n"
      "  A custom cluster from a config file, with flags overriding it:\n"
      "    mlengine jobs submit training my_job_2 --config config.yaml \\\n"
      "        --packages gs://my-bucket/pkgs/trainer-0.1.tar.gz --module-name trainer.task\n\n"
      "  config.yaml holds a Job (jobId, labels, trainingInput), e.g.:\n"
      "    trainingInput:\n"
      "      scaleTier: CUSTOM\n"
      "      masterType: n1-highcpu-16\n"
      "      workerType: n1-highcpu-16\n"
      "      workerCount: 4\n");
  SubmitFlags& f = state->flags;
  t->add_option("JOB", f.job_id, "Name of the job (letters, digits and underscores; starts with a letter)")
      ->required();
  t->add_option("USER_ARGS", f.user_args, "Arguments passed to the trainer (after `--`)");
  AddOptional(t, "--package-path", &state->package_path,
              "Local directory of the Python package to build (must contain __init__.py); built with "
              "setuptools using its parent directory (and the parent's setup.py, if any)");
  AddOptional(t, "--module-name", &f.module_name, "Python module to run after installing the packages, e.g. trainer.task");
  AddOptional(t, "--packages", &state->packages,
              "Comma-separated extra packages: local archives are uploaded, gs:// paths used as they are");
  AddOptional(t, "--staging-bucket", &state->staging_bucket,
              "Bucket (gs://BUCKET) where local packages are staged, under JOB/<sha256>/");
  AddOptional(t, "--job-dir", &f.job_dir,
              "gs:// directory for the job's outputs; passed to the trainer as --job-dir, and packages are "
              "staged under it (JOB_DIR/packages) when --staging-bucket is not given");
  AddOptional(t, "--config", &state->config,
              "YAML or JSON file holding a Job resource (jobId, labels, trainingInput: ...); flags override it");
  AddOptional(t, "--region", &f.region, "Region to run the job in, e.g. us-central1");
  AddOptional(t, "--runtime-version", &f.runtime_version,
              "Runtime version: one this cluster runs (the default configuration has pytorch-1.13-cpu), or AI "
              "Platform's names such as 2.11 where the operator configured them");
  AddOptional(t, "--python-version", &f.python_version, "Python version of the runtime, e.g. 3.7");
  AddOptional(t, "--scale-tier", &f.scale_tier,
              absl::StrCat("Machine tier: ", absl::StrJoin(ScaleTierChoices(), ", "),
                           " (custom needs --master-machine-type)"));
  const std::string accel_help = absl::StrCat("Accelerators as type=TYPE,count=N; TYPE is one of ",
                                              absl::StrJoin(AcceleratorChoices(), ", "));
  AddOptional(t, "--master-machine-type", &f.master_machine_type, "Machine type of the master (scale tier custom)");
  AddOptional(t, "--master-accelerator", &f.master_accelerator, absl::StrCat(accel_help, " (master)"));
  AddOptional(t, "--master-image-uri", &f.master_image_uri, "Container image of the master (custom container job)");
  AddOptional(t, "--worker-machine-type", &f.worker_machine_type, "Machine type of the workers (with --worker-count)");
  t->add_option("--worker-count", state->worker_count, "Number of workers (with --worker-machine-type)")
      ->type_name(ValueName("--worker-count"));
  AddOptional(t, "--worker-accelerator", &f.worker_accelerator, absl::StrCat(accel_help, " (each worker)"));
  AddOptional(t, "--worker-image-uri", &f.worker_image_uri, "Container image of the workers");
  AddOptional(t, "--parameter-server-machine-type", &f.parameter_server_machine_type,
              "Machine type of the parameter servers (with --parameter-server-count)");
  t->add_option("--parameter-server-count", state->ps_count,
                "Number of parameter servers (with --parameter-server-machine-type)")
      ->type_name(ValueName("--parameter-server-count"));
  AddOptional(t, "--parameter-server-accelerator", &f.parameter_server_accelerator,
              absl::StrCat(accel_help, " (each parameter server)"));
  AddOptional(t, "--parameter-server-image-uri", &f.parameter_server_image_uri, "Container image of the parameter servers");
  AddOptional(t, "--tpu-tf-version", &f.tpu_tf_version,
              "TensorFlow version for the TPU worker of a custom container job (workerConfig.tpuTfVersion)");
  AddOptional(t, "--labels", &f.labels, "Labels as KEY=VALUE,KEY2=VALUE2 (added to those of --config)");
  AddOptional(t, "--use-chief-in-tf-config", &f.use_chief_in_tf_config,
              "true: TF_CONFIG names the primary replica \"chief\" instead of \"master\" (custom containers)");
  AddOptional(t, "--service-account", &f.service_account, "Service account the job runs as");
  AddOptional(t, "--network", &f.network,
              "VPC network of the job (projects/P/global/networks/N); recorded: replicas reach what this "
              "cluster's hosts reach");
  t->add_flag("--enable-web-access", f.enable_web_access,
              "Interactive shells into the replicas (trainingInput.enableWebAccess): not served here; the server "
              "refuses the job saying so");
  AddOptional(t, "--kms-key", &f.kms_key,
              "Cloud KMS key for the job's data (encryptionConfig.kmsKeyName): no KMS here; the server refuses "
              "the job saying so");
  AddOptional(t, "--kms-keyring", &f.kms_keyring, "Key ring of --kms-key given as an id");
  AddOptional(t, "--kms-location", &f.kms_location, "Location of --kms-key given as an id");
  AddOptional(t, "--kms-project", &f.kms_project, "Project of --kms-key given as an id (default: the job's)");
  t->add_flag("--stream-logs", state->stream_logs,
              "Wait for the job, streaming its logs; exit 0 only if it SUCCEEDED");
  t->add_flag("--async", state->async, "Return at once after submitting (the default; kept for gcloud scripts)");
  t->callback([&ctx, state] {
    if (ctx.trainer_args) state->flags.user_args = *ctx.trainer_args;
    ctx.exit_code = RunSubmit(ctx, *state);
  });
}

// ---------------------------------------------------------------- others

void AddDescribe(CLI::App* jobs, Context& ctx) {
  auto job_id = std::make_shared<std::string>();
  CLI::App* c = jobs->add_subcommand("describe", "Show a job: its spec, state, times and error message");
  Usage(c, "mlengine jobs describe JOB [--format FORMAT]");
  c->add_option("JOB", *job_id, "Name of the job")->required();
  c->callback([&ctx, job_id] {
    const std::string cmd = "jobs.describe";
    auto format = ParseFormat(ctx.format);
    if (!format.ok()) return void(ctx.exit_code = PrintError(cmd, format.status()));
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    auto job = (*client)->GetJob(*job_id);
    if (!job.ok()) return void(ctx.exit_code = PrintError(cmd, job.status()));
    PrintResource(*job, *format);
  });
}

struct ListState {
  std::string filter;
  int limit = 0;
  int page_size = 0;
};

void AddList(CLI::App* jobs, Context& ctx) {
  auto state = std::make_shared<ListState>();
  CLI::App* c = jobs->add_subcommand("list", "List the project's jobs (newest first): JOB_ID, STATUS, CREATED");
  Usage(c, "mlengine jobs list [--filter EXPR] [--limit N] [--page-size N] [--format FORMAT]");
  MoreHelp(c, 
      "\nEXAMPLES\n"
      "  mlengine jobs list --filter 'jobId:census*'\n"
      "  mlengine jobs list --filter 'state:FAILED' --limit 10\n");
  c->add_option("--filter", state->filter,
                "Server-side filter, e.g. 'jobId:census*' or 'jobId:rnn* AND state:FAILED'")
      ->type_name(ValueName("--filter"));
  c->add_option("--limit", state->limit, "Show at most this many jobs")->check(CLI::Range(1, 1000000).description(""))
      ->type_name(ValueName("--limit"));
  c->add_option("--page-size", state->page_size, "Jobs fetched per request (the server allows at most 100)")
      ->check(CLI::Range(1, 1000000).description(""))
      ->type_name(ValueName("--page-size"));
  c->callback([&ctx, state] {
    const std::string cmd = "jobs.list";
    auto format = ParseFormat(ctx.format);
    if (!format.ok()) return void(ctx.exit_code = PrintError(cmd, format.status()));
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    json all = json::array();
    std::string token;
    do {
      int page = state->page_size;
      if (state->limit > 0) {
        int left = state->limit - static_cast<int>(all.size());
        if (page == 0 || page > left) page = std::min(left, 100);
      }
      auto reply = (*client)->ListJobs(state->filter, page, token);
      if (!reply.ok()) return void(ctx.exit_code = PrintError(cmd, reply.status()));
      if (reply->contains("jobs") && (*reply)["jobs"].is_array()) {
        for (auto& j : (*reply)["jobs"]) {
          if (state->limit > 0 && static_cast<int>(all.size()) >= state->limit) break;
          all.push_back(j);
        }
      }
      token = reply->value("nextPageToken", "");
    } while (!token.empty() && (state->limit == 0 || static_cast<int>(all.size()) < state->limit));
    if (*format != Format::kDefault) {
      PrintList(std::vector<json>(all.begin(), all.end()), *format);
    } else if (all.empty()) {
      std::fprintf(stderr, "Listed 0 items.\n");
    } else {
      std::vector<std::vector<std::string>> rows = {{"JOB_ID", "STATUS", "CREATED"}};
      for (const auto& j : all) rows.push_back({j.value("jobId", ""), j.value("state", ""), j.value("createTime", "")});
      std::cout << Table(rows);
    }
    std::cout << std::flush;
  });
}

void AddCancel(CLI::App* jobs, Context& ctx) {
  auto job_id = std::make_shared<std::string>();
  CLI::App* c = jobs->add_subcommand(
      "cancel",
      "Cancel a queued or running job (it goes to CANCELLING, then CANCELLED); a job that has ended is refused "
      "(FAILED_PRECONDITION, exit 1) and left as it is");
  Usage(c, "mlengine jobs cancel JOB");
  c->add_option("JOB", *job_id, "Name of the job")->required();
  c->callback([&ctx, job_id] {
    const std::string cmd = "jobs.cancel";
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    auto reply = (*client)->CancelJob(*job_id);
    if (!reply.ok()) return void(ctx.exit_code = PrintError(cmd, reply.status()));
    std::fprintf(stderr, "Cancelled job [%s].\n", job_id->c_str());
  });
}

struct UpdateState {
  std::string job_id;
  std::optional<std::string> update_labels;
  std::optional<std::string> remove_labels;
  bool clear_labels = false;
};

void AddUpdate(CLI::App* jobs, Context& ctx) {
  auto state = std::make_shared<UpdateState>();
  CLI::App* c = jobs->add_subcommand("update", "Change a job's labels");
  Usage(c, "mlengine jobs update JOB [--update-labels K=V,...] [--remove-labels K,...] [--clear-labels]");
  MoreHelp(c, 
      "\nLabels are cleared first (--clear-labels), then removed (--remove-labels), then\n"
      "added or changed (--update-labels).\n\nEXAMPLE\n"
      "  mlengine jobs update my_job --update-labels team=vision,env=dev --remove-labels old\n");
  c->add_option("JOB", state->job_id, "Name of the job")->required();
  AddOptional(c, "--update-labels", &state->update_labels, "Labels to add or change, as KEY=VALUE,KEY2=VALUE2");
  auto* remove = AddOptional(c, "--remove-labels", &state->remove_labels, "Label keys to remove, as KEY,KEY2");
  c->add_flag("--clear-labels", state->clear_labels, "Remove every label")->excludes(remove);
  c->callback([&ctx, state] {
    const std::string cmd = "jobs.update";
    if (!state->update_labels && !state->remove_labels && !state->clear_labels) {
      ctx.exit_code = PrintError(cmd, "give at least one of --update-labels, --remove-labels, --clear-labels");
      return;
    }
    std::map<std::string, std::string> updates;
    if (state->update_labels) {
      auto parsed = ParseLabels("--update-labels", *state->update_labels);
      if (!parsed.ok()) return void(ctx.exit_code = PrintError(cmd, parsed.status()));
      updates = *parsed;
    }
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    auto job = (*client)->GetJob(state->job_id);
    if (!job.ok()) return void(ctx.exit_code = PrintError(cmd, job.status()));
    json old_labels = job->contains("labels") && (*job)["labels"].is_object() ? (*job)["labels"] : json::object();
    json labels = state->clear_labels ? json::object() : old_labels;
    if (state->remove_labels) {
      for (const auto& k : ParseKeyList(*state->remove_labels)) labels.erase(k);
    }
    for (const auto& [k, v] : updates) labels[k] = v;
    if (labels == old_labels) {
      std::fprintf(stderr, "No update to perform.\n");
      return;
    }
    json body = {{"labels", labels}};
    if (job->contains("etag")) body["etag"] = (*job)["etag"];
    auto patched = (*client)->PatchJob(state->job_id, body, "labels");
    if (!patched.ok()) return void(ctx.exit_code = PrintError(cmd, patched.status()));
    std::fprintf(stderr, "Updated job [%s].\n", state->job_id.c_str());
  });
}

struct StreamState {
  std::string job_id;
  StreamLogsOptions options;
};

void AddStreamLogs(CLI::App* jobs, Context& ctx) {
  auto state = std::make_shared<StreamState>();
  CLI::App* c = jobs->add_subcommand(
      "stream-logs",
      "Print a job's log lines (\"TIMESTAMP TASK_NAME MESSAGE\", from every replica's stdout and stderr)\n"
      "and follow new ones until the job ends. A hyperparameter tuning job's lines are its trials',\n"
      "each marked with its trial (\"TIMESTAMP TASK_NAME trial=ID MESSAGE\")");
  Usage(c, "mlengine jobs stream-logs JOB [--task-name NAME] [--trial ID] [--polling-interval S] [--since-now]");
  c->add_option("JOB", state->job_id, "Name of the job")->required();
  c->add_option("--task-name", state->options.task_name,
                "Only this replica's lines, e.g. master-replica-0, worker-replica-1, ps-replica-0")
      ->type_name(ValueName("--task-name"));
  c->add_option("--trial", state->options.trial_id, "A hyperparameter tuning job's: only this trial's lines, e.g. 3")
      ->type_name(ValueName("--trial"));
  c->add_option("--polling-interval", state->options.polling_interval_s,
                "Accepted for gcloud's scripts; used only with a server that cannot stream logs: the longest\n"
                "wait in seconds for new lines per request (1-30). Lines are otherwise printed as they are written")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600).description(""))
      ->type_name(ValueName("--polling-interval"));
  c->add_flag("--since-now", state->options.since_now, "Skip the lines written so far; print only new ones");
  c->callback([&ctx, state] {
    const std::string cmd = "jobs.stream-logs";
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError(cmd, client.status()));
    if (auto s = StreamLogs(**client, state->job_id, state->options, stdout); !s.ok()) {
      ctx.exit_code = PrintError(cmd, s);
    }
  });
}

}  // namespace

void AddJobsCommands(CLI::App& app, Context& ctx) {
  CLI::App* jobs = app.add_subcommand("jobs", "Submit and manage training jobs");
  jobs->require_subcommand(1);
  CLI::App* submit = jobs->add_subcommand("submit", "Submit a job");
  submit->require_subcommand(1);
  AddSubmitTraining(submit, ctx);
  AddDescribe(jobs, ctx);
  AddList(jobs, ctx);
  AddCancel(jobs, ctx);
  AddUpdate(jobs, ctx);
  AddStreamLogs(jobs, ctx);
}

}  // namespace mle::cli
