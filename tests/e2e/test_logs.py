"""`mlengine jobs stream-logs` of a finished job: every line of every replica,
each with its timestamp and task name, in order; --task-name filters."""

from conftest import parse_log_lines

TASKS = ("master-replica-0", "worker-replica-0", "worker-replica-1")


def expected_lines(task, n):
    return [f"{task} line {i}" for i in range(n)] + [f"{task} stderr line"]


def test_stream_logs_after_the_end_and_task_filter(cli, names):
    job = names.job("logs")
    # Master + 2 workers; each prints 5 lines and one to stderr. The master
    # waits until both workers have written theirs (a barrier in the bucket),
    # so no worker is stopped before it logged everything.
    r = cli.submit(job, "--scale-tier=custom", "--master-machine-type=n1-standard-4",
                   "--worker-machine-type=n1-standard-4", "--worker-count=2",
                   args=["--lines", "5", "--barrier", f"gs://{cli.bucket}/{job}/barrier"])
    assert r.rc == 0, r
    cli.wait_state(job, {"SUCCEEDED"}, timeout=120)

    full = cli.ok("jobs", "stream-logs", job, timeout=120)
    parsed, other = parse_log_lines(full.out)
    assert not other, "stream-logs printed lines without 'TIMESTAMP TASK MESSAGE':\n" + "\n".join(other)
    by_task = {}
    for ts, task, message in parsed:
        by_task.setdefault(task, []).append((ts, message))
    assert set(by_task) == set(TASKS), sorted(by_task)
    for task in TASKS:
        messages = [m for _, m in by_task[task]]
        stdout_lines = [m for m in messages if " line " in m and not m.endswith("stderr line")]
        assert stdout_lines == [f"{task} line {i}" for i in range(5)], f"{task}:\n" + "\n".join(messages)
        assert f"{task} stderr line" in messages, f"{task}'s stderr line is missing:\n" + "\n".join(messages)
        assert any(m.startswith(f"started task={task} ") and "world_size=3" in m for m in messages), messages
        stamps = [ts for ts, _ in by_task[task]]
        assert stamps == sorted(stamps), f"{task}'s lines are not in time order:\n{stamps}"

    only = cli.ok("jobs", "stream-logs", job, "--task-name", "worker-replica-1", timeout=120)
    parsed1, other1 = parse_log_lines(only.out)
    assert not other1, other1
    assert parsed1 and {task for _, task, _ in parsed1} == {"worker-replica-1"}, only
    assert [(ts, m) for ts, _, m in parsed1] == by_task["worker-replica-1"], \
        "--task-name worker-replica-1 does not print exactly that replica's lines"

    master = cli.ok("jobs", "stream-logs", job, "--task-name", "master-replica-0", timeout=120)
    parsed0, _ = parse_log_lines(master.out)
    assert [(ts, m) for ts, _, m in parsed0] == by_task["master-replica-0"]
    assert any(m == "done" for _, _, m in parsed0), master


def test_a_follower_gets_a_line_as_it_is_written_not_at_the_next_tick(cli, names):
    """A long poll wakes when the replica writes (the run's directories are
    watched), where it once waited for a 100 ms tick: the median of a dozen
    lines' delays, from the replica's timestamp to the follower, is far below
    the tick's 50 ms."""
    import json
    import time
    import urllib.parse
    from datetime import datetime

    job = names.job("follow")
    gate = f"gs://{cli.bucket}/{job}/gate"
    # The trainer prints a line every 0.5 s while it waits for the gate.
    assert cli.submit(job, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    cli.wait_state(job, {"RUNNING"})
    delays, token = [], "end"
    deadline = time.time() + 60
    while len(delays) < 12 and time.time() < deadline:
        q = urllib.parse.urlencode({"pageToken": token, "waitSeconds": 10})
        status, text = cli.server.request("GET", f"/v1/projects/{cli.project}/jobs/{job}/logs?{q}")
        now = time.time()
        assert status == 200, text
        page = json.loads(text)
        for e in page.get("entries", []):
            written = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            delays.append(now - written)
        token = page.get("nextPageToken", token)
    cli.open_gate(gate)
    assert len(delays) >= 12, delays
    delays.sort()
    assert delays[len(delays) // 2] < 0.025, f"median {delays[len(delays) // 2] * 1000:.1f} ms: {delays}"
    assert cli.wait_state(job, {"SUCCEEDED"})["state"] == "SUCCEEDED"


def running_job_and_its_log_stream(cli, names, tag, token):
    """A job that prints a line every 0.5 s until its gate opens, RUNNING,
    and a streamed follow of its log (alt=sse) with `token`: (job, gate,
    connection, response), the response's headers read and 200."""
    import http.client
    import urllib.parse

    job = names.job(tag)
    gate = f"gs://{cli.bucket}/{job}/gate"
    assert cli.submit(job, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    cli.wait_state(job, {"RUNNING"})
    u = urllib.parse.urlparse(cli.server.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("GET", f"/v1/projects/{cli.project}/jobs/{job}/logs?alt=sse",
                 headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    return job, gate, conn, resp


def test_a_streamed_follow_gets_each_line_as_it_is_written_and_ends_with_the_job(cli, names):
    """alt=sse: one response, a page per event as the replica writes (the
    median delay from the replica's timestamp far below a tick), the lines
    of every page in order with none twice, and the end of the body once the
    job has ended, its last event saying so."""
    import json
    import time
    from datetime import datetime

    job, gate, conn, resp = running_job_and_its_log_stream(cli, names, "stream", cli.server.token)
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    assert resp.getheader("Transfer-Encoding") == "chunked"
    events, delays, opened, token = [], [], False, ""
    buf = b""
    deadline = time.time() + 120
    while time.time() < deadline:
        piece = resp.read1(65536)
        if not piece:
            break  # the body has ended
        now = time.time()
        buf += piece
        while b"\n\n" in buf:
            raw, buf = buf.split(b"\n\n", 1)
            assert raw.startswith(b"data: "), raw
            page = json.loads(raw[6:])
            events.append(page)
            token = page["nextPageToken"] or token
            for e in page["entries"] if len(events) > 1 else []:  # the first: what was written before
                if "waiting for" in e["message"]:
                    written = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
                    delays.append(now - written)
        if len(delays) >= 12 and not opened:
            cli.open_gate(gate)
            opened = True
    conn.close()
    assert opened and len(delays) >= 12, (len(delays), events[-3:])
    assert events[-1].get("jobEnded") is True, events[-1]
    assert not any(e.get("jobEnded") for e in events[:-1])
    # Every line once, in order: the stream's lines are the log's.
    streamed = [(e["timestamp"], e["taskName"], e["message"]) for p in events for e in p["entries"]]
    logged = [(e["timestamp"], e["taskName"], e["message"]) for e in cli.server.logs(cli.project, job)]
    assert streamed == logged
    delays.sort()
    assert delays[len(delays) // 2] < 0.025, f"median {delays[len(delays) // 2] * 1000:.1f} ms: {delays}"
    assert cli.wait_state(job, {"SUCCEEDED"})["state"] == "SUCCEEDED"


def test_a_streamed_follow_ends_soon_after_its_callers_role_is_taken_away(cli, names):
    """A stream is not a standing grant: the follower's access is checked
    again as pages go out (every 5 s at most), so once its role is removed
    the stream ends with PERMISSION_DENIED within seconds, not at the
    server's 10-minute limit."""
    import json
    import time

    email = f"follower{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    job, gate, conn, resp = running_job_and_its_log_stream(cli, names, "revoked", token)
    buf, events, revoked_at, error_at = b"", [], None, None
    deadline = time.time() + 60
    try:
        while time.time() < deadline and error_at is None:
            piece = resp.read1(65536)
            if not piece:
                break
            buf += piece
            while b"\n\n" in buf and error_at is None:
                raw, buf = buf.split(b"\n\n", 1)
                events.append(raw)
                if raw.startswith(b"event: error"):
                    error_at = time.time()
            if revoked_at is None and len(events) >= 3:
                cli.ok("projects", "remove-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
                revoked_at = time.time()
        rest = resp.read()  # the body ends after the error
    finally:
        conn.close()
        cli.open_gate(gate)
    assert revoked_at is not None and error_at is not None, events[-3:]
    assert error_at - revoked_at < 10, f"the stream went on {error_at - revoked_at:.1f} s after the role was removed"
    error = json.loads(events[-1].split(b"data: ", 1)[1])
    assert error["error"]["status"] == "PERMISSION_DENIED", error
    assert rest == b"", rest
    assert cli.wait_state(job, {"SUCCEEDED"})["state"] == "SUCCEEDED"


def test_a_streamed_follow_of_what_cannot_be_followed_is_an_error_not_a_stream(cli, names):
    status, text = cli.server.request("GET", f"/v1/projects/{cli.project}/jobs/no_such_job/logs?alt=sse")
    assert status == 404 and '"NOT_FOUND"' in text, text
    status, text = cli.server.request("GET", f"/v1/projects/{cli.project}/jobs/no_such_job/logs?alt=xml")
    assert status == 400 and "alt" in text and "sse" in text, text


def test_the_server_raises_its_open_file_limit_for_a_thousand_followers(tmp_path):
    """Each follower holds a connection: started under a soft limit of 1,024
    (a service's default), mlengined raises it to the hard limit, at most
    65,536, as it starts."""
    import resource
    import subprocess
    from conftest import MLENGINED

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if want <= 1024:
        import pytest
        pytest.skip(f"the hard limit here is {hard}: nothing to raise")
    p = subprocess.Popen([MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    try:
        assert "listening on" in p.stdout.readline().decode()
        line = next(l for l in open(f"/proc/{p.pid}/limits") if l.startswith("Max open files"))
        assert int(line.split()[3]) == want, line
    finally:
        p.terminate()
        p.wait(20)
