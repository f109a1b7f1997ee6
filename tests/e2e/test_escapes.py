"""No process escapes a job. A trainer starts a helper that leaves the
replica's process group and ignores SIGTERM (a child in a session of its
own, or a classic double-forked daemon). However the job ends (cancel,
maxRunningTime, a failing replica, the master's success, or a cancel after
mlengined was killed and started again) the helper is gone once the job
has reached its final state."""

import pytest

from conftest import make_cli
from test_cancel import assert_no_job_processes, logged_pid

MODES = ["setsid", "double-fork"]


def daemon_pid(cli, job_id, may_have_ended=False):
    return logged_pid(cli, job_id, "daemon pid=", may_have_ended)


def ended(cli, job, state, contains=""):
    desc = cli.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=90)
    assert desc["state"] == state, f"{desc['state']} != {state}\n{cli.explain(job)}"
    assert contains in desc.get("errorMessage", ""), desc
    assert_no_job_processes(cli, job, why=" (a daemon escaped the replica)")


@pytest.mark.parametrize("mode", MODES)
def test_cancel(cli, names, mode):
    job = names.job("esc_cancel")
    assert cli.submit(job, args=["--daemon", mode, "--sleep", "600"]).rc == 0
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    daemon_pid(cli, job)
    assert cli("jobs", "cancel", job).rc == 0
    ended(cli, job, "CANCELLED")


@pytest.mark.parametrize("mode", MODES)
def test_max_running_time(cli, names, tmp_path, mode):
    config = tmp_path / "sched.yaml"
    config.write_text("trainingInput:\n  scheduling:\n    maxRunningTime: 3s\n")
    job = names.job("esc_timeout")
    assert cli.submit(job, f"--config={config}", args=["--daemon", mode, "--sleep", "600"]).rc == 0
    daemon_pid(cli, job, may_have_ended=True)
    ended(cli, job, "CANCELLED", "maxRunningTime")


@pytest.mark.parametrize("mode", MODES)
def test_failure(cli, names, mode):
    # The trainer fails once the test has seen its daemon (the gate).
    job = names.job("esc_fail")
    gate = f"gs://{cli.bucket}/{job}/gate"
    assert cli.submit(job, args=["--daemon", mode, "--wait-for", gate, "--fail", "3"]).rc == 0
    daemon_pid(cli, job)
    cli.open_gate(gate)
    ended(cli, job, "FAILED", "non-zero status of 3")


@pytest.mark.parametrize("mode", MODES)
def test_master_success_ends_the_workers_daemons(cli, names, mode):
    # Every replica (master and 2 workers) starts a daemon; the master
    # succeeds once the workers are up, which ends the job.
    job = names.job("esc_master")
    barrier = f"gs://{cli.bucket}/{job}/barrier"
    r = cli.submit(job, "--scale-tier=CUSTOM", "--master-machine-type=n1-standard-4",
                   "--worker-machine-type=n1-standard-4", "--worker-count=2",
                   args=["--daemon", mode, "--barrier", barrier, "--sleep", "1"])
    assert r.rc == 0, r
    ended(cli, job, "SUCCEEDED")


@pytest.mark.parametrize("mode", MODES)
def test_cancel_after_a_restart(server_factory, tmp_path, names, mode):
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    job = names.job("esc_restart")
    assert cli.submit(job, args=["--daemon", mode, "--sleep", "600"]).rc == 0
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    daemon_pid(cli, job)
    server.kill()  # kill -9: the replica and its daemon keep running
    server.start()
    assert cli.describe(job)["state"] == "RUNNING", cli.explain(job)
    assert cli("jobs", "cancel", job).rc == 0
    ended(cli, job, "CANCELLED")
