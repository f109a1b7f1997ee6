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
