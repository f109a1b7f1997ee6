#!/usr/bin/env bash
# Benchmark: Vertex AI's customJobs API against ml v1's jobs API on the same
# mlengined, in the same run (issue 21: within 10%). Keep-alive get/s of one
# job and durable create/s, measured with wrk, each side twice in the order
# ml, Vertex, Vertex, ml (this machine's speed drifts within a minute); the
# ratio printed is Vertex's rate over ml v1's (goal: at least 0.90).
# wrk runs on the same 2 cores as the server, so the figures are a floor.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/$BUILD/src/server/mlengined"
DUR=${BENCH_SECONDS:-4}
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT

"$BIN" --listen 127.0.0.1:0 --data-dir "$DIR" --executor none > "$DIR/out" 2>"$DIR/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$DIR/out")
export MLE_TOKEN=$(cat "$DIR/admin.token")

# Seed both kinds so each get and create works on a table of both.
MLE_PREFIX=seed wrk -t1 -c4 -d1s -s "$ROOT/bench/create.lua" "$URL" > /dev/null
wrk -t1 -c4 -d1s -s "$ROOT/bench/create_vertex.lua" "$URL" > /dev/null
auth=(-H "Authorization: Bearer $MLE_TOKEN")
JOB=$(curl -s "${auth[@]}" "$URL/v1/projects/bench/jobs?pageSize=1&prettyPrint=false" \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["jobId"])')
CUSTOM=$(curl -s "${auth[@]}" "$URL/v1/projects/bench/locations/us-central1/customJobs?pageSize=1&prettyPrint=false" \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["customJobs"][0]["name"])')

rate() { grep 'Requests/sec' | awk '{print $2}'; }
run() {  # NAME WRK-ARGS...
  local name=$1
  shift
  wrk "$@" > "$DIR/$name"
  if grep -q 'non-2xx: [1-9]\|Non-2xx' "$DIR/$name"; then echo "FAIL: $name had non-2xx responses"; cat "$DIR/$name"; exit 1; fi
  rate < "$DIR/$name"
}
echo "mlengined $URL, wrk ${DUR}s per round, rounds ml, Vertex, Vertex, ml; this machine: $(nproc) cores"
g1=$(run ml_get1 -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB")
v1=$(run vx_get1 -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/$CUSTOM")
v2=$(run vx_get2 -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/$CUSTOM")
g2=$(run ml_get2 -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB")
c1=$(MLE_PREFIX=r1 run ml_create1 -t2 -c64 -d${DUR}s -s "$ROOT/bench/create.lua" "$URL")
w1=$(run vx_create1 -t2 -c64 -d${DUR}s -s "$ROOT/bench/create_vertex.lua" "$URL")
w2=$(run vx_create2 -t2 -c64 -d${DUR}s -s "$ROOT/bench/create_vertex.lua" "$URL")
c2=$(MLE_PREFIX=r2 run ml_create2 -t2 -c64 -d${DUR}s -s "$ROOT/bench/create.lua" "$URL")
row() {  # CASE ML1 ML2 VX1 VX2
  local ml vx
  ml=$(echo "($2+$3)/2" | bc -l)
  vx=$(echo "($4+$5)/2" | bc -l)
  printf '%-22s %12.0f %12.0f %8.2f  (rounds: ml %.0f %.0f, Vertex %.0f %.0f)\n' "$1" "$ml" "$vx" \
    "$(echo "$vx/$ml" | bc -l)" "$2" "$3" "$4" "$5"
}
printf '%-22s %12s %12s %8s\n' case "ml v1 req/s" "Vertex req/s" ratio
row "get (keep-alive)" "$g1" "$g2" "$v1" "$v2"
row "create (durable)" "$c1" "$c2" "$w1" "$w2"
echo "goal: Vertex within 10% of ml v1 (ratio >= 0.90)"
