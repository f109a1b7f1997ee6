#!/usr/bin/env bash
# Runs the browser suite (ctest's `browser`): node's test runner over
# tests/browser/*.test.mjs. Exits 77 (ctest: skipped), saying why, only when
# Chromium is absent; scripts/install-deps.sh installs Debian's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chromium=${MLE_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "browser: SKIPPED: no Chromium at $chromium (scripts/install-deps.sh installs Debian's chromium)" >&2
  exit 77
fi
exec node --test --test-reporter=spec "$here"/*.test.mjs
