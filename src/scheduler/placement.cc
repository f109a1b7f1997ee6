#include "scheduler/placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/catalog.h"

namespace mle::scheduler {
namespace {

using model::Host;
using model::JobDemand;
using model::ReplicaDemand;

}  // namespace

void Usage::Add(const JobDemand& demand, const model::Placement& placement) {
  for (const auto& r : demand.replicas) {
    auto it = placement.replicas.find(r.TaskName());
    if (it == placement.replicas.end()) continue;
    cpu_milli[it->second.host] += r.cpu_milli;
    memory_mib[it->second.host] += r.memory_mib;
    auto& busy = gpus[it->second.host];
    busy.insert(busy.end(), it->second.gpu_indices.begin(), it->second.gpu_indices.end());
  }
  for (const auto& h : placement.tpu_hosts) tpu_busy[h] = true;
}

void Usage::Remove(const JobDemand& demand, const model::Placement& placement) {
  for (const auto& r : demand.replicas) {
    auto it = placement.replicas.find(r.TaskName());
    if (it == placement.replicas.end()) continue;
    cpu_milli[it->second.host] -= r.cpu_milli;
    memory_mib[it->second.host] -= r.memory_mib;
    auto& busy = gpus[it->second.host];
    for (int g : it->second.gpu_indices) std::erase(busy, g);
  }
  for (const auto& h : placement.tpu_hosts) tpu_busy.erase(h);
}

std::string DescribeInventory(const model::Inventory& inventory) {
  std::vector<std::string> hosts;
  std::map<std::string, int> tpus;
  bool tpu_simulated = false;
  for (const auto& h : inventory.hosts) {
    if (!h.tpu_type.empty()) {
      ++tpus[h.tpu_type];
      tpu_simulated = tpu_simulated || h.simulated;
    }
    if (!h.runs_replicas) continue;
    std::vector<std::string> gpu_names;
    std::map<std::string, int> by_type;
    for (const auto& g : h.gpus) ++by_type[g.type.empty() ? g.model : g.type];
    for (const auto& [type, n] : by_type) gpu_names.push_back(absl::StrCat(n, " x ", type));
    hosts.push_back(absl::StrCat(h.name, ": ", h.cpu_milli / 1000.0, " schedulable CPUs, ",
                                 gpu_names.empty() ? "no GPUs" : absl::StrJoin(gpu_names, ", ")));
  }
  std::vector<std::string> tpu_names;
  for (const auto& [type, n] : tpus) tpu_names.push_back(absl::StrCat(n, " x ", type, " host (8 cores)"));
  return absl::StrCat(absl::StrJoin(hosts, "; "), "; TPU hosts: ",
                      tpu_names.empty() ? "none" : absl::StrJoin(tpu_names, ", "),
                      tpu_simulated ? " (simulated)" : "");
}

absl::Status CheckFeasible(const JobDemand& demand, const model::Inventory& inventory) {
  if (Place(demand, inventory, Usage{})) return absl::OkStatus();
  // Explain the first thing that can never be met.
  std::string why;
  if (demand.tpu_hosts > 0) {
    int have = 0;
    for (const auto& h : inventory.hosts) have += h.tpu_type == demand.tpu_type ? 1 : 0;
    if (have < demand.tpu_hosts) {
      why = absl::StrCat("it needs ", demand.tpu_hosts, " ", demand.tpu_type, " host", demand.tpu_hosts > 1 ? "s" : "",
                         " (", demand.tpu_accelerator, " with ", demand.tpu_cores, " cores) but this cluster has ",
                         have);
    }
  }
  if (why.empty()) {
    for (const auto& r : demand.replicas) {
      if (r.gpu_count == 0) continue;
      int best = 0;
      for (const auto& h : inventory.hosts) {
        int n = 0;
        for (const auto& g : h.gpus) n += g.type == r.gpu_type ? 1 : 0;
        best = std::max(best, n);
      }
      if (best < r.gpu_count) {
        why = absl::StrCat(r.TaskName(), " needs ", r.gpu_count, " x ", r.gpu_type, " on one host but the most any host has is ",
                           best);
        if (!r.gpu_implied_by.empty()) {
          // The job named no GPU: say what asked for this one, and how to
          // ask for one the cluster has.
          std::set<std::string> types;
          for (const auto& h : inventory.hosts) {
            for (const auto& g : h.gpus) {
              if (!g.type.empty()) types.insert(g.type);
            }
          }
          absl::StrAppend(&why, " (", r.gpu_implied_by, " means ", r.gpu_count, " x ", r.gpu_type, " for the ",
                          r.role, ")");
          if (!types.empty()) {
            std::string flag = absl::AsciiStrToLower(*types.begin());
            std::replace(flag.begin(), flag.end(), '_', '-');
            absl::StrAppend(&why, "; to use a GPU this cluster has (", absl::StrJoin(types, ", "),
                            "), submit with scaleTier CUSTOM and masterConfig.acceleratorConfig, e.g. --scale-tier "
                            "custom --master-machine-type n1-standard-8 --master-accelerator type=",
                            flag, ",count=1");
          }
        }
        break;
      }
    }
  }
  if (why.empty()) {
    int64_t total_cpu = 0;
    for (const auto& h : inventory.hosts) total_cpu += h.runs_replicas ? h.cpu_milli : 0;
    int64_t need = 0;
    for (const auto& r : demand.replicas) need += r.cpu_milli;
    why = absl::StrCat("its ", demand.replicas.size(), " replicas need ", need / 1000.0,
                       " schedulable CPUs in all but this cluster has ", total_cpu / 1000.0);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("This job can never run on this cluster: ", why, ". The cluster has: ", DescribeInventory(inventory),
                   "."));
}

std::optional<model::Placement> Place(const JobDemand& demand, const model::Inventory& inventory, const Usage& usage) {
  model::Placement placement;
  Usage trial = usage;  // reserve-on-all-then-commit: work on a copy
  auto get = [](const auto& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? typename std::decay_t<decltype(m)>::mapped_type{} : it->second;
  };
  // TPU hosts first: the scarcest resource of a TPU job.
  if (demand.tpu_hosts > 0) {
    for (const auto& h : inventory.hosts) {
      if (static_cast<int>(placement.tpu_hosts.size()) == demand.tpu_hosts) break;
      if (h.tpu_type != demand.tpu_type || get(trial.tpu_busy, h.name)) continue;
      placement.tpu_hosts.push_back(h.name);
      placement.tpu_simulated = placement.tpu_simulated || h.simulated;
    }
    if (static_cast<int>(placement.tpu_hosts.size()) < demand.tpu_hosts) return std::nullopt;
    for (const auto& h : placement.tpu_hosts) trial.tpu_busy[h] = true;
  }
  // Replicas: first fit, GPUs by index.
  for (const auto& r : demand.replicas) {
    bool placed = false;
    for (const auto& h : inventory.hosts) {
      if (!h.runs_replicas) continue;
      if (get(trial.cpu_milli, h.name) + r.cpu_milli > h.cpu_milli) continue;
      if (h.memory_mib > 0 && get(trial.memory_mib, h.name) + r.memory_mib > h.memory_mib) continue;
      std::vector<int> chosen;
      if (r.gpu_count > 0) {
        const auto busy = get(trial.gpus, h.name);
        for (const auto& g : h.gpus) {
          if (static_cast<int>(chosen.size()) == r.gpu_count) break;
          if (g.type != r.gpu_type) continue;
          if (std::find(busy.begin(), busy.end(), g.index) != busy.end()) continue;
          chosen.push_back(g.index);
        }
        if (static_cast<int>(chosen.size()) < r.gpu_count) continue;
      }
      trial.cpu_milli[h.name] += r.cpu_milli;
      trial.memory_mib[h.name] += r.memory_mib;
      auto& busy = trial.gpus[h.name];
      busy.insert(busy.end(), chosen.begin(), chosen.end());
      placement.replicas[r.TaskName()] = {h.name, chosen};
      placed = true;
      break;
    }
    if (!placed) return std::nullopt;
  }
  return placement;
}

}  // namespace mle::scheduler
