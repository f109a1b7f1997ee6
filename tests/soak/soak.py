#!/usr/bin/python3
"""kill -9 soak of mlengined under load, through its real API and processes.

N concurrent clients create JOBS jobs whose trainers record their run in a
bucket (one file per run, named by its attempt and written when the trainer
starts, with the time; "done" appended when it finishes) and run briefly;
one job in ten has a higher scheduling.priority, so that jobs are preempted
and run again as their next attempt. Meanwhile mlengined is killed with
SIGKILL at KILLS random moments and started again at once on the same port
and data directory, and every restart must succeed on its first try. At
the end:

  - every acknowledged job exists exactly once        (lost must be 0)
  - no attempt ran twice: at most one run file per attempt, and an attempt
    ran only after the one before it had ended (its endTime)
                                                      (run twice must be 0)
  - each ended in a true state: SUCCEEDED means its last attempt succeeded
    and that attempt's run finished; every run is one of its attempts
  - jobs were preempted (preemptions > 0), each queued again, none failed
  - no process of the data directory is left once the server has stopped

Prints: jobs acknowledged, lost, run twice, states, recovery time after each
restart. Exit status 0 only when all of that holds.

  soak.py [--jobs 1000] [--clients 50] [--kills 5] [--keep DIR]

Needs MLENGINED (or the build tree's binary) and Debian's python3 only.
"""

import argparse
import http.client
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

SOURCE_DIR = os.environ.get("MLE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MLENGINED = os.environ.get("MLENGINED") or os.path.join(SOURCE_DIR, "build/src/server/mlengined")
PROJECT = "soak"
BUCKET = "soak-runs"
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

TRAINER = r'''
import os, sys, time, uuid
job = os.environ["CLOUD_ML_JOB_ID"]
root = os.path.join(os.environ["MLENGINE_GCS_ROOT"], "%s", "runs", job)
os.makedirs(root, exist_ok=True)
path = os.path.join(root, "%%s-%%d-%%s" %% (os.environ["MLENGINE_ATTEMPT"], os.getpid(), uuid.uuid4().hex))
with open(path, "w") as f:
    f.write("started %%.6f\n" %% time.time())
    f.flush()
    os.fsync(f.fileno())
time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 0.5)
with open(path, "a") as f:
    f.write("done\n")
    f.flush()
    os.fsync(f.fileno())
print("done", flush=True)
''' % BUCKET

CONFIG = """runtimes:
  - name: pytorch-1.13-cpu
    python: /usr/bin/python3
    python_version: "3.11"
local:
  cpu_oversubscription: 4
  replica_cpu_milli: 500
cancel_grace_seconds: 2
"""


def sdist():
    """soak_trainer-0.1.tar.gz: an sdist pip can install with no index."""
    files = {
        "soak_trainer-0.1/setup.py": "from setuptools import setup\nsetup(name='soak_trainer', version='0.1', "
                                     "packages=['soak_trainer'])\n",
        "soak_trainer-0.1/PKG-INFO": "Metadata-Version: 1.0\nName: soak_trainer\nVersion: 0.1\n",
        "soak_trainer-0.1/soak_trainer/__init__.py": "",
        "soak_trainer-0.1/soak_trainer/task.py": TRAINER,
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Server:
    def __init__(self, root):
        self.root = root
        self.data_dir = os.path.join(root, "data")
        self.config = os.path.join(root, "mlengined.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG)
        self.port = 0
        self.proc = None
        self.starts = 0
        self.token = None
        self.lock = threading.Lock()

    def start(self):
        """Starts mlengined on self.port (0 the first time); returns seconds
        until it listens. Raises when it does not come up on the first try."""
        self.starts += 1
        out_path = os.path.join(self.root, f"mlengined.{self.starts}.out")
        err_path = os.path.join(self.root, f"mlengined.{self.starts}.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLENGINE")}
        t0 = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([MLENGINED, "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data_dir,
                                     "--config", self.config], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.root)
        while True:
            with open(out_path, "rb") as f:
                line = f.readline()
            if line.endswith(b"\n"):
                break
            if proc.poll() is not None or time.monotonic() - t0 > 60:
                proc.kill()
                with open(err_path, "rb") as f:
                    log = f.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"restart {self.starts} failed on its first try (rc={proc.returncode}):\n{log}")
            time.sleep(0.005)
        elapsed = time.monotonic() - t0
        port = int(line.decode().rsplit(":", 1)[1])
        if self.port:
            assert port == self.port, (port, self.port)
        self.port = port
        with open(os.path.join(self.data_dir, "admin.token")) as f:
            self.token = f.read().strip()
        with self.lock:
            self.proc = proc
        return elapsed

    def kill(self):
        with self.lock:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        with self.lock:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()

    def request(self, method, path, body=None, raw=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Authorization": f"Bearer {self.token}"}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read()
            return resp.status, json.loads(text) if text else {}
        finally:
            conn.close()


def parse_time(rfc3339):
    """Seconds since the epoch of an RFC 3339 UTC time ("...T04:29:05.874Z")."""
    import datetime
    text = rfc3339.rstrip("Z")
    whole, _, frac = text.partition(".")
    t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + (float("0." + frac) if frac else 0.0)


def job_body(job_id):
    # One in ten jumps the queue, preempting a running job of priority 0.
    priority = 10 if random.random() < 0.1 else 0
    return {
        "jobId": job_id,
        "trainingInput": {
            "scheduling": {"priority": priority},
            "scaleTier": "BASIC",
            "packageUris": [f"gs://{BUCKET}/pkg/soak_trainer-0.1.tar.gz"],
            "pythonModule": "soak_trainer.task",
            "args": ["--sleep", str(round(random.uniform(0.3, 1.5), 2))],
            "region": "us-central1",
            "runtimeVersion": "pytorch-1.13-cpu",
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--rate", type=float, default=25.0, help="job creations per second, all clients together")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", help="keep the server's directory here (default: a temp dir, removed on success)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    root = args.keep or tempfile.mkdtemp(prefix="mle-soak-")
    os.makedirs(root, exist_ok=True)
    server = Server(root)
    recoveries = []
    first_start = server.start()
    status, _ = server.request("POST", f"/storage/v1/b?project={PROJECT}", {"name": BUCKET})
    assert status == 200, status
    status, _ = server.request("POST", f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=pkg/soak_trainer-0.1.tar.gz",
                               raw=sdist())
    assert status == 200, status

    acknowledged = set()
    ack_lock = threading.Lock()
    ids = [f"soak_{i:05d}" for i in range(args.jobs)]
    next_id = iter(ids)
    id_lock = threading.Lock()
    interval = args.clients / args.rate
    stop_clients = threading.Event()
    problems = []

    def client():
        while not stop_clients.is_set():
            with id_lock:
                job_id = next(next_id, None)
            if job_id is None:
                return
            body = job_body(job_id)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    status, reply = server.request("POST", f"/v1/projects/{PROJECT}/jobs", body)
                except (OSError, http.client.HTTPException):
                    time.sleep(0.05)  # the server is being restarted: retry the same job id
                    continue
                if status == 200 or (status == 409 and "already exists" in reply.get("error", {}).get("message", "")):
                    # 409 on a retry: an earlier attempt was made durable.
                    with ack_lock:
                        acknowledged.add(job_id)
                    break
                if status >= 500:
                    time.sleep(0.05)
                    continue
                problems.append(f"create {job_id}: HTTP {status} {reply}")
                break
            time.sleep(interval * random.uniform(0.5, 1.5))

    t_start = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
    for t in threads:
        t.start()
    # Kills spread over the creation period, each while jobs prepare and run.
    creation_period = args.jobs / args.rate
    kill_times = sorted(random.uniform(0.1, 0.9) * creation_period for _ in range(args.kills))
    for at in kill_times:
        time.sleep(max(0.0, at - (time.monotonic() - t_start)))
        server.kill()
        try:
            recoveries.append(server.start())
        except RuntimeError as e:
            stop_clients.set()
            print(f"soak: FAILED: {e}", file=sys.stderr)
            return 1
    for t in threads:
        t.join()

    # Wait for every job to end.
    deadline = time.monotonic() + 600
    states = {}
    while time.monotonic() < deadline:
        states = {}
        token = ""
        while True:
            q = f"?pageSize=100&pageToken={token}" if token else "?pageSize=100"
            status, reply = server.request("GET", f"/v1/projects/{PROJECT}/jobs{q}")
            assert status == 200, (status, reply)
            for j in reply.get("jobs", []):
                if j["jobId"] in states:
                    problems.append(f"jobs.list returned {j['jobId']} twice")
                states[j["jobId"]] = j
            token = reply.get("nextPageToken", "")
            if not token:
                break
        if all(j["state"] in TERMINAL for j in states.values()) and acknowledged <= set(states):
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - t_start
    server.stop()

    runs_root = os.path.join(server.data_dir, "buckets", BUCKET, "runs")
    lost = sorted(acknowledged - set(states))
    unfinished = sorted(j for j, d in states.items() if d["state"] not in TERMINAL)
    twice, false_states = [], []
    by_state = {}
    preemptions = 0
    for job_id, desc in states.items():
        by_state[desc["state"]] = by_state.get(desc["state"], 0) + 1
        attempts = desc.get("attempts", [])
        preemptions += sum(1 for a in attempts if a.get("end") == "PREEMPTED")
        run_dir = os.path.join(runs_root, job_id)
        runs = {}  # attempt -> [(started, finished, file)]
        for name in sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []:
            with open(os.path.join(run_dir, name)) as f:
                lines = f.read().split("\n")
            started = float(lines[0].split()[1]) if lines[0].startswith("started ") else None
            runs.setdefault(int(name.split("-")[0]), []).append((started, "done" in lines, name))
        for attempt, records in runs.items():
            if len(records) > 1:
                twice.append(f"{job_id}: attempt {attempt} ran {len(records)} times {records}")
            if attempt > len(attempts):
                false_states.append(f"{job_id}: a run of attempt {attempt}, which the job does not have ({attempts})")
                continue
            # Every attempt before it had ended before it started.
            for before in attempts[:attempt - 1]:
                ended = before.get("endTime", "")
                if records[0][0] is not None and ended and parse_time(ended) > records[0][0] + 0.001:
                    twice.append(f"{job_id}: attempt {attempt} started at {records[0][0]:.3f}, before attempt "
                                 f"{before['attempt']} ended ({ended})")
        last = attempts[-1] if attempts else {}
        finished = bool(runs.get(last.get("attempt"), [(None, False, "")])[0][1])
        if desc["state"] == "SUCCEEDED" and (last.get("end") != "SUCCEEDED" or not finished):
            false_states.append(f"{job_id}: SUCCEEDED but its last attempt's run did not finish ({attempts}, {runs})")
        if desc["state"] != "SUCCEEDED":
            false_states.append(f"{job_id}: {desc['state']}: {desc.get('errorMessage', '')[:300]}")
    # No process of the data directory may be left.
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if server.data_dir.encode() in cmd or server.data_dir.encode() in env:
            shown = cmd.replace(b"\0", b" ").decode(errors="replace")[:200]
            left.append(f"pid {name}: {shown}")

    print(f"soak: seed {seed}, {args.clients} clients, {args.jobs} jobs, {args.kills} kills, {elapsed:.1f} s")
    print(f"soak: jobs acknowledged: {len(acknowledged)}")
    print(f"soak: lost: {len(lost)}")
    print(f"soak: run twice: {len(twice)}")
    print(f"soak: preemptions: {preemptions} (each queued again and run as its next attempt)")
    print(f"soak: states: {json.dumps(by_state, sort_keys=True)}; not ended: {len(unfinished)}")
    print(f"soak: first start {first_start * 1000:.0f} ms; recovery after each kill (to listening): "
          + ", ".join(f"{r * 1000:.0f} ms" for r in recoveries))
    print(f"soak: processes left: {len(left)}")
    failures = problems + [f"lost: {j}" for j in lost] + [f"run twice: {t}" for t in twice] + false_states \
        + [f"not ended: {j}" for j in unfinished] + [f"left: {p}" for p in left]
    if preemptions == 0 and args.jobs >= 200:
        failures.append("no job was preempted: the soak did not exercise preemption")
    if len(acknowledged) != args.jobs:
        failures.append(f"only {len(acknowledged)} of {args.jobs} creates were acknowledged")
    if failures:
        print("soak: FAILED:\n  " + "\n  ".join(failures[:50]), file=sys.stderr)
        print(f"soak: server logs and data kept in {root}", file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print("soak: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
