#!/usr/bin/env bash
# `make demo`: the TPU guide's MNIST walkthrough, end to end, on this machine.
# Starts the embedded mlengined (SQLite, a directory for buckets, child
# processes for replicas, simulated TPU hosts), stages the data, submits the
# walkthrough's job with gcloud's flags, streams its logs until it SUCCEEDS,
# shows the model in the bucket, then runs the CUSTOM cloud_tpu variant, the
# same trainer as a custom container (the guide's container configuration:
# mlengine's PyTorch base image, built once with mmdebstrap, in a local
# docker-registry), and the distributed variant (master + 2 workers).
#
# MLENGINE_DEMO_EXECUTOR=slurm (`make demo-slurm`): the same, with
# `mlengined --executor slurm` on the local four-node Slurm test cluster
# (scripts/slurm/cluster.sh; started here, stopped at the end).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DATA=${MLENGINE_DEMO_DIR:-$(mktemp -d /tmp/mlengine-demo.XXXXXX)}
MLENGINED="$ROOT/$BUILD/src/server/mlengined"
export MLENGINE_BIN="$ROOT/$BUILD/src/cli/mlengine"
export MLENGINE_CONFIG="$DATA/server.json"
BUCKET=gs://demo-bucket

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

EXECUTOR=${MLENGINE_DEMO_EXECUTOR:-local}
SERVER_ARGS=(--config "$ROOT/config/mlengined.yaml")
CLEANUP=""
if [ "$EXECUTOR" = slurm ]; then
  say "Starting the local Slurm test cluster (4 nodes tpuhost1..4, simulated tpu:8 GRES)"
  export MLE_SLURM_DIR="$DATA/slurm"
  eval "$(scripts/slurm/cluster.sh start)"
  CLEANUP="\"$ROOT/scripts/slurm/cluster.sh\" stop >/dev/null 2>&1 || true;"
  SERVER_ARGS=(--config "$ROOT/config/mlengined-slurm.yaml" --executor slurm)
fi

say "A local image registry with mlengine's base images (the first time on a machine: minutes of mmdebstrap)"
export CONTAINERS_CONF="$ROOT/scripts/containers/containers.conf"
REGISTRY_DIR=${MLE_IMAGE_CACHE:-/var/cache/mlengine/images}/registry
REGISTRY_PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REGISTRY="127.0.0.1:$REGISTRY_PORT"
scripts/containers/registry.sh start "$REGISTRY_DIR" "$REGISTRY_PORT"
CLEANUP="\"$ROOT/scripts/containers/registry.sh\" stop \"$REGISTRY_DIR\"; $CLEANUP"
trap "$CLEANUP" EXIT
scripts/containers/images.sh push "$REGISTRY" pytorch
podman build --quiet --tls-verify=false --build-arg REGISTRY="$REGISTRY" -t "$REGISTRY/demo/mnist-trainer:1" \
  examples/mnist > /dev/null
podman push --quiet --tls-verify=false "$REGISTRY/demo/mnist-trainer:1"
echo "pushed $REGISTRY/demo/mnist-trainer:1 (examples/mnist/Containerfile)"
# The server's configuration, with containers: this registry, and the guide's
# image names mirrored to it.
CONFIG="$DATA/mlengined.yaml"
cat "${SERVER_ARGS[1]}" - > "$CONFIG" <<YAML

containers:
  registry: $REGISTRY
  mirrors:
    - name: gcr.io/YOUR_PROJECT_ID/mnist-trainer
      image: demo/mnist-trainer
    - name: gcr.io/cloud-ml-public/training/pytorch-xla.1-11
      image: mlengine/pytorch:bookworm
      tpu_tf_versions: [pytorch-1.11]
      simulated: true
      description: Debian 12 python3 + torch 1.13 (CPU)
YAML
SERVER_ARGS[1]="$CONFIG"

say "Starting mlengined (executor: $EXECUTOR; data in $DATA)"
"$MLENGINED" --listen 127.0.0.1:0 --data-dir "$DATA" "${SERVER_ARGS[@]}" \
  > "$DATA/mlengined.out" 2> "$DATA/mlengined.log" &
SERVER=$!
trap "kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true; $CLEANUP" EXIT
for _ in $(seq 200); do grep -q listening "$DATA/mlengined.out" 2>/dev/null && break; sleep 0.05; done
cat "$DATA/mlengined.out"
grep -E "inventory|Slurm cluster" "$DATA/mlengined.log" || true
ENDPOINT=$(sed -n 's/^mlengined listening on //p' "$DATA/mlengined.out" | head -n 1)
echo "web console: $ENDPOINT/console/ (sign in with the token in $DATA/admin.token; docs/console.md)"

say "Making the project's bucket $BUCKET (its jobs see its buckets in their sandbox: docs/security.md)"
"$MLENGINE_BIN" storage mb "$BUCKET"

say "Staging the digits data set into $BUCKET/datasets/digits"
/usr/bin/python3 examples/mnist/stage_data.py "$BUCKET/datasets/digits"

say "The guide's access steps: the project's TPU service identity, granted roles/ml.serviceAgent"
TPU_SA=$("$MLENGINE_BIN" services identity create --service=tpu.googleapis.com --format=json | \
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["email"])')
echo "TPU service account: $TPU_SA"
"$MLENGINE_BIN" projects add-iam-policy-binding \
  --member="serviceAccount:$TPU_SA" --role=roles/ml.serviceAgent >/dev/null
"$MLENGINE_BIN" projects get-iam-policy

say "gcloud's walkthrough command, on a (simulated) TPU: BASIC_TPU"
cd examples/mnist
"$MLENGINE_BIN" jobs submit training tpu_mnist_1 \
  --staging-bucket="$BUCKET" \
  --package-path=trainer \
  --module-name=trainer.task \
  --runtime-version=pytorch-1.13-cpu \
  --scale-tier=BASIC_TPU \
  --region=us-central1 \
  --stream-logs \
  -- \
  --distribution_strategy=tpu \
  --data_dir="$BUCKET/datasets/digits" \
  --model_dir="$BUCKET/tpu_mnist_1_output"

say "The job, as jobs describe shows it"
"$MLENGINE_BIN" jobs describe tpu_mnist_1

say "The trained model in the job's output directory"
"$MLENGINE_BIN" storage ls "$BUCKET/tpu_mnist_1_output"
"$MLENGINE_BIN" storage cat "$BUCKET/tpu_mnist_1_output/metrics.json" | head -c 400; echo

say "The guide's third way to a TPU: CUSTOM, n1-highcpu-16 master + cloud_tpu worker (TPU_V2 x 8, simulated)"
"$MLENGINE_BIN" jobs submit training tpu_mnist_custom_1 \
  --staging-bucket="$BUCKET" \
  --package-path=trainer \
  --module-name=trainer.task \
  --runtime-version=pytorch-1.13-cpu \
  --region=us-central1 \
  --config=config_tpu_custom.yaml \
  --stream-logs \
  -- \
  --epochs=3 \
  --data_dir="$BUCKET/datasets/digits" \
  --model_dir="$BUCKET/tpu_mnist_custom_1_output" | grep -E "TPU|final test accuracy|state:"

say "The guide's custom containers on the master and the TPU worker (image pinned by digest at submission)"
"$MLENGINE_BIN" jobs submit training tpu_mnist_container_1 \
  --region=us-central1 \
  --config=config_tpu_container.yaml \
  --stream-logs \
  -- \
  --distribution_strategy=tpu \
  --epochs=3 \
  --data_dir="$BUCKET/datasets/digits" \
  --model_dir="$BUCKET/tpu_mnist_container_1_output" | grep -E "TPU|final test accuracy|state:"

say "The distributed variant: CUSTOM, master + 2 workers, torch.distributed (gloo)"
"$MLENGINE_BIN" jobs submit training mnist_distributed_1 \
  --staging-bucket="$BUCKET" \
  --package-path=trainer \
  --module-name=trainer.task \
  --runtime-version=pytorch-1.13-cpu \
  --region=us-central1 \
  --config=config_distributed.yaml \
  --stream-logs \
  -- \
  --data_dir="$BUCKET/datasets/digits" \
  --model_dir="$BUCKET/mnist_distributed_1_output"

say "Hyperparameter tuning (hptuning_config.yaml): 4 trials, 2 at a time, learning rate on a log scale"
# A smaller run of the example's config: the same parameters, fewer trials.
sed -e 's/maxTrials: 6/maxTrials: 4/' hptuning_config.yaml > "$DATA/hptuning_demo.yaml"
"$MLENGINE_BIN" jobs submit training mnist_hpt_1 \
  --staging-bucket="$BUCKET" \
  --package-path=trainer \
  --module-name=trainer.task \
  --runtime-version=pytorch-1.13-cpu \
  --region=us-central1 \
  --job-dir="$BUCKET/mnist_hpt_1" \
  --config="$DATA/hptuning_demo.yaml" \
  --stream-logs \
  -- \
  --epochs=3 \
  --data_dir="$BUCKET/datasets/digits" | grep -E "final test accuracy|reported|state:"
say "The trials, best first, and the best one"
"$MLENGINE_BIN" jobs describe mnist_hpt_1 --format json | /usr/bin/python3 -c '
import json, sys
job = json.load(sys.stdin)
trials = job["trainingOutput"]["trials"]
for t in trials:
    metric = t.get("finalMetric", {}).get("objectiveValue")
    print("trial %-2s %-9s accuracy %-8s %s%s" % (t["trialId"], t["state"], "-" if metric is None else "%.4f" % metric,
          " ".join("%s=%s" % kv for kv in sorted(t["hyperparameters"].items())),
          " (stopped early)" if t.get("isTrialStoppedEarly") else ""))
best = trials[0]
print("best: trial %s, accuracy %.4f, with %s" % (best["trialId"], best["finalMetric"]["objectiveValue"],
      ", ".join("%s=%s" % kv for kv in sorted(best["hyperparameters"].items()))))
if job["state"] != "SUCCEEDED":
    sys.exit("the tuning job ended %s: %s" % (job["state"], job.get("errorMessage", "")))
'

say "All jobs"
"$MLENGINE_BIN" jobs list
say "Demo finished. Server data (logs, buckets, database) are in $DATA"
if [ "${MLENGINE_DEMO_STAY:-0}" = 1 ]; then
  say "mlengined keeps serving (MLENGINE_DEMO_STAY=1): the web console at $ENDPOINT/console/, token in $DATA/admin.token; Ctrl-C ends it"
  wait "$SERVER" || true
fi
