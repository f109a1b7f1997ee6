#!/usr/bin/env python3
"""Benchmark: what mlengine adds to running a container.

Peer, measured in the same run: a bare `podman run --rm --network host IMAGE
python3 -c ...` of the same image (already in the node's store), timed from
spawn to exit. mlengine: jobs.create of a BASIC custom container job running
the same command, timed from sending the create to seeing SUCCEEDED
(jobs.get polled every 5 ms): admission (the image located in the registry
and pinned by digest), the durable create, scheduling, mlengine-replica,
`podman run` with mlengine's flags, the job's end recorded.

Goal: under 1.2x. Starts its own docker-registry (scripts/containers/
registry.sh) and mlengined; needs root, podman and the python base image
(scripts/containers/images.sh builds it).

Usage: bench/container_start.py BUILD_DIR [--samples 15]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "helpers"))
import images  # noqa: E402

CODE = 'print("first line", flush=True)'


class Server:
    def __init__(self, build, data, config):
        self.proc = subprocess.Popen(
            [os.path.join(build, "src/server/mlengined"), "--listen", "127.0.0.1:0", "--data-dir", data,
             "--config", config], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.url = self.proc.stdout.readline().decode().split()[-1]
        with open(os.path.join(data, "admin.token")) as f:
            self.token = f.read().strip()

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_job(server, job_id, image):
    start = time.perf_counter()
    server.call("POST", "/v1/projects/bench/jobs", {
        "jobId": job_id,
        "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "masterConfig": {"imageUri": image},
                          "args": ["python3", "-c", CODE]}})
    while True:
        state = server.call("GET", f"/v1/projects/bench/jobs/{job_id}")["state"]
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            elapsed = time.perf_counter() - start
            if state != "SUCCEEDED":
                raise SystemExit(f"job {job_id} ended {state}")
            return elapsed
        time.sleep(0.005)


def run_bare(image):
    start = time.perf_counter()
    r = subprocess.run(["podman", "run", "--rm", "--network", "host", image, "python3", "-c", CODE],
                       env=images.podman_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode != 0 or "first line" not in r.stdout:
        raise SystemExit(f"podman run failed: {r.stdout}{r.stderr}")
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args()
    registry = images.Registry(images=("python",))
    image = registry.ref("mlengine/python:bookworm")
    try:
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "mlengined.yaml")
            with open(config, "w") as f:
                f.write("runtimes:\n  - {name: pytorch-1.13-cpu, python: /usr/bin/python3, python_version: '3.11'}\n")
                f.write(f"containers:\n  registry: {registry.host}\n")
            server = Server(args.build, os.path.join(d, "data"), config)
            try:
                run_job(server, "warmup", image)  # the node pulls the image once
                images.podman("pull", "--quiet", "--tls-verify=false", image)
                run_bare(image)
                bare, ours = [], []
                for i in range(args.samples):  # interleaved: both see the same machine
                    bare.append(run_bare(image))
                    ours.append(run_job(server, f"c{i}", image))
            finally:
                server.stop()
    finally:
        registry.stop()
    b, m = statistics.median(bare), statistics.median(ours)
    print(f"container job, create to SUCCEEDED (median of {args.samples}): {m * 1000:.0f} ms")
    print(f"bare podman run of the same image (median of {args.samples}):   {b * 1000:.0f} ms")
    print(f"ratio mlengine / bare podman run: {m / b:.2f}x (goal: under 1.2x)")


if __name__ == "__main__":
    main()
