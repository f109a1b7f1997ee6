#include "executor/slurm/slurm_parsers.h"

#include <charconv>
#include <cstddef>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mle::executor::slurm {
namespace {

using nlohmann::json;

constexpr size_t kMaxHosts = 65536;

bool ParseInt64(absl::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  return ec == std::errc() && ptr == end;
}

// A number as Slurm writes it: a plain integer (v0.0.38) or
// {"set": bool, "infinite": bool, "number": n} (v0.0.39+). Unset, infinite,
// missing or non-numeric values give `fallback`.
int64_t Number(const json& j, const char* key, int64_t fallback = 0) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  const json& v = *it;
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_object()) {
    // Flags of another type (never Slurm's own) read as unset: value<bool>
    // would throw on them.
    auto flag = [&v](const char* name, bool absent) {
      auto f = v.find(name);
      if (f == v.end()) return absent;
      return f->is_boolean() ? f->get<bool>() : !absent;
    };
    if (!flag("set", true) || flag("infinite", false)) return fallback;
    auto n = v.find("number");
    if (n != v.end() && n->is_number_integer()) return n->get<int64_t>();
  }
  return fallback;
}

std::string String(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// Expands one bracket body "01-03,7" into its numbers, keeping the padding
// of each range's lower bound.
absl::Status ExpandBracket(absl::string_view body, std::vector<std::string>* out) {
  for (absl::string_view part : absl::StrSplit(body, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> bounds = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int64_t lo = 0;
    int64_t hi = 0;
    if (!ParseInt64(bounds[0], &lo) || lo < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad hostlist range \"", part, "\""));
    }
    hi = lo;
    if (bounds.size() == 2 && (!ParseInt64(bounds[1], &hi) || hi < lo)) {
      return absl::InvalidArgumentError(absl::StrCat("bad hostlist range \"", part, "\""));
    }
    if (static_cast<size_t>(hi - lo) >= kMaxHosts) {
      return absl::InvalidArgumentError(absl::StrCat("hostlist range \"", part, "\" is too large"));
    }
    const size_t width = bounds[0].size();
    for (int64_t n = lo;; ++n) {  // stops at hi before ++n: hi may be INT64_MAX
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out->push_back(std::move(digits));
      if (out->size() > kMaxHosts) return absl::InvalidArgumentError("hostlist expands to too many hosts");
      if (n == hi) break;
    }
  }
  return absl::OkStatus();
}

// Expands one item, e.g. "rack[1-2]-n[01-02]", appending to `hosts`.
absl::Status ExpandItem(absl::string_view item, std::vector<std::string>* hosts) {
  std::vector<std::string> prefixes = {""};
  size_t pos = 0;
  while (pos < item.size()) {
    size_t open = item.find('[', pos);
    absl::string_view literal = item.substr(pos, open == absl::string_view::npos ? absl::string_view::npos : open - pos);
    if (literal.find(']') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unbalanced ']' in hostlist item \"", item, "\""));
    }
    for (auto& p : prefixes) absl::StrAppend(&p, literal);
    if (open == absl::string_view::npos) break;
    size_t close = item.find(']', open);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unbalanced '[' in hostlist item \"", item, "\""));
    }
    std::vector<std::string> numbers;
    if (absl::Status s = ExpandBracket(item.substr(open + 1, close - open - 1), &numbers); !s.ok()) return s;
    if (prefixes.size() * numbers.size() > kMaxHosts) {
      return absl::InvalidArgumentError("hostlist expands to too many hosts");
    }
    std::vector<std::string> next;
    next.reserve(prefixes.size() * numbers.size());
    for (const auto& p : prefixes) {
      for (const auto& n : numbers) next.push_back(absl::StrCat(p, n));
    }
    prefixes = std::move(next);
    pos = close + 1;
  }
  for (auto& p : prefixes) hosts->push_back(std::move(p));
  if (hosts->size() > kMaxHosts) return absl::InvalidArgumentError("hostlist expands to too many hosts");
  return absl::OkStatus();
}

std::string ReasonText(absl::string_view reason) {
  if (reason.empty() || reason == "None") return "";
  return std::string(reason);
}

}  // namespace

absl::StatusOr<SbatchSubmission> ParseSbatchParsable(absl::string_view output) {
  absl::string_view text = absl::StripAsciiWhitespace(output);
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits(';', 1));
  SbatchSubmission sub;
  if (!ParseInt64(parts[0], &sub.job_id) || sub.job_id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sbatch did not print a job id: \"", text, "\""));
  }
  if (parts.size() == 2) {
    sub.cluster = std::string(parts[1]);
    if (sub.cluster.empty() || sub.cluster.find_first_of(" \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("sbatch printed a malformed cluster: \"", text, "\""));
    }
  }
  return sub;
}

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist) {
  std::vector<std::string> hosts;
  hostlist = absl::StripAsciiWhitespace(hostlist);
  if (hostlist.empty() || hostlist == "(null)") return hosts;
  // Split at top-level commas only (commas inside brackets list numbers).
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= hostlist.size(); ++i) {
    const char c = i < hostlist.size() ? hostlist[i] : ',';
    if (c == '[') {
      if (++depth > 1) return absl::InvalidArgumentError(absl::StrCat("nested '[' in hostlist \"", hostlist, "\""));
    } else if (c == ']') {
      if (--depth < 0) return absl::InvalidArgumentError(absl::StrCat("unbalanced ']' in hostlist \"", hostlist, "\""));
    } else if (c == ',' && depth == 0) {
      absl::string_view item = absl::StripAsciiWhitespace(hostlist.substr(start, i - start));
      start = i + 1;
      if (item.empty()) continue;
      if (absl::Status s = ExpandItem(item, &hosts); !s.ok()) return s;
    }
  }
  if (depth != 0) return absl::InvalidArgumentError(absl::StrCat("unbalanced '[' in hostlist \"", hostlist, "\""));
  return hosts;
}

absl::StatusOr<std::vector<SlurmJob>> ParseJobsTable(absl::string_view text, bool named) {
  std::vector<SlurmJob> out;
  const size_t fields = named ? 8 : 7;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("squeue printed a line mlengine cannot read (", why, "): \"",
                       absl::CHexEscape(line.substr(0, 200)), "\""));
    };
    // The name, last, may hold '|': it takes the rest of the line.
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits('|', fields - 1));
    if (f.size() != fields) return bad(absl::StrCat(f.size(), " fields, not ", fields));
    if (!named && absl::StrContains(f.back(), '|')) return bad(absl::StrCat("more than ", fields, " fields"));
    SlurmJob job;
    if (!ParseInt64(f[0], &job.job_id) || job.job_id <= 0) return bad("no job id");
    // HetJobID and HetJobOffset are "N/A" for a job of one component.
    if (f[1] != "N/A" && !ParseInt64(f[1], &job.het_job_id)) return bad("HetJobID is not a number");
    int64_t offset = 0;
    if (f[2] != "N/A" && (!ParseInt64(f[2], &offset) || offset < 0 || offset > INT32_MAX)) {
      return bad("HetJobOffset is not a component index");
    }
    job.het_job_offset = static_cast<int>(offset);
    job.account = f[3] == "(null)" ? "" : std::string(f[3]);
    job.state = std::string(f[4]);
    if (job.state.empty()) return bad("no state");
    job.state_reason = ReasonText(f[5]);
    if (!f[6].empty() && f[6] != "(null)") {
      auto nodes = ExpandHostlist(f[6]);
      if (!nodes.ok()) return bad(nodes.status().message());
      job.nodes = *std::move(nodes);
    }
    if (named) job.name = std::string(f[7]);
    out.push_back(std::move(job));
  }
  return out;
}

std::map<std::string, int64_t> ParseGres(absl::string_view gres) {
  std::map<std::string, int64_t> out;
  // Top-level commas only: "(S:0-1)" holds none, but be safe with parens.
  int depth = 0;
  size_t start = 0;
  auto item = [&](absl::string_view it) {
    if (auto paren = it.find('('); paren != absl::string_view::npos) it = it.substr(0, paren);
    std::vector<absl::string_view> parts = absl::StrSplit(it, ':');
    if (parts.empty() || parts[0].empty() || parts[0] == "(null)") return;
    int64_t count = 1;
    absl::string_view type;
    if (parts.size() >= 2 && !ParseInt64(parts.back(), &count)) {
      count = 1;
      type = parts[1];
    } else if (parts.size() >= 3) {
      type = parts[1];
    }
    auto add = [&out, count](std::string key) {  // saturating: no count is trusted to fit
      int64_t& total = out[std::move(key)];
      if (__builtin_add_overflow(total, count, &total)) total = count > 0 ? INT64_MAX : INT64_MIN;
    };
    add(std::string(parts[0]));
    if (!type.empty()) add(absl::StrCat(parts[0], ":", type));
  };
  for (size_t i = 0; i <= gres.size(); ++i) {
    if (i == gres.size() || (gres[i] == ',' && depth == 0)) {
      item(gres.substr(start, i - start));
      start = i + 1;
    } else if (gres[i] == '(') {
      ++depth;
    } else if (gres[i] == ')') {
      --depth;
    }
  }
  return out;
}

absl::StatusOr<std::vector<SlurmNode>> ParseNodesJson(absl::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return absl::InvalidArgumentError("sinfo output is not JSON");
  auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array()) return absl::InvalidArgumentError("sinfo output has no \"nodes\" list");
  std::vector<SlurmNode> out;
  for (const json& n : *nodes) {
    SlurmNode node;
    node.name = String(n, "name");
    if (node.name.empty()) return absl::InvalidArgumentError("a node in sinfo output has no name");
    node.address = String(n, "address");
    if (node.address.empty()) node.address = node.name;
    node.cpus = static_cast<int>(Number(n, "cpus"));
    node.memory_mib = Number(n, "real_memory");
    node.gres = ParseGres(String(n, "gres"));
    std::string features = String(n, "active_features");
    if (features.empty()) features = String(n, "features");
    for (absl::string_view f : absl::StrSplit(features, ',', absl::SkipEmpty())) node.features.insert(std::string(f));
    auto st = n.find("state");
    if (st != n.end() && st->is_string()) node.state = absl::AsciiStrToLower(st->get<std::string>());
    if (st != n.end() && st->is_array() && !st->empty() && st->front().is_string()) {
      node.state = absl::AsciiStrToLower(st->front().get<std::string>());
    }
    if (auto flags = n.find("state_flags"); flags != n.end() && flags->is_array()) {
      for (const json& f : *flags) {
        if (f.is_string()) node.state_flags.push_back(absl::AsciiStrToUpper(f.get<std::string>()));
      }
    }
    // v0.0.39+: "state" is a list of flags, the first being the base state.
    if (st != n.end() && st->is_array()) {
      for (size_t i = 1; i < st->size(); ++i) {
        if ((*st)[i].is_string()) node.state_flags.push_back(absl::AsciiStrToUpper((*st)[i].get<std::string>()));
      }
    }
    out.push_back(std::move(node));
  }
  return out;
}

bool SlurmNode::Lost() const {
  if (state == "down" || state == "fail" || state == "failing" || state == "unknown") return true;
  for (const auto& f : state_flags) {
    if (f == "NOT_RESPONDING" || f == "FAIL" || f == "POWERED_DOWN") return true;
  }
  return false;
}

absl::StatusOr<std::vector<SlurmAssociation>> ParseAssociations(absl::string_view output) {
  std::vector<SlurmAssociation> out;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    line = absl::StripTrailingAsciiWhitespace(line);
    std::vector<absl::string_view> f = absl::StrSplit(line, '|');
    if (f.size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("sacctmgr association line \"", line, "\" has not 4 fields (Account|User|GrpJobs|GrpTRES)"));
    }
    SlurmAssociation a{std::string(f[0]), std::string(f[1]), {}};
    if (!f[2].empty()) {
      int64_t n = 0;
      if (!ParseInt64(f[2], &n)) {
        return absl::InvalidArgumentError(absl::StrCat("sacctmgr association line \"", line, "\": GrpJobs \"", f[2],
                                                       "\" is not a number"));
      }
      a.limits.grp_jobs = n;
    }
    for (absl::string_view kv : absl::StrSplit(f[3], ',', absl::SkipEmpty())) {
      std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      int64_t n = 0;
      if (p.first.empty() || !ParseInt64(p.second, &n)) {
        return absl::InvalidArgumentError(
            absl::StrCat("sacctmgr association line \"", line, "\": GrpTRES item \"", kv, "\" is not name=number"));
      }
      a.limits.grp_tres[std::string(p.first)] = n;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string FormatTres(const std::map<std::string, int64_t>& tres) {
  std::vector<std::string> items;
  for (const auto& [name, n] : tres) items.push_back(absl::StrCat(name, "=", n));
  return absl::StrJoin(items, ",");
}

std::string DescribeAssociationLimit(absl::string_view reason, absl::string_view account,
                                     const AccountLimits* limits) {
  // Slurm's reason -> the limit's TRES ("" for GrpJobs) and what it counts.
  struct Limit {
    const char* tres;
    const char* what;
  };
  static const std::map<std::string, Limit, std::less<>> kLimits = {
      {"AssocGrpJobsLimit", {"", "running jobs"}},
      {"AssocGrpCpuLimit", {"cpu", "CPUs"}},
      {"AssocGrpMemLimit", {"mem", "MB of memory"}},
      {"AssocGrpNodeLimit", {"node", "nodes"}},
      {"AssocGrpGRES", {"gres/", "GRES"}},
      {"AssocGrpSubmitJobsLimit", {"", "submitted jobs"}},
  };
  if (!absl::StartsWith(reason, "AssocGrp")) return "";
  const std::string whose = account.empty()      ? std::string("its Slurm account")
                            : limits != nullptr ? absl::StrCat("the project's Slurm account ", account)
                                                : absl::StrCat("its Slurm account ", account);
  auto it = kLimits.find(reason);
  if (it == kLimits.end()) return absl::StrCat(whose, " is at one of its limits (", reason, ")");
  const Limit& l = it->second;
  std::string amount;
  std::string what = l.what;
  auto count = [&](int64_t n) {
    amount = absl::StrCat(n, " ");
    if (n == 1 && absl::EndsWith(what, "s")) what.pop_back();  // "1 running job", "1 CPU"
  };
  if (limits != nullptr) {
    if (reason == "AssocGrpJobsLimit" && limits->grp_jobs) {
      count(*limits->grp_jobs);
    } else if (reason == "AssocGrpGRES") {
      std::map<std::string, int64_t> gres;
      for (const auto& [name, n] : limits->grp_tres) {
        if (absl::StartsWith(name, "gres/")) gres[name] = n;
      }
      if (!gres.empty()) return absl::StrCat(whose, " is at its limit of ", FormatTres(gres), " (", reason, ")");
    } else if (auto t = limits->grp_tres.find(l.tres); *l.tres != '\0' && t != limits->grp_tres.end()) {
      count(t->second);
    }
  }
  return absl::StrCat(whose, " is at its limit of ", amount, what, " (", reason, ")");
}

MappedState MapSlurmState(absl::string_view state, absl::string_view reason, absl::string_view account,
                          const AccountLimits* limits) {
  using model::JobState;
  const std::string why = ReasonText(reason);
  auto with_reason = [&](absl::string_view text) {
    return why.empty() ? std::string(text) : absl::StrCat(text, " (", why, ")");
  };
  if (state == "PENDING") {
    // Slurm's reason code first (as squeue shows it), then what it means.
    static const std::map<std::string, std::string, std::less<>> kMeaning = {
        {"Resources", "the nodes it needs are in use by other jobs"},
        {"Priority", "jobs of higher priority are ahead of it"},
        {"Dependency", "it waits for another job"},
        {"ReqNodeNotAvail", "a node it needs is down, drained or reserved"},
        {"PartitionDown", "its partition is down"},
        {"PartitionNodeLimit", "it needs more nodes than its partition allows"},
        {"PartitionTimeLimit", "its time limit is above its partition's"},
        {"BeginTime", "its start time has not come"},
        {"JobHeldUser", "it is held (scontrol release frees it)"},
        {"JobHeldAdmin", "an administrator holds it"},
        {"AssocGrpGRES", "its account has used up its GRES limit"},
        {"QOSMaxJobsPerUserLimit", "its QOS allows no more jobs of this user now"},
    };
    if (why.empty()) return {JobState::kQueued, "Waiting in the Slurm queue"};
    if (std::string limit = DescribeAssociationLimit(why, account, limits); !limit.empty()) {
      return {JobState::kQueued, absl::StrCat("Waiting in the Slurm queue: ", limit)};
    }
    std::string head = why.substr(0, why.find(','));
    auto it = kMeaning.find(head);
    return {JobState::kQueued, absl::StrCat("Waiting in the Slurm queue: ", why,
                                            it == kMeaning.end() ? "" : absl::StrCat(" (", it->second, ")"))};
  }
  if (state == "REQUEUED" || state == "REQUEUE_HOLD" || state == "REQUEUE_FED" || state == "RESV_DEL_HOLD") {
    return {JobState::kQueued, with_reason(absl::StrCat("Requeued by Slurm (", state, ")"))};
  }
  if (state == "CONFIGURING") return {JobState::kPreparing, "Slurm is configuring the allocated nodes"};
  if (state == "RUNNING" || state == "COMPLETING" || state == "STAGE_OUT" || state == "SIGNALING" ||
      state == "RESIZING") {
    return {JobState::kRunning, ""};
  }
  if (state == "COMPLETED") return {JobState::kSucceeded, ""};
  if (state == "CANCELLED") return {JobState::kCancelled, with_reason("Cancelled in Slurm")};
  if (state == "FAILED") return {JobState::kFailed, with_reason("The Slurm job failed")};
  if (state == "TIMEOUT") return {JobState::kFailed, "The Slurm job reached its time limit"};
  if (state == "NODE_FAIL") return {JobState::kFailed, with_reason("A node of the Slurm job failed")};
  if (state == "OUT_OF_MEMORY") return {JobState::kFailed, "The Slurm job ran out of memory"};
  if (state == "PREEMPTED") return {JobState::kFailed, "The Slurm job was preempted"};
  if (state == "BOOT_FAIL") return {JobState::kFailed, with_reason("A node of the Slurm job failed to boot")};
  if (state == "DEADLINE") return {JobState::kFailed, "The Slurm job reached its deadline"};
  return {JobState::kUnspecified, absl::StrCat("Unknown Slurm job state \"", state, "\"")};
}

}  // namespace mle::executor::slurm
