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

Usage: bench/slurm_jobs.py BUILD_DIR [--jobs 200]   (root; Slurm installed)
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


def run_direct(n, env, work, samples):
    os.makedirs(os.path.join(work, "trivial_trainer"))
    open(os.path.join(work, "trivial_trainer/__init__.py"), "w").close()
    with open(os.path.join(work, "trivial_trainer/task.py"), "w") as f:
        f.write(TRAINER)
    # One job first, not measured (as mlengine's warm-up job below).
    subprocess.run(["sbatch", "--wait", "-N1", "-n1", "-c1", "-o", "/dev/null", "-D", work,
                    "--wrap", f"exec {jl.PY} -m trivial_trainer.task"], env=env, capture_output=True, check=True)
    # Idle cluster: one job at a time, submission to the trainer's first line.
    idle = []
    for i in range(samples):
        wait_cluster_idle(env)
        t = time.time()
        # Submitted as mlengine submits (no --wait), then waited for as the
        # cluster's idleness is.
        subprocess.run(["sbatch", "--parsable", "-N1", "-n1", "-c1", "-o", f"{work}/idle-{i}.txt", "-D", work,
                        "--wrap", f"exec {jl.PY} -m trivial_trainer.task"], env=env, capture_output=True, check=True)
        wait_cluster_idle(env)
        with open(f"{work}/idle-{i}.txt") as f:
            idle.append(float(f.read().split()[2]) - t)
    submitted = {}
    t0 = time.time()
    for i in range(n):
        t = time.time()
        out = subprocess.run(
            ["sbatch", "--parsable", "-N1", "-n1", "-c1", "-J", f"direct-{i}", "-o", f"{work}/out-{i}.txt",
             "-D", work, "--wrap", f"exec {jl.PY} -m trivial_trainer.task"],
            env=env, capture_output=True, text=True, check=True)
        submitted[int(out.stdout.strip().split(";")[0])] = (i, t)
    while True:
        jobs = squeue(env)
        states = [jobs.get(jid, {}).get("job_state", "GONE") for jid in submitted]
        bad = [s for s in states if s not in ("COMPLETED", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
        if bad:
            raise RuntimeError(f"direct jobs ended badly: {bad[:5]}")
        if all(s == "COMPLETED" for s in states):
            break
        time.sleep(0.05)
    makespan = time.time() - t0
    lat = []
    for jid, (i, t) in submitted.items():
        with open(f"{work}/out-{i}.txt") as f:
            lat.append(float(f.read().split()[2]) - t)
    return makespan, lat, idle


def first_line_at(server, job_id):
    page = server.call("GET", f"/v1/projects/bench/jobs/{job_id}/logs?prettyPrint=false")
    first = [e for e in page.get("entries", []) if e["message"].startswith("first line")]
    return float(first[0]["message"].split()[2])


def run_mlengine(n, build, env, tmp, samples):
    data = os.path.join(tmp, "data")
    config = os.path.join(ROOT, "config", "mlengined-slurm.yaml")
    proc = subprocess.Popen([os.path.join(build, "src/server/mlengined"), "--listen", "127.0.0.1:0",
                             "--data-dir", data, "--config", config, "--executor", "slurm"],
                            stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "mlengined.log"), "w"),
                            env=dict(env, MLENGINE_SLURM_TRACE="1"))
    try:
        line = proc.stdout.readline().decode()
        server = jl.Server.__new__(jl.Server)
        server.proc, server.url = proc, line.split()[-1]
        server.token = open(os.path.join(data, "admin.token")).read().strip()
        server.conn = None
        name = "pkgs/trivial_trainer-1.0.0.tar.gz"
        jl.TRAINER_SAVED = jl.TRAINER
        jl.TRAINER = TRAINER
        server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name="
                    + urllib.parse.quote(name, safe=""), raw=jl.sdist("1.0.0"))
        pkg = f"gs://bench-bucket/{name}"
        # One job first: builds the package's environment (cold), not measured.
        server.call("POST", "/v1/projects/bench/jobs", jl.job_body("warmup", pkg))
        jl.wait_done(server, "warmup", timeout=60)
        idle = []
        for i in range(samples):
            wait_cluster_idle(env)
            t = time.time()
            server.call("POST", "/v1/projects/bench/jobs?prettyPrint=false", jl.job_body(f"idle_{i}", pkg))
            jl.wait_done(server, f"idle_{i}")
            idle.append(first_line_at(server, f"idle_{i}") - t)
        submitted = {}
        t0 = time.time()
        for i in range(n):
            t = time.time()
            server.call("POST", "/v1/projects/bench/jobs?prettyPrint=false", jl.job_body(f"many_{i}", pkg))
            submitted[f"many_{i}"] = t
        for job_id in submitted:
            jl.wait_done(server, job_id, timeout=900)
        makespan = time.time() - t0
        lat = [first_line_at(server, job_id) - t for job_id, t in submitted.items()]
        return makespan, lat, idle
    finally:
        proc.terminate()
        proc.wait(20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=10, help="jobs run one at a time on the idle cluster")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if shutil.which("sbatch") is None or os.geteuid() != 0:
        sys.exit("needs Slurm (apt-get install slurm-wlm munge) and root")
    tmp = tempfile.mkdtemp(prefix="mle-bench-slurm-")
    env = dict(os.environ, MLE_SLURM_DIR=os.path.join(tmp, "cluster"))
    env = {k: v for k, v in env.items() if not k.startswith("MLENGINE")}
    script = os.path.join(ROOT, "scripts", "slurm", "cluster.sh")
    out = subprocess.run([script, "start"], env=env, capture_output=True, text=True, check=True)
    env["SLURM_CONF"] = out.stdout.strip().split("=", 1)[1]
    try:
        os.makedirs(os.path.join(tmp, "direct"))
        d_span, d_lat, d_idle = run_direct(args.jobs, env, os.path.join(tmp, "direct"), args.samples)
        try:
            m_span, m_lat, m_idle = run_mlengine(args.jobs, build, env, tmp, args.samples)
        except Exception:
            with open(os.path.join(tmp, "mlengined.log")) as f:
                print("mlengined's log (tail):\n" + f.read()[-3000:], file=sys.stderr)
            subprocess.run(["find", os.path.join(tmp, "data", "runs")])
            subprocess.run(["ps", "aux"])
            raise
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
    print(f"{args.jobs} jobs submitted at once (8 run at a time):")
    print(f"{'case':34} {'makespan s':>11} {'start p50 ms':>13} {'start p90 ms':>13}")
    print(f"{'direct sbatch':34} {d_span:11.2f} {pct(d_lat, .5) * 1000:13.0f} {pct(d_lat, .9) * 1000:13.0f}")
    print(f"{'mlengine (jobs.create, Slurm)':34} {m_span:11.2f} {pct(m_lat, .5) * 1000:13.0f} {pct(m_lat, .9) * 1000:13.0f}")
    print(f"{'ratio mlengine / direct':34} {m_span / d_span:11.2f} {pct(m_lat, .5) / pct(d_lat, .5):13.2f} "
          f"{pct(m_lat, .9) / pct(d_lat, .9):13.2f}")


if __name__ == "__main__":
    main()
