"""Retention (docs/operations.md, "Retention"): ended jobs' run files
(their replicas' work/ and tmp/) go once past their age, their logs once
over the size budget, oldest first; a running job's are never touched,
whatever they weigh; what was removed is logged and counted in /metrics."""

import os
import time

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


def wait_counted(server, name, kind, at_least):
    """Waits until the metric has reached at_least. What retention removed
    is gone from disk a moment before its round is logged and counted."""
    return wait_for(lambda: metric(server, name, kind) >= at_least, f"{name}{{kind={kind}}} >= {at_least}",
                    timeout=30, on_fail=lambda: metric(server, name, kind))


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

    # Each round counts what it removed (removed, then freed) after it is gone.
    wait_counted(server, "mlengine_retention_freed_bytes_total", "logs", 1)
    wait_counted(server, "mlengine_retention_freed_bytes_total", "run_files", 2 * 300000)
    assert metric(server, "mlengine_retention_removed_total", "logs") >= 1
    log = open(server.stderr_path).read()
    assert "retention" in log and "removed the run files" in log and "removed the run directories" in log, log[-3000:]

    # Once it ends it is like any other: its run files go.
    from test_backup import put_object
    put_object(server, cli.bucket, f"{running}/gate", b"open\n")
    cli.wait_state(running, {"SUCCEEDED"}, timeout=120)
    wait_for(lambda: not os.path.exists(os.path.join(run_dir[running], "master-replica-0", "work")),
             "the running job's work/ removed once it ended", timeout=30)


# Package environments no running job uses: none kept (a budget of 0).
PACKAGES_CONFIG = config_yaml() + """retention:
  packages: {max_size_mb: 0}
  check_seconds: 1
"""


def environment_of(cli, job_id):
    """The package environment a job's run directory names."""
    with open(os.path.join(cli.run_dir(job_id), "environment")) as f:
        return f.read().strip()


def test_package_environments_go_once_no_running_job_uses_them_and_are_built_again(server_factory, tmp_path, names):
    import shutil
    server = server_factory(PACKAGES_CONFIG)
    cli = make_cli(server, tmp_path, names)
    # The same trainer with one more file: other contents, another environment.
    from conftest import TASKS_PKG
    other = tmp_path / "other" / "trainer"
    shutil.copytree(TASKS_PKG, other)
    (other / "other.py").write_text("# another package\n")

    running = names.job("running")
    gate = f"gs://{cli.bucket}/{running}/gate"
    assert cli.submit(running, args=["--wait-for", gate]).rc == 0
    cli.wait_log(running, "waiting for", timeout=120)
    in_use = environment_of(cli, running)
    assert in_use.startswith(os.path.join(server.data_dir, "envs") + "/"), in_use
    # As an earlier release left it: a running job with packages whose run
    # directory names no environment. Which it uses is unknown: none goes.
    named = os.path.join(cli.run_dir(running), "environment")
    os.rename(named, named + ".aside")

    ended = names.job("ended")
    assert cli.submit(ended, package=str(other)).rc == 0
    cli.wait_state(ended, {"SUCCEEDED"}, timeout=180)
    unused = environment_of(cli, ended)
    assert unused != in_use
    time.sleep(3)  # three rounds (check_seconds: 1) that must remove nothing
    assert os.path.exists(os.path.join(unused, ".ready")), "removed while a job's environment was unknown"
    os.rename(named + ".aside", named)
    # Over the budget once its job ended: removed. The running job's stays.
    wait_for(lambda: not os.path.exists(unused), "the ended job's environment removed", timeout=30)
    assert os.path.exists(os.path.join(in_use, ".ready"))
    wait_counted(server, "mlengine_retention_freed_bytes_total", "packages", 1)
    assert metric(server, "mlengine_retention_removed_total", "packages") >= 1
    log = open(server.stderr_path).read()
    assert "package environments no running job uses" in log, log[-3000:]
    # Nothing of it left beside the others (no staging directory either).
    runtime_dir = os.path.dirname(in_use)
    assert sorted(os.listdir(runtime_dir)) == [os.path.basename(in_use)]

    # The same packages again: built again, and the job runs.
    again = names.job("again")
    assert cli.submit(again, package=str(other)).rc == 0
    cli.wait_state(again, {"SUCCEEDED"}, timeout=180)
    assert environment_of(cli, again) == unused

    # Once the running job ends, its environment goes too.
    from test_backup import put_object
    put_object(server, cli.bucket, f"{running}/gate", b"open\n")
    cli.wait_state(running, {"SUCCEEDED"}, timeout=120)
    wait_for(lambda: not os.path.exists(in_use), "the environment removed once its job ended", timeout=30)
    wait_for(lambda: os.listdir(runtime_dir) == [], "every environment removed", timeout=30)
