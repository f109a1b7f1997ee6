#!/usr/bin/env bash
# Runs every benchmark of mlengine: `make bench` (or bench/run.sh BUILD_DIR).
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "== scheduler: one freed slot among 10,000 queued jobs, with quotas and fair share against without (under 1 ms)"
"$BUILD/bench/schedule_pass"
echo
echo "== hyperparameter tuning: Bayesian against random search, median regret after 30 trials (ratio >= 3 on Branin and Hartmann-6), one suggestion with 200 trials (under 50 ms)"
"$BUILD/bench/tuning_regret"
echo
echo "== control plane: jobs API throughput"
bench/api_throughput.sh "$BUILD"
echo
echo "== Vertex AI customJobs against ml v1 jobs: get and create throughput (within 10%)"
bench/vertex_throughput.sh "$BUILD"
echo
echo "== access control: jobs.get as a user (token hashed, policy checked) against as the operator (at most 10% slower)"
bench/authz_cost.sh "$BUILD"
echo
echo "== object store: 1 GiB upload and download through the Cloud Storage API against cp (at least 0.5x)"
bench/storage_throughput.sh "$BUILD"
echo
echo "== local execution: job start latency and 200 trivial jobs, against direct python3 -m"
/usr/bin/python3 bench/job_latency.py "$BUILD"
echo
echo "== preemption: a job of higher priority, submission to its first line while a lower one holds the cluster, against Slurm's own preemption (partition_prio, REQUEUE)"
/usr/bin/python3 bench/preemption.py "$BUILD"
echo
echo "== log follow: a line written to a follower's read, 1 and 1,000 followers, against tail -F"
/usr/bin/python3 bench/log_follow.py "$BUILD"
echo
echo "== warm starts: a torch trainer's first line and 20 jobs, forked from the warm interpreter against cold and bare python3 -m (5x and 3x)"
/usr/bin/python3 bench/warm_start.py "$BUILD"
echo
echo "== web console in Chromium: the jobs page of 10,000 jobs to its first 50 rows (under 300 ms) against mlengine jobs list; the log view at 1,000 lines/s against mlengine jobs stream-logs"
if [ -x "${MLE_CHROMIUM:-/usr/bin/chromium}" ]; then
  ./scripts/install-node-deps.sh
  node bench/console.mjs "$BUILD"
else
  echo "skipped: needs Debian's chromium (scripts/install-deps.sh installs it)"
fi
echo
echo "== custom containers: a container job, create to SUCCEEDED, against a bare podman run of the same image (under 1.2x)"
if command -v podman >/dev/null && [ "$(id -u)" -eq 0 ]; then
  /usr/bin/python3 bench/container_start.py "$BUILD"
else
  echo "skipped: needs podman (scripts/install-deps.sh installs it) and root"
fi
echo
echo "== Slurm execution: mlengined --executor slurm against direct sbatch (starts its own test cluster; root)"
if command -v sbatch >/dev/null && [ "$(id -u)" -eq 0 ]; then
  /usr/bin/python3 bench/slurm_jobs.py "$BUILD"
else
  echo "skipped: needs Slurm (scripts/install-deps.sh installs it) and root"
fi
echo
echo "== kill -9 soak, longer than make test's: 3000 jobs, 50 clients, 10 kills (must print lost 0, run twice 0)"
MLENGINED="$BUILD/src/server/mlengined" /usr/bin/python3 tests/soak/soak.py --jobs 3000 --clients 50 --kills 10
