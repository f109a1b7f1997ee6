#!/usr/bin/env bash
# A four-host Slurm test cluster on this one machine (docs: /work/shared/design
# slurm-local.md): munged, slurmctld, and four slurmd daemons named
# tpuhost1..tpuhost4, each with 2 CPUs and a count-only GRES `tpu:8`; with
# accounting: a private MariaDB (its own datadir, socket and port under the
# cluster's directory, no grant tables: it listens on 127.0.0.1 only) and a
# slurmdbd, so that Slurm enforces association and QOS limits
# (AccountingStorageEnforce=associations,limits,qos). The cluster `local` is
# registered in the database; root's default account `root` lets jobs
# submitted without --account run.
#
#   scripts/slurm/cluster.sh start    # idempotent; prints `export SLURM_CONF=...`
#   scripts/slurm/cluster.sh status   # exit 0 when 4 nodes respond
#   scripts/slurm/cluster.sh stop     # idempotent; scontrol shutdown + munged
#
# Everything lives under $MLE_SLURM_DIR (default /tmp/mlengine-slurm): the
# generated slurm.conf, slurmdbd.conf and gres.conf, state, spool, the
# database (mysql/, fresh at every start), pid files and logs. Ports
# are picked free at `start`. Needs root (slurmd runs jobs as their user).
# munged is started only when none answers; `stop` ends it only if this script
# started it. Scheduler settings favour fast turnaround over throughput;
# MLE_SLURMD_TIMEOUT_S (default 10) is how long a silent node has before
# Slurm declares it down; MLE_SLURM_MIN_JOB_AGE_S (default 600) how long
# slurmctld keeps a finished job; MLE_SLURM_PREEMPT=1 adds Slurm's own
# preemption (a partition `urgent` that preempts `debug`).
set -euo pipefail

DIR="${MLE_SLURM_DIR:-/tmp/mlengine-slurm}"
CONF="$DIR/slurm.conf"
NODES=(tpuhost1 tpuhost2 tpuhost3 tpuhost4)
START_TIMEOUT_S="${MLE_SLURM_START_TIMEOUT_S:-60}"

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_ok; then return 0; fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then
      mungekey -c -f -k /etc/munge/munge.key
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  su -s /bin/sh munge -c munged
  for _ in $(seq 50); do
    if munge_ok; then
      cat /run/munge/munged.pid > "$DIR/munged.pid.ours" 2>/dev/null || true
      return 0
    fi
    sleep 0.1
  done
  die "munged did not come up (munge -n | unmunge fails)"
}

# The accounting database: mariadbd on its own datadir (fresh at every start:
# mariadb-install-db takes under a second), without grant tables: no users
# to create, and it answers only on 127.0.0.1 and its socket while the test
# cluster lives.
start_mariadb() {
  local port="$1"
  local opts=(--no-defaults --user=root --datadir="$DIR/mysql" --innodb-log-file-size=16M)
  command -v mariadbd >/dev/null || die "mariadbd not found (apt-get install -y mariadb-server)"
  rm -rf "$DIR/mysql"
  mariadb-install-db "${opts[@]}" --skip-test-db --auth-root-authentication-method=normal \
    >"$DIR/mariadb-install-db.log" 2>&1 || die "mariadb-install-db failed; see $DIR/mariadb-install-db.log"
  mariadbd "${opts[@]}" --socket="$DIR/mysqld.sock" --port="$port" \
    --bind-address=127.0.0.1 --skip-grant-tables --skip-name-resolve --skip-log-bin \
    --pid-file="$DIR/mariadbd.pid" --log-error="$DIR/mariadbd.log" \
    --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 \
    >/dev/null 2>&1 &
  for _ in $(seq 150); do
    if mariadb-admin --no-defaults --socket="$DIR/mysqld.sock" ping >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "mariadbd did not come up; see $DIR/mariadbd.log"
}

# slurmdbd, then the cluster `local` registered in its database (which also
# creates the account root and root's association to it).
start_slurmdbd() {
  command -v slurmdbd >/dev/null || die "slurmdbd not found (apt-get install -y slurmdbd)"
  slurmdbd || die "slurmdbd failed; see $DIR/slurmdbd.log"
  for _ in $(seq 150); do
    if sacctmgr -n show cluster >/dev/null 2>&1; then
      sacctmgr -i add cluster local >/dev/null || die "sacctmgr add cluster local failed; see $DIR/slurmdbd.log"
      return 0
    fi
    sleep 0.1
  done
  die "slurmdbd did not answer; see $DIR/slurmdbd.log"
}

# Prints N distinct free TCP ports (bound then released; good enough for tests).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

write_conf() {
  local host ports ctld_port i
  host="$(hostname -s)"
  read -r -a ports <<<"$(free_ports 7)"
  ctld_port="${ports[0]}"
  DBD_PORT="${ports[5]}"
  DB_PORT="${ports[6]}"
  mkdir -p "$DIR/state" "$DIR/spool"
  # slurmdbd reads slurmdbd.conf beside slurm.conf, and only when it is
  # private to SlurmUser (root here): it names the database and its user.
  rm -f "$DIR/slurmdbd.conf"
  (umask 077 && cat >"$DIR/slurmdbd.conf" <<EOF
# Generated by scripts/slurm/cluster.sh; regenerated at every start.
AuthType=auth/munge
DbdHost=$host
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=root
StorageLoc=slurm_acct_db
EOF
  )
  chown root:root "$DIR/slurmdbd.conf"
  chmod 0600 "$DIR/slurmdbd.conf"
  cat >"$CONF" <<EOF
# Generated by scripts/slurm/cluster.sh; regenerated at every start.
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldPort=$ctld_port
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# Accounting through slurmdbd, so that association and QOS limits (GrpTRES,
# GrpJobs: what mlengined sets per project account) are enforced. GRES are
# trackable resources only when listed here.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$host
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu,gres/tpu
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=tpu,gpu
ReturnToService=2
# Fast turnaround: schedule at submit and on every event, no batching delay,
# short main/backfill loops; short kill grace; finished jobs stay visible to
# scontrol/squeue for 10 minutes by default (mlengined reads squeue, not sacct).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1,bf_interval=1,default_queue_depth=200
KillWait=2
MinJobAge=${MLE_SLURM_MIN_JOB_AGE_S:-600}
InactiveLimit=0
MessageTimeout=10
# A node whose slurmd stops answering is declared DOWN, and its jobs end as
# NODE_FAIL, after SlurmdTimeout seconds (Slurm's default is 300): short, so
# that a lost host (tests/slurm kills one) ends its job in seconds.
SlurmdTimeout=${MLE_SLURMD_TIMEOUT_S:-10}
EOF
  for i in 0 1 2 3; do
    echo "NodeName=${NODES[$i]} NodeHostname=$host Port=${ports[$((i + 1))]} CPUs=2 RealMemory=2000 Gres=tpu:8 State=UNKNOWN" >>"$CONF"
  done
  if [ "${MLE_SLURM_PREEMPT:-0}" = 1 ]; then
    # Slurm's own preemption (bench/preemption.py's peer): a job of the
    # partition `urgent` preempts jobs of `debug`, which get SIGTERM, their
    # GraceTime (MLE_SLURM_GRACE_S, default 10 s as mlengine's
    # cancel_grace_seconds; Slurm waits it out even when the job has
    # exited), then SIGKILL, and are requeued.
    printf '%s\n' "PreemptType=preempt/partition_prio" "PreemptMode=REQUEUE" >>"$CONF"
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES PriorityTier=1 GraceTime=${MLE_SLURM_GRACE_S:-10}" >>"$CONF"
    echo "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF" >>"$CONF"
  else
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >>"$CONF"
  fi
  # gres.conf is read from slurm.conf's directory.
  echo "NodeName=tpuhost[1-4] Name=tpu Count=8" >"$DIR/gres.conf"
}

pid_alive() { local p; p="$(cat "$1" 2>/dev/null)" && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

# 0 when slurmctld answers and all four nodes are idle (or mixed/allocated).
cluster_up() {
  [ -f "$CONF" ] || return 1
  pid_alive "$DIR/slurmctld.pid" || return 1
  pid_alive "$DIR/slurmdbd.pid" || return 1
  pid_alive "$DIR/mariadbd.pid" || return 1
  local states
  states="$(SLURM_CONF="$CONF" sinfo -N -h -o '%N %t' 2>/dev/null | sort -u)" || return 1
  [ "$(echo "$states" | grep -cE '^tpuhost[1-4] (idle|mix|alloc)$')" -eq 4 ]
}

cmd_start() {
  command -v slurmctld >/dev/null || die "slurmctld not found (apt-get install -y slurm-wlm munge)"
  mkdir -p "$DIR"
  if cluster_up; then
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  # Half-started or stale: clear it before generating a fresh config.
  stop_daemons
  rm -rf "$DIR/state" "$DIR/spool" "$DIR/mysql"
  start_munge
  write_conf
  export SLURM_CONF="$CONF"
  start_mariadb "$DB_PORT"
  start_slurmdbd
  slurmctld -c -f "$CONF" || die "slurmctld failed; see $DIR/slurmctld.log"
  for n in "${NODES[@]}"; do
    mkdir -p "$DIR/spool/$n"
    slurmd -N "$n" -f "$CONF" || die "slurmd $n failed; see $DIR/slurmd-$n.log"
  done
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until cluster_up; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      sinfo -N >&2 || true
      die "nodes not idle after ${START_TIMEOUT_S}s; logs in $DIR"
    fi
    sleep 0.2
  done
  echo "export SLURM_CONF=$CONF"
}

# Stops slurmctld and every slurmd of this cluster (by their pid files).
stop_daemons() {
  local pids=() f p
  # Read the pids first: the daemons remove their pid files as they exit.
  for f in "$DIR/slurmctld.pid" "$DIR"/slurmd-*.pid; do
    p="$(cat "$f" 2>/dev/null)" || continue
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then pids+=("$p"); fi
  done
  if [ -f "$CONF" ] && pid_alive "$DIR/slurmctld.pid"; then
    SLURM_CONF="$CONF" scontrol shutdown >/dev/null 2>&1 || true
  fi
  # Bounded wait for a clean shutdown, then TERM, then KILL.
  local left i
  for i in $(seq 100); do
    left=()
    for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then left+=("$p"); fi; done
    [ ${#left[@]} -eq 0 ] && break
    if [ "$i" -eq 50 ]; then kill -TERM "${left[@]}" 2>/dev/null || true; fi
    if [ "$i" -eq 90 ]; then kill -KILL "${left[@]}" 2>/dev/null || true; fi
    sleep 0.1
  done
  rm -f "$DIR/slurmctld.pid" "$DIR"/slurmd-*.pid
  # Then accounting: slurmdbd, and the database last.
  stop_pidfile "$DIR/slurmdbd.pid"
  stop_pidfile "$DIR/mariadbd.pid"
}

# TERMs the daemon of a pid file, KILLs it after 10 s; removes the file.
stop_pidfile() {
  local p i
  p="$(cat "$1" 2>/dev/null)" || return 0
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    for i in $(seq 100); do
      kill -0 "$p" 2>/dev/null || break
      if [ "$i" -eq 100 ]; then kill -KILL "$p" 2>/dev/null || true; fi
      sleep 0.1
    done
  fi
  rm -f "$1"
}

cmd_stop() {
  stop_daemons
  if [ -s "$DIR/munged.pid.ours" ]; then
    local p
    p="$(cat "$DIR/munged.pid.ours")"
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$DIR/munged.pid.ours"
  fi
}

cmd_status() {
  if cluster_up; then
    SLURM_CONF="$CONF" sinfo -N
    echo "export SLURM_CONF=$CONF"
  else
    echo "not running ($DIR)"
    return 1
  fi
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status   (dir: \$MLE_SLURM_DIR, default /tmp/mlengine-slurm)" >&2; exit 2 ;;
esac
