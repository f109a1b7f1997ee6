"""Stopping running jobs: jobs cancel, and scheduling.maxRunningTime. The
replica's whole process group must go, a child of the trainer included."""

import time

from conftest import describe_procs, procs_of_job, wait_no_procs


def assert_no_job_processes(cli, job_id):
    run_dir = cli.run_dir(job_id)
    left = wait_no_procs(lambda: procs_of_job(run_dir, job_id), timeout=5)
    assert not left, (f"SERVER BUG: job {job_id} ended ({cli.describe(job_id).get('state')}) but processes of it "
                      f"are still running (cmdline naming {run_dir} or CLOUD_ML_JOB_ID={job_id} in the "
                      f"environment):\n{describe_procs(left)}")


def test_cancel_kills_the_process_group(cli, names):
    job = names.job("cancel")
    r = cli.submit(job, args=["--ignore-term", "--child", "--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    entries = cli.wait_log(job, "child pid=", timeout=60)
    child_pid = next(int(e["message"].split("child pid=")[1]) for e in entries if "child pid=" in e["message"])
    run_dir = cli.run_dir(job)
    before = procs_of_job(run_dir, job)
    assert child_pid in {p[0] for p in before}, \
        f"the trainer's child {child_pid} is not found as a process of the job:\n{describe_procs(before)}"

    r = cli("jobs", "cancel", job)
    assert r.rc == 0, r
    # The trainer and its child ignore SIGTERM: the job stays CANCELLING for
    # the grace period (2 s), then everything is killed.
    first = cli.describe(job)
    assert first["state"] in ("CANCELLING", "CANCELLED"), first
    seen = {first["state"]}
    deadline = time.time() + 30
    desc = first
    while desc["state"] != "CANCELLED" and time.time() < deadline:
        time.sleep(0.1)
        desc = cli.describe(job)
        seen.add(desc["state"])
    assert desc["state"] == "CANCELLED", f"job never reached CANCELLED (states seen {seen})\n{cli.explain(job)}"
    assert "CANCELLING" in seen, f"the job went to CANCELLED without CANCELLING being visible: {seen}"
    assert "endTime" in desc, desc
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
    running = cli.wait_state(job, {"RUNNING"}, timeout=60)
    desc = cli.wait_state(job, {"CANCELLED"}, timeout=60)
    msg = desc.get("errorMessage", "")
    assert "maxRunningTime" in msg, f"errorMessage does not mention maxRunningTime: {msg!r}"
    assert desc.get("startTime") == running.get("startTime"), (running, desc)
    assert_no_job_processes(cli, job)
