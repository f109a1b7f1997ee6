"""Priority preemption through the real binaries (docs/interruptions.md): a
low-priority job whose trainer checkpoints (trainers/checkpoint) is
preempted by a higher-priority one; it gets SIGTERM, saves, is queued again
ahead of a job of its own priority that came later, and runs as attempt 2
from its checkpoint to the result an uninterrupted run gives. A job of
equal priority never preempts. The attempts and their causes are in
`jobs describe` and the logs of both attempts in the logs API.

The server has room for one job at a time: each replica counts as every
CPU of this machine."""
import os

from conftest import TRAINERS, config_yaml, make_cli, wait_for

CHECKPOINTING = os.path.join(TRAINERS, "checkpoint", "trainer")


def priority(tmp_path, value):
    """A --config file giving scheduling.priority (gcloud has no flag for it)."""
    path = tmp_path / f"priority-{value}.yaml"
    path.write_text(f"trainingInput:\n  scheduling:\n    priority: {value}\n")
    return f"--config={path}"


def one_job_at_a_time(server_factory):
    cpus = os.cpu_count() or 1
    return server_factory(config_yaml(cpu_oversubscription=1, replica_cpu_milli=cpus * 1000))


def test_a_preempted_job_resumes_from_its_checkpoint_to_the_same_result(server_factory, tmp_path, names):
    cli = make_cli(one_job_at_a_time(server_factory), tmp_path, names)
    ref, low, peer, urgent = (names.job(t) for t in ("ref", "low", "peer", "urgent"))

    def run(job, *flags, steps=40):
        return cli.submit(job, "--scale-tier", "basic", "--job-dir", f"gs://{cli.bucket}/{job}", *flags,
                          package=CHECKPOINTING, args=["--steps", str(steps)])

    # The uninterrupted result.
    assert run(ref).rc == 0
    assert cli.wait_state(ref, {"SUCCEEDED"}, timeout=120)["state"] == "SUCCEEDED"
    expected = [e["message"] for e in cli.server.logs(cli.project, ref) if e["message"].startswith("result ")]
    assert len(expected) == 1, cli.explain(ref)

    assert run(low, priority(tmp_path, 0)).rc == 0
    cli.wait_log(low, "step 12")
    # Equal priority: it waits, and stops nothing.
    assert run(peer, priority(tmp_path, 0), steps=2).rc == 0
    waiting = cli.wait_state(peer, {"QUEUED"})
    wait_for(lambda: "needs" in cli.describe(peer).get("errorMessage", ""), "peer to say why it waits")
    assert "preempting" not in cli.describe(peer)["errorMessage"], waiting
    assert cli.describe(low)["state"] == "RUNNING"

    # Higher priority: low is preempted for it.
    assert cli.submit(urgent, "--scale-tier", "basic", priority(tmp_path, 10), args=["--lines", "1"]).rc == 0
    done = cli.wait_state(urgent, {"SUCCEEDED", "FAILED"}, timeout=120)
    assert done["state"] == "SUCCEEDED", cli.explain(urgent)
    # low ran again before peer: it kept its place by priority and age.
    final = cli.wait_state(low, {"SUCCEEDED", "FAILED"}, timeout=180)
    assert final["state"] == "SUCCEEDED", cli.explain(low)
    assert cli.describe(peer)["state"] in ("RUNNING", "SUCCEEDED", "PREPARING")
    peer_done = cli.wait_state(peer, {"SUCCEEDED"}, timeout=120)
    assert peer_done["startTime"] > final["endTime"], (peer_done, final)

    attempts = final.get("attempts")
    assert [a["attempt"] for a in attempts] == [1, 2], final
    assert attempts[0]["end"] == "PREEMPTED", attempts
    assert attempts[0]["message"] == f"Preempted by job {urgent} (priority 10)", attempts
    assert attempts[0]["hosts"] == ["localhost"], attempts
    assert attempts[1]["end"] == "SUCCEEDED", attempts
    assert attempts[0]["endTime"] <= attempts[1]["startTime"], attempts
    assert [a["end"] for a in done["attempts"]] == ["SUCCEEDED"], done

    lines = [e["message"] for e in cli.server.logs(cli.project, low)]
    assert "attempt 1: starting at step 0" in lines, lines
    preempted_at = [m for m in lines if m.startswith("attempt 1: preempted at step ")]
    assert len(preempted_at) == 1, lines
    step = int(preempted_at[0].split("step ")[1].split(",")[0])
    assert f"attempt 2: resumed from step {step}" in lines, lines
    assert [m for m in lines if m.startswith("result ")] == expected, "the same result as the uninterrupted run"
    result = cli.ok("storage", "cat", f"gs://{cli.bucket}/{low}/result.txt").out.strip()
    assert f"result {result}" == expected[0]


def test_a_job_of_another_project_is_not_preempted_by_priority(server_factory, tmp_path, names):
    server = one_job_at_a_time(server_factory)
    cli = make_cli(server, tmp_path, names)
    other = make_cli(server, tmp_path, names, tag="other")
    other.project = cli.project + "-o"
    other.env["MLENGINE_PROJECT"] = other.project
    other.bucket = cli.bucket + "-o"
    server.projects.add(other.project)
    other.make_bucket()
    running, urgent = names.job("running"), names.job("urgent")
    assert cli.submit(running, "--scale-tier", "basic", args=["--sleep", "8"]).rc == 0
    cli.wait_state(running, {"RUNNING"})
    assert other.submit(urgent, "--scale-tier", "basic", priority(tmp_path, 1000), args=["--lines", "1"]).rc == 0
    wait_for(lambda: "needs" in other.describe(urgent).get("errorMessage", ""), "urgent to say why it waits")
    assert "preempting" not in other.describe(urgent)["errorMessage"]
    done = cli.wait_state(running, {"SUCCEEDED", "FAILED"}, timeout=60)
    assert done["state"] == "SUCCEEDED" and [a["end"] for a in done["attempts"]] == ["SUCCEEDED"], done


def test_an_attempt_lost_with_its_shim_is_retried_and_a_trainer_failure_is_not(cli, names):
    """mlengine's shim killed (as the host's OOM killer would) loses the
    attempt to the infrastructure: it runs again as attempt 2 and succeeds.
    A trainer that exits non-zero fails the job at once."""
    import signal
    from conftest import procs_of_job
    job, failing = names.job("lost"), names.job("failing")
    assert cli.submit(job, "--scale-tier", "basic", args=["--lines", "1", "--sleep", "4"]).rc == 0
    cli.wait_log(job, " line ")
    run_dir = cli.run_dir(job)
    shims = [pid for pid, cmd, _, _ in procs_of_job(run_dir, job) if cmd and cmd[0].endswith("mlengine-replica")]
    assert len(shims) == 1, procs_of_job(run_dir, job)
    os.kill(shims[0], signal.SIGKILL)
    done = cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=90)
    assert done["state"] == "SUCCEEDED", cli.explain(job)
    ends = [(a["attempt"], a["end"]) for a in done["attempts"]]
    assert ends == [(1, "INFRASTRUCTURE"), (2, "SUCCEEDED")], done
    assert "was killed before it could record how it ended" in done["attempts"][0]["message"], done
    assert os.path.isdir(run_dir + "@2"), "attempt 2 ran in a directory of its own"

    assert cli.submit(failing, "--scale-tier", "basic", args=["--fail", "3"]).rc == 0
    failed = cli.wait_state(failing, {"FAILED", "SUCCEEDED"}, timeout=90)
    assert failed["state"] == "FAILED" and [a["end"] for a in failed["attempts"]] == ["FAILED"], failed
