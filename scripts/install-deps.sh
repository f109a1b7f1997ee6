#!/usr/bin/env bash
# Installs every Debian package mlengine builds, tests and runs with.
# Idempotent: packages already present are skipped; apt-get runs only when
# something is missing. Needs root (CI and the dev machines run as root).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-system-dev libboost-program-options-dev
  nlohmann-json3-dev rapidjson-dev libyaml-cpp-dev libsqlite3-dev sqlite3
  libabsl-dev libcli11-dev libspdlog-dev libfmt-dev prometheus-cpp-dev
  libcurl4-openssl-dev libarchive-dev libssl-dev libisal-dev libsystemd-dev
  libeigen3-dev libnlopt-cxx-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev lld
  python3 python3-venv python3-pip python3-setuptools
  python3-googleapi python3-yaml
  python3-numpy python3-sklearn python3-torch
  procps curl wrk bc python3-pytest python3-prometheus-client
  slurm-wlm munge slurmdbd mariadb-server
  podman runc catatonit docker-registry mmdebstrap lintian help2man
  chromium
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm (the storage client suite, the console and its browser
# tests, which drive Debian's chromium above: no npm package downloads a
# browser). Any installation builds the console (a nodejs that bundles npm
# conflicts with Debian's npm package); the browser tests' playwright-core
# needs Node.js 20 or later, where Debian 12's own nodejs is 18.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
warn_old_node() {
  if (($(node -p 'process.versions.node.split(".")[0]') < 20)); then
    echo "install-deps: Node.js $(node --version) builds the console, but the browser tests (make test) need Node.js 20 or later" >&2
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  warn_old_node
  exec "$(dirname "$0")/install-node-deps.sh"
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
warn_old_node
"$(dirname "$0")/install-node-deps.sh"
