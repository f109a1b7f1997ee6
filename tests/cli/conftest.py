"""Fixtures for the mlengine CLI end-to-end suite.

Every test drives the real `mlengine` binary (env MLENGINE) against a real
`mlengined` (env MLENGINED) started on port 0 with a temporary data
directory; the CLI finds it the documented way, through
MLENGINE_CONFIG=DATA_DIR/server.json. Tests that need the server's storage or
logs API fail with a message naming the missing API when the server does not
serve it (see `storage_api` / `logs_api`).

Fixtures:
  server      one mlengined for the session
  cli         runs mlengine against `server` in a clean environment, with a
              project of the test's own: cli("jobs", "list") -> Result
  names       unique job ids / bucket names for the test
  trainer     a tiny trainer package dir (trainer/__init__.py, trainer/task.py)
  storage_api / logs_api   fail the test when the server lacks that API
"""

import hashlib
import http.client
import itertools
import json
import os
import re
import signal
import subprocess
import textwrap
import time
import urllib.parse

import pytest

SOURCE_DIR = os.environ.get("MLE_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
MLENGINED = os.environ.get("MLENGINED") or os.path.join(SOURCE_DIR, "build/src/server/mlengined")
MLENGINE = os.environ.get("MLENGINE") or os.path.join(SOURCE_DIR, "build/src/cli/mlengine")
RUNTIME = os.environ.get("MLE_TEST_RUNTIME", "pytorch-1.13-cpu")

LISTEN_RE = re.compile(rb"mlengined listening on (http://[0-9.]+:[0-9]+)")
_counter = itertools.count()


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def __repr__(self):
        return f"mlengine {' '.join(self.args)} -> rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"

    def json(self):
        return json.loads(self.out)


class Server:
    def __init__(self, data_dir):
        self.data_dir = str(data_dir)
        self.log_path = self.data_dir + ".log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", self.data_dir],
            stdout=self._log, stderr=subprocess.STDOUT)
        self.endpoint = None
        deadline = time.time() + 30
        while time.time() < deadline and self.endpoint is None and self.proc.poll() is None:
            with open(self.log_path, "rb") as f:
                m = LISTEN_RE.search(f.read())
            if m:
                self.endpoint = m.group(1).decode()
            else:
                time.sleep(0.05)
        if self.endpoint is None:
            self.stop()
            with open(self.log_path, "rb") as f:
                raise RuntimeError(f"mlengined did not start: {f.read().decode(errors='replace')}")
        self.config_path = os.path.join(self.data_dir, "server.json")
        with open(os.path.join(self.data_dir, "admin.token")) as f:
            self.token = f.read().strip()

    def request(self, method, path, body=None):
        u = urllib.parse.urlparse(self.endpoint)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        conn.close()
        return resp.status, text

    def serves(self, method, path):
        """False when the server answers with its 'no such route' 404."""
        status, text = self.request(method, path)
        return not (status == 404 and "was not found on this server" in text)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlengined-data"))
    yield s
    s.stop()


def clean_env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLENGINE")}
    env["HOME"] = str(home)
    env.pop("XDG_CONFIG_HOME", None)
    return env


def run_mlengine(args, env, cwd=None, timeout=120, stdin=None):
    proc = subprocess.run([MLENGINE, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin if stdin is not None else subprocess.DEVNULL)
    return Result(list(args), proc.returncode, proc.stdout, proc.stderr)


class Cli:
    def __init__(self, server, home, project):
        self.server = server
        self.project = project
        self.env = clean_env(home)
        self.env["MLENGINE_CONFIG"] = server.config_path
        self.env["MLENGINE_PROJECT"] = project

    def __call__(self, *args, cwd=None, timeout=120, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        return run_mlengine(args, e, cwd=cwd, timeout=timeout)

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.rc == 0, r
        return r

    def describe(self, job_id):
        return self.ok("jobs", "describe", job_id, "--format", "json").json()

    def wait_state(self, job_id, states, timeout=120):
        deadline = time.time() + timeout
        job = None
        while time.time() < deadline:
            job = self.describe(job_id)
            if job.get("state") in states:
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} never reached {states}: {job}")


@pytest.fixture
def names(request):
    n = next(_counter)
    base = re.sub(r"[^a-z0-9]", "", request.node.name.lower())[:20]
    suffix = f"{os.getpid() % 10000}{n}"

    class Names:
        project = f"p{base}{suffix}"
        bucket = f"b-{base}-{suffix}"
        staging = f"stage-{base}-{suffix}"

        @staticmethod
        def job(tag="job"):
            return f"{tag}_{base}_{suffix}"
    return Names


@pytest.fixture
def cli(server, tmp_path, names):
    home = tmp_path / "home"
    home.mkdir()
    return Cli(server, home, names.project)


TRAINER_TASK = textwrap.dedent('''\
    """Tiny trainer used by the CLI tests."""
    import json
    import os
    import sys
    import time

    def main():
        args = sys.argv[1:]
        print("trainer args:", json.dumps(args), flush=True)
        print("trainer stderr line", file=sys.stderr, flush=True)
        if "--sleep" in args:
            time.sleep(float(args[args.index("--sleep") + 1]))
        if "--fail" in args:
            print("failing on purpose", file=sys.stderr, flush=True)
            sys.exit(3)

    if __name__ == "__main__":
        main()
    ''')


def write_trainer(root, task=TRAINER_TASK, name="trainer"):
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text(task)
    return pkg


@pytest.fixture
def trainer(tmp_path):
    return write_trainer(tmp_path / "src")


@pytest.fixture
def storage_api(server):
    if not server.serves("GET", "/storage/v1/b?project=probe"):
        pytest.fail("mlengined does not serve the storage API (GET /storage/v1/b, "
                    "POST /upload/storage/v1/b/{bucket}/o): the CLI cannot stage packages or copy files")
    return True


@pytest.fixture
def logs_api(server):
    if not server.serves("GET", "/v1/projects/probe/jobs/probe/logs"):
        pytest.fail("mlengined does not serve the logs API (GET /v1/projects/{p}/jobs/{j}/logs)")
    return True


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()
