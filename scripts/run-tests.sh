#!/usr/bin/env bash
# Runs every test of mlengine through CTest (C++ unit tests and the Python
# integration suites, which start the real mlengined on port 0).
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" --timeout 600
