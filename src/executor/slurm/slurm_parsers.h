// Pure parsers of Slurm's command output, the edge where the Slurm executor
// reads the cluster's state: `sbatch --parsable`, `squeue`'s table of the
// fields below, `sinfo --json`, Slurm hostlists ("tpuhost[1-4]",
// "a[01-03,7],b1"), and the mapping of Slurm job states onto the `ml` v1 job
// states. No I/O; thread-safe (no state).
//
// `sinfo --json` (read once, at start) is accepted in both shapes (captured
// samples in tests/data/slurm): Slurm 22.05 (openapi v0.0.38) and >= 23.02
// (v0.0.39+: numbers as {"set","infinite","number"} objects).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/job_state.h"

namespace mle::executor::slurm {

// `sbatch --parsable` prints "<job id>" or "<job id>;<cluster>".
struct SbatchSubmission {
  int64_t job_id = 0;
  std::string cluster;  // empty when sbatch printed no cluster
};
// INVALID_ARGUMENT when the output is not of that form (e.g. an error text).
absl::StatusOr<SbatchSubmission> ParseSbatchParsable(absl::string_view output);

struct SlurmJob {
  int64_t job_id = 0;
  int64_t het_job_id = 0;    // leader's id for a heterogeneous job component, else 0
  int het_job_offset = 0;    // component index within the heterogeneous job
  std::string name;          // read only from a listing by name (kSqueueNamedFields)
  std::string account;       // the Slurm account it runs under
  std::string state;         // base state: PENDING, RUNNING, COMPLETED, ...
  std::string state_reason;  // Resources, JobHeldUser, NonZeroExitCode, ...; "" for "None"
  std::vector<std::string> nodes;  // expanded host list; empty while pending
};

// What the executor asks `squeue -h -t all -O` for: each job a line of these
// fields, each ended by '|' but the last, none padded. Every field is
// Slurm's or the operator's (ids, states, reason codes, account and node
// names), never a user's free text: a job name may hold a newline and a
// line of its own making, so names are read only from a listing filtered by
// the names mlengine gave (`--name=`), with the name last
// (kSqueueNamedFields). About 50 bytes a job, against `squeue --json`'s 4 KB
// (which cost the controller's host 70 ms of CPU a poll at 200 jobs).
inline constexpr char kSqueueFields[] = "JobID:|,HetJobID:|,HetJobOffset:|,Account:|,State:|,Reason:|,NodeList:";
inline constexpr char kSqueueNamedFields[] =
    "JobID:|,HetJobID:|,HetJobOffset:|,Account:|,State:|,Reason:|,NodeList:|,Name:";
// Parses that table (`named`: of kSqueueNamedFields). INVALID_ARGUMENT for a
// line of another shape (e.g. an error message squeue printed), naming it.
absl::StatusOr<std::vector<SlurmJob>> ParseJobsTable(absl::string_view text, bool named);

// A node as `sinfo --json` describes it.
struct SlurmNode {
  std::string name;
  std::string address;   // what other nodes connect to (NodeAddr)
  int cpus = 0;
  int64_t memory_mib = 0;  // RealMemory
  // GRES counts by "name" and by "name:type" ("gpu" and "gpu:t4").
  std::map<std::string, int64_t> gres;
  std::set<std::string> features;  // active features
  std::string state;               // idle, mixed, allocated, down, ...
  std::vector<std::string> state_flags;  // NOT_RESPONDING, DRAIN, ... (upper case)
  // Down, failing, or not answering slurmctld.
  bool Lost() const;
};
// Parses {"nodes":[...]} of `sinfo --json`. INVALID_ARGUMENT for malformed
// JSON or a node without a name.
absl::StatusOr<std::vector<SlurmNode>> ParseNodesJson(absl::string_view json);

// Parses a GRES list: "gpu:t4:2(S:0-1),tpu:8" -> {gpu:2, gpu:t4:2, tpu:8}.
std::map<std::string, int64_t> ParseGres(absl::string_view gres);

// Expands a Slurm hostlist: top-level commas separate items; each item may
// hold bracketed sets of numbers and ranges ("[01-03,7]"), several brackets
// expand as a product; a range keeps the zero padding of its lower bound.
// INVALID_ARGUMENT for unbalanced brackets, bad ranges, or more than 65536
// hosts.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist);

// An association's limits as sacctmgr shows them: GrpJobs and GrpTRES by
// TRES name ("cpu", "gres/tpu", "gres/gpu:t4"). Absent: no limit.
struct AccountLimits {
  std::optional<int64_t> grp_jobs;
  std::map<std::string, int64_t> grp_tres;
  bool operator==(const AccountLimits&) const = default;
};

// One line of `sacctmgr -nP show assoc format=Account,User,GrpJobs,GrpTRES`;
// `user` is empty for the account's own association.
struct SlurmAssociation {
  std::string account;
  std::string user;
  AccountLimits limits;
  bool operator==(const SlurmAssociation&) const = default;
};
// INVALID_ARGUMENT for a line of another shape (a number that is not one).
absl::StatusOr<std::vector<SlurmAssociation>> ParseAssociations(absl::string_view output);

// "cpu=2,gres/tpu=8" for GrpTRES=.
std::string FormatTres(const std::map<std::string, int64_t>& tres);

// What a Slurm job state means for the `ml` v1 job.
struct MappedState {
  model::JobState state = model::JobState::kUnspecified;
  std::string message;  // why (pending reason, failure cause); may be empty
};
// PENDING -> QUEUED (message names the reason); REQUEUED/REQUEUE_HOLD/
// REQUEUE_FED/RESV_DEL_HOLD -> QUEUED; CONFIGURING ->
// PREPARING; RUNNING/COMPLETING/STAGE_OUT/SIGNALING/RESIZING -> RUNNING;
// COMPLETED -> SUCCEEDED; FAILED/TIMEOUT/NODE_FAIL/OUT_OF_MEMORY/PREEMPTED/
// BOOT_FAIL/DEADLINE -> FAILED with a message; CANCELLED -> CANCELLED;
// anything else -> kUnspecified with a message naming the state. A job held
// by an association limit is said in DescribeAssociationLimit's words, with
// its `account` and that account's `limits` (may be null).
MappedState MapSlurmState(absl::string_view state, absl::string_view reason, absl::string_view account = "",
                          const AccountLimits* limits = nullptr);

// The words for a job held by its account's association limit (reason
// AssocGrp*, e.g. AssocGrpCpuLimit): "the project's Slurm account mle-p is
// at its limit of 2 CPUs (AssocGrpCpuLimit)". `limits`: the account's limits
// as mlengined set them (per-project accounts), null when unknown: then the
// sentence names the account and what is limited, without the number.
// Empty for any other reason.
std::string DescribeAssociationLimit(absl::string_view reason, absl::string_view account,
                                     const AccountLimits* limits);

}  // namespace mle::executor::slurm
