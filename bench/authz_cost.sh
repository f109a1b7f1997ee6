#!/usr/bin/env bash
# Benchmark: what authorization costs jobs.get. The same jobs.get over
# keep-alive connections, with two callers in alternating rounds against one
# mlengined:
#   operator  the admin token: compared in constant time, no policy read
#   user      a user's token: hashed, looked up, and the permission checked
#             against the job's project policy (52 members in 3 bindings)
# The goal: authorization costs at most 10% of jobs.get throughput, i.e.
# user/operator >= 0.90. wrk runs on the same cores as the server.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/$BUILD/src/server/mlengined"
DUR=${BENCH_SECONDS:-3}
ROUNDS=${BENCH_ROUNDS:-6}
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT

"$BIN" --listen 127.0.0.1:0 --data-dir "$DIR" --executor none > "$DIR/out" 2>"$DIR/err" &
PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'http://[^ ]*' "$DIR/out")
ADMIN=$(cat "$DIR/admin.token")
call() { curl -sf -H "Authorization: Bearer $ADMIN" -H "Content-Type: application/json" "$@"; }

# A user with roles/ml.viewer on the project, among 50 other members.
MLE_TOKEN=$ADMIN MLE_PREFIX=seed wrk -t1 -c4 -d1s -s "$ROOT/bench/create.lua" "$URL" > /dev/null
JOB=$(call "$URL/v1/projects/bench/jobs?pageSize=1&prettyPrint=false" \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["jobId"])')
for i in $(seq 50); do call -X POST "$URL/mlengine/v1/users" -d "{\"email\": \"u$i@example.com\"}" > /dev/null; done
call -X POST "$URL/mlengine/v1/users" -d '{"email": "viewer@example.com"}' > /dev/null
/usr/bin/python3 - "$URL" "$ADMIN" <<'PY'
import json, sys, urllib.request
url, token = sys.argv[1], sys.argv[2]
others = ["user:u%d@example.com" % i for i in range(1, 51)]
policy = {"bindings": [{"role": "roles/editor", "members": others[:25]},
                       {"role": "roles/ml.developer", "members": others[25:]},
                       {"role": "roles/ml.viewer", "members": ["user:viewer@example.com", "user:u1@example.com"]}]}
req = urllib.request.Request(url + "/v1/projects/bench:setIamPolicy", json.dumps({"policy": policy}).encode(),
                             {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
urllib.request.urlopen(req).read()
PY
USER_TOKEN=$(call -X POST "$URL/mlengine/v1/users/viewer@example.com:generateToken" -d '{}' \
  | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["accessToken"])')

rate() { grep 'Requests/sec' | awk '{print $2}'; }
run() {
  MLE_TOKEN=$1 wrk -t2 -c32 -d${DUR}s -s "$ROOT/bench/auth.lua" "$URL/v1/projects/bench/jobs/$JOB" > "$DIR/wrk"
  if grep -q 'non-2xx: [1-9]' "$DIR/wrk"; then echo "FAIL: non-2xx responses"; cat "$DIR/wrk"; exit 1; fi
  rate < "$DIR/wrk"
}
echo "mlengined $URL, jobs.get, wrk ${DUR}s x $ROUNDS rounds per caller, alternating who goes first; $(nproc) cores"
OPS=(); USERS=()
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then o=$(run "$ADMIN"); u=$(run "$USER_TOKEN"); else u=$(run "$USER_TOKEN"); o=$(run "$ADMIN"); fi
  printf 'round %d: operator %8.0f req/s   user %8.0f req/s\n' "$r" "$o" "$u"
  OPS+=("$o"); USERS+=("$u")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
OP=$(median "${OPS[@]}"); US=$(median "${USERS[@]}")
RATIO=$(echo "$US / $OP" | bc -l)
printf '%-34s %10.0f req/s (median)\n' "jobs.get as the operator (peer)" "$OP"
printf '%-34s %10.0f req/s (median)\n' "jobs.get as a user (authorized)" "$US"
printf '%-34s %10.3f (goal >= 0.90)\n' "ratio user/operator" "$RATIO"
if [ "$(echo "$RATIO < 0.90" | bc -l)" = 1 ]; then echo "FAIL: authorization costs more than 10%"; exit 1; fi
