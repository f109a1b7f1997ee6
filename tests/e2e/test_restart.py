"""mlengined crashes (kill -9) while a job runs and is started again on the
same data directory: the replica keeps running, the new server adopts it, and
the job ends once, SUCCEEDED, with every log line from before and after."""

import json

from conftest import make_cli, parse_log_lines


def test_restart_while_running(server_factory, tmp_path, names):
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    job = names.job("restart")
    bucket = f"gs://{cli.bucket}"
    pids_uri = f"{bucket}/{job}/pids"
    gate_uri = f"{bucket}/{job}/gate"
    marker_uri = f"{bucket}/{job}/marker"
    # The trainer records its pid, waits for the gate (opened only after the
    # restart), sleeps a little more, writes the marker and exits 0.
    r = cli.submit(job, args=["--append-pid", pids_uri, "--wait-for", gate_uri, "--sleep", "1",
                              "--write", marker_uri])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    cli.wait_log(job, "waiting for", timeout=60)

    server.kill()  # kill -9
    server.start()  # same data dir, a new port
    # Port 0 again: the CLI finds the new port through server.json.
    with open(server.server_json) as f:
        assert json.load(f)["endpoint"] == server.endpoint

    desc = cli.describe(job)  # the CLI re-reads server.json
    assert desc["state"] == "RUNNING", f"after the restart the job is {desc['state']}\n{cli.explain(job)}"
    cli.wait_log(job, "waiting for", timeout=30)

    cli.open_gate(gate_uri)
    desc = cli.wait_state(job, {"SUCCEEDED"}, timeout=60)
    assert not desc.get("errorMessage"), desc

    marker = cli.ok("storage", "cat", marker_uri)
    assert marker.out == "done\n", marker
    pids = cli.ok("storage", "cat", pids_uri).out.splitlines()
    assert len(pids) == 1, f"SERVER BUG: the trainer ran {len(pids)} times across the restart (pids {pids})"

    logs = cli.ok("jobs", "stream-logs", job, timeout=60)
    parsed, other = parse_log_lines(logs.out)
    assert not other, other
    messages = [m for _, task, m in parsed if task == "master-replica-0"]
    for want in ("started task=master-replica-0", f"appended pid {pids[0]}", "waiting for", f"gate opened: {gate_uri}",
                 f"wrote {marker_uri}", "done"):
        assert any(m.startswith(want) for m in messages), f"stream-logs lacks {want!r}:\n" + "\n".join(messages)
    assert sum(m.startswith("started task=") for m in messages) == 1, messages


def test_restart_after_kill_listens_at_once_on_the_same_port(server_factory, tmp_path, names):
    """The listening socket never reaches a replica: after kill -9 the new
    mlengined binds the same port while the old server's job still runs,
    and the job is adopted, not started again."""
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    job = names.job("sameport")
    pids_uri = f"gs://{cli.bucket}/{job}/pids"
    r = cli.submit(job, args=["--print-fds", "--child", "--append-pid", pids_uri, "--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    entries = cli.wait_log(job, "fds: ", timeout=60)
    fds = next(e["message"] for e in entries if e["message"].startswith("fds: "))
    assert "socket:" not in fds, f"SERVER BUG: the trainer inherited sockets of mlengined: {fds}"
    inherited = [f for f in fds[len("fds: "):].split() if int(f.split("=")[0]) > 2]
    assert not inherited, f"SERVER BUG: the trainer inherited descriptors beyond stdin/stdout/stderr: {fds}"
    cli.wait_log(job, "child pid=", timeout=60)
    port = server.port

    server.kill()
    server.start(port=port)  # fails the test if it cannot listen
    assert server.port == port
    desc = cli.describe(job)
    assert desc["state"] == "RUNNING", f"after the restart the job is {desc['state']}\n{cli.explain(job)}"
    pids = cli.ok("storage", "cat", pids_uri).out.splitlines()
    assert len(pids) == 1, f"SERVER BUG: the trainer ran {len(pids)} times (pids {pids})"
    assert cli("jobs", "cancel", job).rc == 0
    cli.wait_state(job, {"CANCELLED"}, timeout=60)


def test_a_server_that_cannot_listen_touches_nothing(server_factory, tmp_path, names):
    """Bind first: a restart whose port is taken exits at once with a clear
    error (no crash), without recovering or starting anything; the next
    start adopts the job that kept running."""
    import socket
    import subprocess

    from conftest import MLENGINED
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    job = names.job("portbusy")
    pids_uri = f"gs://{cli.bucket}/{job}/pids"
    assert cli.submit(job, args=["--append-pid", pids_uri, "--sleep", "600"]).rc == 0
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    cli.wait_log(job, "appended pid", timeout=60)
    port = server.port
    server.kill()

    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        r = subprocess.run([MLENGINED, "--listen", f"127.0.0.1:{port}", "--data-dir", server.data_dir,
                            "--config", server.config_path], capture_output=True, text=True, timeout=60)
    finally:
        squatter.close()
    assert r.returncode == 1, f"rc={r.returncode} (a negative rc is a crash)\n{r.stderr}"
    assert "cannot listen" in r.stderr and "Address already in use" in r.stderr, r.stderr
    assert "recover" not in r.stderr.lower(), r.stderr

    server.start(port=port)
    assert cli.describe(job)["state"] == "RUNNING", cli.explain(job)
    pids = cli.ok("storage", "cat", pids_uri).out.splitlines()
    assert len(pids) == 1, f"SERVER BUG: the trainer ran {len(pids)} times (pids {pids})"
    assert cli("jobs", "cancel", job).rc == 0
    cli.wait_state(job, {"CANCELLED"}, timeout=60)
