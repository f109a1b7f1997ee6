#!/usr/bin/env bash
# Installs the npm packages the Node.js test suites and the console use,
# exactly as each package-lock.json pins them (npm ci): the storage client
# suite's, the Vertex AI client suite's (googleapis and
# @google-cloud/aiplatform), and console/'s (esbuild, uPlot, and playwright-core for the
# browser tests, which drive Debian's chromium: no browser is downloaded).
# Idempotent: skipped while node_modules is newer than the lock file.
set -euo pipefail
cd "$(dirname "$0")/.."
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
for dir in tests/storage_client tests/vertex_client console; do
  stamp="$dir/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ]; then
    continue
  fi
  if ! command -v npm >/dev/null; then
    echo "install-node-deps: npm is missing (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
