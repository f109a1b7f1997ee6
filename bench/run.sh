#!/usr/bin/env bash
# Runs every benchmark of mlengine: `make bench` (or bench/run.sh BUILD_DIR).
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "== control plane: jobs API throughput"
bench/api_throughput.sh "$BUILD"
