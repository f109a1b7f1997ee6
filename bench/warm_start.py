#!/usr/bin/env python3
"""Benchmark: warm starts (a replica forked from the runtime's warm
interpreter, torch, numpy and sklearn imported) against cold starts (the
same job with the label mlengine-warm-start=false) and against a bare
`python3 -m` of the same module, in one run.

1. jobs.create to the trainer's first line (its log timestamp), a trainer
   whose first line follows `import torch`: median of --samples each;
   bare: spawn to first line. And cold, a trainer that imports nothing:
   what starting a replica costs, without torch's import (1.3-2 s here,
   varying by 10-20% from one start to the next, which hides a
   difference of 10 ms between the sides).
2. --jobs short jobs back to back (created together, run to SUCCEEDED),
   warm against cold.
3. The warm interpreter's memory (RSS and PSS).

Each measured twice in the same run, on a server with the sandbox
(docs/security.md) and on one without.

Goals: warm first line at least 5x sooner than bare python3 -m (sandbox
included); the burst of jobs at least 3x faster warm than cold; the sandbox
adds at most 10 ms to a replica's start, cold (the trainer that imports
nothing) and warm.

Usage: bench/warm_start.py BUILD_DIR [--samples 10] [--jobs 20]
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import job_latency as jl  # noqa: E402  (its Server, sdist and log helpers)

PY = "/usr/bin/python3"
TRAINER = 'import torch\nprint("first line", flush=True)\n'
PLAIN = 'print("first line", flush=True)\n'


class Side:
    """One mlengined (sandbox on or off), its package staged and built."""

    def __init__(self, build, tmp, sandbox):
        self.name = "sandboxed" if sandbox else "no sandbox"
        self.data = os.path.join(tmp, f"data-{'sandbox' if sandbox else 'open'}")
        config = os.path.join(tmp, f"mlengined-{'sandbox' if sandbox else 'open'}.yaml")
        with open(config, "w") as f:
            f.write("runtimes:\n  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11',\n"
                    "     warm_start: {preload: [torch, numpy, sklearn]}}\n"
                    "local: {cpu_oversubscription: 8, replica_cpu_milli: 1000}\n"
                    f"sandbox: {{enabled: {'true' if sandbox else 'false'}}}\n")
        self.server = jl.Server(build, self.data, config)
        deadline = time.time() + 120
        while not glob.glob(os.path.join(self.data, "warm", "*.sock")):
            if time.time() > deadline:
                raise RuntimeError("the warm interpreter never served")
            time.sleep(0.05)
        name = "pkgs/1.0.0/trivial_trainer-1.0.0.tar.gz"
        self.server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name=" +
                         name.replace("/", "%2F"), raw=jl.sdist("1.0.0", task=TRAINER))
        self.pkg = "gs://bench-bucket/" + name
        name = "pkgs/1.0.0/plain_trainer-1.0.0.tar.gz"
        self.server.call("POST", "/upload/storage/v1/b/bench-bucket/o?uploadType=media&name=" +
                         name.replace("/", "%2F"), raw=jl.sdist("1.0.0", name="plain_trainer", task=PLAIN))
        self.plain_pkg = "gs://bench-bucket/" + name
        self.create("setup", False)  # each package's environment is built once
        self.create("setup_plain", True, plain=True)
        jl.wait_done(self.server, "setup")
        jl.wait_done(self.server, "setup_plain")
        self.first = {"warm": [], "cold": [], "plain": []}
        self.burst = {}

    def create(self, job, cold, plain=False):
        body = jl.job_body(job, self.plain_pkg if plain else self.pkg)
        if plain:
            body["trainingInput"]["pythonModule"] = "plain_trainer.task"
        if cold:
            body["labels"] = {"mlengine-warm-start": "false"}
        t0 = time.time()
        self.server.call("POST", "/v1/projects/bench/jobs", body)
        return t0

    def sample(self, i):
        for kind in ("warm", "cold", "plain"):
            job = f"{kind}_{i}"
            t0 = self.create(job, kind != "warm", plain=kind == "plain")
            self.first[kind].append(jl.wait_first_line(self.server, job) - t0)
            jl.wait_done(self.server, job)

    def run_burst(self, jobs):
        for kind in ("warm", "cold"):
            t0 = time.time()
            for i in range(jobs):
                self.create(f"burst_{kind}_{i}", kind == "cold")
            for i in range(jobs):
                jl.wait_done(self.server, f"burst_{kind}_{i}")
            self.burst[kind] = time.time() - t0

    def memory(self):
        rss = pss = 0
        for pid in subprocess.run(["pgrep", "-f", "mlengine._warm --serve " + self.data], capture_output=True,
                                  text=True).stdout.split():
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        return rss, pss

    def medians(self):
        return {k: statistics.median(v) * 1000 for k, v in self.first.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=20)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    with tempfile.TemporaryDirectory() as tmp:
        direct = os.path.join(tmp, "direct")
        os.makedirs(os.path.join(direct, "trivial_trainer"))
        open(os.path.join(direct, "trivial_trainer/__init__.py"), "w").close()
        open(os.path.join(direct, "trivial_trainer/task.py"), "w").write(TRAINER)
        # Both servers at once, their samples interleaved (and with the bare
        # starts): what drifts on the machine meanwhile hits all alike.
        boxed, opened = Side(build, tmp, True), Side(build, tmp, False)
        try:
            bare_samples = []
            for i in range(args.samples):
                bare_samples.append(jl.direct_first_line(direct))
                boxed.sample(i)
                opened.sample(i)
            boxed.run_burst(args.jobs)
            opened.run_burst(args.jobs)
            rss, pss = boxed.memory()
        finally:
            boxed.server.stop()
            opened.server.stop()
        bare = statistics.median(bare_samples) * 1000

    b = bare
    first_boxed, first_open = boxed.medians(), opened.medians()
    print(f"machine: {os.cpu_count()} cores; a trainer whose first line follows `import torch`; medians of {args.samples}")
    print(f"{'start':46} {'ms to first line':>17} {'bare / it':>10}")
    print(f"{'bare python3 -m (spawn to first line)':46} {b:17.1f} {1.0:10.2f}")
    for side, first in ((boxed, first_boxed), (opened, first_open)):
        print(f"{'mlengine, cold start, ' + side.name:46} {first['cold']:17.1f} {b / first['cold']:10.2f}")
        print(f"{'mlengine, warm start, ' + side.name:46} {first['warm']:17.1f} {b / first['warm']:10.2f}")
    for side, first in ((boxed, first_boxed), (opened, first_open)):
        print(f"{'a trainer importing nothing, cold, ' + side.name:46} {first['plain']:17.1f}")
    added_cold, added_warm = first_boxed["plain"] - first_open["plain"], first_boxed["warm"] - first_open["warm"]
    print(f"the sandbox adds per replica: cold {added_cold:+.1f} ms (importing torch: "
          f"{first_boxed['cold'] - first_open['cold']:+.1f}), warm {added_warm:+.1f} ms")
    burst, burst_open = boxed.burst, opened.burst
    print(f"{args.jobs} jobs back to back, sandboxed: warm {burst['warm']:.1f} s, cold {burst['cold']:.1f} s, "
          f"cold / warm {burst['cold'] / burst['warm']:.1f}x (no sandbox: warm {burst_open['warm']:.1f} s, "
          f"cold {burst_open['cold']:.1f} s)")
    print(f"warm interpreter memory: RSS {rss / 1024:.0f} MiB, PSS {pss / 1024:.0f} MiB")
    ok_first, ok_burst = b / first_boxed["warm"] >= 5, burst["cold"] / burst["warm"] >= 3
    ok_added = added_cold <= 10 and added_warm <= 10
    print(f"goals: warm first line >= 5x sooner than bare: {'met' if ok_first else 'NOT met'}; "
          f"{args.jobs} jobs >= 3x faster than cold: {'met' if ok_burst else 'NOT met'}; "
          f"the sandbox adds <= 10 ms a replica: {'met' if ok_added else 'NOT met'}")


if __name__ == "__main__":
    main()
