// Projects as Slurm accounts, and mlengine's quotas as those accounts'
// association limits (slurm.accounts: per_project), as pure functions: from
// the quotas, the projects, the user mlengined runs as and the associations
// Slurm has now (`sacctmgr show assoc`) to the sacctmgr commands that bring
// Slurm there. The Slurm executor runs them through its CommandRunner.
//
// What Slurm can enforce of a project's quotas in the cluster's region
// (slurm.region):
//   JOBS    -> GrpJobs (Slurm counts running jobs; mlengine placed ones)
//   CPUS    -> GrpTRES cpu (whole CPUs, rounded up)
//   NVIDIA_TESLA_<T> -> GrpTRES gres/gpu:<gres type of T> (slurm.gpu_gres_types)
//   TPU cores: the TPU GRES counts 8 cores per host, of every generation,
//   single hosts and pod slices alike: gres/<tpu_gres> is the sum of
//   TPU_V2_CORES, TPU_V3_CORES, TPU_V2_POD_CORES and TPU_V3_POD_CORES when
//   all four are limited, else not limited in Slurm.
// Anything not limited is cleared in Slurm (=-1), so a quota removed is a
// limit removed. mlengined's own check before the hand-over stays the exact
// one; Slurm's limits hold jobs submitted to the account by other means.
// No I/O; thread-safe (no state).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "executor/slurm/slurm_parsers.h"
#include "executor/slurm/slurm_plan.h"
#include "scheduler/quota.h"

namespace mle::executor::slurm {

// Accounts mlengined creates and manages are named with this prefix.
inline constexpr char kAccountPrefix[] = "mle-";

// "mle-" + the project id lowercased, every character other than a-z, 0-9,
// '-' and '_' as '_' ("My.Proj" -> "mle-my_proj").
std::string SlurmAccountOf(absl::string_view project);

// The association limits that carry out `limits` (one project and region).
AccountLimits SlurmLimitsOf(const scheduler::QuotaLimits& limits, const SlurmSettings& settings);

// `sacctmgr -nP show assoc format=Account,User,GrpJobs,GrpTRES`.
std::vector<std::string> ShowAssociationsArgv();

struct AccountPlan {
  std::vector<std::vector<std::string>> commands;  // in order
  std::map<std::string, AccountLimits> limits;     // account -> the limits it has once they ran
};

// The commands that make every project's account exist with `user`
// associated (`sacctmgr -i add account`, `add user`) and give it its
// project's limits in `region` (`sacctmgr -i modify account ... set GrpJobs=
// GrpTRES=`), given the associations Slurm has now. Accounts Slurm has with
// the prefix but no project here get the limits of the project their name
// spells (the defaults, for a project with no quotas of its own). Nothing for
// what already is as it should be.
AccountPlan PlanAccounts(const scheduler::Quotas& quotas, const std::string& region,
                         const std::set<std::string>& projects, const std::string& user,
                         const std::vector<SlurmAssociation>& existing, const SlurmSettings& settings);

}  // namespace mle::executor::slurm
