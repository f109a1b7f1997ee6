#!/usr/bin/env bash
# Refreshes the web console's screenshots committed in docs/console/ (jobs,
# a job, its logs, trials, metrics, the cluster, buckets, the jobs page on a
# phone): runs the browser suite (tests/browser) against BUILD (default
# build/, built with the console) with MLE_SCREENSHOT_DIR=docs/console.
# `make test` runs the same suite but writes its screenshots into the build
# tree, never into the sources.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
root=$(pwd)
if [ ! -f "$BUILD/src/server/console/index.html" ]; then
  echo "console-screenshots: no console in $BUILD/src/server/console (build first: make build)" >&2
  exit 1
fi
./scripts/install-node-deps.sh
MLENGINED="$root/$BUILD/src/server/mlengined" MLENGINE="$root/$BUILD/src/cli/mlengine" MLE_SOURCE_DIR="$root" \
  MLE_SCREENSHOT_DIR="$root/docs/console" tests/browser/run.sh
ls -l docs/console/*.png
