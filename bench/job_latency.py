#!/usr/bin/env python3
"""Benchmark: how much mlengine adds to starting a trainer.

Peer, measured in the same run: starting the same module directly with
`python3 -m trivial_trainer.task`.

1. Create-to-first-line latency: from sending jobs.create to the moment the
   trainer's first line was read by mlengine-replica (its log timestamp),
   for a cold package (new content digest: a venv is built and pip installs
   the sdist) and for a cached one; against spawn-to-first-line of the
   direct launch.
2. Throughput: 200 trivial jobs end to end (created, run, SUCCEEDED) against
   200 direct launches with the same concurrency as the server's slots, and
   where the CPU went per job: mlengined's own, its replicas' (shim, sandbox
   and trainer, against the trainer launched directly) and the client's.

Usage: bench/job_latency.py BUILD_DIR [--jobs 200] [--samples 15] [--rounds 4]
"""
import argparse
import concurrent.futures
import http.client
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
from datetime import datetime

PY = "/usr/bin/python3"
TRAINER = 'import sys\nprint("first line", flush=True)\n'


def sdist(version, name="trivial_trainer", task=TRAINER):
    """A tiny sdist (setup.py + package NAME whose task.py is `task`), built
    in memory."""
    buf = io.BytesIO()
    base = f"{name}-{version}"
    files = {
        f"{base}/setup.py": f'from setuptools import setup\nsetup(name="{name}", version="{version}", packages=["{name}"])\n',
        f"{base}/{name}/__init__.py": "",
        f"{base}/{name}/task.py": task,
        f"{base}/PKG-INFO": f"Metadata-Version: 1.0\nName: {name}\nVersion: {version}\n",
    }
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Server:
    def __init__(self, build, data, config, extra_args=(), env=None):
        self.proc = subprocess.Popen(
            [os.path.join(build, "src/server/mlengined"), "--listen", "127.0.0.1:0", "--data-dir", data,
             "--config", config, *extra_args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        line = self.proc.stdout.readline().decode()
        self.url = line.split()[-1]
        self.token = open(os.path.join(data, "admin.token")).read().strip()
        self.conn = None

    def call(self, method, path, body=None, raw=None):
        """One API call on a kept-alive connection, as Google's client
        libraries make them (a new TCP connection per call would charge both
        sides a handshake that no real client pays)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Authorization": "Bearer " + self.token}
        for attempt in (0, 1):
            if self.conn is None:
                u = urllib.parse.urlsplit(self.url)
                self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            if r.status >= 400:
                raise RuntimeError(f"{method} {path}: {r.status} {text[:500]!r}")
            return json.loads(text or b"{}")

    def cpu(self):
        """(mlengined's own CPU seconds, its replicas', mlengined's own page
        faults, its replicas'), from /proc: its reaped children's, and its
        shims' fork server's (the shims are that server's children, reaped
        by it; executor/shim_forks.h)."""
        tick = os.sysconf("SC_CLK_TCK")

        def stat(pid):
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()

        fields = stat(self.proc.pid)
        own = (int(fields[11]) + int(fields[12])) / tick
        replicas = (int(fields[13]) + int(fields[14])) / tick
        own_faults, replica_faults = int(fields[7]), int(fields[8])
        children = []
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):  # each thread's children
            try:
                children += open(f"/proc/{self.proc.pid}/task/{tid}/children").read().split()
            except OSError:
                pass
        for child in children:
            try:
                if b"--fork-server" in open(f"/proc/{child}/cmdline", "rb").read():
                    f = stat(child)
                    replicas += sum(int(x) for x in f[11:15]) / tick
                    replica_faults += int(f[7]) + int(f[8])
            except OSError:
                pass
        return own, replicas, own_faults, replica_faults

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def job_body(job_id, package):
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "pytorch-1.13-cpu",
        "packageUris": [package], "pythonModule": "trivial_trainer.task"}}


def ts(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def wait_first_line(server, job_id, timeout=120, text="first line", after=0.0):
    """The log timestamp of the first line `text` of `job_id` (written after `after`)."""
    deadline = time.time() + timeout
    token = ""
    while time.time() < deadline:
        page = server.call("GET", f"/v1/projects/bench/jobs/{job_id}/logs?waitSeconds=5&prettyPrint=false"
                                  f"&pageToken={urllib.parse.quote(token)}")
        for e in page.get("entries", []):
            if e["message"] == text and ts(e["timestamp"]) >= after:
                return ts(e["timestamp"])
        token = page.get("nextPageToken", token)
        if page.get("jobEnded"):
            raise RuntimeError(f"{job_id} ended without its first line: "
                               + json.dumps(server.call("GET", f"/v1/projects/bench/jobs/{job_id}")))
    raise RuntimeError(f"timeout waiting for {job_id}")


def wait_done(server, job_id, timeout=300, interval=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = server.call("GET", f"/v1/projects/bench/jobs/{job_id}?prettyPrint=false")
        if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            if job["state"] != "SUCCEEDED":
                raise RuntimeError(f"{job_id}: {job['state']} {job.get('errorMessage')}")
            return
        time.sleep(interval)
    raise RuntimeError(f"timeout waiting for {job_id}")


def direct_first_line(cwd):
    t0 = time.time()
    p = subprocess.Popen([PY, "-m", "trivial_trainer.task"], cwd=cwd, stdout=subprocess.PIPE)
    p.stdout.readline()
    t1 = time.time()
    p.wait()
    return t1 - t0


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--cold-samples", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4, help="throughput rounds of each side, side by side")
    ap.add_argument("--sandbox", choices=["on", "off"], default="on",
                    help="the server's sandbox (docs/security.md); the goal holds with it on")
    ap.add_argument("--data-parent", help="where the server's data directory goes (default: BUILD)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    # The data directory where a deployment has it (/var/lib/mlengine, the
    # package's), on the same disk, not below /tmp: a sandboxed replica's
    # /tmp is its own directory, so every path of its view that lies below
    # /tmp (its work directory, its environment, the buckets) needs mount
    # points made inside that directory, a dozen new inodes per job that no
    # deployment pays (docs/security.md).
    with tempfile.TemporaryDirectory(dir=args.data_parent or build) as tmp:
        data = os.path.join(tmp, "data")
        config = os.path.join(tmp, "mlengined.yaml")
        slots = 8
        with open(config, "w") as f:
            f.write("runtimes:\n  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11'}\n"
                    f"local: {{cpu_oversubscription: {slots // os.cpu_count() or 1}, replica_cpu_milli: 1000}}\n"
                    f"sandbox: {{enabled: {'true' if args.sandbox == 'on' else 'false'}}}\n")
        # Direct peer: the module on disk.
        direct = os.path.join(tmp, "direct")
        os.makedirs(os.path.join(direct, "trivial_trainer"))
        open(os.path.join(direct, "trivial_trainer/__init__.py"), "w").close()
        open(os.path.join(direct, "trivial_trainer/task.py"), "w").write(TRAINER)

        server = Server(build, data, config)
        try:
            def upload(version):
                name = f"pkgs/{version}/trivial_trainer-{version}.tar.gz"
                server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name="
                            + urllib.parse.quote(name, safe=""), raw=sdist(version))
                return f"gs://bench-bucket/{name}"

            # 1. Latency to the first line.
            direct_lat = [direct_first_line(direct) for _ in range(args.samples)]
            cold, cached = [], []
            for i in range(args.cold_samples):
                pkg = upload(f"0.0.{i + 1}")  # new content: a new digest, a new environment
                t0 = time.time()
                server.call("POST", "/v1/projects/bench/jobs", job_body(f"cold_{i}", pkg))
                cold.append(wait_first_line(server, f"cold_{i}") - t0)
                wait_done(server, f"cold_{i}")
            pkg = upload("1.0.0")
            server.call("POST", "/v1/projects/bench/jobs", job_body("warmup", pkg))
            wait_done(server, "warmup")
            for i in range(args.samples):
                t0 = time.time()
                server.call("POST", "/v1/projects/bench/jobs", job_body(f"cached_{i}", pkg))
                cached.append(wait_first_line(server, f"cached_{i}") - t0)
                wait_done(server, f"cached_{i}")

            # 2. Throughput: N jobs end to end vs N direct launches, same
            # concurrency, in rounds side by side (D M M D ...): this VM's
            # speed drifts by a quarter within a minute, and one side
            # measured after the other took the drift for overhead. The
            # client polls a job every 50 ms (a person's client polls once a
            # second): at 10 ms its polls took a tenth of the two cores from
            # the jobs it waited for. Where the CPU goes, per job:
            # mlengined's own threads; its children (each replica's shim
            # with everything below it: the sandbox's set-up and the
            # trainer); this client; and the trainer launched directly.
            def mlengine_round(r):
                cpu0, me0 = server.cpu(), os.times()
                t0 = time.time()
                for i in range(args.jobs):
                    server.call("POST", "/v1/projects/bench/jobs", job_body(f"many_{r}_{i}", pkg))
                for i in range(args.jobs):
                    wait_done(server, f"many_{r}_{i}", interval=0.05)
                took = time.time() - t0
                cpu1, me1 = server.cpu(), os.times()
                totals["mle"] += took
                totals["own"] += cpu1[0] - cpu0[0]
                totals["replicas"] += cpu1[1] - cpu0[1]
                totals["own_faults"] += cpu1[2] - cpu0[2]
                totals["replica_faults"] += cpu1[3] - cpu0[3]
                totals["client"] += me1.user - me0.user + me1.system - me0.system
                return took

            def direct_round(_):
                cpu0, faults0 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                t0 = time.time()
                with concurrent.futures.ThreadPoolExecutor(slots) as pool:
                    list(pool.map(lambda _: subprocess.run([PY, "-m", "trivial_trainer.task"], cwd=direct,
                                                           stdout=subprocess.DEVNULL, check=True), range(args.jobs)))
                took = time.time() - t0
                cpu1, faults1 = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                totals["trainer_faults"] += faults1 - faults0
                totals["direct"] += took
                totals["trainer"] += (cpu1.children_user - cpu0.children_user
                                      + cpu1.children_system - cpu0.children_system)
                return took

            totals = dict.fromkeys(("mle", "direct", "own", "replicas", "client", "trainer", "own_faults",
                                    "replica_faults", "trainer_faults"), 0.0)
            rounds = []
            for r in range(args.rounds):
                pair = (direct_round, mlengine_round) if r % 2 == 0 else (mlengine_round, direct_round)
                took = {f.__name__: f(r) for f in pair}
                rounds.append((took["direct_round"], took["mlengine_round"]))
        finally:
            server.stop()

    d, c, k = median(direct_lat) * 1000, median(cached) * 1000, median(cold) * 1000
    print(f"machine: {os.cpu_count()} cores; samples: {args.samples} (cold: {args.cold_samples}); medians")
    print(f"{'case':44} {'ms':>9} {'vs direct':>10} {'overhead ms':>12}")
    print(f"{'direct python3 -m (spawn to first line)':44} {d:9.1f} {1.0:10.2f} {0.0:12.1f}")
    print(f"{'mlengine, cached package (create to line)':44} {c:9.1f} {c / d:10.2f} {c - d:12.1f}")
    print(f"{'mlengine, cold package (venv + pip install)':44} {k:9.1f} {k / d:10.2f} {k - d:12.1f}")
    print(f"{args.jobs} trivial jobs, {slots} at a time, {args.rounds} rounds side by side (ms):")
    for r, (dt, mt) in enumerate(rounds):
        print(f"  round {r + 1}: direct {dt * 1000:6.0f}  mlengine {mt * 1000:6.0f}  ratio {mt / dt:5.2f}")
    through_direct, through_mle = totals["direct"], totals["mle"]
    n = args.jobs * args.rounds
    print(f"{'  direct launches (all rounds)':44} {through_direct * 1000:9.0f}")
    print(f"{'  mlengine jobs (create .. SUCCEEDED)':44} {through_mle * 1000:9.0f} {through_mle / through_direct:10.2f}"
          f" {(through_mle - through_direct) * 1000 / n:12.1f} per job")
    per_job = lambda seconds: seconds * 1000 / n
    print(f"CPU per job, ms: mlengined {per_job(totals['own']):.1f}; shim, sandbox and trainer "
          f"{per_job(totals['replicas']):.1f} (the trainer launched directly: {per_job(totals['trainer']):.1f}); "
          f"this client {per_job(totals['client']):.1f}")
    # A page fault costs 13-16 us on this VM (a tenth of that on bare
    # metal): the count is where much of the replicas' extra CPU goes.
    print(f"page faults per job: mlengined {totals['own_faults'] / n:.0f}; shim, sandbox and trainer "
          f"{totals['replica_faults'] / n:.0f} (the trainer launched directly: {totals['trainer_faults'] / n:.0f})")
    goal = "met" if c - d < 50 else "NOT met"
    print(f"goal: < 50 ms overhead per job with a cached package: {goal}")
    ratio = through_mle / through_direct
    print(f"goal: {args.jobs} trivial jobs within 1.25x of direct launches: {'met' if ratio <= 1.25 else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
