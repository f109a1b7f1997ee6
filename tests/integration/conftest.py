"""Shared fixtures for the mlengined integration suite.

Every test talks to a real mlengined process over real HTTP: the server is
started on port 0 with a temporary data directory, the port is read from its
first stdout line ("mlengined listening on http://HOST:PORT"), and the
process is stopped (SIGTERM, then SIGKILL) at teardown.

Fixtures:
  server          one server shared by the whole session; tests isolate
                  themselves by using their own project (see `project`).
                  Its configuration is mlengined.yaml here (TPU pod quota).
  project         a project id unique to the test.
  fresh_server    a server of the test's own (for global state such as the
                  scheduler queue, or for restarts).
  launcher        starts servers on chosen data directories, flags and
                  executors (restarts, kill -9); every server it started is
                  stopped at teardown.

Helpers (importable as `from conftest import ...`):
  Server.call(method, path, body=None, query=None, ...) -> (status, json)
  Server.request(...) -> Response(status, json, text, headers)
  assert_error(status, body, http_status, code_name)
  violations(body) -> [(field, description), ...]
  wait_for(fn, what, timeout) -> fn's first truthy result (bounded poll)
  tpu_job(job_id, **overrides) -> the reference BASIC_TPU job body
"""

import copy
import http.client
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

MLENGINED = os.environ.get("MLENGINED") or "/work/main/build/src/server/mlengined"
SOURCE_DIR = os.environ.get("MLE_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
DISCOVERY_DOC = os.path.join(SOURCE_DIR, "api", "ml.v1.json")
# The shared server's configuration: TPU pod quota for every project.
SUITE_CONFIG = os.path.join(SOURCE_DIR, "tests", "integration", "mlengined.yaml")

STARTUP_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
HTTP_TIMEOUT = 15.0

LISTEN_RE = re.compile(rb"^mlengined listening on http://([0-9.]+):([0-9]+)\s*$")
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")

BASE_JOB = {
    "jobId": "tpu_mnist_1",
    "trainingInput": {
        "scaleTier": "BASIC_TPU",
        "packageUris": ["gs://bucket/trainer-0.0.0.tar.gz"],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        "runtimeVersion": "2.11",
        "pythonVersion": "3.7",
    },
    "labels": {"team": "vision"},
}


def tpu_job(job_id="tpu_mnist_1", labels=None, **training_overrides):
    """The reference BASIC_TPU job, with a new id/labels/trainingInput keys."""
    job = copy.deepcopy(BASE_JOB)
    job["jobId"] = job_id
    if labels is not None:
        job["labels"] = labels
    job["trainingInput"].update(training_overrides)
    return job


class Response:
    def __init__(self, status, text, headers):
        self.status = status
        self.text = text
        self.headers = headers
        try:
            self.json = json.loads(text) if text.strip() else None
        except ValueError:
            self.json = None

    def __repr__(self):
        return "Response(%d, %s)" % (self.status, self.text[:2000])


class Server:
    """A running mlengined process and a tiny HTTP client for it."""

    def __init__(self, data_dir, args=(), executor="none"):
        self.data_dir = data_dir
        self.stderr_path = os.path.join(os.path.dirname(data_dir.rstrip("/")) or ".",
                                        os.path.basename(data_dir.rstrip("/")) + ".stderr")
        self._stderr = open(self.stderr_path, "ab")
        # By default a control plane only: jobs stay QUEUED (this suite tests the API).
        cmd = [MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--executor", executor] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._stderr)
        try:
            self.host, self.port = self._read_endpoint()
        except BaseException:
            self._terminate(kill_only=True)
            raise
        with open(os.path.join(data_dir, "admin.token")) as f:
            self.token = f.readline().strip()
        self.url = "http://%s:%d" % (self.host, self.port)
        self.tpu_ready = set()  # projects whose TPU access is set up (set_up_tpu_access)
        self.tpu_lock = threading.Lock()

    # ---- process control ----

    def _read_endpoint(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        fd = self.proc.stdout.fileno()
        buf = b""
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("mlengined did not print its endpoint within %.0fs; stdout so far %r; "
                                     "stderr: %s" % (STARTUP_TIMEOUT, buf, self.stderr_text()))
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError("mlengined exited before printing its endpoint (rc=%s); stderr: %s"
                                     % (self.proc.wait(), self.stderr_text()))
            buf += chunk
        line = buf.split(b"\n", 1)[0]
        m = LISTEN_RE.match(line)
        assert m, "unexpected first stdout line from mlengined: %r" % line
        port = int(m.group(2))
        assert 0 < port < 65536
        return m.group(1).decode(), port

    def log_lines(self):
        """Every line the server wrote to stderr so far (its log)."""
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()

    def stderr_text(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def _terminate(self, kill_only=False):
        if self.proc.poll() is None:
            if not kill_only:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()

    def stop(self):
        """SIGTERM (then SIGKILL after a timeout); returns the exit status."""
        self._terminate()
        return self.proc.returncode

    def kill9(self):
        self.proc.kill()
        self.proc.wait(STOP_TIMEOUT)
        self._terminate(kill_only=True)

    # ---- HTTP ----

    def connection(self, timeout=HTTP_TIMEOUT):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, query=None, headers=None, token=True, conn=None):
        """Sends one request. body: dict/list (sent as JSON), str/bytes (sent as is) or None.
        token: True = the admin token, None/False = no Authorization header, str = that header
        value's token. Returns a Response."""
        if query:
            items = query.items() if isinstance(query, dict) else query
            path = path + ("&" if "?" in path else "?") + urllib.parse.urlencode(list(items))
        hdrs = {}
        if token is True:
            hdrs["Authorization"] = "Bearer " + self.token
        elif token:
            hdrs["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            if isinstance(body, (dict, list)):
                data = json.dumps(body).encode()
            elif isinstance(body, str):
                data = body.encode()
            else:
                data = body
            hdrs["Content-Type"] = "application/json"
        if headers:
            hdrs.update(headers)
        own = conn is None
        c = self.connection() if own else conn
        try:
            c.request(method, path, body=data, headers=hdrs)
            r = c.getresponse()
            text = r.read().decode("utf-8", "replace")
            return Response(r.status, text, dict((k.lower(), v) for k, v in r.getheaders()))
        finally:
            if own:
                c.close()

    def call(self, method, path, body=None, query=None, **kw):
        r = self.request(method, path, body=body, query=query, **kw)
        return r.status, r.json

    # ---- API shortcuts (paths are relative to v1/projects/{project}) ----

    def get_config(self, project):
        return self.call("GET", "/v1/projects/%s:getConfig" % project)

    def create(self, project, job):
        self.set_up_tpu_access(project)
        return self.call("POST", "/v1/projects/%s/jobs" % project, job)

    def set_up_tpu_access(self, project):
        """The TPU guide's access steps, once per project: getConfig, generate
        the TPU service identity, grant it roles/ml.serviceAgent."""
        with self.tpu_lock:
            self._set_up_tpu_access(project)

    def _set_up_tpu_access(self, project):
        if project in self.tpu_ready:
            return
        status, cfg = self.get_config(project)
        assert status == 200, cfg
        number = cfg["serviceAccountProject"]
        status, op = self.call(
            "POST", "/v1beta1/projects/%s/services/tpu.googleapis.com:generateServiceIdentity" % number, {})
        assert status == 200 and op["done"], op
        member = "serviceAccount:" + op["response"]["email"]
        status, policy = self.call("POST", "/v1/projects/%s:getIamPolicy" % project, {})
        assert status == 200, policy
        bindings = policy.get("bindings", [])
        agent = [b for b in bindings if b["role"] == "roles/ml.serviceAgent"]
        if not agent:
            bindings.append({"role": "roles/ml.serviceAgent", "members": [member]})
        elif member not in agent[0]["members"]:
            agent[0]["members"].append(member)
        status, body = self.call("POST", "/v1/projects/%s:setIamPolicy" % project,
                                 {"policy": {"bindings": bindings, "etag": policy["etag"]}})
        assert status == 200, body
        self.tpu_ready.add(project)

    def get(self, project, job_id):
        return self.call("GET", "/v1/projects/%s/jobs/%s" % (project, job_id))

    def list(self, project, **query):
        return self.call("GET", "/v1/projects/%s/jobs" % project, query=query or None)

    def list_all(self, project, **query):
        """Every job over all pages (pageSize as given)."""
        jobs, token, pages = [], None, 0
        while True:
            q = dict(query)
            if token:
                q["pageToken"] = token
            status, body = self.list(project, **q)
            assert status == 200, body
            jobs.extend(body.get("jobs", []))
            token = body.get("nextPageToken")
            pages += 1
            assert pages < 1000
            if not token:
                return jobs

    def patch(self, project, job_id, body, update_mask=None):
        q = {"updateMask": update_mask} if update_mask is not None else None
        return self.call("PATCH", "/v1/projects/%s/jobs/%s" % (project, job_id), body, query=q)

    def cancel(self, project, job_id, body=None):
        return self.call("POST", "/v1/projects/%s/jobs/%s:cancel" % (project, job_id),
                         {} if body is None else body)

    def create_ok(self, project, job):
        status, body = self.create(project, job)
        assert status == 200, "create %s failed: %s %s" % (job.get("jobId"), status, body)
        return body

    def wait_state(self, project, job_id, state, timeout=10.0):
        def check():
            status, body = self.get(project, job_id)
            assert status == 200, body
            return body if body.get("state") == state else None
        return wait_for(check, "job %s/%s to reach %s" % (project, job_id, state), timeout)

    def ping(self):
        """The server still answers a normal authenticated request."""
        assert self.alive(), "mlengined exited: " + self.stderr_text()
        status, body = self.get_config("ping")
        assert status == 200, (status, body)
        assert body["serviceAccountProject"].isdigit()


def no_positions(value):
    """A copy of a Job / ListJobsResponse / (status, body) without jobPosition,
    which appears asynchronously once the scheduler has placed a new job."""
    if isinstance(value, dict):
        return {k: no_positions(v) for k, v in value.items() if k != "jobPosition"}
    if isinstance(value, (list, tuple)):
        return type(value)(no_positions(v) for v in value)
    return value


def wait_for(fn, what, timeout=10.0, interval=0.02):
    """Polls fn until it returns something truthy; fails after `timeout` seconds.
    Only for state that changes asynchronously (e.g. CANCELLING -> CANCELLED)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def assert_error(status, body, http_status, code_name):
    """Google's error format: {"error": {"code", "message", "status"[, "details"]}}."""
    assert status == http_status, "expected HTTP %d %s, got %d: %s" % (http_status, code_name, status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert err.get("code") == http_status, body
    assert err.get("status") == code_name, body
    assert isinstance(err.get("message"), str) and err["message"], body
    assert set(err) <= {"code", "message", "status", "details", "errors"}, body
    return err


def violations(body):
    """[(field, description)] from a BadRequest detail (asserting its shape)."""
    err = body["error"]
    details = err.get("details")
    assert isinstance(details, list) and details, "no details in %s" % body
    assert details[0]["@type"] == "type.googleapis.com/google.rpc.BadRequest", body
    out = []
    for v in details[0]["fieldViolations"]:
        assert isinstance(v.get("field"), str) and v["field"], body
        assert isinstance(v.get("description"), str) and v["description"], body
        out.append((v["field"], v["description"]))
    return out


def violation_fields(body):
    return [f for f, _ in violations(body)]


def assert_invalid(status, body, *fields):
    """400 INVALID_ARGUMENT whose fieldViolations name (at least) the given fields."""
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    got = violation_fields(body)
    for f in fields:
        assert f in got, "expected a violation of %r, got %s" % (f, violations(body))
    return got


_counter = itertools.count()


@pytest.fixture(scope="session")
def tmp_root():
    d = tempfile.mkdtemp(prefix="mle-it-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _new_dir(root, name):
    d = os.path.join(root, "%s-%d" % (name, next(_counter)))
    os.makedirs(d)
    return os.path.join(d, "data")


class Launcher:
    def __init__(self, root):
        self.root = root
        self.servers = []

    def new_data_dir(self, name="srv"):
        return _new_dir(self.root, name)

    def start(self, data_dir=None, args=(), executor="none"):
        s = Server(data_dir or self.new_data_dir(), args, executor)
        self.servers.append(s)
        return s

    def stop_all(self):
        for s in self.servers:
            s._terminate()


@pytest.fixture(scope="session")
def server(tmp_root):
    assert os.access(MLENGINED, os.X_OK), "mlengined binary not found at %s (set MLENGINED)" % MLENGINED
    s = Server(_new_dir(tmp_root, "shared"), ["--config", SUITE_CONFIG])
    yield s
    alive = s.alive()
    rc = s.stop()
    assert alive, "the shared mlengined died during the suite: " + s.stderr_text()
    assert rc == 0, "mlengined exited %s on SIGTERM: %s" % (rc, s.stderr_text())


@pytest.fixture
def launcher(tmp_root):
    assert os.access(MLENGINED, os.X_OK), "mlengined binary not found at %s (set MLENGINED)" % MLENGINED
    l = Launcher(tmp_root)
    yield l
    l.stop_all()


@pytest.fixture
def fresh_server(launcher):
    return launcher.start()


@pytest.fixture
def project(request, server):
    """A project id of the test's own on the shared server, its TPU access set
    up as the TPU guide says (so TPU jobs are accepted)."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = "%s-%d" % (name, next(_counter))
    server.set_up_tpu_access(name)
    return name
