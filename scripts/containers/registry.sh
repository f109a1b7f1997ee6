#!/usr/bin/env bash
# A local image registry (Debian's docker-registry) for tests and the demo:
#
#   registry.sh start DIR PORT   serves DIR/data at 127.0.0.1:PORT (plain HTTP)
#   registry.sh stop DIR
#
# Blobs stay in DIR/data between runs, so pushing an image again is quick.
set -euo pipefail
cmd=${1:?usage: registry.sh start DIR PORT | stop DIR}
DIR=${2:?usage: registry.sh start DIR PORT | stop DIR}
mkdir -p "$DIR/data"
case $cmd in
  start)
    PORT=${3:?usage: registry.sh start DIR PORT}
    cat > "$DIR/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
YAML
    if [ -f "$DIR/pid" ] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null; then
      # One registry per directory: one left by an interrupted run goes.
      echo "registry.sh: stopping the registry left running on $DIR (pid $(cat "$DIR/pid"))" >&2
      "$0" stop "$DIR"
    fi
    setsid docker-registry serve "$DIR/config.yml" > "$DIR/registry.log" 2>&1 < /dev/null &
    echo $! > "$DIR/pid"
    for _ in $(seq 1 200); do
      if curl -sf "http://127.0.0.1:$PORT/v2/" > /dev/null; then exit 0; fi
      if ! kill -0 "$(cat "$DIR/pid")" 2>/dev/null; then break; fi
      sleep 0.05
    done
    echo "registry.sh: docker-registry did not start; its log:" >&2
    cat "$DIR/registry.log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$DIR/pid" ]; then
      pid=$(cat "$DIR/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$DIR/pid"
    fi
    ;;
  *) echo "registry.sh: unknown command $cmd" >&2; exit 2 ;;
esac
