#include "server/server_config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"
#include "model/catalog.h"

namespace mle::server {

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  std::string text =
      "runtimes:\n"
      "  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11', tpu_capable: true,\n"
      "     description: 'Debian 12 python3 with torch 1.13 (CPU), numpy and scikit-learn'}\n";
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read the configuration file ", path));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto config = ParseServerConfig(text, path.empty() ? "built-in configuration" : path);
  if (!config.ok()) return config.status();
  for (const auto& r : config->runtimes.runtimes()) {
    if (::access(r.python.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("runtime ", r.name, ": the interpreter ", r.python,
                                                        " does not exist or is not executable"));
    }
  }
  return config;
}

namespace {

// A map of names to whole numbers (quotas, shares); `where` names it in errors.
absl::StatusOr<std::map<std::string, int64_t>> AmountsByName(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map of names to numbers"));
  std::map<std::string, int64_t> amounts;
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    int64_t amount = 0;
    if (!kv.second.IsScalar() || !YAML::convert<int64_t>::decode(kv.second, amount)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", name, ": expected a whole number"));
    }
    amounts[name] = amount;
  }
  return amounts;
}

// `node` is a map whose keys are all among `known`; `where` ("disk") names
// it in the refusal.
absl::Status CheckKeys(const YAML::Node& node, absl::string_view where,
                       std::initializer_list<absl::string_view> known) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map"));
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", key, ": unknown key; known: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

// `accounting:` (ml_units_per_hour: machine_types, accelerators), over the
// default rates.
absl::Status ParseAccounting(const YAML::Node& node, model::UsageRates* rates) {
  if (!node.IsMap()) return absl::InvalidArgumentError("accounting: expected a map (ml_units_per_hour)");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (key != "ml_units_per_hour") {
      return absl::InvalidArgumentError(absl::StrCat("accounting.", key, ": unknown key; known: ml_units_per_hour"));
    }
    if (!kv.second.IsMap()) {
      return absl::InvalidArgumentError("accounting.ml_units_per_hour: expected a map (machine_types, accelerators)");
    }
    for (const auto& section : kv.second) {
      const std::string name = section.first.as<std::string>();
      const bool machines = name == "machine_types";
      if (!machines && name != "accelerators") {
        return absl::InvalidArgumentError(absl::StrCat("accounting.ml_units_per_hour.", name,
                                                       ": unknown key; known: machine_types, accelerators"));
      }
      const std::string where = absl::StrCat("accounting.ml_units_per_hour.", name);
      if (!section.second.IsMap()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map of names to ML units per hour"));
      }
      for (const auto& rate : section.second) {
        const std::string type = rate.first.as<std::string>();
        const bool known = machines ? model::FindMachineType(type) != nullptr
                                    : model::FindAcceleratorType(type) != nullptr;
        if (!known) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".", type, ": not ",
                                                         machines ? "a machine type" : "an accelerator type",
                                                         " of AI Platform (e.g. ",
                                                         machines ? "n1-standard-4" : "NVIDIA_TESLA_T4", ")"));
        }
        double value = -1;
        if (!rate.second.IsScalar() || !YAML::convert<double>::decode(rate.second, value) || !(value >= 0) ||
            value > 1e6) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".", type, ": expected ML units per hour, a number from 0 to 1000000"));
        }
        (machines ? rates->machine_types : rates->accelerators)[type] = value;
      }
    }
  }
  return absl::OkStatus();
}

// `retention:` (run_files, logs, packages, images: max_age_days,
// max_size_mb; check_seconds).
absl::Status ParseRetention(const YAML::Node& node, ServerConfig::Retention* retention) {
  if (auto s = CheckKeys(node, "retention", {"run_files", "logs", "packages", "images", "check_seconds"}); !s.ok()) {
    return s;
  }
  if (const YAML::Node n = node["check_seconds"]) {
    int seconds = 0;
    if (!n.IsScalar() || !YAML::convert<int>::decode(n, seconds) || seconds < 1 || seconds > 86400) {
      return absl::InvalidArgumentError("retention.check_seconds must be from 1 to 86400");
    }
    retention->check_seconds = seconds;
  }
  const std::pair<const char*, ServerConfig::RetentionBudget*> budgets[] = {{"run_files", &retention->run_files},
                                                                            {"logs", &retention->logs},
                                                                            {"packages", &retention->packages},
                                                                            {"images", &retention->images}};
  for (const auto& [key, budget] : budgets) {
    const YAML::Node b = node[key];
    if (!b) continue;
    const std::string where = absl::StrCat("retention.", key);
    if (auto s = CheckKeys(b, where, {"max_age_days", "max_size_mb"}); !s.ok()) return s;
    if (const YAML::Node n = b["max_age_days"]) {
      double days = -1;
      if (!n.IsScalar() || !YAML::convert<double>::decode(n, days) || !(days >= 0) || days > 36500) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".max_age_days must be a number of days from 0 to 36500"));
      }
      budget->max_age_days = days;
    }
    if (const YAML::Node n = b["max_size_mb"]) {
      int64_t mb = -1;
      if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, mb) || mb < 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".max_size_mb must be a whole number of MiB, 0 or more"));
      }
      budget->max_size_mb = mb;
    }
  }
  return absl::OkStatus();
}

// `quotas:` as the operator wrote it; names and amounts are checked when compiled.
absl::StatusOr<scheduler::QuotaSpec> ParseQuotaSpec(const YAML::Node& node) {
  scheduler::QuotaSpec spec;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (key == "defaults") {
      auto defaults = AmountsByName(kv.second, "quotas.defaults");
      if (!defaults.ok()) return defaults.status();
      spec.defaults = *std::move(defaults);
    } else if (key == "projects") {
      for (const auto& project : kv.second) {
        const std::string name = project.first.as<std::string>();
        auto& regions = spec.projects[name];
        for (const auto& region : project.second) {
          const std::string region_name = region.first.as<std::string>();
          auto amounts = AmountsByName(region.second, absl::StrCat("quotas.projects.", name, ".", region_name));
          if (!amounts.ok()) return amounts.status();
          regions[region_name] = *std::move(amounts);
        }
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("quotas.", key, ": unknown key; known: defaults, projects"));
    }
  }
  return spec;
}

// The stall watch and the join deadline of an executor's section
// (`local:` or `slurm:`): stall_after_seconds, stall_action, join_timeout_seconds.
absl::Status ParseWatches(const YAML::Node& section, const std::string& name, const std::string& origin,
                          int64_t* stall_after, bool* stall_fails, int64_t* join_timeout) {
  *stall_after = section["stall_after_seconds"].as<int64_t>(*stall_after);
  *join_timeout = section["join_timeout_seconds"].as<int64_t>(*join_timeout);
  if (*join_timeout < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", name, ".join_timeout_seconds must be 0 (never) or a number of seconds, e.g. 600"));
  }
  if (*stall_after < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", name, ".stall_after_seconds must be 0 (never) or a number of seconds, e.g. 3600"));
  }
  if (auto action = section["stall_action"]) {
    const std::string a = action.as<std::string>();
    if (a != "flag" && a != "fail") {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": ", name, ".stall_action must be \"flag\" (say so in the job's errorMessage) or \"fail\" "
          "(end the job FAILED), not \"", a, "\""));
    }
    *stall_fails = a == "fail";
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerConfig> ParseServerConfig(const std::string& text, const std::string& origin) {
  ServerConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    auto runtimes = runtime::RuntimeCatalog::FromYaml(text);
    if (!runtimes.ok()) return runtimes.status();
    config.runtimes = *std::move(runtimes);
    if (auto local = root["local"]) {
      config.cpu_oversubscription = local["cpu_oversubscription"].as<int>(config.cpu_oversubscription);
      config.replica_cpu_milli = local["replica_cpu_milli"].as<int64_t>(config.replica_cpu_milli);
      config.replica_memory_mib = local["replica_memory_mib"].as<int64_t>(config.replica_memory_mib);
      if (config.replica_cpu_milli <= 0 || config.replica_memory_mib < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": local.replica_cpu_milli must be positive and local.replica_memory_mib not negative"));
      }
      if (auto st = ParseWatches(local, "local", origin, &config.stall_after_seconds, &config.stall_fails,
                                 &config.join_timeout_seconds);
          !st.ok()) {
        return st;
      }
    }
    if (auto sandbox = root["sandbox"]) {
      for (const auto& kv : sandbox) {
        const std::string key = kv.first.as<std::string>();
        if (key != "enabled" && key != "first_uid" && key != "uid_count" && key != "pids_limit" &&
            key != "favordynmods") {
          return absl::InvalidArgumentError(absl::StrCat(origin, ": sandbox.", key,
                                                         ": unknown key; known: enabled, first_uid, uid_count, "
                                                         "pids_limit, favordynmods"));
        }
      }
      auto& sb = config.sandbox;
      sb.enabled = sandbox["enabled"].as<bool>(sb.enabled);
      const int64_t first = sandbox["first_uid"].as<int64_t>(sb.first_uid);
      const int64_t count = sandbox["uid_count"].as<int64_t>(sb.uid_count);
      if (first < 1000 || count < 1 || first + count > 0xffffffffLL) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": sandbox.first_uid and sandbox.uid_count must name a range of ids from 1000 up"));
      }
      sb.first_uid = static_cast<uid_t>(first);
      sb.uid_count = static_cast<uint32_t>(count);
      sb.pids_limit = sandbox["pids_limit"].as<int64_t>(sb.pids_limit);
      sb.favordynmods = sandbox["favordynmods"].as<bool>(sb.favordynmods);
      if (sb.pids_limit < 16) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": sandbox.pids_limit must be at least 16"));
      }
    }
    if (auto hosts = root["tpu_hosts"]) {
      for (const auto& h : hosts) {
        TpuHostConfig t;
        t.name = h["name"].as<std::string>("");
        t.type = h["type"].as<std::string>("");
        t.simulated = h["simulated"].as<bool>(true);
        if (t.name.empty() || (t.type != "TPU_V2" && t.type != "TPU_V3")) {
          return absl::InvalidArgumentError(
              absl::StrCat(origin, ": each tpu_hosts entry needs a name and type TPU_V2 or TPU_V3"));
        }
        config.tpu_hosts.push_back(t);
      }
    }
    if (auto gpus = root["gpu_types"]) {
      for (const auto& kv : gpus) {
        config.gpu_types[kv.first.as<std::string>()] = kv.second.as<std::vector<std::string>>();
      }
    }
    config.cancel_grace_seconds = root["cancel_grace_seconds"].as<int>(config.cancel_grace_seconds);
    if (auto console = root["console_dir"]) {
      // `console_dir:` with no value is an empty string too: no console.
      config.console_dir = console.IsNull() ? "" : console.as<std::string>();
    }
    if (auto c = root["containers"]) {
      containers::ContainerSettings& cs = config.containers;
      cs.enabled = c["enabled"].as<bool>(true);
      cs.podman = c["podman"].as<std::string>(cs.podman);
      cs.runtime = c["runtime"].as<std::string>(cs.runtime);
      cs.init = c["init"].as<std::string>(cs.init);
      cs.registry = c["registry"].as<std::string>("");
      cs.registry_insecure = c["registry_insecure"].as<bool>(cs.registry_insecure);
      cs.allow_registry_images = c["allow_registry_images"].as<bool>(cs.allow_registry_images);
      cs.allow_local_images = c["allow_local_images"].as<bool>(cs.allow_local_images);
      cs.gpu_devices = c["gpu_devices"].as<std::string>(cs.gpu_devices);
      if (cs.gpu_devices != "cdi" && cs.gpu_devices != "none") {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": containers.gpu_devices: \"", cs.gpu_devices, "\" is not one of cdi, none"));
      }
      if (auto mirrors = c["mirrors"]) {
        for (const auto& m : mirrors) {
          containers::Mirror mirror;
          mirror.name = m["name"].as<std::string>("");
          mirror.image = m["image"].as<std::string>("");
          if (auto v = m["tpu_tf_versions"]) mirror.tpu_tf_versions = v.as<std::vector<std::string>>();
          mirror.simulated = m["simulated"].as<bool>(false);
          mirror.description = m["description"].as<std::string>("");
          if (!containers::ParseImageName(mirror.name).ok() || !containers::ParseImageName(mirror.image).ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                origin, ": each containers.mirrors entry needs a name (the image jobs name) and an image (where it "
                        "is: REPO:TAG in containers.registry, or localhost/NAME:TAG), both valid image names"));
          }
          cs.mirrors.push_back(std::move(mirror));
        }
      }
    }
    config.slurm.machines = model::ResourceTable::Defaults();
    if (auto slurm = root["slurm"]) {
      SlurmConfig& c = config.slurm;
      auto& st = c.settings;
      c.conf = slurm["conf"].as<std::string>("");
      st.partition = slurm["partition"].as<std::string>("");
      st.account = slurm["account"].as<std::string>("");
      st.qos = slurm["qos"].as<std::string>("");
      const std::string accounts = slurm["accounts"].as<std::string>("none");
      if (accounts == "per_project") {
        st.accounts = executor::slurm::AccountMode::kPerProject;
      } else if (accounts != "none") {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": slurm.accounts: \"", accounts, "\" is not one of none, per_project"));
      }
      if (st.accounts == executor::slurm::AccountMode::kPerProject && !st.account.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": slurm.account and slurm.accounts: per_project exclude each other (every job runs under its "
                    "project's account)"));
      }
      st.region = slurm["region"].as<std::string>(st.region);
      st.tpu_gres = slurm["tpu_gres"].as<std::string>(st.tpu_gres);
      st.tpu_type_constraint = slurm["tpu_type_constraint"].as<bool>(false);
      st.tpu_simulated = slurm["tpu_simulated"].as<bool>(false);
      st.requeue = slurm["requeue"].as<bool>(false);
      if (auto g = slurm["gpu_gres_types"]) {
        for (const auto& kv : g) st.gpu_gres_types[kv.first.as<std::string>()] = kv.second.as<std::string>();
      }
      if (auto a = slurm["sbatch_args"]) st.extra_sbatch_args = a.as<std::vector<std::string>>();
      auto shape = [](const YAML::Node& n) {
        model::MachineShape m;
        m.cpu_milli = n["cpus"].as<int64_t>(1) * 1000;
        m.memory_mib = n["memory_mib"].as<int64_t>(0);
        return m;
      };
      if (auto d = slurm["default_machine"]) c.machines.fallback = shape(d);
      if (auto m = slurm["machine_types"]) {
        for (const auto& kv : m) c.machines.machine_types[kv.first.as<std::string>()] = shape(kv.second);
      }
      c.max_poll_seconds = slurm["max_poll_seconds"].as<int>(c.max_poll_seconds);
      c.submit_concurrency = slurm["submit_concurrency"].as<int>(c.submit_concurrency);
      if (auto st = ParseWatches(slurm, "slurm", origin, &c.stall_after_seconds, &c.stall_fails,
                                 &c.join_timeout_seconds);
          !st.ok()) {
        return st;
      }
      if (c.submit_concurrency < 1 || c.submit_concurrency > 64) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": slurm.submit_concurrency is ", c.submit_concurrency,
                                                       "; it must be 1 to 64 (sbatch calls at once)"));
      }
    }
    if (auto regions = root["regions"]) {
      if (!regions.IsSequence() || regions.size() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": regions must be a list of the regions this cluster serves, e.g. [us-central1]"));
      }
      config.regions.clear();
      for (const auto& r : regions) {
        const std::string name = r.as<std::string>();
        const auto known = model::DefaultRegions();
        if (std::find(known.begin(), known.end(), std::string_view(name)) == known.end()) {
          std::vector<std::string> names;
          for (std::string_view k : known) names.emplace_back(k);
          return absl::InvalidArgumentError(absl::StrCat(origin, ": regions: ", name,
                                                         " is not an AI Platform region; known: ",
                                                         absl::StrJoin(names, ", ")));
        }
        config.regions.push_back(name);
      }
    }
    if (auto quotas = root["quotas"]) {
      auto spec = ParseQuotaSpec(quotas);
      if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", spec.status().message()));
      auto compiled = scheduler::Quotas::Compile(*std::move(spec));
      if (!compiled.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", compiled.status().message()));
      config.quotas = *std::move(compiled);
    }
    auto in_file = [&origin](const absl::Status& s) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
    };
    if (auto scheduling = root["scheduling"]) {
      if (auto s = CheckKeys(scheduling, "scheduling", {"preemption", "max_retries"}); !s.ok()) return in_file(s);
      config.retries.infrastructure = scheduling["max_retries"].as<int>(config.retries.infrastructure);
      if (config.retries.infrastructure < 0 || config.retries.infrastructure > 10) {
        return absl::InvalidArgumentError(absl::StrCat(
            origin, ": scheduling.max_retries must be from 0 to 10 (how often an attempt lost to the "
                    "infrastructure is run again)"));
      }
      if (auto preemption = scheduling["preemption"]) {
        if (auto s = CheckKeys(preemption, "scheduling.preemption", {"enabled", "fair_share", "exempt_projects"});
            !s.ok()) {
          return in_file(s);
        }
        auto& p = config.preemption;
        p.enabled = preemption["enabled"].as<bool>(p.enabled);
        p.for_share = preemption["fair_share"].as<bool>(p.for_share);
        if (auto exempt = preemption["exempt_projects"]) {
          if (!exempt.IsSequence()) {
            return absl::InvalidArgumentError(absl::StrCat(
                origin, ": scheduling.preemption.exempt_projects must be a list of project ids, e.g. [prod]"));
          }
          for (const auto& project : exempt) p.exempt_projects.insert(project.as<std::string>());
        }
      }
    }
    if (auto webhooks = root["webhooks"]) {
      if (auto s = CheckKeys(webhooks, "webhooks", {"enabled", "allow_loopback", "max_per_project"}); !s.ok()) {
        return in_file(s);
      }
      auto& w = config.webhooks;
      w.enabled = webhooks["enabled"].as<bool>(w.enabled);
      w.allow_loopback = webhooks["allow_loopback"].as<bool>(w.allow_loopback);
      w.max_per_project = webhooks["max_per_project"].as<int>(w.max_per_project);
      if (w.max_per_project < 1 || w.max_per_project > 1000) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": webhooks.max_per_project must be from 1 to 1000"));
      }
    }
    if (auto retention = root["retention"]) {
      if (auto s = ParseRetention(retention, &config.retention); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
      }
    }
    if (auto disk = root["disk"]) {
      if (auto s = CheckKeys(disk, "disk", {"reserve_mb", "check_seconds"}); !s.ok()) return in_file(s);
      config.disk.reserve_mb = disk["reserve_mb"].as<int64_t>(config.disk.reserve_mb);
      config.disk.check_seconds = disk["check_seconds"].as<int>(config.disk.check_seconds);
      if (config.disk.reserve_mb < 0 || config.disk.reserve_mb > (int64_t{1} << 30)) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": disk.reserve_mb must be 0 or more (MiB)"));
      }
      if (config.disk.check_seconds < 1 || config.disk.check_seconds > 3600) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": disk.check_seconds must be from 1 to 3600"));
      }
    }
    if (auto accounting = root["accounting"]) {
      if (auto s = ParseAccounting(accounting, &config.usage_rates); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
      }
    }
    if (auto shares = root["shares"]) {
      auto weights = AmountsByName(shares, "shares");
      if (!weights.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", weights.status().message()));
      auto compiled = scheduler::Shares::Compile(*std::move(weights));
      if (!compiled.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", compiled.status().message()));
      config.shares = *std::move(compiled);
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return config;
}

model::Inventory DetectLocalInventory(const ServerConfig& config) {
  model::Inventory inventory;
  model::Host local;
  local.name = "localhost";
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  local.cpu_milli = static_cast<int64_t>(cores > 0 ? cores : 1) * 1000 * config.cpu_oversubscription;
  // Memory is counted where each replica is held to its share (the sandbox's
  // limits): this machine's memory, as the kernel reports it.
  if (config.sandbox.enabled && config.replica_memory_mib > 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) local.memory_mib = static_cast<int64_t>(pages) * page / (1024 * 1024);
  }
  if (common::FindProgram("nvidia-smi")) {
    common::CommandOptions options;
    options.timeout = absl::Seconds(20);
    auto out = common::RunCommand({"nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"}, options);
    if (out.ok() && out->exit_code == 0) {
      for (absl::string_view line : absl::StrSplit(out->output, '\n', absl::SkipWhitespace())) {
        std::pair<absl::string_view, absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(',', 1));
        model::GpuDevice gpu;
        if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(f.first), &gpu.index)) continue;
        gpu.model = std::string(absl::StripAsciiWhitespace(f.second));
        for (const auto& [type, models] : config.gpu_types) {
          for (const auto& m : models) {
            if (gpu.model.find(m) != std::string::npos) gpu.type = type;
          }
        }
        local.gpus.push_back(gpu);
      }
    }
  }
  inventory.hosts.push_back(local);
  for (const auto& t : config.tpu_hosts) {
    model::Host h;
    h.name = t.name;
    h.tpu_type = t.type;
    h.simulated = t.simulated;
    h.runs_replicas = false;
    inventory.hosts.push_back(h);
  }
  return inventory;
}

}  // namespace mle::server
