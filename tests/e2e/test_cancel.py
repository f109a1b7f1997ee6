"""Stopping jobs: jobs cancel and scheduling.maxRunningTime. Whatever way a
job ends, nothing it started may keep running: the replica's whole process
group goes, children of the trainer included."""

import os
import signal
import time

from conftest import describe_procs, procs_of_job, wait_no_procs


def assert_no_job_processes(cli, job_id, why=""):
    run_dir = cli.run_dir(job_id)
    left = wait_no_procs(lambda: procs_of_job(run_dir, job_id), timeout=15)
    if not left:
        return
    listing = describe_procs(left)
    for pid, _, _, _ in left:  # ours to clean up: the test started them
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    raise AssertionError(
        f"SERVER BUG: job {job_id} ended ({cli.describe(job_id).get('state')}) but processes of it are still "
        f"running (cmdline naming {run_dir} or CLOUD_ML_JOB_ID={job_id} in the environment){why}:\n{listing}")


def logged_pid(cli, job_id, marker, may_have_ended=False):
    """The pid the trainer logged after `marker` ("child pid=", "daemon
    pid="), checked to be found as a process of the job (else a later check
    that none is left would prove nothing). `may_have_ended`: the job ends by
    itself (maxRunningTime), possibly before the check, which is then made
    only if the job still runs."""
    entries = cli.wait_log(job_id, marker, timeout=60)
    pid = next(int(e["message"].split(marker)[1].split()[0]) for e in entries if marker in e["message"])
    procs = procs_of_job(cli.run_dir(job_id), job_id)
    found = pid in {p[0] for p in procs}
    if not found and may_have_ended and cli.describe(job_id)["state"] != "RUNNING":
        return pid
    assert found, f"the process {pid} ({marker.strip()}) is not a process of the job:\n{describe_procs(procs)}"
    return pid


def child_pid_of(cli, job_id, may_have_ended=False):
    return logged_pid(cli, job_id, "child pid=", may_have_ended)


def test_cancel_kills_the_process_group(cli, names):
    job = names.job("cancel")
    # The trainer and its child both ignore SIGTERM: only the SIGKILL to the
    # replica's process group after cancel_grace_seconds (2 s) ends them.
    r = cli.submit(job, args=["--ignore-term", "--stubborn-child", "--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    child_pid_of(cli, job)

    r = cli("jobs", "cancel", job)
    assert r.rc == 0, r
    first = cli.describe(job)
    assert first["state"] in ("CANCELLING", "CANCELLED"), first
    seen = [first["state"]]
    deadline = time.time() + 30
    desc = first
    while desc["state"] != "CANCELLED" and time.time() < deadline:
        time.sleep(0.1)
        desc = cli.describe(job)
        if desc["state"] != seen[-1]:
            seen.append(desc["state"])
    assert desc["state"] == "CANCELLED", f"job never reached CANCELLED (states seen {seen})\n{cli.explain(job)}"
    assert seen == ["CANCELLING", "CANCELLED"], f"states after cancel: {seen}"
    assert "endTime" in desc, desc
    # Who cancelled it: the CLI's caller is the operator here.
    assert desc["errorMessage"] == "Cancelled by a user request (the operator).", desc
    assert [(a["end"], a["message"]) for a in desc["attempts"]] == [("CANCELLED", desc["errorMessage"])], desc
    assert_no_job_processes(cli, job)

    again = cli("jobs", "cancel", job)
    assert again.rc == 1, again
    assert "FAILED_PRECONDITION" in again.out + again.err, again
    assert "CANCELLED" in again.out + again.err, again


def test_max_running_time_cancels(cli, names, tmp_path):
    config = tmp_path / "sched.yaml"
    config.write_text("trainingInput:\n  scheduling:\n    maxRunningTime: 3s\n")
    job = names.job("maxrun")
    r = cli.submit(job, f"--config={config}", args=["--child", "--sleep", "600"])
    assert r.rc == 0, r
    # RUNNING lasts 3 s: a slow poll may first see the job past it.
    running = cli.wait_state(job, {"RUNNING", "CANCELLING", "CANCELLED"}, timeout=60)
    child_pid_of(cli, job, may_have_ended=True)
    desc = cli.wait_state(job, {"CANCELLED"}, timeout=60)
    msg = desc.get("errorMessage", "")
    assert "maxRunningTime" in msg, f"errorMessage does not mention maxRunningTime: {msg!r}"
    assert [a["end"] for a in desc["attempts"]] == ["TIMED_OUT"], desc
    assert desc.get("startTime") == running.get("startTime"), (running, desc)
    assert_no_job_processes(cli, job)


def test_cancel_kills_a_child_that_outlives_the_trainer(cli, names):
    """The trainer dies on SIGTERM at once; its child ignores SIGTERM. The
    child is in the replica's process group, so it must get the SIGKILL too."""
    job = names.job("orphan")
    r = cli.submit(job, args=["--stubborn-child", "--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    child_pid_of(cli, job)
    cli.ok("jobs", "cancel", job)
    cli.wait_state(job, {"CANCELLED"}, timeout=30)
    assert_no_job_processes(
        cli, job, why=" -- the trainer exited on SIGTERM, the executor then treated the replica as gone and never "
                      "sent SIGKILL to its process group (LocalExecutor::Signal skips exited replicas; MaybeFinish "
                      "ends the job as soon as every mlengine-replica shim has exited)")


def test_succeeded_job_leaves_no_process(cli, names):
    """A master that exits 0 while a child it started still runs: the job
    SUCCEEDS and the child (same process group) must be stopped with it."""
    job = names.job("leak")
    r = cli.submit(job, args=["--child"])
    assert r.rc == 0, r
    cli.wait_state(job, {"SUCCEEDED"}, timeout=60)
    assert_no_job_processes(
        cli, job, why=" -- the master exited 0, so no replica was left to signal (LocalExecutor::BeginStop signals "
                      "only replicas that have not exited) and the rest of the master's process group was never "
                      "stopped")
