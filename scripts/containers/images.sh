#!/usr/bin/env bash
# Builds mlengine's training base images from Debian packages and pushes them
# to a registry (docs/containers.md):
#
#   images.sh build [IMAGE...]            into podman's image store
#   images.sh push REGISTRY [IMAGE...]    build if needed, then push, e.g.
#                                         images.sh push 127.0.0.1:5000
#   images.sh base IMAGE                  build if needed and print the
#                                         reference of IMAGE's plain Debian
#                                         root file system, without
#                                         mlengine's helpers (tests/e2e/
#                                         test_package.py installs the .deb
#                                         on the pytorch one)
#
#   mlengine/python:bookworm   python3-minimal, numpy and mlengine's helper
#                              packages (python/mlengine, python/hypertune as
#                              cloudml-hypertune): small and quick, for
#                              trainers that need no framework
#   mlengine/pytorch:bookworm  python3 with torch (CPU), numpy, scikit-learn
#                              and the helpers; the server configurations
#                              of the tests and the demo mirror the guide's
#                              gcr.io/cloud-ml-public/training/pytorch-xla.*
#                              images to it, labelled simulated (no TPU here)
#
# Each root file system comes from mmdebstrap (Debian bookworm, variant apt),
# imported with `podman import`; the helpers are a layer on top
# (`podman build`). Root file systems are cached in MLE_IMAGE_CACHE (default
# /var/cache/mlengine/images) by a hash of their package list, images in
# podman's store by a hash of everything that goes into them, so a second run
# only pushes (and the registry keeps blobs it has). Needs root; podman runs
# with mlengine's containers.conf (runc, no default ulimits).
set -euo pipefail
usage="usage: images.sh build [python|pytorch ...] | images.sh push REGISTRY [python|pytorch ...] | images.sh base python|pytorch"
CMD=${1:?$usage}
shift
REGISTRY=
case $CMD in
  build) ;;
  push) REGISTRY=${1:?$usage}; shift ;;
  base) [ $# -eq 1 ] || { echo "$usage" >&2; exit 2; } ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
IMAGES=("$@")
[ ${#IMAGES[@]} -eq 0 ] && IMAGES=(python pytorch)
HERE=$(cd "$(dirname "$0")" && pwd)
SOURCE=$(cd "$HERE/../.." && pwd)
CACHE=${MLE_IMAGE_CACHE:-/var/cache/mlengine/images}
MIRROR=${MLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$CACHE"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/containers.conf}

packages() {
  case $1 in
    python) echo "python3-minimal,python3-numpy" ;;
    pytorch) echo "python3-minimal,python3-torch,python3-numpy,python3-sklearn" ;;
    *) echo "images.sh: unknown image $1 (python, pytorch)" >&2; exit 2 ;;
  esac
}

log() { echo "images.sh: $*" >&2; }

# The key of image $1's root file system: a hash of its package list.
base_key_of() {
  local pkgs
  pkgs=$(packages "$1")
  printf '%s\n' "bookworm" "$pkgs" "$MIRROR" | sha256sum | cut -c1-16
}

# Builds (if needed) the plain root file system of image $1 and imports it;
# sets base_ref.
build_base() {
  local name=$1 pkgs base_key rootfs
  pkgs=$(packages "$name")
  base_key=$(base_key_of "$name")
  rootfs="$CACHE/rootfs-$name-$base_key.tar"
  base_ref="localhost/mlengine/$name-base:$base_key"
  podman image exists "$base_ref" && return 0
  if [ ! -s "$rootfs" ]; then
    log "building the $name root file system (mmdebstrap: $pkgs)"
    # shellcheck disable=SC2016  # "$1" is for mmdebstrap's hook: the root's path
    mmdebstrap --quiet --variant=apt --include="$pkgs" \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
      bookworm "$rootfs.partial.tar" "$MIRROR"  # the .tar suffix makes mmdebstrap write a tarball
    mv "$rootfs.partial.tar" "$rootfs"
  fi
  log "importing $rootfs"
  podman import --quiet --change 'CMD ["/usr/bin/python3"]' --change 'ENV PYTHONUNBUFFERED=1' \
    "$rootfs" "$base_ref" >/dev/null
}

if [ "$CMD" = base ]; then
  build_base "${IMAGES[0]}"
  echo "$base_ref"
  exit 0
fi

for name in "${IMAGES[@]}"; do
  base_key=$(base_key_of "$name")
  # What the final image holds: the root file system and mlengine's package.
  key=$( (echo "$base_key"; cd "$SOURCE/python" &&
          find mlengine hypertune cloudml_hypertune-*.dist-info -type f ! -name '*.pyc' -print0 | sort -z |
          xargs -0 sha256sum) |
         sha256sum | cut -c1-16)
  local_ref="localhost/mlengine/$name:$key"
  if ! podman image exists "$local_ref"; then
    build_base "$name"
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    mkdir "$ctx/python"
    cp -r "$SOURCE/python/mlengine" "$SOURCE/python/hypertune" "$SOURCE"/python/cloudml_hypertune-*.dist-info \
      "$ctx/python/"
    find "$ctx" -name __pycache__ -prune -exec rm -rf {} +
    # mlengine's helpers, and cloudml-hypertune's `hypertune` as AI
    # Platform's trainers import it (with its metadata: pip sees it
    # installed).
    printf 'FROM %s\nCOPY python/ /usr/lib/python3/dist-packages/\nLABEL org.mlengine.image=%s\n' \
      "$base_ref" "$name" > "$ctx/Containerfile"
    log "adding python/mlengine and python/hypertune to $name"
    podman build --quiet --network none -t "$local_ref" "$ctx" >/dev/null
    rm -rf "$ctx"
    trap - EXIT
  fi
  podman tag "$local_ref" "localhost/mlengine/$name:bookworm"
  if [ -n "$REGISTRY" ]; then
    for tag in bookworm "$key"; do
      podman push --quiet --tls-verify=false "$local_ref" "$REGISTRY/mlengine/$name:$tag"
    done
    log "$REGISTRY/mlengine/$name:bookworm is $local_ref"
  else
    log "localhost/mlengine/$name:bookworm is $local_ref"
  fi
done
