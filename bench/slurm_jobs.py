#!/usr/bin/env python3
"""Benchmark: mlengine on Slurm against the same jobs submitted with sbatch.

Same cluster (scripts/slurm/cluster.sh: 4 nodes x 2 CPUs, started here in
its own directory), same run, same trivial trainer (`python3 -m
trivial_trainer.task`, which prints one line and exits), 1 CPU per job:

  peer:     N x `sbatch --parsable -N1 -n1 -c1` of a script running the
            trainer directly, submitted one after the other;
  mlengine: N x jobs.create (scaleTier BASIC, the sdist staged once in
            mlengined's bucket store), through `mlengined --executor slurm`.

Reports, for each: on an idle cluster (no job pending, running or
completing before each sample, on both sides), submission to the
trainer's first line (from its own timestamp), mean and median, every
sample listed; then for N jobs submitted at once, the makespan (first
submission .. every job done: squeue says COMPLETED / jobs.get says
SUCCEEDED) and submission-to-start latency, median and p90; then the
ratios.

The bursts run in rounds side by side (D M, then M D), each on a controller
that lists no job; the makespan ratio is of the sums over the rounds, the
start latencies are over every job of every round.

Usage: bench/slurm_jobs.py BUILD_DIR [--jobs 200] [--rounds 2]   (root; Slurm installed)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_latency as jl  # noqa: E402  (the sdist builder and the API client)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# How long slurmctld keeps a finished job here (the test cluster's default is
# 600 s): short, so that each burst can start on an empty controller.
MIN_JOB_AGE_S = 20
TRAINER = 'import time\nprint("first line %.6f" % time.time(), flush=True)\n'


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def squeue(env):
    out = subprocess.run(["squeue", "--json"], env=env, capture_output=True, text=True, check=True).stdout
    return {j["job_id"]: j for j in json.loads(out)["jobs"]}


def wait_cluster_idle(env, timeout=60):
    """Until no job is pending, running or completing in Slurm:
    each idle sample then starts from the same state on both sides. Without
    it a sample's start depended on whether the previous job's node was
    still completing (Slurm then waits for its next scheduling pass, about
    half a second here), which split the samples into two groups at
    random."""
    deadline = time.time() + timeout
    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
             "PREEMPTED")
    while any(j.get("job_state") not in ended for j in squeue(env).values()):
        if time.time() > deadline:
            raise RuntimeError("the cluster did not become idle")
        time.sleep(0.02)


def wait_cluster_empty(env, timeout=240):
    """Until slurmctld lists no job at all (finished ones go MIN_JOB_AGE_S
    after they end, at its next purge: up to a minute later)."""
    deadline = time.time() + timeout
    while squeue(env):
        if time.time() > deadline:
            raise RuntimeError("slurmctld still lists finished jobs")
        time.sleep(0.5)


class Direct:
    """The peer: the trainer in a script, `sbatch --parsable -N1 -n1 -c1`."""

    def __init__(self, env, work):
        self.env, self.work = env, work
        os.makedirs(os.path.join(work, "trivial_trainer"))
        open(os.path.join(work, "trivial_trainer/__init__.py"), "w").close()
        with open(os.path.join(work, "trivial_trainer/task.py"), "w") as f:
            f.write(TRAINER)
        # One job first, not measured (as mlengine's warm-up job).
        self.submit("warmup")
        wait_cluster_idle(env)

    def submit(self, name):
        out = subprocess.run(
            ["sbatch", "--parsable", "-N1", "-n1", "-c1", "-J", f"direct-{name}", "-o", f"{self.work}/{name}.txt",
             "-D", self.work, "--wrap", f"exec {jl.PY} -m trivial_trainer.task"],
            env=self.env, capture_output=True, text=True, check=True)
        return int(out.stdout.strip().split(";")[0])

    def first_line_at(self, name):
        with open(f"{self.work}/{name}.txt") as f:
            return float(f.read().split()[2])

    def idle_sample(self, i):
        """Submission to the first line of one job on the idle cluster."""
        wait_cluster_idle(self.env)
        t = time.time()
        self.submit(f"idle-{i}")
        wait_cluster_idle(self.env)
        return self.first_line_at(f"idle-{i}") - t

    def burst(self, n, r):
        submitted = {}
        t0 = time.time()
        for i in range(n):
            t = time.time()
            submitted[self.submit(f"out-{r}-{i}")] = (i, t)
        completed = set()  # seen COMPLETED: slurmctld forgets them MIN_JOB_AGE_S later, mid-burst
        while True:
            jobs = squeue(self.env)
            states = {jid: jobs.get(jid, {}).get("job_state", "GONE") for jid in submitted if jid not in completed}
            completed |= {jid for jid, s in states.items() if s == "COMPLETED"}
            bad = [s for s in states.values() if s not in ("COMPLETED", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
            if bad:
                raise RuntimeError(f"direct jobs ended badly: {bad[:5]}")
            if len(completed) == len(submitted):
                break
            time.sleep(0.05)
        makespan = time.time() - t0
        return makespan, [self.first_line_at(f"out-{r}-{i}") - t for i, t in submitted.values()]


def first_line_at(server, job_id):
    page = server.call("GET", f"/v1/projects/bench/jobs/{job_id}/logs?prettyPrint=false")
    first = [e for e in page.get("entries", []) if e["message"].startswith("first line")]
    return float(first[0]["message"].split()[2])


class Mlengine:
    """mlengined --executor slurm on the same cluster; jobs.create of a BASIC job."""

    def __init__(self, build, env, tmp):
        self.env = env
        data = os.path.join(tmp, "data")
        config = os.path.join(ROOT, "config", "mlengined-slurm.yaml")
        self.proc = subprocess.Popen([os.path.join(build, "src/server/mlengined"), "--listen", "127.0.0.1:0",
                                      "--data-dir", data, "--config", config, "--executor", "slurm"],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "mlengined.log"), "w"),
                                     env=env)
        line = self.proc.stdout.readline().decode()
        server = jl.Server.__new__(jl.Server)
        server.proc, server.url = self.proc, line.split()[-1]
        server.token = open(os.path.join(data, "admin.token")).read().strip()
        server.conn = None
        self.server = server
        name = "pkgs/trivial_trainer-1.0.0.tar.gz"
        server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name="
                    + urllib.parse.quote(name, safe=""), raw=jl.sdist("1.0.0", task=TRAINER))
        self.pkg = f"gs://bench-bucket/{name}"
        # One job first: builds the package's environment (cold), not measured.
        server.call("POST", "/v1/projects/bench/jobs", jl.job_body("warmup", self.pkg))
        jl.wait_done(server, "warmup", timeout=60)

    def create(self, job_id):
        self.server.call("POST", "/v1/projects/bench/jobs?prettyPrint=false", jl.job_body(job_id, self.pkg))

    def idle_sample(self, i):
        wait_cluster_idle(self.env)
        t = time.time()
        self.create(f"idle_{i}")
        jl.wait_done(self.server, f"idle_{i}")
        wait_cluster_idle(self.env)
        return first_line_at(self.server, f"idle_{i}") - t

    def burst(self, n, r):
        submitted = {}
        t0 = time.time()
        for i in range(n):
            t = time.time()
            self.create(f"many_{r}_{i}")
            submitted[f"many_{r}_{i}"] = t
        for job_id in submitted:
            jl.wait_done(self.server, job_id, timeout=900)
        makespan = time.time() - t0
        return makespan, [first_line_at(self.server, job_id) - t for job_id, t in submitted.items()]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=10, help="jobs run one at a time on the idle cluster")
    ap.add_argument("--rounds", type=int, default=2, help="bursts of each side, side by side (D M, M D, ...)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if shutil.which("sbatch") is None or os.geteuid() != 0:
        sys.exit("needs Slurm (apt-get install slurm-wlm munge) and root")
    tmp = tempfile.mkdtemp(prefix="mle-bench-slurm-")
    env = dict(os.environ, MLE_SLURM_DIR=os.path.join(tmp, "cluster"), MLE_SLURM_MIN_JOB_AGE_S=str(MIN_JOB_AGE_S))
    env = {k: v for k, v in env.items() if not k.startswith("MLENGINE")}
    script = os.path.join(ROOT, "scripts", "slurm", "cluster.sh")
    out = subprocess.run([script, "start"], env=env, capture_output=True, text=True, check=True)
    env["SLURM_CONF"] = out.stdout.strip().split("=", 1)[1]
    try:
        direct = Direct(env, os.path.join(tmp, "direct"))
        mle = Mlengine(build, env, tmp)
        try:
            # The idle samples side by side, before any burst (a burst
            # leaves slurmctld hundreds of finished jobs to keep for a
            # while), then the bursts.
            # Which goes first alternates: on this cluster an idle job
            # starts at once or half a second later by turns, whoever
            # submits it, so strict alternation D, M, D, M would hand one
            # side every slow turn.
            d_idle, m_idle = [], []
            for i in range(args.samples):
                if i % 4 in (0, 3):
                    d_idle.append(direct.idle_sample(i))
                    m_idle.append(mle.idle_sample(i))
                else:
                    m_idle.append(mle.idle_sample(i))
                    d_idle.append(direct.idle_sample(i))
            # The bursts in rounds side by side, D M then M D: this VM's
            # speed drifts by a quarter within a minute (a direct burst took
            # 19 s in one run and 24.5 s in the next), and one burst of each
            # side, the direct one first, took that drift for a ratio.
            # Each burst starts on a controller that keeps no finished job
            # (squeue's cost grows with every job it still lists: the second
            # burst would otherwise carry the first one's 200).
            rounds, d_lat, m_lat = [], [], []
            for r in range(args.rounds):
                took = {}
                for side in (("direct", "mlengine") if r % 2 == 0 else ("mlengine", "direct")):
                    wait_cluster_empty(env)
                    span, lat = (direct if side == "direct" else mle).burst(args.jobs, r)
                    took[side] = span
                    (d_lat if side == "direct" else m_lat).extend(lat)
                rounds.append((took["direct"], took["mlengine"]))
            d_span, m_span = sum(d for d, _ in rounds), sum(m for _, m in rounds)
        except Exception:
            with open(os.path.join(tmp, "mlengined.log")) as f:
                print("mlengined's log (tail):\n" + f.read()[-3000:], file=sys.stderr)
            subprocess.run(["find", os.path.join(tmp, "data", "runs")])
            subprocess.run(["ps", "aux"])
            raise
        finally:
            mle.stop()
        with open(env["SLURM_CONF"]) as f:
            sched = [ln.strip() for ln in f if ln.startswith(("SchedulerParameters", "SchedulerType", "SelectType"))]
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True)
        if os.environ.get("MLE_BENCH_KEEP"):
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"4 Slurm nodes x 2 CPUs, 1 CPU per job, this machine: {os.cpu_count()} cores")
    print("Slurm settings: " + "; ".join(sched))
    # Slurm starts a job on an idle cluster either at once or at its next
    # pass (about half a second later), for direct and mlengine jobs alike:
    # the samples fall in two groups and a median jumps between them, so
    # the mean is compared (the median is shown too).
    mean = lambda xs: sum(xs) / len(xs)
    print(f"Idle cluster, {args.samples} jobs one at a time: submission to the trainer's first line, mean (median)")
    print(f"{'  direct sbatch':34} {mean(d_idle) * 1000:11.0f} ms ({pct(d_idle, .5) * 1000:.0f})")
    print(f"{'  mlengine (jobs.create, Slurm)':34} {mean(m_idle) * 1000:11.0f} ms ({pct(m_idle, .5) * 1000:.0f})   ratio "
          f"{mean(m_idle) / mean(d_idle):.2f}, overhead {(mean(m_idle) - mean(d_idle)) * 1000:.0f} ms")
    print("  every sample, ms: direct " + " ".join(f"{x * 1000:.0f}" for x in sorted(d_idle)))
    print("                    mlengine " + " ".join(f"{x * 1000:.0f}" for x in sorted(m_idle)))
    print(f"{args.jobs} jobs submitted at once (8 run at a time), {args.rounds} rounds side by side (D M, M D, ...):")
    for r, (dt, mt) in enumerate(rounds):
        print(f"  round {r + 1}: makespan direct {dt:6.2f} s  mlengine {mt:6.2f} s  ratio {mt / dt:5.2f}")
    print(f"{'case (all rounds)':34} {'makespan s':>11} {'start p50 ms':>13} {'start p90 ms':>13}")
    print(f"{'direct sbatch':34} {d_span:11.2f} {pct(d_lat, .5) * 1000:13.0f} {pct(d_lat, .9) * 1000:13.0f}")
    print(f"{'mlengine (jobs.create, Slurm)':34} {m_span:11.2f} {pct(m_lat, .5) * 1000:13.0f} {pct(m_lat, .9) * 1000:13.0f}")
    print(f"{'ratio mlengine / direct':34} {m_span / d_span:11.2f} {pct(m_lat, .5) / pct(d_lat, .5):13.2f} "
          f"{pct(m_lat, .9) / pct(d_lat, .9):13.2f}")


if __name__ == "__main__":
    main()
