#include "executor/slurm/slurm_accounts.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mle::executor::slurm {
namespace {

using scheduler::QuotaResource;

constexpr QuotaResource kGpus[] = {
    QuotaResource::kNvidiaTeslaK80, QuotaResource::kNvidiaTeslaP100, QuotaResource::kNvidiaTeslaV100,
    QuotaResource::kNvidiaTeslaP4,  QuotaResource::kNvidiaTeslaT4,   QuotaResource::kNvidiaTeslaA100,
};
constexpr QuotaResource kTpuCores[] = {QuotaResource::kTpuV2Cores, QuotaResource::kTpuV3Cores,
                                       QuotaResource::kTpuV2PodCores, QuotaResource::kTpuV3PodCores};

int64_t Limit(const scheduler::QuotaLimits& limits, QuotaResource r) { return limits[static_cast<int>(r)]; }

// `set GrpJobs=... GrpTRES=...` turning `have` into `want`: every TRES either
// has now, a cleared one as -1.
std::vector<std::string> ModifyArgv(const std::string& account, const AccountLimits& want,
                                    const AccountLimits& have) {
  std::map<std::string, int64_t> tres = want.grp_tres;
  for (const auto& [name, n] : have.grp_tres) tres.emplace(name, -1);
  std::vector<std::string> argv = {"sacctmgr", "-i", "modify", "account", "where", absl::StrCat("name=", account),
                                   "set",      absl::StrCat("GrpJobs=", want.grp_jobs.value_or(-1))};
  if (!tres.empty()) argv.push_back(absl::StrCat("GrpTRES=", FormatTres(tres)));
  return argv;
}

}  // namespace

std::string SlurmAccountOf(absl::string_view project) {
  std::string out = kAccountPrefix;
  for (char c : project) {
    c = absl::ascii_tolower(static_cast<unsigned char>(c));
    out += absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  }
  return out;
}

AccountLimits SlurmLimitsOf(const scheduler::QuotaLimits& limits, const SlurmSettings& settings) {
  AccountLimits out;
  if (int64_t jobs = Limit(limits, QuotaResource::kJobs); jobs != scheduler::kUnlimited) out.grp_jobs = jobs;
  if (int64_t milli = Limit(limits, QuotaResource::kCpus); milli != scheduler::kUnlimited) {
    out.grp_tres["cpu"] = (milli + 999) / 1000;
  }
  for (QuotaResource r : kGpus) {
    if (int64_t n = Limit(limits, r); n != scheduler::kUnlimited) {
      out.grp_tres[absl::StrCat("gres/gpu:", GpuGresType(scheduler::QuotaResourceName(r), settings))] = n;
    }
  }
  int64_t tpu = 0;
  for (QuotaResource r : kTpuCores) {
    const int64_t n = Limit(limits, r);
    if (n == scheduler::kUnlimited) {
      tpu = scheduler::kUnlimited;
      break;
    }
    tpu += n;
  }
  if (tpu != scheduler::kUnlimited) out.grp_tres[absl::StrCat("gres/", settings.tpu_gres)] = tpu;
  return out;
}

std::vector<std::string> ShowAssociationsArgv() {
  return {"sacctmgr", "-nP", "show", "assoc", "format=Account,User,GrpJobs,GrpTRES"};
}

AccountPlan PlanAccounts(const scheduler::Quotas& quotas, const std::string& region,
                         const std::set<std::string>& projects, const std::string& user,
                         const std::vector<SlurmAssociation>& existing, const SlurmSettings& settings) {
  std::map<std::string, std::string> project_of;  // account -> project
  for (const auto& p : projects) project_of.emplace(SlurmAccountOf(p), p);
  std::map<std::string, AccountLimits> have;  // the account's own association
  std::set<std::pair<std::string, std::string>> users;
  for (const auto& a : existing) {
    if (a.user.empty()) {
      have[a.account] = a.limits;
      if (absl::StartsWith(a.account, kAccountPrefix)) {
        project_of.emplace(a.account, a.account.substr(sizeof(kAccountPrefix) - 1));
      }
    } else {
      users.emplace(a.account, a.user);
    }
  }
  AccountPlan plan;
  for (const auto& [account, project] : project_of) {
    const auto had = have.find(account);
    if (had == have.end()) {
      plan.commands.push_back({"sacctmgr", "-i", "add", "account", account,
                               absl::StrCat("Description=mlengine project ", project), "Organization=mlengine"});
    }
    if (!user.empty() && !users.count({account, user})) {
      plan.commands.push_back({"sacctmgr", "-i", "add", "user", user, absl::StrCat("Account=", account)});
    }
    const AccountLimits want = SlurmLimitsOf(quotas.For(project, region), settings);
    const AccountLimits now = had == have.end() ? AccountLimits{} : had->second;
    if (want != now) plan.commands.push_back(ModifyArgv(account, want, now));
    plan.limits[account] = want;
  }
  return plan;
}

}  // namespace mle::executor::slurm
