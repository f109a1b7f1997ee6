#include "executor/slurm/slurm_plan.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "model/catalog.h"
#include "rundir/slurm_files.h"
#include "runtime/replica_env.h"

namespace mle::executor::slurm {
namespace {

// Quotes a value for an #SBATCH line (sbatch splits on whitespace and
// honours double quotes).
std::string Quote(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ShellQuote(const std::string& v) {
  std::string out = "'";
  for (char c : v) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::string GpuGresType(const std::string& type, const SlurmSettings& settings) {
  if (auto it = settings.gpu_gres_types.find(type); it != settings.gpu_gres_types.end()) return it->second;
  absl::string_view t = type;
  if (!absl::ConsumePrefix(&t, "NVIDIA_TESLA_")) absl::ConsumePrefix(&t, "NVIDIA_");
  return absl::AsciiStrToLower(t);
}

std::vector<Component> PlanComponents(const model::JobDemand& demand, const SlurmSettings& settings) {
  std::vector<Component> out;
  const bool tpu = demand.tpu_hosts > 0;
  for (const char* role : {"master", "worker", "ps", "evaluator"}) {
    Component c;
    c.role = role;
    for (const auto& r : demand.replicas) {
      if (r.role != role) continue;
      if (c.tasks.empty()) {
        c.cpus_per_task = static_cast<int>(std::max<int64_t>(1, (r.cpu_milli + 999) / 1000));
        c.memory_mib = r.memory_mib;
        if (r.gpu_count > 0) c.gres = absl::StrCat("gpu:", GpuGresType(r.gpu_type, settings), ":", r.gpu_count);
      }
      c.tasks.push_back(r.TaskName());
    }
    if (c.tasks.empty()) continue;
    if (tpu && c.role == "master") {
      // The master lives on the first TPU host: a TPU component of its shape.
      Component t = std::move(c);
      t.role = "tpu";
      t.first_node_task = t.tasks.front();
      t.tasks.clear();
      for (int i = 0; i < demand.tpu_hosts; ++i) t.tasks.push_back(runtime::TpuTaskName(i));
      std::string gres = absl::StrCat(settings.tpu_gres, ":", model::kTpuCoresPerHost);
      t.gres = t.gres.empty() ? gres : absl::StrCat(t.gres, ",", gres);
      if (settings.tpu_type_constraint) t.constraint = absl::AsciiStrToLower(demand.tpu_type);
      out.push_back(std::move(t));
      continue;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> TasksOf(const std::vector<Component>& components) {
  std::vector<std::string> out;
  for (const auto& c : components) {
    if (!c.first_node_task.empty()) out.push_back(c.first_node_task);
    out.insert(out.end(), c.tasks.begin(), c.tasks.end());
  }
  return out;
}

std::vector<codec::LaunchComponent> ToLaunchComponents(const std::vector<Component>& components) {
  std::vector<codec::LaunchComponent> out;
  for (const auto& c : components) out.push_back({c.role, c.tasks, c.first_node_task});
  return out;
}

std::vector<Component> FromLaunchComponents(const std::vector<codec::LaunchComponent>& components) {
  std::vector<Component> out;
  for (const auto& c : components) {
    Component k;
    k.role = c.role;
    k.tasks = c.tasks;
    k.first_node_task = c.first_node_task;
    out.push_back(std::move(k));
  }
  return out;
}

std::string SlurmJobName(const std::string& project, const std::string& job_id) {
  return absl::StrCat("mle-", project, "-", job_id);
}

std::string BuildBatchScript(const BatchScriptInput& in, const std::vector<Component>& components,
                             const SlurmSettings& settings) {
  // sh, not bash: the script only execs the launcher (its quoting is
  // POSIX), and dash starts in a fraction of bash's time, once per job.
  std::string s = "#!/bin/sh\n";
  absl::StrAppend(&s, "# mlengine job projects/", in.project, "/jobs/", in.job_id,
                  " (written by mlengined; one component per replica role)\n");
  auto opt = [&s](const std::string& name, const std::string& value) {
    absl::StrAppend(&s, "#SBATCH --", name, value.empty() ? "" : "=", value, "\n");
  };
  for (size_t k = 0; k < components.size(); ++k) {
    const Component& c = components[k];
    if (k > 0) s += "#SBATCH hetjob\n";
    if (k == 0) {
      opt("job-name", SlurmJobName(in.project, in.job_id));
      opt("output", Quote(rundir::SlurmOutputPattern(in.run_dir)));
      opt("open-mode", "append");
      if (!in.labels.empty()) {
        std::vector<std::string> kv;
        for (const auto& [key, value] : in.labels) kv.push_back(absl::StrCat(key, "=", value));
        opt("comment", Quote(absl::StrJoin(kv, ",")));
      }
      opt(settings.requeue ? "requeue" : "no-requeue", "");
      for (const auto& a : settings.extra_sbatch_args) absl::StrAppend(&s, "#SBATCH ", a, "\n");
    }
    if (!settings.partition.empty()) opt("partition", settings.partition);
    if (const std::string& account = in.account.empty() ? settings.account : in.account; !account.empty()) {
      opt("account", account);
    }
    if (!settings.qos.empty()) opt("qos", settings.qos);
    if (in.time_limit_minutes > 0) opt("time", std::to_string(in.time_limit_minutes));
    if (in.nice != 0) opt("nice", std::to_string(in.nice));
    opt("nodes", std::to_string(c.tasks.size()));
    opt("ntasks-per-node", "1");
    opt("cpus-per-task", std::to_string(c.cpus_per_task));
    if (c.memory_mib > 0) opt("mem", absl::StrCat(c.memory_mib, "M"));
    if (!c.gres.empty()) opt("gres", c.gres);
    if (!c.constraint.empty()) opt("constraint", c.constraint);
  }
  std::vector<std::string> quoted;
  for (const auto& a : in.launcher_argv) quoted.push_back(ShellQuote(a));
  absl::StrAppend(&s, "exec ", absl::StrJoin(quoted, " "), "\n");
  return s;
}

absl::StatusOr<model::Placement> PlacementFromAllocation(const std::vector<Component>& components,
                                                         const std::vector<std::vector<std::string>>& nodes,
                                                         bool tpu_simulated) {
  if (nodes.size() != components.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the allocation has ", nodes.size(), " components, the plan ",
                                                   components.size()));
  }
  model::Placement p;
  for (size_t k = 0; k < components.size(); ++k) {
    const Component& c = components[k];
    if (nodes[k].size() < c.tasks.size()) {
      return absl::InvalidArgumentError(absl::StrCat("component ", k, " (", c.role, ") got ", nodes[k].size(),
                                                     " nodes for ", c.tasks.size(), " tasks"));
    }
    if (!c.first_node_task.empty()) {
      if (nodes[k].empty()) return absl::InvalidArgumentError(absl::StrCat("component ", k, " got no nodes"));
      p.replicas[c.first_node_task].host = nodes[k][0];
    }
    for (size_t i = 0; i < c.tasks.size(); ++i) {
      if (c.role == "tpu") {
        p.tpu_hosts.push_back(nodes[k][i]);
      } else {
        p.replicas[c.tasks[i]].host = nodes[k][i];
      }
    }
    if (c.role == "tpu") p.tpu_simulated = tpu_simulated;
  }
  return p;
}

namespace {

bool NodeFits(const Component& c, const SlurmNode& n) {
  if (n.cpus < c.cpus_per_task) return false;
  if (c.memory_mib > 0 && n.memory_mib > 0 && n.memory_mib < c.memory_mib) return false;
  for (const auto& [name, count] : ParseGres(c.gres)) {
    auto it = n.gres.find(name);
    if (it == n.gres.end() || it->second < count) return false;
  }
  for (absl::string_view f : absl::StrSplit(c.constraint, '&', absl::SkipEmpty())) {
    if (!n.features.count(std::string(f))) return false;
  }
  return true;
}

std::string ComponentNeeds(const Component& c, const model::JobDemand& demand) {
  std::string what;
  if (c.role == "tpu") {
    what = absl::StrCat(c.tasks.size(), " TPU host", c.tasks.size() > 1 ? "s" : "", " (", demand.tpu_accelerator,
                        " with ", demand.tpu_cores, " cores)");
  } else {
    what = absl::StrCat(c.tasks.size(), " node", c.tasks.size() > 1 ? "s" : "", " for its ", c.role, " replica",
                        c.tasks.size() > 1 ? "s" : "");
  }
  std::vector<std::string> each = {absl::StrCat(c.cpus_per_task, " CPU", c.cpus_per_task > 1 ? "s" : "")};
  if (c.memory_mib > 0) each.push_back(absl::StrCat(c.memory_mib, " MiB"));
  if (!c.gres.empty()) each.push_back(absl::StrCat("GRES ", c.gres));
  if (!c.constraint.empty()) each.push_back(absl::StrCat("feature ", c.constraint));
  return absl::StrCat(what, ", each with ", absl::StrJoin(each, ", "));
}

}  // namespace

std::string DescribeNodes(const std::vector<SlurmNode>& nodes) {
  std::vector<std::string> items;
  for (const auto& n : nodes) {
    std::vector<std::string> parts = {absl::StrCat(n.cpus, " CPUs")};
    if (n.memory_mib > 0) parts.push_back(absl::StrCat(n.memory_mib, " MiB"));
    for (const auto& [name, count] : n.gres) {
      if (name.find(':') != std::string::npos || !n.gres.count(name)) continue;
      bool typed = false;
      for (const auto& [other, c2] : n.gres) typed = typed || absl::StartsWith(other, name + ":");
      if (!typed) parts.push_back(absl::StrCat(name, ":", count));
    }
    for (const auto& [name, count] : n.gres) {
      if (name.find(':') != std::string::npos) parts.push_back(absl::StrCat(name, ":", count));
    }
    if (!n.features.empty()) parts.push_back(absl::StrCat("features ", absl::StrJoin(n.features, "&")));
    if (n.state == "down" || n.state == "drained" || n.state == "fail") parts.push_back(n.state);
    items.push_back(absl::StrCat(n.name, " (", absl::StrJoin(parts, ", "), ")"));
  }
  return absl::StrCat(nodes.size(), " node", nodes.size() == 1 ? "" : "s", ": ", absl::StrJoin(items, "; "));
}

model::Host HostOfNode(const SlurmNode& node, const SlurmSettings& settings) {
  model::Host host;
  host.name = node.name;
  host.cpu_milli = int64_t{node.cpus} * 1000;
  host.memory_mib = node.memory_mib;
  auto add_gpus = [&host](int64_t count, const std::string& model, const std::string& type) {
    for (int64_t i = 0; i < count; ++i) {
      host.gpus.push_back({static_cast<int>(host.gpus.size()), model, type});
    }
  };
  int64_t typed = 0;
  for (const auto& [name, count] : node.gres) {
    if (!absl::StartsWith(name, "gpu:")) continue;
    const std::string gres_type = name.substr(4);
    std::string type;
    for (const auto& [accelerator, mapped] : settings.gpu_gres_types) {
      if (mapped == gres_type) type = accelerator;
    }
    add_gpus(count, gres_type, type);
    typed += count;
  }
  if (auto untyped = node.gres.find("gpu"); untyped != node.gres.end() && untyped->second > typed) {
    add_gpus(untyped->second - typed, "", "");
  }
  if (node.gres.count(settings.tpu_gres) > 0) {
    host.tpu_type = "TPU";
    for (const char* feature : {"tpu_v2", "tpu_v3"}) {
      if (node.features.count(feature)) host.tpu_type = absl::AsciiStrToUpper(feature);
    }
    host.simulated = settings.tpu_simulated;
  }
  return host;
}

absl::Status CheckComponentsFit(const std::vector<Component>& components, const model::JobDemand& demand,
                                const std::vector<SlurmNode>& nodes) {
  std::string why;
  size_t total = 0;
  for (const auto& c : components) {
    total += c.tasks.size();
    size_t fit = 0;
    for (const auto& n : nodes) fit += NodeFits(c, n) ? 1 : 0;
    if (fit < c.tasks.size()) {
      why = absl::StrCat("it needs ", ComponentNeeds(c, demand), ", but ", fit == 0 ? "no" : absl::StrCat("only ", fit),
                         " node", fit == 1 ? "" : "s", " of this Slurm cluster ", fit == 1 ? "has" : "have", " that");
      break;
    }
  }
  if (why.empty() && total > nodes.size()) {
    why = absl::StrCat("its replicas need ", total, " nodes (one each; Slurm gives each component of a job its own ",
                       "nodes), but this Slurm cluster has ", nodes.size());
  }
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("This job can never run on this cluster: ", why, ". The cluster has ", DescribeNodes(nodes), "."));
}

std::vector<int> JobPorts(int64_t slurm_job_id, int count, int first, int span) {
  const int base = first + static_cast<int>((slurm_job_id % span) * 16);
  std::vector<int> out;
  for (int i = 0; i < count; ++i) out.push_back(base + i);
  return out;
}

}  // namespace mle::executor::slurm
