// Access in the gcloud spirit:
//   mlengine projects get-iam-policy|add-iam-policy-binding|remove-iam-policy-binding PROJECT
//   mlengine services identity create --service=tpu.googleapis.com [--project=P]
//   mlengine iam service-accounts create|list|delete
//   mlengine auth activate-service-account|login|list|revoke
//   mlengine auth print-access-token [--impersonate-service-account=EMAIL]
//   mlengine admin users create|list|delete|create-token   (the operator's)
//   mlengine admin quotas describe|set FILE|reset; mlengine projects describe-quotas
//   mlengine admin usage [--start=DATE] [--end=DATE] [--by=project,user] [--project=P]
//   mlengine webhooks create --url=URL [--states=S,...] | list | describe ID | delete ID   (a project's owners)
// Each is one or two REST calls; policy edits are read-modify-write with the
// policy's etag, retried when another change came between (409 ABORTED).

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/schema.h"
#include "common/time_format.h"

namespace mle::cli {
namespace {

using nlohmann::json;


struct IamArgs {
  std::string project;  // positional PROJECT (default: the connection's)
  std::string member;
  std::string role;
  std::string name;
  std::string display_name;
  std::string description;
  std::string service;
  std::string impersonate;
  std::string lifetime;
  std::string file;
};

// A --lifetime as the server takes it (whole seconds, "3600s"), from what a
// person types: 3600s, 60m, 12h (absl::ParseDuration), 30d, or 3600; at
// most `max` (`max_text` says it to a person).
absl::StatusOr<std::string> LifetimeSeconds(const std::string& flag, absl::Duration max, const char* max_text) {
  std::string v(absl::StripAsciiWhitespace(flag));
  int64_t n = 0;
  if (absl::SimpleAtoi(v, &n)) {
    v += "s";
  } else if (absl::EndsWith(v, "d") && absl::SimpleAtoi(v.substr(0, v.size() - 1), &n)) {
    v = absl::StrCat(n * 24, "h");  // absl has no days
  }
  absl::Duration d;
  if (!absl::ParseDuration(v, &d) || d < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lifetime=", flag, ": give a duration such as 3600s, 60m, 12h or 30d"));
  }
  if (d > max) return absl::InvalidArgumentError(absl::StrCat("--lifetime=", flag, ": ", max_text));
  return absl::StrCat(absl::ToInt64Seconds(d), "s");
}


// Runs `body` with a client, printing errors as mlengine.COMMAND.
template <class F>
void Run(Context& ctx, const std::string& command, F body) {
  auto client = ctx.GetClient();
  if (!client.ok()) return void(ctx.exit_code = PrintError(command, client.status()));
  auto format = ParseFormat(ctx.format);
  if (!format.ok()) return void(ctx.exit_code = PrintError(command, format.status()));
  if (auto s = body(**client, *format); !s.ok()) ctx.exit_code = PrintError(command, s);
}

// A date (2026-11-01, midnight UTC) or an RFC 3339 time, as RFC 3339.
absl::StatusOr<std::string> TimeArgument(const std::string& flag, const std::string& value) {
  absl::Time day;
  std::string err;
  if (absl::ParseTime("%Y-%m-%d", value, absl::UTCTimeZone(), &day, &err)) return common::FormatRfc3339(day);
  if (auto t = common::ParseRfc3339(value)) return common::FormatRfc3339(*t);
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": expected a date (2026-11-01, midnight UTC) or a time in RFC 3339 "
                   "(2026-11-01T08:00:00Z)"));
}

std::string Hours(const json& row, const char* key) {
  return absl::StrFormat("%.2f", row.value(key, 0.0));
}

struct UsageArgs {
  std::string start;
  std::string end;
  std::string by = "project";
  std::string project;
};

void AddUsageCommand(CLI::App* admin, Context& ctx) {
  auto args = std::make_shared<UsageArgs>();
  CLI::App* usage = admin->add_subcommand(
      "usage", "What jobs used, per project and/or user: ML units, CPU, GPU and TPU-core hours, hours waited");
  Usage(usage, "mlengine admin usage [--start=DATE] [--end=DATE] [--by=project,user] [--project=PROJECT]");
  MoreHelp(usage,
           "\nCounts every attempt of every job (a tuning job's trials included) for the time it ran within\n"
           "the period, and each job's wait from its creation to its start. ML units are\n"
           "trainingOutput.consumedMLUnits' (one unit: one hour of scale tier BASIC); CPU hours are what\n"
           "the cluster set aside for the replicas. The formula and its rates: docs/operations.md,\n"
           "\"Usage accounting\".\n"
           "\nExamples:\n"
           "  mlengine admin usage --start=2026-11-01 --end=2026-12-01\n"
           "  mlengine admin usage --by=user --project=my-project --format=json\n");
  usage->add_option("--start", args->start, "From this date or time (default: the beginning)");
  usage->add_option("--end", args->end, "Until this date or time, not included (default: now)");
  usage->add_option("--by", args->by, "Group by project, user, project,user or none")
      ->default_str("project");
  usage->add_option("--project", args->project, "Only this project's jobs");
  usage->callback([&ctx, args] {
    Run(ctx, "admin.usage", [&](Client& c, Format f) -> absl::Status {
      Query q;
      for (const auto& [flag, value, param] : {std::tuple<const char*, std::string, const char*>{"start", args->start, "startTime"},
                                               {"end", args->end, "endTime"}}) {
        if (value.empty()) continue;
        auto t = TimeArgument(flag, value);
        if (!t.ok()) return t.status();
        q.push_back({param, *t});
      }
      q.push_back({"groupBy", args->by});
      if (!args->project.empty()) q.push_back({"project", args->project});
      auto r = c.Call("GET", "/mlengine/v1/usage", q);
      if (!r.ok()) return r.status();
      if (f != Format::kDefault) return PrintResource(*r, f), absl::OkStatus();
      const bool by_project = absl::StrContains(args->by, "project");
      const bool by_user = absl::StrContains(args->by, "user");
      std::vector<std::string> header;
      if (by_project) header.push_back("PROJECT");
      if (by_user) header.push_back("USER");
      for (const char* h : {"JOBS", "ML UNITS", "CPU HOURS", "GPU HOURS", "TPU CORE HOURS", "RUN HOURS", "QUEUE HOURS"}) {
        header.push_back(h);
      }
      std::vector<std::vector<std::string>> rows = {header};
      auto add = [&](const json& row, const std::string& project, const std::string& user) {
        std::vector<std::string> cells;
        if (by_project) cells.push_back(project);
        if (by_user) cells.push_back(user);
        cells.push_back(std::to_string(row.value("jobs", int64_t{0})));
        for (const char* key : {"mlUnits", "cpuHours", "gpuHours", "tpuCoreHours", "runHours", "queueHours"}) {
          cells.push_back(Hours(row, key));
        }
        rows.push_back(std::move(cells));
      };
      for (const auto& row : r->value("rows", json::array())) add(row, row.value("project", ""), row.value("user", ""));
      if (by_project || by_user) add(r->value("total", json::object()), by_project ? "TOTAL" : "", by_project ? "" : "TOTAL");
      std::cout << "Usage from " << r->value("startTime", std::string("the beginning")) << " until "
                << r->value("endTime", std::string("now")) << ":\n"
                << Table(rows);
      return absl::OkStatus();
    });
  });
}

struct WebhookArgs {
  std::string url;
  std::vector<std::string> states;
  std::string description;
  std::string id;
};

void AddWebhookCommands(CLI::App& app, Context& ctx) {
  CLI::App* hooks = app.add_subcommand("webhooks", "URLs told of every state change of the project's jobs (its owners')");
  hooks->require_subcommand(1);
  MoreHelp(hooks,
           "\nEach change is POSTed as JSON, signed with the webhook's secret (header X-Mlengine-Signature:\n"
           "t=UNIX_SECONDS,v1=HMAC-SHA256(secret, \"UNIX_SECONDS.\" + body), in hex). A delivery that fails\n"
           "is tried again (1 s, doubling to 10 min, for a day); the later ones wait behind it.\n"
           "docs/notifications.md says what is sent and how to check the signature.\n");
  auto args = std::make_shared<WebhookArgs>();
  auto path = [](Client& c) { return absl::StrCat("/mlengine/v1/projects/", c.connection().project, "/webhooks"); };
  CLI::App* create = hooks->add_subcommand("create", "Register a URL; prints its secret, shown this once");
  Usage(create, "mlengine webhooks create --url=URL [--states=SUCCEEDED,FAILED] [--description=TEXT]");
  create->add_option("--url", args->url, "Where to POST each event (http:// or https://)")->required();
  create->add_option("--states", args->states, "Only changes into these states (default: every change)")
      ->delimiter(',');
  create->add_option("--description", args->description, "What it is for");
  create->callback([&ctx, args, path] {
    Run(ctx, "webhooks.create", [&](Client& c, Format f) -> absl::Status {
      json body = {{"url", args->url}};
      if (!args->states.empty()) body["states"] = args->states;
      if (!args->description.empty()) body["description"] = args->description;
      auto made = c.Call("POST", path(c), {}, body);
      if (!made.ok()) return made.status();
      if (f != Format::kDefault) return PrintResource(*made, f), absl::OkStatus();
      std::cerr << "Created " << made->value("name", "") << ". Its secret (shown only now; keep it to check each "
                << "delivery's X-Mlengine-Signature):\n";
      std::cout << made->value("secret", "") << "\n";
      return absl::OkStatus();
    });
  });
  CLI::App* list = hooks->add_subcommand("list", "The project's webhooks and how their deliveries go");
  list->callback([&ctx, path] {
    Run(ctx, "webhooks.list", [&](Client& c, Format f) -> absl::Status {
      auto r = c.Call("GET", path(c));
      if (!r.ok()) return r.status();
      const json hooks = r->value("webhooks", json::array());
      if (f != Format::kDefault) return PrintResource(hooks, f), absl::OkStatus();
      std::vector<std::vector<std::string>> rows = {{"ID", "URL", "STATES", "PENDING", "LAST ERROR"}};
      for (const auto& h : hooks) {
        const json status = h.value("status", json::object());
        std::vector<std::string> states = h.value("states", std::vector<std::string>{});
        rows.push_back({h.value("name", "").substr(h.value("name", "").rfind('/') + 1), h.value("url", ""),
                        states.empty() ? "(all)" : absl::StrJoin(states, ","),
                        std::to_string(status.value("pendingDeliveries", int64_t{0})), status.value("lastError", "")});
      }
      std::cout << Table(rows);
      return absl::OkStatus();
    });
  });
  CLI::App* describe = hooks->add_subcommand("describe", "One webhook, with its deliveries' status");
  describe->add_option("ID", args->id, "The webhook's id (wh-...)")->required();
  describe->callback([&ctx, args, path] {
    Run(ctx, "webhooks.describe", [&](Client& c, Format f) -> absl::Status {
      auto r = c.Call("GET", absl::StrCat(path(c), "/", args->id));
      if (!r.ok()) return r.status();
      PrintResource(*r, f);
      return absl::OkStatus();
    });
  });
  CLI::App* remove = hooks->add_subcommand("delete", "Delete a webhook and what it is still owed");
  remove->add_option("ID", args->id, "The webhook's id (wh-...)")->required();
  remove->callback([&ctx, args, path] {
    Run(ctx, "webhooks.delete", [&](Client& c, Format) -> absl::Status {
      auto r = c.Call("DELETE", absl::StrCat(path(c), "/", args->id));
      if (!r.ok()) return r.status();
      std::cerr << "Deleted webhook " << args->id << ".\n";
      return absl::OkStatus();
    });
  });
}

std::string ProjectOf(const IamArgs& a, Client& client) {
  return a.project.empty() ? client.connection().project : a.project;
}

// Adds (add=true) or removes a member of a role in the project's policy.
absl::StatusOr<json> EditBinding(Client& client, const std::string& project, const std::string& member,
                                 const std::string& role, bool add) {
  for (int attempt = 0;; ++attempt) {
    auto policy = client.Call("POST", absl::StrCat("/v1/projects/", project, ":getIamPolicy"), {}, json::object());
    if (!policy.ok()) return policy.status();
    json bindings = policy->value("bindings", json::array());
    bool role_found = false, member_found = false;
    for (auto& b : bindings) {
      if (b.value("role", "") != role) continue;
      role_found = true;
      auto& members = b["members"];
      auto it = std::find(members.begin(), members.end(), member);
      member_found = it != members.end();
      if (add && !member_found) members.push_back(member);
      if (!add && member_found) members.erase(it);
    }
    if (!role_found && add) bindings.push_back({{"role", role}, {"members", {member}}});
    if (!member_found && !add) {
      return absl::NotFoundError(absl::StrCat("Policy binding with the specified principal, role, and condition not "
                                              "found: ", member, " does not hold ", role, " on project ", project,
                                              "."));
    }
    json kept = json::array();
    for (auto& b : bindings) {
      if (!b["members"].empty()) kept.push_back(b);
    }
    auto set = client.Call("POST", absl::StrCat("/v1/projects/", project, ":setIamPolicy"), {},
                           json{{"policy", {{"bindings", kept}, {"etag", (*policy)["etag"]}}}});
    if (set.ok() || set.status().code() != absl::StatusCode::kAborted || attempt == 4) return set;
  }
}


}  // namespace

// Writes `text` to `path` readable by its owner alone (a token): a temporary
// file of mode 0600 renamed into place.
absl::Status WritePrivateFile(const std::string& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create the directory of ", path, ": ", ec.message()));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", tmp));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = written ? errno : saved;
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

void AddIamCommands(CLI::App& app, Context& ctx) {
  AddWebhookCommands(app, ctx);
  // ---- projects ----
  CLI::App* projects = app.add_subcommand("projects", "Read and change who may do what in a project (IAM policy)");
  projects->require_subcommand(1);
  MoreHelp(projects,
           "\nRoles: roles/owner, roles/editor, roles/viewer, roles/ml.admin, roles/ml.developer,\n"
           "roles/ml.viewer, roles/ml.serviceAgent, roles/iam.serviceAccountTokenCreator,\n"
           "roles/iam.serviceAccountUser, roles/storage.admin, roles/storage.objectAdmin,\n"
           "roles/storage.objectViewer. Members: user:EMAIL, serviceAccount:EMAIL.\n");
  auto get_args = std::make_shared<IamArgs>();
  CLI::App* get = projects->add_subcommand("get-iam-policy", "Show the project's IAM policy");
  Usage(get, "mlengine projects get-iam-policy PROJECT");
  get->add_option("PROJECT", get_args->project, "The project (default: --project)");
  get->callback([&ctx, get_args] {
    Run(ctx, "projects.get-iam-policy", [&](Client& c, Format f) -> absl::Status {
      auto policy = c.Call("POST", absl::StrCat("/v1/projects/", ProjectOf(*get_args, c), ":getIamPolicy"), {},
                           json::object());
      if (!policy.ok()) return policy.status();
      PrintResource(*policy, f);
      return absl::OkStatus();
    });
  });
  for (bool add : {true, false}) {
    auto args = std::make_shared<IamArgs>();
    const std::string name = add ? "add-iam-policy-binding" : "remove-iam-policy-binding";
    CLI::App* cmd = projects->add_subcommand(
        name, add ? "Grant a role to a member on the project" : "Revoke a member's role on the project");
    Usage(cmd, absl::StrCat("mlengine projects ", name, " PROJECT --member=MEMBER --role=ROLE"));
    MoreHelp(cmd, add ? "\nEXAMPLE (the TPU guide's access step)\n"
                        "  mlengine projects add-iam-policy-binding my-project \\\n"
                        "    --member=serviceAccount:service-123@cloud-tpu.mlengine.iam.local \\\n"
                        "    --role=roles/ml.serviceAgent\n"
                      : "");
    cmd->add_option("PROJECT", args->project, "The project (default: --project)");
    cmd->add_option("--member", args->member, "user:EMAIL or serviceAccount:EMAIL")->required();
    cmd->add_option("--role", args->role, "e.g. roles/ml.developer")->required();
    cmd->callback([&ctx, args, add, name] {
      Run(ctx, "projects." + name, [&](Client& c, Format f) -> absl::Status {
        auto policy = EditBinding(c, ProjectOf(*args, c), args->member, args->role, add);
        if (!policy.ok()) return policy.status();
        std::cerr << "Updated IAM policy for project ["
                  << ProjectOf(*args, c) << "].\n";
        PrintResource(*policy, f);
        return absl::OkStatus();
      });
    });
  }

  auto q_args = std::make_shared<IamArgs>();
  CLI::App* describe_quotas =
      projects->add_subcommand("describe-quotas", "Show the project's quotas and fair-share weight");
  Usage(describe_quotas, "mlengine projects describe-quotas [PROJECT]");
  describe_quotas->add_option("PROJECT", q_args->project, "The project (default: --project)");
  describe_quotas->callback([&ctx, q_args] {
    Run(ctx, "projects.describe-quotas", [&](Client& c, Format f) -> absl::Status {
      auto q = c.Call("GET", absl::StrCat("/mlengine/v1/projects/", ProjectOf(*q_args, c), "/quotas"));
      if (!q.ok()) return q.status();
      PrintResource(*q, f);
      return absl::OkStatus();
    });
  });

  // ---- services identity create ----
  CLI::App* services = app.add_subcommand("services", "Service identities (the TPU guide's service account)");
  services->require_subcommand(1);
  CLI::App* identity = services->add_subcommand("identity", "A service's identity in a project");
  identity->require_subcommand(1);
  auto id_args = std::make_shared<IamArgs>();
  CLI::App* create_identity = identity->add_subcommand("create", "Create (or show) the project's identity of a service");
  Usage(create_identity, "mlengine services identity create --service=tpu.googleapis.com [--project=PROJECT]");
  create_identity->add_option("--service", id_args->service, "tpu.googleapis.com")->required();
  create_identity->callback([&ctx, id_args] {
    Run(ctx, "services.identity.create", [&](Client& c, Format f) -> absl::Status {
      auto op = c.Call("POST",
                       absl::StrCat("/v1beta1/projects/", c.connection().project, "/services/", id_args->service,
                                    ":generateServiceIdentity"),
                       {}, json::object());
      if (!op.ok()) return op.status();
      const json identity = op->value("response", json::object());
      std::cerr << "Service identity created: " << identity.value("email", "") << "\n";
      if (f != Format::kDefault) PrintResource(identity, f);
      return absl::OkStatus();
    });
  });

  // ---- iam service-accounts ----
  CLI::App* iam = app.add_subcommand("iam", "Service accounts of a project");
  iam->require_subcommand(1);
  CLI::App* accounts = iam->add_subcommand("service-accounts", "Create, list and delete service accounts");
  accounts->require_subcommand(1);
  auto sa_args = std::make_shared<IamArgs>();
  CLI::App* sa_create = accounts->add_subcommand("create", "Create a service account NAME@PROJECT.iam.mlengine.local");
  Usage(sa_create, "mlengine iam service-accounts create NAME [--display-name=TEXT] [--description=TEXT]");
  sa_create->add_option("NAME", sa_args->name, "6-30 lowercase letters, digits, hyphens")->required();
  sa_create->add_option("--display-name", sa_args->display_name, "A name for people");
  sa_create->add_option("--description", sa_args->description, "What it is for");
  sa_create->callback([&ctx, sa_args] {
    Run(ctx, "iam.service-accounts.create", [&](Client& c, Format f) -> absl::Status {
      json sa = json::object();
      if (!sa_args->display_name.empty()) sa["displayName"] = sa_args->display_name;
      if (!sa_args->description.empty()) sa["description"] = sa_args->description;
      auto created = c.Call("POST", absl::StrCat("/v1/projects/", c.connection().project, "/serviceAccounts"), {},
                            json{{"accountId", sa_args->name}, {"serviceAccount", sa}});
      if (!created.ok()) return created.status();
      std::cerr << "Created service account [" << created->value("email", "") << "].\n";
      if (f != Format::kDefault) PrintResource(*created, f);
      return absl::OkStatus();
    });
  });
  CLI::App* sa_list = accounts->add_subcommand("list", "List the project's service accounts");
  sa_list->callback([&ctx] {
    Run(ctx, "iam.service-accounts.list", [&](Client& c, Format f) -> absl::Status {
      json all = json::array();
      std::string token;
      do {
        Query q;
        if (!token.empty()) q.push_back({"pageToken", token});
        auto page = c.Call("GET", absl::StrCat("/v1/projects/", c.connection().project, "/serviceAccounts"), q);
        if (!page.ok()) return page.status();
        for (auto& a : page->value("accounts", json::array())) all.push_back(a);
        token = page->value("nextPageToken", "");
      } while (!token.empty());
      if (f != Format::kDefault) {
        PrintResource(all, f);
      } else {
        std::vector<std::vector<std::string>> rows = {{"DISPLAY NAME", "EMAIL", "DISABLED"}};
        for (const auto& a : all) {
          rows.push_back({a.value("displayName", ""), a.value("email", ""), a.value("disabled", false) ? "True" : "False"});
        }
        std::cout << Table(rows);
      }
      return absl::OkStatus();
    });
  });
  auto del_args = std::make_shared<IamArgs>();
  CLI::App* sa_delete = accounts->add_subcommand("delete", "Delete a service account (its tokens die with it)");
  sa_delete->add_option("EMAIL", del_args->name, "The account's email")->required();
  sa_delete->callback([&ctx, del_args] {
    Run(ctx, "iam.service-accounts.delete", [&](Client& c, Format) -> absl::Status {
      auto r = c.Call("DELETE", absl::StrCat("/v1/projects/-/serviceAccounts/", del_args->name));
      if (!r.ok()) return r.status();
      std::cerr << "Deleted service account [" << del_args->name << "].\n";
      return absl::OkStatus();
    });
  });

  // ---- auth: the credential this CLI sends ----
  CLI::App* auth = app.add_subcommand("auth", "The credential this CLI sends, and tokens");
  auth->require_subcommand(1);
  MoreHelp(auth,
           "\nThe active credential (auth activate-service-account, auth login) is kept in\n"
           "${XDG_CONFIG_HOME:-~/.config}/mlengine/credentials.json (mode 0600). --token,\n"
           "--token-file and MLENGINE_TOKEN still win over it; it wins over MLENGINE_CONFIG's token.\n");
  for (const bool service_account : {true, false}) {
    auto a = std::make_shared<IamArgs>();
    const std::string name = service_account ? "activate-service-account" : "login";
    CLI::App* cmd = auth->add_subcommand(
        name, service_account ? "Send a service account's token from now on (a file with the token)"
                              : "Send a user's token from now on (a file with the token the operator gave)");
    Usage(cmd, absl::StrCat("mlengine auth ", name, " ACCOUNT --", service_account ? "key-file" : "token-file",
                            "=FILE"));
    cmd->add_option("ACCOUNT", a->name, service_account ? "The service account's email" : "Your email")
        ->required();
    cmd->add_option(service_account ? "--key-file" : "--token-file", a->file,
                    "A file holding the token (e.g. from auth print-access-token or admin users create-token)")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->callback([&ctx, a, name, service_account] {
      const std::string command = "auth." + name;
      auto status = [&]() -> absl::Status {
        std::ifstream in(a->file);
        std::string token;
        std::getline(in, token);
        token = std::string(absl::StripAsciiWhitespace(token));
        if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(a->file, " holds no token"));
        // The server says whose token it is: a token that is not valid, or
        // is someone else's, is not activated under this name.
        auto client = ctx.GetClient();
        if (!client.ok()) return client.status();
        Connection with = (*client)->connection();
        with.token = token;
        Client check(with);
        auto who = check.Call("GET", "/mlengine/v1/whoami");
        if (!who.ok()) {
          return absl::Status(who.status().code(),
                              absl::StrCat("the token in ", a->file, " was not accepted by ", with.endpoint, ": ",
                                           who.status().message(), " Nothing was activated."));
        }
        const std::string want = absl::StrCat(service_account ? "serviceAccount:" : "user:",
                                              absl::AsciiStrToLower(a->name));
        const std::string holder = who->value("principal", "");
        if (holder != want) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the token in ", a->file, " is ",
              who->value("operator", false) ? "the operator's" : absl::StrCat(holder, "'s"), ", not ", want,
              "'s. Nothing was activated: give ", name, " the account the token belongs to."));
        }
        const std::string path = CredentialsPath(ProcessEnv());
        if (path.empty()) return absl::FailedPreconditionError("neither XDG_CONFIG_HOME nor HOME is set");
        return WritePrivateFile(path, json{{"account", a->name}, {"token", token}}.dump(2) + "\n");
      }();
      if (!status.ok()) return void(ctx.exit_code = PrintError(command, status));
      std::cerr << "Activated credentials for [" << a->name << "].\n";
    });
  }
  CLI::App* list = auth->add_subcommand("list", "Show whose token this CLI sends");
  list->callback([&ctx] {
    auto client = ctx.GetClient();
    if (!client.ok()) return void(ctx.exit_code = PrintError("auth.list", client.status()));
    const Connection& c = (*client)->connection();
    if (!c.account.empty()) {
      std::cout << "active account: " << c.account << "\n";
    } else {
      std::cout << (c.token.empty() ? "no credential: requests go without a token\n"
                                    : "a token from --token, MLENGINE_TOKEN or a config file (no account recorded)\n");
    }
  });
  CLI::App* revoke = auth->add_subcommand("revoke", "Forget the active credential (the token itself stays valid)");
  revoke->callback([&ctx] {
    const std::string path = CredentialsPath(ProcessEnv());
    std::error_code ec;
    if (path.empty() || !std::filesystem::remove(path, ec)) {
      return void(ctx.exit_code = PrintError("auth.revoke", ec ? ec.message() : "no credential is active"));
    }
    std::cerr << "Forgot the active credential.\n";
  });
  auto tok_args = std::make_shared<IamArgs>();
  CLI::App* print = auth->add_subcommand("print-access-token", "Print the token this CLI sends, or one of a service account");
  Usage(print, "mlengine auth print-access-token [--impersonate-service-account=EMAIL] [--lifetime=3600s]");
  print->add_option("--impersonate-service-account", tok_args->impersonate,
                    "A short-lived token of this account (needs roles/iam.serviceAccountTokenCreator on it)");
  print->add_option("--lifetime", tok_args->lifetime,
                    "With --impersonate-service-account: 1s to 43200s (also as 60m or 12h)");
  print->callback([&ctx, tok_args] {
    Run(ctx, "auth.print-access-token", [&](Client& c, Format) -> absl::Status {
      if (tok_args->impersonate.empty()) {
        if (c.connection().token.empty()) {
          return absl::FailedPreconditionError(
              "no token is configured: sign in with `mlengine auth login EMAIL --token-file=FILE` (the token your "
              "operator gave you), or give one with --token, --token-file or MLENGINE_TOKEN");
        }
        std::cout << c.connection().token << "\n";
        return absl::OkStatus();
      }
      json body = {{"scope", {"https://www.googleapis.com/auth/cloud-platform"}}};
      if (!tok_args->lifetime.empty()) {
        auto lifetime = LifetimeSeconds(tok_args->lifetime, absl::Hours(12),
                                        "a service account's access token lasts at most 12 hours (43200s)");
        if (!lifetime.ok()) return lifetime.status();
        body["lifetime"] = *lifetime;
      }
      auto t = c.Call("POST",
                      absl::StrCat("/v1/projects/-/serviceAccounts/", tok_args->impersonate, ":generateAccessToken"),
                      {}, body);
      if (!t.ok()) return t.status();
      std::cout << t->value("accessToken", "") << "\n";
      return absl::OkStatus();
    });
  });

  // ---- admin users ----
  CLI::App* admin = app.add_subcommand("admin", "The operator's commands (with mlengined's admin token)");
  admin->require_subcommand(1);

  AddUsageCommand(admin, ctx);

  // ---- admin quotas ----
  CLI::App* quotas = admin->add_subcommand("quotas", "Quotas and fair-share weights of every project");
  quotas->require_subcommand(1);
  CLI::App* q_describe = quotas->add_subcommand("describe", "Show the quotas and weights in force, and their source");
  q_describe->callback([&ctx] {
    Run(ctx, "admin.quotas.describe", [&](Client& c, Format f) -> absl::Status {
      auto q = c.Call("GET", "/mlengine/v1/quotas");
      if (!q.ok()) return q.status();
      PrintResource(*q, f);
      return absl::OkStatus();
    });
  });
  auto set_args = std::make_shared<IamArgs>();
  CLI::App* q_set = quotas->add_subcommand(
      "set",
      "Set quotas and weights from a file: each section it has (quotas.defaults, quotas.projects, shares) replaces "
      "the one in force, the others are kept; in force until `admin quotas reset`");
  Usage(q_set, "mlengine admin quotas set FILE");
  MoreHelp(q_set,
           "\nFILE is YAML (or JSON) with the keys of mlengined's configuration file, e.g.\n"
           "  quotas:\n"
           "    defaults: {TPU_V2_POD_CORES: 0, TPU_V3_POD_CORES: 0}\n"
           "    projects:\n"
           "      my-project:\n"
           "        us-central1: {TPU_V3_POD_CORES: 32, NVIDIA_TESLA_T4: 4, CPUS: 64, JOBS: 10}\n"
           "  shares:\n"
           "    my-project: 2\n");
  q_set->add_option("FILE", set_args->file, "The settings")->required()->check(CLI::ExistingFile);
  q_set->callback([&ctx, set_args] {
    Run(ctx, "admin.quotas.set", [&](Client& c, Format f) -> absl::Status {
      json body;
      try {
        body = YamlToJson(YAML::LoadFile(set_args->file));
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError(absl::StrCat(set_args->file, ": ", e.what()));
      }
      if (!body.is_object()) return absl::InvalidArgumentError(absl::StrCat(set_args->file, ": expected a map"));
      // Only the sections the file has: the server keeps the others as they
      // are in force, and this says which is which.
      json settings = json::object();
      std::vector<std::string> replaced, kept;
      for (const char* section : {"defaults", "projects"}) {
        const bool has = body.contains("quotas") && body["quotas"].is_object() && body["quotas"].contains(section);
        (has ? replaced : kept).push_back(absl::StrCat("quotas.", section));
      }
      (body.contains("shares") ? replaced : kept).push_back("shares");
      for (const auto& [key, value] : body.items()) {
        if (key == "quotas" || key == "shares") {
          settings[key] = value;
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat(set_args->file, ": unknown key ", key, "; known: quotas (defaults, projects), shares"));
        }
      }
      auto q = c.Call("PUT", "/mlengine/v1/quotas", {}, settings);
      if (!q.ok()) return q.status();
      std::cerr << "Replaced " << (replaced.empty() ? "nothing" : absl::StrJoin(replaced, ", "));
      if (!kept.empty()) std::cerr << "; kept " << absl::StrJoin(kept, ", ") << " as they were in force";
      std::cerr << ".\n";
      PrintResource(*q, f);
      return absl::OkStatus();
    });
  });
  CLI::App* q_reset = quotas->add_subcommand("reset", "Go back to the configuration file's quotas and weights");
  q_reset->callback([&ctx] {
    Run(ctx, "admin.quotas.reset", [&](Client& c, Format f) -> absl::Status {
      auto q = c.Call("DELETE", "/mlengine/v1/quotas");
      if (!q.ok()) return q.status();
      PrintResource(*q, f);
      return absl::OkStatus();
    });
  });

  CLI::App* users = admin->add_subcommand("users", "People who may call mlengined");
  users->require_subcommand(1);
  auto user_args = std::make_shared<IamArgs>();
  CLI::App* u_create = users->add_subcommand("create", "Create a user (then grant roles on projects)");
  u_create->add_option("EMAIL", user_args->name, "The user's email")->required();
  u_create->callback([&ctx, user_args] {
    Run(ctx, "admin.users.create", [&](Client& c, Format) -> absl::Status {
      auto r = c.Call("POST", "/mlengine/v1/users", {}, json{{"email", user_args->name}});
      if (!r.ok()) return r.status();
      std::cerr << "Created user [" << r->value("email", "") << "].\n";
      return absl::OkStatus();
    });
  });
  CLI::App* u_list = users->add_subcommand("list", "List users");
  u_list->callback([&ctx] {
    Run(ctx, "admin.users.list", [&](Client& c, Format f) -> absl::Status {
      auto r = c.Call("GET", "/mlengine/v1/users");
      if (!r.ok()) return r.status();
      if (f != Format::kDefault) return PrintResource(*r, f), absl::OkStatus();
      for (const auto& u : r->value("users", json::array())) std::cout << u.value("email", "") << "\n";
      return absl::OkStatus();
    });
  });
  auto udel_args = std::make_shared<IamArgs>();
  CLI::App* u_delete = users->add_subcommand("delete", "Delete a user: their tokens and grants go too");
  u_delete->add_option("EMAIL", udel_args->name, "The user's email")->required();
  u_delete->callback([&ctx, udel_args] {
    Run(ctx, "admin.users.delete", [&](Client& c, Format) -> absl::Status {
      auto r = c.Call("DELETE", absl::StrCat("/mlengine/v1/users/", udel_args->name));
      if (!r.ok()) return r.status();
      std::cerr << "Deleted user [" << udel_args->name << "].\n";
      return absl::OkStatus();
    });
  });
  auto ut_args = std::make_shared<IamArgs>();
  CLI::App* u_token = users->add_subcommand("create-token", "Mint a token for a user (printed once; only its hash is kept)");
  Usage(u_token, "mlengine admin users create-token EMAIL [--lifetime=2592000s]");
  u_token->add_option("EMAIL", ut_args->name, "The user's email")->required();
  u_token->add_option("--lifetime", ut_args->lifetime,
                      "How long it is valid, e.g. 3600s, 60m, 12h, 30d: 1s to 366 days (default 30 days)");
  u_token->callback([&ctx, ut_args] {
    Run(ctx, "admin.users.create-token", [&](Client& c, Format) -> absl::Status {
      json body = json::object();
      if (!ut_args->lifetime.empty()) {
        auto lifetime = LifetimeSeconds(ut_args->lifetime, absl::Hours(24 * 366),
                                        "a user's token lasts at most 366 days; mint a new one before it expires");
        if (!lifetime.ok()) return lifetime.status();
        body["lifetime"] = *lifetime;
      }
      auto r = c.Call("POST", absl::StrCat("/mlengine/v1/users/", ut_args->name, ":generateToken"), {}, body);
      if (!r.ok()) return r.status();
      std::cerr << "Token for " << ut_args->name << ", valid until " << r->value("expireTime", "") << ":\n";
      std::cout << r->value("accessToken", "") << "\n";
      return absl::OkStatus();
    });
  });
}

}  // namespace mle::cli
