#!/usr/bin/env bash
# Storage API throughput: a 1 GiB object uploaded (uploadType=media) and
# downloaded (alt=media) through mlengined's Cloud Storage JSON API with
# curl, against `cp` of the same file on the same disk, in the same run.
# Prints MB/s and the ratios (goal: at least 0.5x of cp each way).
# Usage: bench/storage_throughput.sh [BUILD_DIR] [SIZE_MIB]
set -euo pipefail
BUILD=${1:-build}
SIZE_MIB=${2:-1024}
cd "$(dirname "$0")/.."
MLENGINED="$BUILD/src/server/mlengined"

work=$(mktemp -d "${TMPDIR:-/tmp}/mle-storage-bench.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$MLENGINED" --listen 127.0.0.1:0 --data-dir "$work/data" --executor none >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 150); do
  grep -q "listening on" "$work/out" 2>/dev/null && break
  sleep 0.1
done
url=$(sed -n 's/^mlengined listening on \(http:[^ ]*\).*/\1/p' "$work/out" | head -1)
[ -n "$url" ] || { echo "mlengined did not start" >&2; cat "$work/err" >&2; exit 1; }
token=$(head -1 "$work/data/admin.token")

# The source file on the same disk as the buckets.
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom >"$work/src.bin"
sync

seconds() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1 || { echo "failed: $*" >&2; exit 1; }; }
mbps() { echo "scale=1; $SIZE_MIB * 1048576 / 1000000 / $1" | bc; }

cp_s=$(seconds cp "$work/src.bin" "$work/copy.bin")
rm -f "$work/copy.bin"
# The API makes an upload durable (fsync) before it answers; cp does not.
cpsync_s=$(seconds sh -c 'cp "$1" "$2" && sync "$2"' sh "$work/src.bin" "$work/copy.bin")
rm -f "$work/copy.bin"
up_s=$(seconds curl -sf -o /dev/null -X POST -H "Authorization: Bearer $token" \
  -H "Content-Type: application/octet-stream" -T "$work/src.bin" \
  "$url/upload/storage/v1/b/bench/o?uploadType=media&name=big.bin")
down_s=$(seconds curl -sf -o "$work/down.bin" -H "Authorization: Bearer $token" \
  "$url/storage/v1/b/bench/o/big.bin?alt=media")
cmp -s "$work/src.bin" "$work/down.bin" || { echo "downloaded bytes differ" >&2; exit 1; }

echo "object: $SIZE_MIB MiB"
printf "cp:       %6.2f s  %8s MB/s\n" "$cp_s" "$(mbps "$cp_s")"
printf "cp+fsync: %6.2f s  %8s MB/s\n" "$cpsync_s" "$(mbps "$cpsync_s")"
printf "upload:   %6.2f s  %8s MB/s  ratio to cp %s, to cp+fsync %s\n" "$up_s" "$(mbps "$up_s")" \
  "$(echo "scale=2; $cp_s / $up_s" | bc)" "$(echo "scale=2; $cpsync_s / $up_s" | bc)"
printf "download: %6.2f s  %8s MB/s  ratio to cp %s\n" "$down_s" "$(mbps "$down_s")" "$(echo "scale=2; $cp_s / $down_s" | bc)"
echo "(goal: ratios at least 0.50; the upload includes MD5+CRC32C and an fsync, cp neither)"
