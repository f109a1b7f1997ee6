#include "scheduler/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace mle::scheduler {
namespace {

using R = QuotaResource;

// How many holders a reason names before "and N more".
constexpr size_t kNamedHolders = 3;

std::string Plural(int64_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string Cpus(int64_t milli) { return absl::StrCat(milli / 1000.0, milli == 1000 ? " CPU" : " CPUs"); }

// "job a"; another project's job is not named: a waiting job's reason is
// read by callers who may hold no role on that project (docs/access.md).
std::string NameOf(const JobKey& key, absl::string_view project) {
  if (key.project == project) return absl::StrCat("job ", key.job_id);
  return "a job of another project";
}

// The first resource a job lacks now, as the user sees it: TPU hosts of a
// generation, GPUs of a type, CPUs, memory; or that what is free is split
// across hosts. Holders are counted in the same unit.
struct Shortfall {
  enum class Kind { kTpuHosts, kGpus, kCpus, kMemory, kSplit } kind;
  std::string type;  // TPU host or GPU type
  int64_t need = 0;
  int64_t free = 0;

  std::string Describe() const {
    switch (kind) {
      case Kind::kTpuHosts:
        return absl::StrCat("needs ", Plural(need, type + " host", type + " hosts"), "; ", free, " free");
      case Kind::kGpus:
        return absl::StrCat("needs ", Plural(need, type + " GPU", type + " GPUs"), "; ", free, " free");
      case Kind::kCpus:
        return absl::StrCat("needs ", Cpus(need), "; ", free / 1000.0, " free");
      case Kind::kMemory:
        return absl::StrCat("needs ", need, " MiB of memory; ", free, " MiB free");
      case Kind::kSplit:
        return absl::StrCat("needs ", Cpus(need),
                            " for its replicas and enough is free in all, but not on the hosts it must share");
    }
    return "";
  }

  // How much of the lacking resource `demand` placed as `placement` holds.
  int64_t HeldBy(const model::JobDemand& demand, const model::Placement& placement,
                 const std::map<std::string, const model::Host*>& hosts) const {
    int64_t n = 0;
    switch (kind) {
      case Kind::kTpuHosts:
        for (const auto& h : placement.tpu_hosts) {
          auto it = hosts.find(h);
          if (it != hosts.end() && it->second->tpu_type == type) ++n;
        }
        return n;
      case Kind::kGpus:
        for (const auto& r : demand.replicas) {
          auto it = placement.replicas.find(r.TaskName());
          if (r.gpu_type == type && it != placement.replicas.end()) n += it->second.gpu_indices.size();
        }
        return n;
      case Kind::kCpus:
      case Kind::kSplit:
        for (const auto& r : demand.replicas) n += placement.replicas.count(r.TaskName()) ? r.cpu_milli : 0;
        return n;
      case Kind::kMemory:
        for (const auto& r : demand.replicas) n += placement.replicas.count(r.TaskName()) ? r.memory_mib : 0;
        return n;
    }
    return n;
  }

  std::string FormatHeld(int64_t amount) const {
    if (kind == Kind::kCpus || kind == Kind::kSplit) return absl::StrCat(amount / 1000.0);
    if (kind == Kind::kMemory) return absl::StrCat(amount, " MiB");
    return absl::StrCat(amount);
  }
};

int64_t Get(const std::map<std::string, int64_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

Shortfall ShortfallOf(const model::JobDemand& demand, const model::Inventory& inventory, const Usage& usage) {
  using K = Shortfall::Kind;
  if (demand.tpu_hosts > 0) {
    int64_t free = 0;
    for (const auto& h : inventory.hosts) {
      auto busy = usage.tpu_busy.find(h.name);
      if (h.tpu_type == demand.tpu_type && (busy == usage.tpu_busy.end() || !busy->second)) ++free;
    }
    if (free < demand.tpu_hosts) return {K::kTpuHosts, demand.tpu_type, demand.tpu_hosts, free};
  }
  std::map<std::string, int64_t> gpus_needed;
  int64_t cpu_needed = 0;
  int64_t memory_needed = 0;
  for (const auto& r : demand.replicas) {
    if (r.gpu_count > 0) gpus_needed[r.gpu_type] += r.gpu_count;
    cpu_needed += r.cpu_milli;
    memory_needed += r.memory_mib;
  }
  for (const auto& [type, need] : gpus_needed) {
    int64_t free = 0;
    for (const auto& h : inventory.hosts) {
      if (!h.runs_replicas) continue;
      auto busy = usage.gpus.find(h.name);
      for (const auto& g : h.gpus) {
        const bool taken = busy != usage.gpus.end() &&
                           std::find(busy->second.begin(), busy->second.end(), g.index) != busy->second.end();
        if (g.type == type && !taken) ++free;
      }
    }
    if (free < need) return {K::kGpus, type, need, free};
  }
  int64_t cpu_free = 0;
  int64_t memory_free = 0;
  bool memory_accounted = false;
  for (const auto& h : inventory.hosts) {
    if (!h.runs_replicas) continue;
    cpu_free += std::max<int64_t>(0, h.cpu_milli - Get(usage.cpu_milli, h.name));
    if (h.memory_mib > 0) {
      memory_accounted = true;
      memory_free += std::max<int64_t>(0, h.memory_mib - Get(usage.memory_mib, h.name));
    }
  }
  if (cpu_free < cpu_needed) return {K::kCpus, "", cpu_needed, cpu_free};
  if (memory_accounted && memory_free < memory_needed) return {K::kMemory, "", memory_needed, memory_free};
  return {K::kSplit, "", cpu_needed, cpu_free};
}

constexpr int8_t kUnknown = -2;
constexpr int8_t kFits = -1;

// A project's quota limits in one region. What is in use against them is
// what the project holds in all regions (ProjectState::held).
struct RegionState {
  const QuotaLimits* limits = nullptr;
  // By shape, until the project's next start: the resource whose quota
  // blocks it (kFits, kUnknown), and why it waits.
  std::vector<int8_t> verdicts;
  std::vector<const std::string*> reasons;
};

struct ProjectState {
  const std::string* name = nullptr;
  const ProjectQueue* queue = nullptr;
  ProjectQueue::const_iterator next;
  int64_t weight = 1;
  ResourceAmounts held;  // with this pass's starts
  DominantShare share;
  double key = 0;  // share.fraction / weight: the lower, the sooner
  const std::string* above_share_reason = nullptr;  // until the next start
  std::map<std::string, RegionState, std::less<>> regions;
  const std::string* last_region_name = nullptr;
  RegionState* last_region = nullptr;
};

class Planner {
 public:
  explicit Planner(const PlanInput& in)
      : in_(in), capacity_(CapacityOf(in.inventory)), now_usage_(in.usage), future_usage_(in.usage) {
    // What jobs already being stopped hold is free soon.
    for (const auto& h : in_.held) {
      if (h.stopping && in_.places_jobs) future_usage_.Remove(*h.demand, *h.placement);
    }
  }

  Plan Run() {
    // The projects in play share the cluster: those that wait and those that hold.
    std::set<absl::string_view> in_play;
    for (const auto& [project, queue] : in_.queues) {
      if (!queue.empty()) in_play.insert(project);
    }
    for (const auto& [project, holding] : in_.holdings) {
      if (holding.total[R::kJobs] > 0) in_play.insert(project);
    }
    for (absl::string_view project : in_play) total_weight_ += in_.shares.WeightOf(project);

    std::set<std::pair<double, size_t>> order;  // (key, index): ties by project name
    for (const auto& [project, queue] : in_.queues) {
      if (queue.empty()) continue;
      ProjectState p;
      p.name = &project;
      p.queue = &queue;
      p.next = queue.begin();
      p.weight = in_.shares.WeightOf(project);
      if (auto h = in_.holdings.find(project); h != in_.holdings.end()) p.held = h->second.total;
      Rekey(p);
      order.emplace(p.key, projects_.size());
      projects_.push_back(std::move(p));
    }
    // Jobs that preempted others take what their victims freed first.
    if (in_.claimants != nullptr) {
      for (const JobKey& key : *in_.claimants) {
        auto project = std::find_if(projects_.begin(), projects_.end(),
                                    [&key](const ProjectState& p) { return *p.name == key.project; });
        if (project == projects_.end()) continue;
        for (auto it = project->queue->begin(); it != project->queue->end(); ++it) {
          if (it->second->key != key) continue;
          considered_.insert(it->second);
          if (Consider(*project, *it->second)) {
            order.clear();
            for (size_t i = 0; i < projects_.size(); ++i) order.emplace(projects_[i].key, i);
          }
          break;
        }
      }
    }
    while (!order.empty()) {
      const size_t i = order.begin()->second;
      order.erase(order.begin());
      ProjectState& p = projects_[i];
      // Until it starts a job, the project keeps its key: it stays first.
      while (p.next != p.queue->end()) {
        const QueuedJob& job = *(p.next++)->second;
        if (considered_.count(&job)) continue;
        if (Consider(p, job)) {
          if (p.next != p.queue->end()) order.emplace(p.key, i);
          break;
        }
      }
    }
    Finish();
    return std::move(plan_);
  }

 private:
  // Decides one job: true when it starts.
  bool Consider(ProjectState& p, const QueuedJob& job) {
    RegionState& region = RegionOf(p, job.region);
    if (auto r = QuotaVerdict(p, region, job)) {
      const std::string*& reason = Memo(region.reasons, job.shape);
      if (reason == nullptr) {
        reason = AtTheEnd([this, &p, &job, resource = *r] {
          return QuotaReason(p, job, resource, p.held[resource]);
        });
      }
      return Wait(job, reason);
    }
    if (!in_.places_jobs) return Start(p, job, {});

    if (const std::string* reason = Memo(no_room_, job.shape)) return WaitForResources(p, job, reason);
    auto placement = Place(job.demand, in_.inventory, now_usage_);
    if (!placement) {
      const std::string* plain =
          AtTheEnd([this, &job] { return ShortfallOf(job.demand, in_.inventory, now_usage_).Describe(); });
      Memo(no_room_, job.shape) = plain;
      if (!reservation_tried_) {
        reservation_tried_ = true;
        if (in_.preemption) {
          if (const std::string* reason = Preempt(p, job)) return Wait(job, reason);
        }
        if (const std::string* head_reason = Reserve(job)) return WaitForResources(p, job, head_reason);
      }
      return WaitForResources(p, job, plain);
    }
    if (reservation_ && in_.now + job.max_running > reservation_->from) {
      if (const std::string* reason = Memo(delays_, job.shape)) return WaitForResources(p, job, reason);
      Usage later = reservation_->at;
      later.Add(job.demand, *placement);
      if (!Place(reservation_->job->demand, in_.inventory, later)) {
        const std::string* reason = Keep(DelayReason(job));
        Memo(delays_, job.shape) = reason;
        return WaitForResources(p, job, reason);
      }
      // It will still hold these when the head starts.
      reservation_->at = std::move(later);
    }
    return Start(p, job, *std::move(placement));
  }

  // QuotaBlock, once per shape until the project's next start (jobs of one
  // shape count alike).
  std::optional<R> QuotaVerdict(const ProjectState& p, RegionState& region, const QueuedJob& job) {
    if (static_cast<size_t>(job.shape) >= region.verdicts.size()) region.verdicts.resize(job.shape + 1, kUnknown);
    int8_t& verdict = region.verdicts[job.shape];
    if (verdict == kUnknown) {
      auto r = QuotaBlock(*region.limits, p.held, job.amounts);
      verdict = r ? static_cast<int8_t>(*r) : kFits;
    }
    if (verdict == kFits) return std::nullopt;
    return static_cast<R>(verdict);
  }

  bool Start(ProjectState& p, const QueuedJob& job, model::Placement placement) {
    if (in_.places_jobs) {
      now_usage_.Add(job.demand, placement);
      future_usage_.Add(job.demand, placement);
    }
    plan_.starts.push_back({&job, std::move(placement)});
    for (auto& [name, region] : p.regions) {
      region.reasons.clear();
      region.verdicts.clear();
    }
    p.held.Add(job.amounts);
    Rekey(p);
    return true;
  }

  bool Wait(const QueuedJob& job, const std::string* reason) {
    waits_.push_back({&job, reason});
    return false;
  }

  // A reason told in the numbers of the end of the pass, once every start
  // is counted: they hold until something else starts or ends, so a pass
  // that only refills a freed slot does not rewrite what waiting jobs say.
  const std::string* AtTheEnd(std::function<std::string()> text) {
    std::string* reason = &plan_.reasons.emplace_back();
    told_at_the_end_.emplace_back(reason, std::move(text));
    return reason;
  }

  void Finish() {
    for (auto& [reason, text] : told_at_the_end_) *reason = text();
    plan_.waiting = static_cast<int64_t>(waits_.size());
    for (const auto& w : waits_) {
      if (w.job->reason != *w.reason) plan_.new_reasons.push_back(w);
    }
  }

  // A job that waits for resources others go first for. Over its share
  // while a project under its own waits, that is the reason that matters.
  bool WaitForResources(ProjectState& p, const QueuedJob& job, const std::string* reason) {
    if (!AboveShare(p)) {
      below_share_waiting_ = true;
      return Wait(job, reason);
    }
    if (!below_share_waiting_) return Wait(job, reason);
    if (p.above_share_reason == nullptr) {
      p.above_share_reason = AtTheEnd([this, &p] {
        return absl::StrCat("project ", *p.name, " is above its fair share (it holds ",
                            std::lround(p.share.fraction * 100), "% of the cluster's ",
                            ShareResourceName(p.share.resource), "; its share is ",
                            std::lround(100.0 * static_cast<double>(p.weight) / static_cast<double>(total_weight_)),
                            "%): waiting for projects below theirs");
      });
    }
    return Wait(job, p.above_share_reason);
  }

  bool AboveShare(const ProjectState& p) const {
    // fraction > weight / total, without dividing.
    return p.share.fraction * static_cast<double>(total_weight_) > static_cast<double>(p.weight) + 1e-9;
  }
  bool AtShare(const ProjectState& p) const {
    return std::abs(p.share.fraction * static_cast<double>(total_weight_) - static_cast<double>(p.weight)) <= 1e-9;
  }

  void Rekey(ProjectState& p) {
    p.share = DominantShareOf(p.held, capacity_);
    p.key = p.share.fraction / static_cast<double>(p.weight);
    p.above_share_reason = nullptr;
  }

  RegionState& RegionOf(ProjectState& p, const std::string& region) {
    // A project's jobs are mostly in one region.
    if (p.last_region != nullptr && *p.last_region_name == region) return *p.last_region;
    auto it = p.regions.find(region);
    if (it == p.regions.end()) it = p.regions.emplace(region, NewRegion(p, region)).first;
    p.last_region_name = &it->first;
    p.last_region = &it->second;
    return it->second;
  }

  RegionState NewRegion(const ProjectState& p, const std::string& region) const {
    RegionState s;
    s.limits = &in_.quotas.For(*p.name, region);
    return s;
  }

  std::string QuotaReason(const ProjectState& p, const QueuedJob& job, R r, int64_t in_use) const {
    std::vector<QuotaHolder> holders;
    for (const auto& h : in_.held) {
      if (h.key->project == *p.name && (*h.amounts)[r] > 0) {
        holders.push_back({h.key->job_id, (*h.amounts)[r], *h.region});
      }
    }
    for (const auto& s : plan_.starts) {
      if (s.job->key.project == *p.name && s.job->amounts[r] > 0) {
        holders.push_back({s.job->key.job_id, s.job->amounts[r], s.job->region});
      }
    }
    return DescribeQuotaWait(in_.quotas, *p.name, job.region, r, in_use, job.amounts[r], holders);
  }

  // Step 4 (plan.h): the reason `head` waits while the jobs it preempts (or
  // that were stopping already) stop; null when no set of candidates frees
  // enough.
  const std::string* Preempt(const ProjectState& p, const QueuedJob& head) {
    // Enough is being freed already: wait for it, preempt nothing more.
    if (auto placement = Place(head.demand, in_.inventory, future_usage_)) {
      std::vector<const HeldJob*> stopping;
      for (const auto& h : in_.held) {
        if (h.stopping) stopping.push_back(&h);
      }
      if (stopping.empty()) return nullptr;  // nothing stops: it is the planner's own starts
      Claim(head, *placement);
      std::string named = stopping.size() == 1 ? NameOf(*stopping[0]->key, head.key.project)
                                               : Plural(static_cast<int64_t>(stopping.size()), "job", "jobs");
      return Keep(absl::StrCat(ShortfallOf(head.demand, in_.inventory, now_usage_).Describe(), ": waiting for ",
                               named, " to stop; it starts then"));
    }
    const bool below_share = !AboveShare(p) && !AtShare(p);
    std::map<std::string, ResourceAmounts, std::less<>> taken;  // what the victims hold, by project
    auto candidate = [&](const HeldJob& h) {
      if (!h.preemptible || h.stopping) return false;
      if (h.key->project == head.key.project) return h.priority < head.priority;
      if (!in_.preemption_for_share || !below_share) return false;
      // The victim's project stays at or above its share without it.
      auto holding = in_.holdings.find(h.key->project);
      if (holding == in_.holdings.end()) return false;
      ResourceAmounts left = holding->second.total;
      if (auto t = taken.find(h.key->project); t != taken.end()) left.Subtract(t->second);
      left.Subtract(*h.amounts);
      const double fraction = DominantShareOf(left, capacity_).fraction;
      return fraction * static_cast<double>(total_weight_) + 1e-9 >=
             static_cast<double>(in_.shares.WeightOf(h.key->project));
    };
    std::vector<const HeldJob*> candidates;
    for (const auto& h : in_.held) candidates.push_back(&h);
    std::sort(candidates.begin(), candidates.end(), [](const HeldJob* a, const HeldJob* b) {
      return std::tie(a->priority, b->started, *a->key) < std::tie(b->priority, a->started, *b->key);
    });
    Usage at = future_usage_;
    std::vector<const HeldJob*> victims;
    std::optional<model::Placement> placement;
    for (const HeldJob* h : candidates) {
      if (!candidate(*h)) continue;
      victims.push_back(h);
      taken[h->key->project].Add(*h->amounts);
      at.Remove(*h->demand, *h->placement);
      if ((placement = Place(head.demand, in_.inventory, at))) break;
    }
    if (!placement) return nullptr;
    // Keep running whichever the head fits without, from the last taken.
    for (size_t i = victims.size(); i-- > 0;) {
      Usage without = at;
      without.Add(*victims[i]->demand, *victims[i]->placement);
      if (auto fits = Place(head.demand, in_.inventory, without)) {
        at = std::move(without);
        placement = std::move(fits);
        victims.erase(victims.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    future_usage_ = std::move(at);
    Claim(head, *placement);
    Plan::Preemption preemption{&head, {}};
    std::vector<std::string> named;
    for (const HeldJob* v : victims) {
      preemption.victims.push_back(v->key);
      named.push_back(v->key->project == head.key.project
                          ? absl::StrCat("job ", v->key->job_id, " (priority ", v->priority, ")")
                          : absl::StrCat("a job of project ", v->key->project, ", above its fair share"));
    }
    plan_.preemption = std::move(preemption);
    return Keep(absl::StrCat(ShortfallOf(head.demand, in_.inventory, now_usage_).Describe(), ": preempting ",
                             absl::StrJoin(named, ", "), " for it; it starts once ",
                             victims.size() == 1 ? "that job stops" : "they stop"));
  }

  // `head` counts on `placement` once what stops is free: nothing started
  // behind it in this pass may take that (a reservation from now).
  void Claim(const QueuedJob& head, const model::Placement& placement) {
    reservation_ = ReservationState{&head, in_.now, future_usage_};  // without the head, as Reserve's
    plan_.reservation = Plan::Reservation{&head, in_.now};
    future_usage_.Add(head.demand, placement);
  }

  // Reserves for `head` what it needs at the earliest time the jobs that
  // hold it end; the reason it waits, naming them (null when no time
  // frees enough, e.g. the cluster shrank since it was accepted).
  const std::string* Reserve(const QueuedJob& head) {
    struct Release {
      absl::Time deadline;
      const JobKey* key;
      const model::JobDemand* demand;
      const model::Placement* placement;
    };
    std::vector<Release> releases;
    for (const auto& h : in_.held) releases.push_back({h.deadline, h.key, h.demand, h.placement});
    for (const auto& s : plan_.starts) {
      releases.push_back({in_.now + s.job->max_running, &s.job->key, &s.job->demand, &s.placement});
    }
    std::sort(releases.begin(), releases.end(), [](const Release& a, const Release& b) {
      return std::tie(a.deadline, *a.key) < std::tie(b.deadline, *b.key);
    });
    Usage at = now_usage_;
    size_t released = 0;
    for (; released < releases.size(); ++released) {
      const Release& r = releases[released];
      at.Remove(*r.demand, *r.placement);
      // Jobs that end at the same time free their resources together.
      if (released + 1 < releases.size() && releases[released + 1].deadline == r.deadline) continue;
      if (Place(head.demand, in_.inventory, at)) break;
    }
    if (released == releases.size()) return nullptr;
    const absl::Time from = releases[released].deadline;
    reservation_ = ReservationState{&head, from, std::move(at)};
    plan_.reservation = Plan::Reservation{&head, from};

    const Shortfall shortfall = ShortfallOf(head.demand, in_.inventory, now_usage_);
    std::map<std::string, const model::Host*> hosts;
    for (const auto& h : in_.inventory.hosts) hosts[h.name] = &h;
    std::vector<std::pair<const Release*, int64_t>> holders;
    for (size_t i = 0; i <= released; ++i) {
      const int64_t amount = shortfall.HeldBy(*releases[i].demand, *releases[i].placement, hosts);
      if (amount > 0) holders.emplace_back(&releases[i], amount);
    }
    const std::string& project = head.key.project;
    std::string text = shortfall.Describe();
    if (holders.size() == 1) {
      absl::StrAppend(&text, ": ", NameOf(*holders[0].first->key, project), " holds ",
                      shortfall.FormatHeld(holders[0].second), " until it ends, at the latest ",
                      FormatWhen(holders[0].first->deadline, in_.now), " by its maxRunningTime");
    } else if (!holders.empty()) {
      std::vector<std::string> named;
      for (size_t i = 0; i < holders.size() && i < kNamedHolders; ++i) {
        named.push_back(absl::StrCat(NameOf(*holders[i].first->key, project), " holds ",
                                     shortfall.FormatHeld(holders[i].second), " until ",
                                     FormatWhen(holders[i].first->deadline, in_.now)));
      }
      absl::StrAppend(&text, ": ", absl::StrJoin(named, ", "));
      if (holders.size() > kNamedHolders) absl::StrAppend(&text, " and ", holders.size() - kNamedHolders, " more jobs");
      absl::StrAppend(&text, " at the latest, by their maxRunningTime");
    }
    absl::StrAppend(&text, "; reserved for it from ", FormatWhen(from, in_.now));
    return Keep(std::move(text));
  }

  std::string DelayReason(const QueuedJob& job) const {
    const QueuedJob& head = *reservation_->job;
    return absl::StrCat("fits now, but would delay ", NameOf(head.key, job.key.project),
                        head.key.project == job.key.project && head.priority > job.priority
                            ? absl::StrCat(" (priority ", head.priority, ")")
                            : "",
                        ", first in line, which has what it needs reserved from ",
                        FormatWhen(reservation_->from, in_.now), "; this job's maxRunningTime ends later");
  }

  const std::string*& Memo(std::vector<const std::string*>& memo, int32_t shape) {
    if (static_cast<size_t>(shape) >= memo.size()) memo.resize(shape + 1, nullptr);
    return memo[shape];
  }

  const std::string* Keep(std::string reason) { return &plan_.reasons.emplace_back(std::move(reason)); }

  struct ReservationState {
    const QueuedJob* job;
    absl::Time from;
    Usage at;  // the cluster at `from`, without the head, with the jobs started beside it
  };

  const PlanInput& in_;
  const ResourceAmounts capacity_;
  Usage now_usage_;  // with this pass's starts
  // What will be in use once the jobs being stopped (and those preempted in
  // this pass) are gone, with this pass's starts and the head's claim.
  Usage future_usage_;
  std::set<const QueuedJob*> considered_;  // the claimants, decided before the others
  int64_t total_weight_ = 0;
  std::vector<ProjectState> projects_;
  std::optional<ReservationState> reservation_;
  bool reservation_tried_ = false;
  bool below_share_waiting_ = false;
  // Per shape, why it cannot be placed now / without delaying the head.
  // Both only grow truer within a pass: nothing is freed during one.
  std::vector<const std::string*> no_room_;
  std::vector<const std::string*> delays_;
  std::vector<Plan::Wait> waits_;
  std::vector<std::pair<std::string*, std::function<std::string()>>> told_at_the_end_;
  Plan plan_;
};

}  // namespace

std::string FormatWhen(absl::Time t, absl::Time now) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  if (absl::FormatTime("%Y-%m-%d", t, utc) == absl::FormatTime("%Y-%m-%d", now, utc)) {
    return absl::FormatTime("%H:%M UTC", t, utc);
  }
  return absl::FormatTime("%Y-%m-%d %H:%M UTC", t, utc);
}

Plan PlanPass(const PlanInput& input) { return Planner(input).Run(); }

}  // namespace mle::scheduler
