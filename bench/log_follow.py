#!/usr/bin/env python3
"""Benchmark: how soon a follower of a job's logs gets a line its replica
wrote, with 1 and with 1,000 followers.

A trainer prints lines carrying the time it printed each (every 20 ms to
one follower, every 250 ms to a thousand). The followers, each over its own
connection, follow the logs API in one streamed response
(`GET .../jobs/JOB/logs?alt=sse`, as `mlengine jobs stream-logs` and the
console do), and take, for every line, its arrival minus the time in it.
They run in BUILD/bench/log_followers (C++, one thread on epoll), so that
the client's own cost does not hide the server's.

Peers, in the same run: `tail -F` of the same replica's log file on disk
(the least a follower of a file can get: no HTTP), measured the same way;
at 1,000 followers, the same followers long-polling (`?waitSeconds=10`, one
request per page: how they followed before the stream), and this machine's
floor: the same number of bytes written to 1,000 bare loopback connections
by two threads, with no server, HTTP or log at all (`log_followers
--floor`): no server can deliver sooner than that.

With `--executor slurm` the job runs through `mlengined --executor slurm`
on the Slurm test cluster (scripts/slurm/cluster.sh, started here in its
own directory): the replica's log is written by a shim on a node, into the
run directory the nodes share with the server.

Usage: bench/log_follow.py BUILD_DIR [--lines 100] [--followers 1,1000] [--executor local|slurm]
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_latency as jl  # noqa: E402  (the server and package helpers)

TRAINER = """import sys, time
n, every = int(sys.argv[1]), float(sys.argv[2])
time.sleep(1.0)  # the followers are in place
for i in range(n):
    print(f"tick {i} {time.time():.6f}", flush=True)
    time.sleep(every)
"""


def latency_of(message, now):
    """(line number, latency) of a trainer's line; None for another."""
    parts = message.split()
    if len(parts) == 3 and parts[0] == "tick":
        return int(parts[1]), now - float(parts[2])
    return None


def tail_peer(path, out, stop):
    while not os.path.exists(path) and not stop.is_set():
        time.sleep(0.005)
    p = subprocess.Popen(["tail", "-F", "-n", "+1", path], stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        for line in p.stdout:
            now = time.time()
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                lat = latency_of(parts[2], now)
                if lat is not None:
                    out.append(lat)
            if stop.is_set():
                break
    finally:
        p.kill()


def pct(pairs, q):
    xs = sorted(lat for _, lat in pairs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--lines", type=int, default=100)
    ap.add_argument("--followers", default="1,1000")
    ap.add_argument("--executor", choices=["local", "slurm"], default="local")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counts = [int(x) for x in args.followers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(dir=build) as tmp:
        data = os.path.join(tmp, "data")
        config = os.path.join(tmp, "mlengined.yaml")
        with open(config, "w") as f:
            f.write("runtimes:\n  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11'}\n")
        cluster_env = None
        if args.executor == "slurm":
            if shutil.which("sbatch") is None or os.geteuid() != 0:
                sys.exit("--executor slurm needs Slurm (apt-get install slurm-wlm munge) and root")
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            cluster_env = {k: v for k, v in os.environ.items() if not k.startswith("MLENGINE")}
            cluster_env["MLE_SLURM_DIR"] = os.path.join(tmp, "cluster")
            out = subprocess.run([os.path.join(root, "scripts", "slurm", "cluster.sh"), "start"], env=cluster_env,
                                 capture_output=True, text=True, check=True)
            cluster_env["SLURM_CONF"] = out.stdout.strip().split("=", 1)[1]
            server = jl.Server(build, data, os.path.join(root, "config", "mlengined-slurm.yaml"),
                               extra_args=["--executor", "slurm"], env=cluster_env)
        else:
            server = jl.Server(build, data, config)
        try:
            name = "pkgs/follow_trainer-1.0.tar.gz"
            server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name="
                        + urllib.parse.quote(name, safe=""), raw=jl.sdist("1.0", name="follow_trainer", task=TRAINER))
            pkg = f"gs://bench-bucket/{name}"
            u = urllib.parse.urlsplit(server.url)
            native = os.path.join(build, "bench", "log_followers")
            if not os.path.exists(native):
                raise SystemExit(f"build {native} first (ninja -C {build} log_followers)")
            runs = [(n, "sse") for n in counts] + [(n, "poll") for n in counts if n > 1]
            for n in counts:
                if n > 1:
                    p = subprocess.run([native, "--floor", str(n), str(args.lines), "250", "330"],
                                       capture_output=True, text=True, timeout=600)
                    if p.returncode != 0:
                        raise RuntimeError(f"log_followers --floor: {p.returncode}: {p.stderr[-2000:]}")
                    got = [(int(a), float(b) / 1000) for a, b in (ln.split() for ln in p.stdout.splitlines())]
                    rows.append((n, "floor", got, []))
            for n, mode in runs:
                job_id = f"follow_{n}_{mode}"
                body = jl.job_body(job_id, pkg)
                body["trainingInput"]["pythonModule"] = "follow_trainer.task"
                # A line every 20 ms to one follower; to a thousand, every
                # 250 ms (each line is a thousand answers on two cores).
                every = 0.02 if n == 1 else 0.25
                body["trainingInput"]["args"] = [str(args.lines), str(every)]
                server.call("POST", "/v1/projects/bench/jobs", body)
                log_path = os.path.join(data, "runs", "bench", job_id, "master-replica-0", "log")
                peer, stop = [], threading.Event()
                t = threading.Thread(target=tail_peer, args=(log_path, peer, stop), daemon=True)
                t.start()
                p = subprocess.run([native, u.hostname, str(u.port), server.token, job_id, str(n),
                                    str(args.lines), mode], capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    raise RuntimeError(f"log_followers: {p.returncode}: {p.stderr[-2000:]}")
                got = [(int(a), float(b) / 1000) for a, b in (ln.split() for ln in p.stdout.splitlines())]
                stop.set()
                t.join(5)
                rows.append((n, mode, got, peer))
        finally:
            server.stop()
            if cluster_env is not None:
                subprocess.run([os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                                             "slurm", "cluster.sh"), "stop"], env=cluster_env, capture_output=True)

    print(f"log follow latency, {args.executor} executor, {args.lines} lines; ms from the replica's print")
    print(f"{'followers':>9} {'how':>9} {'lines got':>10} {'p50':>7} {'p99':>7}   {'tail -F p50':>11} {'p99':>7}"
          f"   {'p99 vs tail':>11}")
    ok = True
    p99_of = {}
    for n, mode, got, peer in rows:
        p50, p99, t50, t99 = pct(got, .5), pct(got, .99), pct(peer, .5), pct(peer, .99)
        how = {"sse": "stream", "poll": "long poll", "floor": "sockets"}[mode]
        tail = f"   {t50:11.1f} {t99:7.1f}   {p99 / t99:11.2f}" if peer else ""
        print(f"{n:9d} {how:>9} {len(got):10d} {p50:7.1f} {p99:7.1f}{tail}")
        if n > 1 and mode != "floor":
            # The first of the followers to get each line: how soon the
            # server answers; the rest is the fan-out to a thousand.
            first = {}
            for line, lat in got:
                first[line] = min(lat, first.get(line, lat))
            f = list(first.items())
            print(f"{'':9} {'':9} {'first of':>10} {pct(f, .5):7.1f} {pct(f, .99):7.1f}")
        p99_of[(n, mode)] = p99
        if mode == "sse":
            ok = ok and p99 <= 10 and len(got) == n * args.lines
    for n in sorted({n for n, _ in p99_of}):
        for peer, name in (("poll", "the long poll's"), ("floor", "bare sockets' (this machine's floor)")):
            if (n, peer) in p99_of:
                print(f"{n} followers: the stream's p99 {p99_of[(n, 'sse')]:.1f} ms against {name} "
                      f"{p99_of[(n, peer)]:.1f} ms ({p99_of[(n, 'sse')] / p99_of[(n, peer)]:.2f}x)")
    print(f"goal: every line, within 10 ms at p99 of the replica writing it, streamed: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
