"""The CLI's HTTP conversations, checked against a small fake of mlengined
written here (so the logs protocols (the stream and the long poll), paging
and uploads are pinned down exactly, whatever the real server's progress)."""

import hashlib
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import clean_env, run_mlengine


class Fake:
    def __init__(self):
        self.requests = []  # (method, path, query dict, headers, body bytes)
        self.logs = []      # entries
        self.page = 2
        self.streams = True  # False: refuse alt=sse, as an mlengined before streamed logs did
        self.stream_error = None  # an error event sent after the first page
        self.job_state = "SUCCEEDED"
        self.error_message = ""
        self.jobs = {}
        self.objects = {}
        self.buckets = {}   # name -> project
        self.list_pages = []


def make_handler(fake):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def handle_any(self, method):
            u = urllib.parse.urlparse(self.path)
            q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            fake.requests.append((method, u.path, q, dict(self.headers), body))
            path = u.path
            m = re.fullmatch(r"/v1/projects/([^/]+)/jobs/([^/]+)/logs", path)
            if m and method == "GET":
                token = q.get("pageToken", "")
                start = len(fake.logs) if token == "end" else int(token or 0)
                entries = [e for e in fake.logs if not q.get("taskName") or e["taskName"] == q["taskName"]]

                def page(start):
                    chunk = entries[start:start + fake.page]
                    nxt = start + len(chunk)
                    out = {"entries": chunk, "nextPageToken": str(nxt)}
                    if nxt >= len(entries):
                        out["jobEnded"] = True
                    return out

                if q.get("alt") == "sse":
                    if not fake.streams:
                        return self.reply(400, {"error": {
                            "code": 400, "status": "INVALID_ARGUMENT", "message": "Invalid query parameters.",
                            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [
                                {"field": "alt", "description": "only alt=json is supported"}]}]}})
                    # Every page, one event each (with a heartbeat comment
                    # between), and the end of the body once the job has ended.
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=UTF-8")
                    self.end_headers()
                    while True:
                        out = page(start)
                        self.wfile.write(b": heartbeat\r\n\r\n" + b"data: " + json.dumps(out).encode() + b"\n\n")
                        start = int(out["nextPageToken"])
                        if fake.stream_error:
                            self.wfile.write(b"event: error\ndata: " + json.dumps(fake.stream_error).encode() + b"\n\n")
                            return
                        if out.get("jobEnded"):
                            return
                return self.reply(200, page(start))
            m = re.fullmatch(r"/v1/projects/([^/]+)/jobs", path)
            if m and method == "POST":
                job = json.loads(body)
                if q.get("validateOnly") == "true":  # checked, not created
                    return self.reply(200, job)
                job["state"] = "QUEUED"
                fake.jobs[job["jobId"]] = job
                return self.reply(200, job)
            if m and method == "GET":
                if fake.list_pages:
                    i = int(q.get("pageToken") or 0)
                    out = {"jobs": fake.list_pages[i]}
                    if i + 1 < len(fake.list_pages):
                        out["nextPageToken"] = str(i + 1)
                    return self.reply(200, out)
                return self.reply(200, {})
            m = re.fullmatch(r"/v1/projects/([^/]+)/jobs/([^/]+)", path)
            if m and method == "GET":
                job = dict(fake.jobs.get(urllib.parse.unquote(m.group(2)), {"jobId": m.group(2)}))
                job["state"] = fake.job_state
                if fake.error_message:
                    job["errorMessage"] = fake.error_message
                return self.reply(200, job)
            m = re.fullmatch(r"/storage/v1/b/([^/]+)", path)
            if m and method == "GET" and m.group(1) in fake.buckets:
                return self.reply(200, {"kind": "storage#bucket", "name": m.group(1)})
            if path == "/storage/v1/b" and method == "POST":
                name = json.loads(body)["name"]
                if name in fake.buckets:
                    return self.reply(409, {"error": {"code": 409, "status": "ALREADY_EXISTS",
                                                      "message": f"The bucket {name} already exists."}})
                fake.buckets[name] = q.get("project")
                return self.reply(200, {"kind": "storage#bucket", "name": name})
            m = re.fullmatch(r"/upload/storage/v1/b/([^/]+)/o", path)
            if m and method == "POST":
                fake.objects[(m.group(1), q["name"])] = body
                return self.reply(200, {"kind": "storage#object", "bucket": m.group(1), "name": q["name"],
                                        "size": str(len(body))})
            return self.reply(404, {"error": {"code": 404, "status": "NOT_FOUND",
                                              "message": f"The requested URL {method} {path} was not found on this server."}})

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

    return Handler


@pytest.fixture
def fake(tmp_path):
    f = Fake()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(f))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    env = clean_env(tmp_path)
    env["MLENGINE_API_ENDPOINT"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    env["MLENGINE_TOKEN"] = "secret-token"
    env["MLENGINE_PROJECT"] = "proj"
    f.env = env
    yield f
    httpd.shutdown()
    httpd.server_close()


def entry(i, task="master-replica-0", stream="stdout"):
    return {"timestamp": f"2024-01-01T00:00:0{i}Z", "taskName": task, "stream": stream,
            "severity": "INFO" if stream == "stdout" else "ERROR", "message": f"line {i}"}


def logs_requests(fake):
    return [r for r in fake.requests if r[1].endswith("/logs")]


def test_stream_logs_pages_until_job_ended(fake):
    fake.logs = [entry(0), entry(1, stream="stderr"), entry(2, "worker-replica-0"), entry(3), entry(4)]
    r = run_mlengine(["jobs", "stream-logs", "my_job", "--polling-interval", "7"], fake.env, timeout=30)
    assert r.rc == 0, r
    assert r.out.splitlines() == [
        "2024-01-01T00:00:00Z master-replica-0 line 0",
        "2024-01-01T00:00:01Z master-replica-0 line 1",
        "2024-01-01T00:00:02Z worker-replica-0 line 2",
        "2024-01-01T00:00:03Z master-replica-0 line 3",
        "2024-01-01T00:00:04Z master-replica-0 line 4",
    ]
    # One streamed response, every page an event.
    reqs = logs_requests(fake)
    assert [(q.get("alt"), q.get("pageToken", "")) for _, _, q, _, _ in reqs] == [("sse", "")]
    assert all(p == "/v1/projects/proj/jobs/my_job/logs" for _, p, _, _, _ in reqs)
    assert all(h.get("Authorization") == "Bearer secret-token" for _, _, _, h, _ in reqs)


def test_stream_logs_ends_with_the_error_a_stream_ends_with(fake):
    fake.logs = [entry(0), entry(1), entry(2)]
    fake.stream_error = {"error": {"code": 403, "status": "PERMISSION_DENIED",
                                   "message": "Permission 'ml.jobs.get' denied on the job."}}
    r = run_mlengine(["jobs", "stream-logs", "my_job"], fake.env, timeout=30)
    assert r.rc == 1, r
    assert r.out.splitlines() == ["2024-01-01T00:00:00Z master-replica-0 line 0",
                                  "2024-01-01T00:00:01Z master-replica-0 line 1"], r
    assert "PERMISSION_DENIED" in r.err and "ml.jobs.get" in r.err, r


def test_stream_logs_long_polls_a_server_that_does_not_stream(fake):
    """An mlengined from before streamed logs refuses alt=sse: the CLI falls
    back to the long poll, from the start, with --polling-interval."""
    fake.streams = False
    fake.logs = [entry(0), entry(1, stream="stderr"), entry(2, "worker-replica-0"), entry(3), entry(4)]
    r = run_mlengine(["jobs", "stream-logs", "my_job", "--polling-interval", "7"], fake.env, timeout=30)
    assert r.rc == 0, r
    assert len(r.out.splitlines()) == 5, r
    reqs = logs_requests(fake)
    assert reqs[0][2].get("alt") == "sse"
    polls = reqs[1:]
    assert [q.get("pageToken", "") for _, _, q, _, _ in polls] == ["", "2", "4"]
    assert all(q["waitSeconds"] == "7" and "alt" not in q for _, _, q, _, _ in polls)
    assert all(p == "/v1/projects/proj/jobs/my_job/logs" for _, p, _, _, _ in reqs)
    assert all(h.get("Authorization") == "Bearer secret-token" for _, _, _, h, _ in reqs)


def test_stream_logs_task_name_and_since_now(fake):
    fake.logs = [entry(0), entry(1, "worker-replica-0"), entry(2)]
    r = run_mlengine(["jobs", "stream-logs", "j", "--task-name", "worker-replica-0"], fake.env, timeout=30)
    assert r.rc == 0, r
    assert r.out.splitlines() == ["2024-01-01T00:00:01Z worker-replica-0 line 1"]
    assert logs_requests(fake)[0][2]["taskName"] == "worker-replica-0"
    fake.requests.clear()
    r = run_mlengine(["jobs", "stream-logs", "j", "--since-now"], fake.env, timeout=30)
    assert r.rc == 0 and r.out == "", r
    assert logs_requests(fake)[0][2]["pageToken"] == "end"
    fake.requests.clear()
    fake.streams = False
    r = run_mlengine(["jobs", "stream-logs", "j", "--since-now"], fake.env, timeout=30)
    assert r.rc == 0 and r.out == "", r
    assert [q["pageToken"] for _, _, q, _, _ in logs_requests(fake)] == ["end", "end"]


@pytest.mark.parametrize("state,rc", [("SUCCEEDED", 0), ("FAILED", 1), ("CANCELLED", 1)])
def test_submit_stream_logs_exit_code_follows_the_final_state(fake, state, rc):
    fake.logs = [entry(0)]
    fake.job_state = state
    fake.error_message = "" if state == "SUCCEEDED" else "The replica master 0 exited with a non-zero status of 3."
    r = run_mlengine(["jobs", "submit", "training", "job_1", "--packages", "gs://b/t-1.0.tar.gz",
                      "--module-name", "t.task", "--region", "us-central1", "--stream-logs"], fake.env, timeout=30)
    assert r.rc == rc, r
    assert "2024-01-01T00:00:00Z master-replica-0 line 0" in r.out
    assert f"state: {state}" in r.out
    if rc:
        assert "non-zero status of 3" in r.err and state in r.err


def test_submit_uploads_the_sdist_to_the_hashed_location(fake, tmp_path):
    pkg = tmp_path / "src" / "my_trainer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text("print('hi')\n")
    dep = tmp_path / "dep-1.0.tar.gz"
    dep.write_bytes(b"dependency bytes")
    r = run_mlengine(["jobs", "submit", "training", "job_2", "--package-path", str(pkg), "--packages", str(dep),
                      "--module-name", "my_trainer.task", "--staging-bucket", "gs://stage", "--region",
                      "us-central1"], fake.env, timeout=60)
    assert r.rc == 0, r
    uploads = [(p, q, b) for m, p, q, _, b in fake.requests if p.startswith("/upload/")]
    assert [u[1]["uploadType"] for u in uploads] == ["media", "media"]
    sdist, extra = uploads
    m = re.fullmatch(r"job_2/([0-9a-f]{64})/my_trainer-0\.0\.0\.tar\.gz", sdist[1]["name"])
    assert m and sdist[0] == "/upload/storage/v1/b/stage/o", sdist[1]
    assert extra[1]["name"] == f"job_2/{m.group(1)}/dep-1.0.tar.gz"
    assert extra[2] == b"dependency bytes"
    assert hashlib.sha256(sdist[2] + extra[2]).hexdigest() == m.group(1)
    created = fake.jobs["job_2"]["trainingInput"]
    assert created["packageUris"] == [f"gs://stage/{sdist[1]['name']}", f"gs://stage/{extra[1]['name']}"]
    # The staging bucket did not exist: it was made in the job's project
    # first (as gcloud does), so the project's jobs may read it.
    assert fake.buckets == {"stage": "proj"}
    assert "Creating the staging bucket gs://stage/ in project proj" in r.err, r


def test_list_follows_next_page_token(fake):
    fake.list_pages = [[{"jobId": "a", "state": "QUEUED", "createTime": "t1"}],
                       [{"jobId": "b", "state": "RUNNING", "createTime": "t2"}],
                       [{"jobId": "c", "state": "FAILED", "createTime": "t3"}]]
    r = run_mlengine(["jobs", "list"], fake.env, timeout=30)
    assert r.rc == 0, r
    assert [l.split() for l in r.out.splitlines()] == [["JOB_ID", "STATUS", "CREATED"], ["a", "QUEUED", "t1"],
                                                       ["b", "RUNNING", "t2"], ["c", "FAILED", "t3"]]
    r = run_mlengine(["jobs", "list", "--limit", "2", "--format", "json"], fake.env, timeout=30)
    assert [j["jobId"] for j in json.loads(r.out)] == ["a", "b"]


def test_progress_bar_for_big_uploads_on_a_terminal(fake, tmp_path):
    import os
    import shlex
    import shutil
    import subprocess
    from conftest import MLENGINE
    if shutil.which("script") is None:
        pytest.skip("needs script(1) for a pseudo-terminal")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(5 * 1024 * 1024))
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    for path, want_bar in ((big, True), (small, False)):
        cmd = " ".join(shlex.quote(a) for a in [MLENGINE, "storage", "cp", str(path), "gs://bkt/"])
        proc = subprocess.run(["script", "-qec", cmd, "/dev/null"], env=fake.env, capture_output=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc
        tty = proc.stdout.decode(errors="replace")
        assert ("Uploading " + path.name + " [") in tty and "100%" in tty if want_bar else "[" not in tty, tty
    assert fake.objects[("bkt", "big.bin")] == big.read_bytes()
    # Without a terminal there is no bar.
    r = run_mlengine(["storage", "cp", str(big), "gs://bkt/again.bin"], fake.env, timeout=60)
    assert r.rc == 0 and "Uploading" not in r.err and "%" not in r.err, r
