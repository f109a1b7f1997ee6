#!/usr/bin/env bash
# Runs the browser suite (ctest's `browser`): node's test runner over
# tests/browser/*.test.mjs. Chromium must be there (scripts/install-deps.sh,
# run by `make test`, installs Debian's): without it the suite fails, saying
# so, rather than passing without having looked at a page.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chromium=${MLE_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "browser: no Chromium at $chromium: install Debian's with scripts/install-deps.sh (apt-get install chromium), or set MLE_CHROMIUM" >&2
  exit 1
fi
if (($(node -p 'process.versions.node.split(".")[0]') < 20)); then
  echo "browser: Node.js $(node --version) is too old: playwright-core, which drives Chromium here, needs Node.js 20 or later (Debian 12's own nodejs is 18)" >&2
  exit 1
fi
exec node --test --test-reporter=spec "$here"/*.test.mjs
