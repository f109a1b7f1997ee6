#!/usr/bin/env bash
# Installs the npm packages the Node.js test suites use, exactly as
# package-lock.json pins them (npm ci). Idempotent: skipped while
# node_modules is newer than the lock file.
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in tests/storage_client; do
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
