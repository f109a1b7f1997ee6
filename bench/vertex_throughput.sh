#!/usr/bin/env bash
# Benchmark: Vertex AI's customJobs API against ml v1's jobs API on the same
# mlengined, in the same run (issue 21: within 10%). Keep-alive get/s of one
# job and durable create/s, measured with wrk. Both sides carry the same
# job: one replica of a package on an n1-standard-4 (ml v1: scaleTier
# CUSTOM, masterType; Vertex: one worker pool; bench/create.lua with
# MLE_MACHINE, bench/create_vertex.lua). This machine's speed drifts by a
# quarter within a minute, so each case runs in short rounds, ml, Vertex,
# Vertex, ml, ROUNDS times over (a cycle each: a drift that runs through a
# cycle weighs on both sides alike). Printed: Vertex's rate over ml v1's
# summed over all rounds, and each cycle's; the goal (at least 0.90) is
# judged on the median cycle, which one cycle that a drift caught halfway
# does not move. Last, for reference,
# ml v1's smallest job (scaleTier BASIC, no machine named) against the same
# Vertex rounds. wrk runs on the same 2 cores as the server, so the figures
# are a floor.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/$BUILD/src/server/mlengined"
DUR=${BENCH_SECONDS:-2}
ROUNDS=${BENCH_ROUNDS:-5}
export MLE_MACHINE=n1-standard-4
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT

"$BIN" --listen 127.0.0.1:0 --data-dir "$DIR" --executor none > "$DIR/out" 2>"$DIR/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$DIR/out")
MLE_TOKEN=$(cat "$DIR/admin.token")
export MLE_TOKEN

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
BASIC=$(curl -s "${auth[@]}" -X POST -H 'Content-Type: application/json' "$URL/v1/projects/bench/jobs?prettyPrint=false" \
  -d '{"jobId":"basic","trainingInput":{"scaleTier":"BASIC","packageUris":["gs://b/t-0.0.0.tar.gz"],"pythonModule":"trainer.task","region":"us-central1","runtimeVersion":"2.11"}}' \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobId"])')
echo "mlengined $URL, wrk ${DUR}s per round, $ROUNDS x (ml, Vertex, Vertex, ml); this machine: $(nproc) cores"
declare -A SUM ROUNDLIST
add() {  # KEY RATE
  SUM[$1]=$(echo "${SUM[$1]:-0}+$2" | bc -l)
  ROUNDLIST[$1]="${ROUNDLIST[$1]:-}$(printf ' %.0f' "$2")"
}
# One cycle's ratio: Vertex's two rounds over ml's two.
declare -A CYCLES
cycle() {  # KEY ML1 VX1 VX2 ML2
  CYCLES[$1]="${CYCLES[$1]:-} $(echo "($3+$4)/($2+$5)" | bc -l)"
}
for r in $(seq "$ROUNDS"); do
  a=$(run ml_get -t2 -c32 -d"${DUR}s" -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB")
  b=$(run vx_get -t2 -c32 -d"${DUR}s" -s "$ROOT/bench/auth.lua" "$URL/v1/$CUSTOM")
  c=$(run vx_get -t2 -c32 -d"${DUR}s" -s "$ROOT/bench/auth.lua" "$URL/v1/$CUSTOM")
  d=$(run ml_get -t2 -c32 -d"${DUR}s" -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB")
  add ml_get "$a"; add vx_get "$b"; add vx_get "$c"; add ml_get "$d"; cycle get "$a" "$b" "$c" "$d"
  add basic_get "$(run basic_get -t2 -c32 -d"${DUR}s" -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$BASIC")"
done
for r in $(seq "$ROUNDS"); do
  a=$(MLE_PREFIX=a$r run ml_create -t2 -c64 -d"${DUR}s" -s "$ROOT/bench/create.lua" "$URL")
  b=$(run vx_create -t2 -c64 -d"${DUR}s" -s "$ROOT/bench/create_vertex.lua" "$URL")
  c=$(run vx_create -t2 -c64 -d"${DUR}s" -s "$ROOT/bench/create_vertex.lua" "$URL")
  d=$(MLE_PREFIX=b$r run ml_create -t2 -c64 -d"${DUR}s" -s "$ROOT/bench/create.lua" "$URL")
  add ml_create "$a"; add vx_create "$b"; add vx_create "$c"; add ml_create "$d"; cycle create "$a" "$b" "$c" "$d"
  add basic_create "$(MLE_MACHINE="" MLE_PREFIX=c$r run basic_create -t2 -c64 -d"${DUR}s" -s "$ROOT/bench/create.lua" "$URL")"
done
# The median of a case's cycle ratios, and the list.
median() { tr ' ' '\n' <<<"${CYCLES[$1]}" | grep . | sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
cycles() { for v in ${CYCLES[$1]}; do printf ' %.2f' "$v"; done; }
row() {  # CASE ML-KEY VX-KEY ML-ROUNDS (the ml side's rates are per round: scale a side run once per cycle)
  local ml vx
  ml=$(echo "${SUM[$2]}/$4" | bc -l)
  vx=$(echo "${SUM[$3]}/(2*$ROUNDS)" | bc -l)
  printf '%-34s %12.0f %12.0f %8.2f\n' "$1" "$ml" "$vx" "$(echo "$vx/$ml" | bc -l)"
  printf '    rounds: ml%s; Vertex%s\n' "${ROUNDLIST[$2]}" "${ROUNDLIST[$3]}"
}
printf '%-34s %12s %12s %8s\n' case "ml v1 req/s" "Vertex req/s" ratio
row "get (keep-alive)" ml_get vx_get $((2 * ROUNDS))
printf '    cycles:%s; median %.2f\n' "$(cycles get)" "$(median get)"
row "create (durable)" ml_create vx_create $((2 * ROUNDS))
printf '    cycles:%s; median %.2f\n' "$(cycles create)" "$(median create)"
met() { [ "$(echo "$(median "$1") >= 0.90" | bc -l)" = 1 ] && echo met || echo "NOT met"; }
echo "goal: Vertex within 10% of ml v1 for the same job (median cycle ratio >= 0.90): get $(met get), create $(met create)"
echo "for reference, against ml v1's smallest job (scaleTier BASIC):"
row "  get (keep-alive)" basic_get vx_get "$ROUNDS"
row "  create (durable)" basic_create vx_create "$ROUNDS"
