"""Priority preemption on the Slurm test cluster (docs/interruptions.md):
Slurm places the jobs, so a job that waits in Slurm's queue for resources
preempts running jobs of its project of lower priority, one at a time.
A checkpointing trainer (tests/e2e/trainers/checkpoint) on one node is
preempted by a job that needs all four: it gets SIGTERM, saves, is
submitted again as attempt 2 (its own run directory, MLENGINE_ATTEMPT=2)
and resumes from its checkpoint to the result of an uninterrupted run.

Each replica takes a whole node here (n1-highcpu-16: 2 CPUs)."""
import os

import pytest

from conftest import SLURM_CONFIG, e2e

CHECKPOINTING = os.path.join(e2e.TRAINERS, "checkpoint", "trainer")
WHOLE_NODE = "n1-highcpu-16"


def uninterrupted(steps):
    """What trainers/checkpoint computes, however often it is interrupted."""
    w = 1
    for step in range(steps):
        w = (w * 1103515245 + 12345 + step) % 2147483648
    return w


def priority(tmp_path, value):
    path = tmp_path / f"priority-{value}.yaml"
    path.write_text(f"trainingInput:\n  scheduling:\n    priority: {value}\n")
    return f"--config={path}"


@pytest.fixture
def whole_node_server(slurm_server_factory):
    text = SLURM_CONFIG.read_text()
    assert f"{WHOLE_NODE}: {{cpus: 1}}" in text
    return slurm_server_factory(text.replace(f"{WHOLE_NODE}: {{cpus: 1}}", f"{WHOLE_NODE}: {{cpus: 2}}"))


def test_a_job_waiting_in_slurm_preempts_a_lower_priority_one_which_resumes(whole_node_server, tmp_path, names):
    cli = e2e.make_cli(whole_node_server, tmp_path, names)
    low, urgent = names.job("low"), names.job("urgent")
    steps = 200  # 20 s of work: the preemption (3 s after Slurm says Resources, a poll) lands well inside
    assert cli.submit(low, "--scale-tier=custom", f"--master-machine-type={WHOLE_NODE}", priority(tmp_path, 0),
                      "--job-dir", f"gs://{cli.bucket}/{low}", package=CHECKPOINTING,
                      args=["--steps", str(steps)], timeout=300).rc == 0
    cli.wait_log(low, "step 12", timeout=180)
    assert cli.submit(urgent, "--scale-tier=custom", f"--master-machine-type={WHOLE_NODE}",
                      f"--worker-machine-type={WHOLE_NODE}", "--worker-count=3", priority(tmp_path, 10),
                      args=["--lines", "1"]).rc == 0
    done = cli.wait_state(urgent, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert done["state"] == "SUCCEEDED", cli.explain(urgent)
    final = cli.wait_state(low, {"SUCCEEDED", "FAILED"}, timeout=240)
    assert final["state"] == "SUCCEEDED", cli.explain(low)

    attempts = final["attempts"]
    assert [(a["attempt"], a["end"]) for a in attempts] == [(1, "PREEMPTED"), (2, "SUCCEEDED")], final
    assert attempts[0]["message"] == f"Preempted by job {urgent} (priority 10)", attempts
    assert attempts[0]["hosts"] and attempts[1]["hosts"], attempts
    lines = [e["message"] for e in whole_node_server.logs(cli.project, low)]
    preempted = [m for m in lines if m.startswith("attempt 1: preempted at step ")]
    assert len(preempted) == 1, lines
    step = int(preempted[0].split("step ")[1].split(",")[0])
    assert f"attempt 2: resumed from step {step}" in lines, lines
    assert f"result {uninterrupted(steps)}" in lines, "the same result as an uninterrupted run"
    assert os.path.isdir(cli.run_dir(low) + "@2"), "attempt 2 ran in a directory of its own"


def test_a_silent_job_is_flagged_and_with_fail_ended(cli, names):
    """The stall watch under Slurm: each replica's shim on its node records
    its CPU time; with the job's labels (a 3 s limit, fail) a trainer that
    sleeps without a word ends STALLED, saying why."""
    job = names.job("silent")
    assert cli.submit(job, "--scale-tier", "basic", "--labels=mlengine-stall-after=3,mlengine-stall-action=fail",
                      args=["--sleep", "600"]).rc == 0
    desc = cli.wait_state(job, {"FAILED", "SUCCEEDED"}, timeout=120)
    assert desc["state"] == "FAILED", cli.explain(job)
    assert desc["errorMessage"].startswith("The job stalled: its replicas wrote no log line and used no CPU for "), desc
    assert desc["errorMessage"].endswith(
        "The job asks to be ended when stalled (its label mlengine-stall-action: fail)."), desc
    assert [a["end"] for a in desc["attempts"]] == ["STALLED"], desc
    progress = os.path.join(cli.run_dir(job), "master-replica-0", "progress")
    assert open(progress).read().startswith("cpu_ticks "), "the shim recorded the replica's CPU time"


def test_replicas_that_never_connect_fail_the_job_naming_them(slurm_server_factory, tmp_path, names):
    """slurm.join_timeout_seconds: each replica's shim, on its node, records
    whether its replica connected on the job's ports; two replicas that
    never talk fail the job within the deadline, named."""
    text = SLURM_CONFIG.read_text()
    assert "join_timeout_seconds: 0" in text
    server = slurm_server_factory(text.replace("join_timeout_seconds: 0", "join_timeout_seconds: 6"))
    cli = e2e.make_cli(server, tmp_path, names)
    job = names.job("alone")
    assert cli.submit(job, "--scale-tier=custom", "--master-machine-type=n1-standard-4",
                      "--worker-machine-type=n1-standard-4", "--worker-count=1", args=["--sleep", "120"]).rc == 0
    desc = cli.wait_state(job, {"FAILED", "SUCCEEDED"}, timeout=120)
    assert desc["state"] == "FAILED", cli.explain(job)
    assert desc["errorMessage"].startswith(
        "The replicas master-replica-0, worker-replica-0 did not connect to the job's other replicas within 6 s"), desc
    assert "(the operator's limit: slurm.join_timeout_seconds)" in desc["errorMessage"], desc
    assert [a["end"] for a in desc["attempts"]] == ["NOT_JOINED"], desc
