#!/usr/bin/env bash
# Benchmark of the control plane (issue: jobs API): requests/s of jobs.get and
# jobs.list over keep-alive connections, and durable jobs.create/s (SQLite,
# synchronous=FULL, group commit), measured with wrk against a real mlengined
# on this machine. The goals are absolute (>= 20,000 get/s, >= 2,000
# create/s), so the ratio printed is the measured rate over the goal.
# wrk runs on the same 2 cores as the server, so the figures are a floor.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/$BUILD/src/server/mlengined"
DUR=${BENCH_SECONDS:-5}
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT

# --executor none: the control plane alone (jobs are stored and queued, not run).
"$BIN" --listen 127.0.0.1:0 --data-dir "$DIR" --executor none ${MLENGINED_FLAGS:-} > "$DIR/out" 2>"$DIR/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$DIR/out")
export MLE_TOKEN=$(cat "$DIR/admin.token")

# Seed 1,000 jobs so list and get work on a realistic table.
MLE_PREFIX=seed wrk -t1 -c4 -d1s -s "$ROOT/bench/create.lua" "$URL" > /dev/null
JOB=$(curl -s -H "Authorization: Bearer $MLE_TOKEN" "$URL/v1/projects/bench/jobs?pageSize=1&prettyPrint=false" \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["jobId"])')

rate() { grep 'Requests/sec' | awk '{print $2}'; }
echo "mlengined $URL, wrk ${DUR}s per case, 2 wrk threads; this machine: $(nproc) cores"
GET=$(wrk -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB" | tee "$DIR/get" | rate)
LIST=$(wrk -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs?pageSize=20" | tee "$DIR/list" | rate)
CREATE=$(MLE_PREFIX=run wrk -t2 -c64 -d${DUR}s -s "$ROOT/bench/create.lua" "$URL" | tee "$DIR/create" | rate)
for f in get list create; do
  if grep -q 'non-2xx: [1-9]' "$DIR/$f"; then echo "FAIL: $f had non-2xx responses"; cat "$DIR/$f"; exit 1; fi
done
printf '%-28s %12s %10s %8s\n' case "req/s" goal ratio
printf '%-28s %12.0f %10d %8.2f\n' "jobs.get (keep-alive)" "$GET" 20000 "$(echo "$GET/20000" | bc -l)"
printf '%-28s %12.0f %10s %8s\n' "jobs.list pageSize=20" "$LIST" "-" "-"
printf '%-28s %12.0f %10d %8.2f\n' "jobs.create (durable)" "$CREATE" 2000 "$(echo "$CREATE/2000" | bc -l)"
