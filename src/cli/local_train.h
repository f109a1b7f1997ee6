// `mlengine local train`: runs a trainer on this machine the way
// `gcloud ai-platform local train` does. `python -m MODULE ARGS` runs with
// the package's parent directory as working directory (and `--job-dir D`
// appended to ARGS when given). With --distributed, one process per task
// (the primary "chief", parameter servers, workers, evaluators) on local
// ports counted up from --start-port, each with TF_CONFIG:
//   {"job": {"job_name": M, "args": [...]}, "task": {"type": T, "index": i},
//    "cluster": {"chief": ["localhost:P"], "ps": [...], "worker": [...]},
//    "environment": "cloud"}
// plus MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK for torch.distributed (the
// chief is rank 0, worker i is rank i+1) and mlengine's python/ directory on
// PYTHONPATH. Output lines are prefixed with the task name.
// PlanLocalTasks is pure; RunLocalTrain owns its child processes and the
// calling thread's SIGINT/SIGTERM handling while it runs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mle::cli {

struct LocalTrainOptions {
  std::string module_name;
  std::string package_path;  // the package directory; its parent is the working directory
  std::optional<std::string> job_dir;
  bool distributed = false;
  int worker_count = 2;
  int parameter_server_count = 2;
  int evaluator_count = 0;
  int start_port = 27182;
  std::vector<std::string> user_args;
  std::string python = "/usr/bin/python3";
  std::string mlengine_pythonpath;  // mlengine's python/ directory, "" when unknown
};

struct LocalTask {
  std::string type;  // chief, ps, worker, evaluator ("" when not distributed)
  int index = 0;
  std::string name;  // master-replica-0, ps-replica-1, worker-replica-0, evaluator-replica-0
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};

// The processes to start. `ports` holds 1 + ps + workers TF ports (chief,
// ps..., worker...) and then the torch MASTER_PORT; for a non-distributed
// run only the torch port.
std::vector<LocalTask> PlanLocalTasks(const LocalTrainOptions& options, const std::vector<int>& ports);

// `count` ports from `start` upward that nothing is listening on.
absl::StatusOr<std::vector<int>> PickFreePorts(int start, int count);

// mlengine's python/ directory: $MLENGINE_PYTHONPATH, else the source tree's
// python/ seen from a build tree (build/src/cli/mlengine -> ../../../python),
// else ../../python from the executable, else ../share/mlengine/python from it, else
// /usr/share/mlengine/python; "" when none exists.
std::string FindMlenginePythonPath();

// Runs the job; returns the exit code for the CLI (0 when every task that
// was expected to finish finished with 0).
int RunLocalTrain(const LocalTrainOptions& options);

}  // namespace mle::cli
