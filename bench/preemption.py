#!/usr/bin/env python3
"""Benchmark: preemption latency, mlengine against Slurm's own preemption.

One job fills the cluster; a job of higher priority is submitted; the
latency is from its submission (where both schedulers decide) to its
trainer's first line. The preempted job's trainer exits when it gets
SIGTERM, as a trainer that saves a checkpoint in its grace period and
exits does: mlengine then starts the preemptor at once (its grace period,
10 s, is only the longest it waits). Slurm waits out a partition's
GraceTime whether or not the victim has gone, so its victims' partition has
GraceTime 0 here (--slurm-grace; a grace given is subtracted from its
samples): what is measured is each scheduler's own work, stopping the
victim and starting the preemptor.

  mlengine: mlengined, local executor, with room for one job (a replica
            counts as every CPU); the victim has scheduling.priority 0, the
            preemptor 10; the victim is queued again and resumes as attempt
            2, which is the next sample's victim.
  peer:     the Slurm test cluster (scripts/slurm/cluster.sh, 4 nodes x 2
            CPUs, started here in its own directory with MLE_SLURM_PREEMPT=1:
            PreemptType=preempt/partition_prio, PreemptMode=REQUEUE); the
            victim takes every CPU in partition `debug`, the preemptor is
            one task in partition `urgent`; the first line is the
            trainer's own timestamp in its output file.

Prints every sample, the medians and their ratio (mlengine / Slurm).

Usage: bench/preemption.py BUILD_DIR [--samples 5]   (root; Slurm installed for the peer)
"""
import argparse
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
PY = "/usr/bin/python3"
TRAINER = r'''import signal, sys, time
if "--hold" in sys.argv:
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # saved; goes at once
    print("holding", flush=True)
    time.sleep(600)
else:
    print("first line", flush=True)
'''


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def job_body(job_id, package, priority, hold):
    body = jl.job_body(job_id, package)
    body["trainingInput"]["scheduling"] = {"priority": priority}
    if hold:
        body["trainingInput"]["args"] = ["--hold"]
    return body


def wait_line(server, job_id, text, after=0.0, timeout=120):
    """The log timestamp of the first line `text` of `job_id` written after `after`."""
    return jl.wait_first_line(server, job_id, timeout=timeout, text=text, after=after)


def mlengine_samples(build, samples):
    out = []
    with tempfile.TemporaryDirectory(dir=build) as tmp:
        data = os.path.join(tmp, "data")
        config = os.path.join(tmp, "mlengined.yaml")
        with open(config, "w") as f:
            f.write("runtimes:\n  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11'}\n"
                    f"local: {{cpu_oversubscription: 1, replica_cpu_milli: {(os.cpu_count() or 1) * 1000}}}\n"
                    "cancel_grace_seconds: 10\n")
        server = jl.Server(build, data, config)
        try:
            name = "pkgs/preempt/trivial_trainer-1.0.tar.gz"
            server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name="
                        + urllib.parse.quote(name, safe=""), raw=jl.sdist("1.0", task=TRAINER))
            pkg = f"gs://bench-bucket/{name}"
            server.call("POST", "/v1/projects/bench/jobs", job_body("warmup", pkg, 0, False))
            jl.wait_done(server, "warmup")
            server.call("POST", "/v1/projects/bench/jobs", job_body("victim", pkg, 0, True))
            since = wait_line(server, "victim", "holding")
            for i in range(samples):
                t0 = time.time()
                server.call("POST", "/v1/projects/bench/jobs", job_body(f"urgent_{i}", pkg, 10, False))
                out.append(wait_line(server, f"urgent_{i}", "first line") - t0)
                jl.wait_done(server, f"urgent_{i}")
                since = wait_line(server, "victim", "holding", after=since + 1e-6)  # its next attempt holds again
            victim = server.call("GET", "/v1/projects/bench/jobs/victim")
            ends = [a["end"] for a in victim.get("attempts", [])]
            if ends != ["PREEMPTED"] * samples:
                raise RuntimeError(f"the victim's attempts are {ends}, not {samples} preemptions")
            server.call("POST", "/v1/projects/bench/jobs/victim:cancel", {})
        finally:
            server.stop()
    return out


def slurm_samples(samples, grace):
    if shutil.which("slurmctld") is None or os.geteuid() != 0:
        return None
    out = []
    tmp = tempfile.mkdtemp(prefix="mle-bench-preempt-")
    env = dict(os.environ, MLE_SLURM_DIR=os.path.join(tmp, "cluster"), MLE_SLURM_PREEMPT="1",
               MLE_SLURM_GRACE_S=str(grace))
    env = {k: v for k, v in env.items() if not k.startswith("MLENGINE")}
    script = os.path.join(ROOT, "scripts", "slurm", "cluster.sh")
    started = subprocess.run([script, "start"], env=env, capture_output=True, text=True)
    if started.returncode != 0:
        raise RuntimeError(f"cluster.sh start: {started.stderr[-2000:]}")
    env["SLURM_CONF"] = started.stdout.strip().split("=", 1)[1]
    try:
        hold = os.path.join(tmp, "hold.sh")
        with open(hold, "w") as f:
            f.write("#!/bin/sh\ntrap 'exit 0' TERM\necho holding\nsleep 600 &\nwait\n")
        first = os.path.join(tmp, "first.sh")
        with open(first, "w") as f:
            f.write(f"#!/bin/sh\nexec {PY} -c 'import time; print(\"first line %.6f\" % time.time(), flush=True)'\n")

        def sbatch(*args):
            p = subprocess.run(["sbatch", "--parsable", *args], env=env, capture_output=True, text=True, check=True)
            return p.stdout.strip().split(";")[0]

        def state(job):
            p = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True, text=True)
            return p.stdout.strip()

        for i in range(samples):
            victim = sbatch("-p", "debug", "-N4", "--ntasks-per-node=1", "-c2", "--requeue",
                            "-o", os.path.join(tmp, f"victim-{i}.out"), hold)
            deadline = time.time() + 60
            while state(victim) != "RUNNING":
                if time.time() > deadline:
                    raise RuntimeError(f"the victim {victim} did not start")
                time.sleep(0.05)
            time.sleep(0.5)  # its script is up and trapping TERM
            out_path = os.path.join(tmp, f"urgent-{i}.out")
            t0 = time.time()
            sbatch("-p", "urgent", "-N1", "-n1", "-c1", "-o", out_path, first)
            deadline = time.time() + 120
            line = ""
            while not line.startswith("first line "):
                if time.time() > deadline:
                    raise RuntimeError("the urgent job never wrote its first line")
                time.sleep(0.01)
                line = open(out_path).read().strip() if os.path.exists(out_path) else ""
            out.append(float(line.split()[2]) - t0 - grace)
            subprocess.run(["scancel", victim], env=env, check=False)
            deadline = time.time() + 60
            while state(victim) not in ("", "CANCELLED", "COMPLETED"):
                if time.time() > deadline:
                    break
                time.sleep(0.1)
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--slurm-grace", type=int, default=0,
                    help="the victim partition's GraceTime (s); Slurm waits it out whether or not the victim "
                         "has exited, so it is subtracted from Slurm's samples")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    mle = mlengine_samples(build, args.samples)
    slurm = slurm_samples(args.samples, args.slurm_grace)
    fmt = lambda xs: ", ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    print(f"preemption: mlengine (local executor): submit to the preemptor's first line, ms: {fmt(mle)}; "
          f"median {median(mle) * 1000:.0f} ms")
    if slurm is None:
        print("preemption: Slurm peer skipped (needs slurmctld and root)")
        return 0
    print(f"preemption: Slurm (partition_prio, REQUEUE): sbatch to the preemptor's first line, ms: {fmt(slurm)}; "
          f"median {median(slurm) * 1000:.0f} ms")
    print(f"preemption: ratio mlengine / Slurm (medians): {median(mle) / median(slurm):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
