"""Retention (docs/operations.md, "Retention"): ended jobs' run files
(their replicas' work/ and tmp/) go once past their age, their logs once
over the size budget, oldest first; a running job's are never touched,
whatever they weigh; what was removed is logged and counted in /metrics."""

import os

from conftest import config_yaml, make_cli, wait_for

# Run files as soon as a job ends; logs beyond 1 MiB, the oldest first.
CONFIG = config_yaml() + """retention:
  run_files: {max_age_days: 0}
  logs: {max_size_mb: 1}
  check_seconds: 1
"""


def tree_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            total += st.st_blocks * 512
    return total


def metric(server, name, kind):
    code, text = server.request("GET", "/metrics")
    assert code == 200
    for line in text.splitlines():
        if line.startswith(name + "{") and f'kind="{kind}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_run_files_go_at_their_age_and_logs_over_their_budget_never_a_running_jobs(server_factory, tmp_path, names):
    server = server_factory(CONFIG)
    cli = make_cli(server, tmp_path, names)
    # A running job with a big log and scratch: over every budget, and kept.
    running = names.job("running")
    gate = f"gs://{cli.bucket}/{running}/gate"
    assert cli.submit(running, args=["--scratch", "300000", "--lines", "20000", "--wait-for", gate]).rc == 0
    cli.wait_log(running, "waiting for", timeout=120)
    # Two ended jobs, each about 0.6 MiB of log and 300 kB of scratch.
    first, second = names.job("first"), names.job("second")
    for job in (first, second):
        assert cli.submit(job, args=["--scratch", "300000", "--lines", "12000"]).rc == 0
        cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
    run_dir = {j: cli.run_dir(j) for j in (running, first, second)}

    # Run files: gone as soon as each ended; its log stays (for now).
    wait_for(lambda: not os.path.exists(os.path.join(run_dir[second], "master-replica-0", "work")),
             "the second job's work/ removed", timeout=30)
    assert not os.path.exists(os.path.join(run_dir[first], "master-replica-0", "work"))
    # Logs over 1 MiB: the older job's whole run directory goes, the newer's stays.
    wait_for(lambda: not os.path.exists(run_dir[first]), "the first job's run directory removed", timeout=30,
             on_fail=lambda: {j: tree_bytes(d) for j, d in run_dir.items()})
    assert os.path.exists(os.path.join(run_dir[second], "master-replica-0", "log"))
    assert any("line 11999" in e["message"] for e in server.logs(cli.project, second))
    assert cli.describe(first)["state"] == "SUCCEEDED"  # the job itself stays
    assert server.logs(cli.project, first) == []
    # The running job's directory is as it was, over both budgets.
    assert os.path.exists(os.path.join(run_dir[running], "master-replica-0", "work", "scratch.bin"))
    assert tree_bytes(run_dir[running]) > 1 << 20
    assert cli.describe(running)["state"] == "RUNNING"

    log = open(server.stderr_path).read()
    assert "retention" in log and "removed the run files" in log and "removed the run directories" in log, log[-3000:]
    assert metric(server, "mlengine_retention_removed_total", "logs") >= 1
    assert metric(server, "mlengine_retention_freed_bytes_total", "run_files") >= 2 * 300000

    # Once it ends it is like any other: its run files go.
    from test_backup import put_object
    put_object(server, cli.bucket, f"{running}/gate", b"open\n")
    cli.wait_state(running, {"SUCCEEDED"}, timeout=120)
    wait_for(lambda: not os.path.exists(os.path.join(run_dir[running], "master-replica-0", "work")),
             "the running job's work/ removed once it ended", timeout=30)
