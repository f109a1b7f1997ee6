"""Fixtures for the end-to-end job execution suite.

Every test drives the real binaries: `mlengined` (env MLENGINED) started on
port 0 with a temporary data directory and a test configuration written into
it, and the `mlengine` CLI (env MLENGINE) pointed at it the documented way
(MLENGINE_CONFIG=DATA_DIR/server.json). Jobs really run: the local executor
starts `mlengine-replica` shims and Python trainers from tests/e2e/trainers.

Nothing sleeps for a fixed time: every wait polls with a bounded deadline and
fails with what the server said (state, errorMessage, the job's log, the
server's own log).

Fixtures:
  server          one mlengined per test module (the default test config)
  server_factory  make_server(config=..., path_prefix=...) for tests that need
                  their own server (restart, queue, fake GPUs)
  cli             the CLI against `server`, with a project of the test's own
  names           unique job ids / bucket names for the test

Each server's teardown cancels what is still running, stops mlengined with
SIGTERM (then SIGKILL) and fails when any process of the test is left
(a process whose cmdline or environment names the server's data directory).
"""

import glob
import http.client
import itertools
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest

SOURCE_DIR = os.environ.get("MLE_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
MLENGINED = os.environ.get("MLENGINED") or os.path.join(SOURCE_DIR, "build/src/server/mlengined")
MLENGINE = os.environ.get("MLENGINE") or os.path.join(SOURCE_DIR, "build/src/cli/mlengine")
# The runtime's interpreter (MLE_TEST_PYTHON: another, e.g. a GPU host's torch).
PYTHON = os.environ.get("MLE_TEST_PYTHON") or "/usr/bin/python3"
RUNTIME = "pytorch-1.13-cpu"
REGION = "us-central1"
TRAINERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainers")
# The multi-purpose trainer package (see trainers/tasks/trainer/task.py).
TASKS_PKG = os.path.join(TRAINERS, "tasks", "trainer")
MNIST_DIR = os.path.join(SOURCE_DIR, "examples", "mnist")

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) (\S+) (.*)$")
_counter = itertools.count()


# ---------------------------------------------------------------------------
# Server configuration

def config_yaml(*, cpu_oversubscription=None, replica_cpu_milli=None, gpu_types=None, tpu_v2_hosts=4,
                cancel_grace_seconds=2, pod_quota=True, warm_preload=None, local=None):
    """The suite's server configuration; `warm_preload` (module names) gives
    the runtime a warm interpreter that imported them."""
    lines = [
        "runtimes:",
        f"  - name: {RUNTIME}",
        f"    python: {PYTHON}",
        '    python_version: "3.11"',
        "    tpu_capable: true",
        "    description: the e2e suite's runtime",
    ]
    if warm_preload:
        lines.append(f"    warm_start: {{preload: [{', '.join(warm_preload)}]}}")
    if cpu_oversubscription is not None or replica_cpu_milli is not None or local:
        lines.append("local:")
        if cpu_oversubscription is not None:
            lines.append(f"  cpu_oversubscription: {cpu_oversubscription}")
        if replica_cpu_milli is not None:
            lines.append(f"  replica_cpu_milli: {replica_cpu_milli}")
        for k, v in (local or {}).items():  # more of local: (stall_after_seconds, ...)
            lines.append(f"  {k}: {v}")
    if tpu_v2_hosts:
        lines.append("tpu_hosts:")
        for i in range(1, tpu_v2_hosts + 1):
            lines.append(f"  - {{name: tpu-e2e-v2-{i}, type: TPU_V2, simulated: true}}")
    if gpu_types:
        lines.append("gpu_types:")
        for k, v in gpu_types.items():
            lines.append(f"  {k}: [{', '.join(v)}]")
    lines.append(f"cancel_grace_seconds: {cancel_grace_seconds}")
    if pod_quota:
        # TPU pods are refused without quota (the TPU guide: ask for it first).
        lines.append("quotas:\n  defaults: {TPU_V2_POD_CORES: 512, TPU_V3_POD_CORES: 256}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The process table (/proc; no psutil)

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def processes():
    """(pid, cmdline list, environ list, state) of every live, readable process but ours."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        stat = _read(f"/proc/{name}/stat")
        if stat is None:
            continue
        try:
            state = stat[stat.rindex(b")") + 2:].split()[0].decode()
        except (ValueError, IndexError):
            state = "?"
        if state in ("Z", "X"):
            continue  # a zombie runs nothing; its parent reaps it
        cmdline = _read(f"/proc/{name}/cmdline") or b""
        environ = _read(f"/proc/{name}/environ") or b""
        out.append((int(name),
                    [a.decode(errors="replace") for a in cmdline.split(b"\0") if a],
                    [e.decode(errors="replace") for e in environ.split(b"\0") if e],
                    state))
    return out


def describe_procs(procs):
    return "\n".join(f"  pid {pid} [{state}]: {' '.join(cmd)[:300]}" for pid, cmd, _, state in procs)


def _names(text, path):
    """True when `text` (an argument or NAME=VALUE) names `path` or a path under it."""
    return text.endswith(path) or (path + "/") in text


def procs_of_job(run_dir, job_id):
    """Processes whose cmdline names the job's run directory or whose
    environment has CLOUD_ML_JOB_ID=<job_id>."""
    entry = f"CLOUD_ML_JOB_ID={job_id}"
    return [p for p in processes() if any(_names(a, run_dir) for a in p[1]) or entry in p[2]]


def procs_of_data_dir(data_dir):
    return [p for p in processes()
            if any(_names(a, data_dir) for a in p[1]) or any(_names(e, data_dir) for e in p[2])]


def wait_for(predicate, what, timeout=120, on_fail=None, interval=0.1):
    """Polls predicate() until it returns something true, and returns that;
    fails after `timeout` seconds saying what was awaited and, with
    on_fail(), what was seen instead."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout}s" + (f"\n{on_fail()}" if on_fail else ""))


def call_as(server, token, method, path, body=None):
    """One call with another caller's token: (HTTP status, the answer's JSON or {})."""
    u = urllib.parse.urlparse(server.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
    finally:
        conn.close()
    try:
        return resp.status, (json.loads(text) if text else {})
    except ValueError:
        return resp.status, {"text": text}


def run_node_job(server, client, project, job, timeout=300):
    """One Vertex AI custom job run through Google's Node.js client `client`
    ("googleapis" or "gax", tests/vertex_client/run_job.js) against `server`
    to its end: the CustomJob as the client read it. `job`: "gloo:BUCKET"
    (the Node suite's trainer, two pools all-reducing over gloo) or a
    CustomJob as a dict."""
    script = os.path.join(SOURCE_DIR, "tests", "vertex_client", "run_job.js")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        if isinstance(job, dict):
            json.dump(job, f)
            f.flush()
            job = f.name
        env = dict(os.environ, MLE_URL=server.endpoint, MLE_TOKEN=server.token, MLE_TIMEOUT_SECONDS=str(timeout))
        r = subprocess.run(["node", script, client, project, job], env=env, capture_output=True, text=True,
                           timeout=timeout + 60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_no_procs(find, timeout=10):
    """Polls until find() is empty; returns what is left at the deadline."""
    deadline = time.time() + timeout
    left = find()
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = find()
    return left


# ---------------------------------------------------------------------------
# mlengined

class Server:
    """One mlengined. `extra_args` are added to its command line (e.g.
    ["--executor", "slurm"]) and `extra_env` to its environment (after the
    caller's MLENGINE* variables are dropped)."""

    def __init__(self, root, config_text, path_prefix=None, extra_args=(), extra_env=None):
        self.root = str(root)
        self.data_dir = os.path.join(self.root, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.config_path = os.path.join(self.root, "mlengined.yaml")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("MLENGINE"):
                del self.env[k]
        if path_prefix:
            self.env["PATH"] = str(path_prefix) + os.pathsep + self.env.get("PATH", "/usr/bin:/bin")
        self.env.update(extra_env or {})
        self.extra_args = [str(a) for a in extra_args]
        self.projects = set()
        self.starts = 0
        self.proc = None
        self.start()

    # -- lifecycle
    def start(self, port=0):
        """Starts mlengined on `port` (0: any free one); fails the test if it
        does not answer."""
        self.starts += 1
        self.stdout_path = os.path.join(self.root, f"mlengined.{self.starts}.out")
        self.stderr_path = os.path.join(self.root, f"mlengined.{self.starts}.log")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [MLENGINED, "--listen", f"127.0.0.1:{port}", "--data-dir", self.data_dir, "--config", self.config_path,
                 *self.extra_args],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=self.env, cwd=self.root)
        self.endpoint = None
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            with open(self.stdout_path, "rb") as f:
                first = f.readline()
            if first.endswith(b"\n"):
                m = re.match(rb"mlengined listening on (http://[0-9.]+:([0-9]+))", first)
                assert m, f"mlengined's first stdout line is not 'mlengined listening on URL': {first!r}"
                self.endpoint = m.group(1).decode()
                self.port = int(m.group(2))
                break
            time.sleep(0.02)
        if self.endpoint is None:
            self.kill()
            raise AssertionError(f"mlengined did not start (rc={self.proc.returncode}):\n{self.server_log()}")
        self.server_json = os.path.join(self.data_dir, "server.json")
        with open(self.server_json) as f:
            info = json.load(f)
        assert info["endpoint"] == self.endpoint, (info, self.endpoint)
        with open(os.path.join(self.data_dir, "admin.token")) as f:
            self.token = f.read().strip()

    def stop(self):
        """SIGTERM, then SIGKILL if it does not exit within 15 s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        """kill -9: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def server_log(self):
        text = ""
        for i in range(1, self.starts + 1):
            for suffix in ("out", "log"):
                data = _read(os.path.join(self.root, f"mlengined.{i}.{suffix}")) or b""
                text += f"--- mlengined start {i} {suffix}\n{data.decode(errors='replace')[-4000:]}\n"
        return text

    # -- paths
    def run_dir(self, project, job_id):
        return os.path.join(self.data_dir, "runs", project, job_id)

    def bucket_path(self, bucket, *parts):
        return os.path.join(self.data_dir, "buckets", bucket, *parts)

    # -- HTTP
    def request(self, method, path, body=None, timeout=60):
        u = urllib.parse.urlparse(self.endpoint)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
        finally:
            conn.close()
        return resp.status, text

    def get_json(self, path):
        status, text = self.request("GET", path)
        assert status == 200, f"GET {path} -> {status}: {text}"
        return json.loads(text)

    def job(self, project, job_id):
        return self.get_json(f"/v1/projects/{project}/jobs/{job_id}")

    def logs(self, project, job_id, task=None):
        """Every log entry of the job so far (follows nextPageToken)."""
        entries, token = [], ""
        for _ in range(1000):
            q = {"pageToken": token}
            if task:
                q["taskName"] = task
            page = self.get_json(f"/v1/projects/{project}/jobs/{job_id}/logs?{urllib.parse.urlencode(q)}")
            got = page.get("entries", [])
            entries += got
            nxt = page.get("nextPageToken", "")
            if not got or not nxt or nxt == token:
                break
            token = nxt
        return entries

    def log_text(self, project, job_id):
        try:
            return "\n".join(f"{e.get('timestamp')} {e.get('taskName')} {e.get('message')}"
                             for e in self.logs(project, job_id))
        except Exception as e:  # pylint: disable=broad-except
            return f"(logs unavailable: {e})"

    def explain(self, project, job_id):
        try:
            job = self.job(project, job_id)
        except Exception as e:  # pylint: disable=broad-except
            job = f"(describe failed: {e})"
        return (f"job {project}/{job_id}: {json.dumps(job, indent=1) if isinstance(job, dict) else job}\n"
                f"--- job log\n{self.log_text(project, job_id)[-6000:]}\n{self.server_log()}")

    def list_jobs(self, project):
        status, text = self.request("GET", f"/v1/projects/{project}/jobs?pageSize=1000")
        if status != 200:
            return []
        return json.loads(text).get("jobs", [])

    # -- teardown
    def finish(self):
        """Cancels unfinished jobs, stops the server, and returns what is left
        running of this server's data directory (after killing it)."""
        problems = []
        if self.proc is not None and self.proc.poll() is None:
            unfinished = []
            for project in sorted(self.projects):
                for job in self.list_jobs(project):
                    if job.get("state") not in TERMINAL:
                        unfinished.append((project, job["jobId"]))
                        self.request("POST", f"/v1/projects/{project}/jobs/{job['jobId']}:cancel", body={})
            deadline = time.time() + 30
            for project, job_id in unfinished:
                while time.time() < deadline:
                    if self.job(project, job_id).get("state") in TERMINAL:
                        break
                    time.sleep(0.1)
        rc = self.stop()
        if rc not in (0, None, -signal.SIGKILL):
            problems.append(f"mlengined exited with status {rc} on SIGTERM")
        left = wait_no_procs(lambda: procs_of_data_dir(self.data_dir), timeout=20)
        if left:
            problems.append("processes of the test left behind after mlengined stopped "
                            f"(data dir {self.data_dir}):\n{describe_procs(left)}")
            for pid, _, _, _ in left:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return problems


def warm_ready(server, timeout=120):
    """Waits until the runtime's warm interpreter serves (it binds its socket once its imports are done)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if glob.glob(os.path.join(server.data_dir, "warm", "*.sock")):
            return
        time.sleep(0.1)
    raise AssertionError(f"the warm interpreter did not serve within {timeout}s\n{server.server_log()}")


def serve(s):
    """For a module's server fixture (`yield from serve(Server(...))`):
    yields the started server, then stops it and fails if anything of its
    jobs was left behind."""
    yield s
    problems = s.finish()
    assert not problems, "\n".join(problems) + "\n" + s.server_log()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve(Server(tmp_path_factory.mktemp("e2e-server"), config_yaml()))


@pytest.fixture
def server_factory(tmp_path):
    made = []

    def make(config=None, path_prefix=None):
        s = Server(tmp_path / f"server{len(made)}", config or config_yaml(), path_prefix=path_prefix)
        made.append(s)
        return s
    yield make
    problems = []
    for s in made:
        problems += s.finish()
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# The CLI

class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def __repr__(self):
        return (f"mlengine {' '.join(self.args)} -> rc={self.rc}\n--- stdout\n{self.out[-6000:]}\n"
                f"--- stderr\n{self.err[-6000:]}")

    def json(self):
        return json.loads(self.out)


class Cli:
    """Runs the real CLI against one server, as one project."""

    def __init__(self, server, home, project, bucket):
        self.server = server
        self.project = project
        self.bucket = bucket
        server.projects.add(project)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MLENGINE")}
        self.env["HOME"] = str(home)
        self.env.pop("XDG_CONFIG_HOME", None)
        self.env["MLENGINE_CONFIG"] = server.server_json
        self.env["MLENGINE_PROJECT"] = project
        self.env["MLENGINE_BIN"] = MLENGINE
        self.set_up_tpu_access()
        self.make_bucket()

    def make_bucket(self):
        """The test's bucket, in its project (as a user makes one): the
        project's jobs reach it through their sandbox. A bucket made by an
        upload into it belongs to no project, and no job sees it."""
        r = self("storage", "mb", f"gs://{self.bucket}")
        assert r.rc == 0 or "already exists" in r.err, r

    def set_up_tpu_access(self):
        """The TPU guide's access steps, as a user runs them: the project's TPU
        service identity, granted roles/ml.serviceAgent (TPU jobs need it)."""
        identity = self.ok("services", "identity", "create", "--service=tpu.googleapis.com", "--format=json").json()
        self.tpu_service_account = identity["email"]
        self.ok("projects", "add-iam-policy-binding", f"--member=serviceAccount:{identity['email']}",
                "--role=roles/ml.serviceAgent")

    def __call__(self, *args, cwd=None, timeout=180, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        try:
            p = subprocess.run([MLENGINE, *args], env=e, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as t:
            raise AssertionError(f"mlengine {' '.join(args)} did not finish in {timeout}s:\n"
                                 f"{t.stdout}\n{t.stderr}\n{self.server.server_log()}") from None
        return Result(list(args), p.returncode, p.stdout, p.stderr)

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.rc == 0, r
        return r

    def describe(self, job_id):
        return self.ok("jobs", "describe", job_id, "--format", "json").json()

    def open_gate(self, uri, text="open\n"):
        """Writes the gs:// object `uri` through `storage cp`: what a trainer
        waiting for it (--wait-for, --gate) takes as its signal to go on."""
        with tempfile.NamedTemporaryFile("w", dir=self.env["HOME"], suffix=".gate", delete=False) as f:
            f.write(text)
        try:
            self.ok("storage", "cp", f.name, uri)
        finally:
            os.unlink(f.name)

    def submit(self, job_id, *flags, package=TASKS_PKG, module="trainer.task", args=(), cwd=None, timeout=240):
        """`mlengine jobs submit training` with gcloud's flags."""
        cmd = ["jobs", "submit", "training", job_id, "--staging-bucket", f"gs://{self.bucket}",
               "--region", REGION, "--runtime-version", RUNTIME]
        if package:
            cmd += ["--package-path", package]
        if module:
            cmd += ["--module-name", module]
        cmd += list(flags)
        if args:
            cmd += ["--", *args]
        return self(*cmd, cwd=cwd, timeout=timeout)

    def stage_digits(self):
        """examples/mnist/stage_data.py into gs://BUCKET/datasets/digits; returns that URI."""
        uri = f"gs://{self.bucket}/datasets/digits"
        p = subprocess.run([PYTHON, os.path.join(MNIST_DIR, "stage_data.py"), uri], env=self.env,
                           capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, f"stage_data.py {uri} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
        return uri

    def submit_mnist(self, job_id, *flags, args=(), timeout=300):
        """The walkthrough's command (scripts/demo.sh), run from examples/mnist
        with gcloud's flags: the digits staged, `flags` before `--`, then
        `args` and the trainer's --data_dir/--model_dir (gs://BUCKET/JOB_output)."""
        data = self.stage_digits()
        return self("jobs", "submit", "training", job_id,
                    f"--staging-bucket=gs://{self.bucket}",
                    "--package-path=trainer",
                    "--module-name=trainer.task",
                    f"--runtime-version={RUNTIME}",
                    *flags,
                    "--region=us-central1",
                    "--",
                    *args,
                    f"--data_dir={data}",
                    f"--model_dir=gs://{self.bucket}/{job_id}_output",
                    cwd=MNIST_DIR, timeout=timeout)

    def explain(self, job_id):
        return self.server.explain(self.project, job_id)

    def wait_state(self, job_id, states, timeout=120):
        """Polls `jobs describe` until the job is in one of `states`."""
        states = {states} if isinstance(states, str) else set(states)
        deadline = time.time() + timeout
        job = None
        while time.time() < deadline:
            job = self.describe(job_id)
            if job.get("state") in states:
                return job
            if job.get("state") in TERMINAL:
                break  # it will never get there
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} never reached {sorted(states)} (last: {job.get('state')}, "
                             f"errorMessage: {job.get('errorMessage')!r})\n{self.explain(job_id)}")

    def wait_log(self, job_id, pattern, task=None, timeout=120):
        """Polls the logs API until a line contains `pattern`; returns the entries."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            entries = self.server.logs(self.project, job_id, task)
            if any(pattern in e.get("message", "") for e in entries):
                return entries
            if self.server.job(self.project, job_id).get("state") in TERMINAL:
                entries = self.server.logs(self.project, job_id, task)
                if any(pattern in e.get("message", "") for e in entries):
                    return entries
                break
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} never logged {pattern!r}\n{self.explain(job_id)}")

    def run_dir(self, job_id):
        return self.server.run_dir(self.project, job_id)


class Names:
    def __init__(self, base, suffix):
        self.base, self.suffix = base, suffix
        self.project = f"p{base}{suffix}"
        self.bucket = f"b-{base}-{suffix}"

    def job(self, tag="job"):
        return f"{tag}_{self.base}_{self.suffix}"


@pytest.fixture
def names(request):
    n = next(_counter)
    base = re.sub(r"[^a-z0-9]", "", request.node.name.lower().replace("test", ""))[:16]
    return Names(base, f"{os.getpid() % 10000}{n}")


def make_cli(server, tmp_path, names, tag="home"):
    home = tmp_path / f"{tag}{next(_counter)}"
    home.mkdir()
    return Cli(server, home, names.project, names.bucket)


@pytest.fixture
def cli(server, tmp_path, names):
    return make_cli(server, tmp_path, names)


SECRET = "another project's secret\n"


def other_project_with_a_secret(cli, tmp_path, names):
    """A second project on `cli`'s server, whose bucket holds
    gs://BUCKET/secret.txt (SECRET): what the sandbox tests' hostile jobs
    must not reach. Its Cli."""
    other = make_cli(cli.server, tmp_path, names, tag="other")
    other.project = cli.project + "-o"
    other.env["MLENGINE_PROJECT"] = other.project
    other.bucket = cli.bucket + "-o"
    cli.server.projects.add(other.project)
    other.make_bucket()
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    other.ok("storage", "cp", str(secret), f"gs://{other.bucket}/secret.txt")
    return other


def assert_secret_untouched(other):
    assert other.ok("storage", "cat", f"gs://{other.bucket}/secret.txt").out == SECRET
    listed = other.ok("storage", "ls", f"gs://{other.bucket}").out.split()
    assert not [o for o in listed if "pwned" in o], listed


def parse_log_lines(text):
    """stream-logs output -> [(timestamp, task, message)] and the lines that do not parse."""
    parsed, other = [], []
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m:
            parsed.append(m.groups())
        elif line.strip():
            other.append(line)
    return parsed, other
