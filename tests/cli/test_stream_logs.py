"""Jobs run by the real server, followed with stream-logs / submit --stream-logs.
Needs the server's storage and logs APIs and a runtime that runs trainers."""

import re

from conftest import RUNTIME

LINE = re.compile(r"^\S+ master-replica-0 (.*)$")


def submit(cli, names, trainer, job, *extra, args=()):
    return cli("jobs", "submit", "training", job, "--package-path", str(trainer), "--module-name", "trainer.task",
               "--staging-bucket", f"gs://{names.staging}", "--region", "us-central1", "--runtime-version",
               RUNTIME, *extra, "--", *args, timeout=300)


def test_submit_stream_logs_succeeds(cli, names, trainer, storage_api, logs_api):
    job = names.job()
    r = submit(cli, names, trainer, job, "--stream-logs", args=("--epochs", "2"))
    assert r.rc == 0, r
    messages = [m.group(1) for m in map(LINE.match, r.out.splitlines()) if m]
    assert 'trainer args: ["--epochs", "2"]' in messages, r
    assert "trainer stderr line" in messages, r  # stderr lines are streamed too
    assert "state: SUCCEEDED" in r.out, r


def test_submit_stream_logs_failure_exits_1(cli, names, trainer, storage_api, logs_api):
    job = names.job()
    r = submit(cli, names, trainer, job, "--stream-logs", args=("--fail",))
    assert r.rc == 1, r
    assert any(l.endswith("master-replica-0 failing on purpose") for l in r.out.splitlines()), r
    assert "FAILED" in r.err, r


def test_stream_logs_after_the_job_ended(cli, names, trainer, storage_api, logs_api):
    job = names.job()
    assert submit(cli, names, trainer, job).rc == 0
    cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=300)
    r = cli.ok("jobs", "stream-logs", job, timeout=120)
    assert any(l.endswith("master-replica-0 trainer stderr line") for l in r.out.splitlines()), r
    only = cli.ok("jobs", "stream-logs", job, "--task-name", "worker-replica-0", timeout=120)
    assert only.out == ""
    r = cli("jobs", "stream-logs", "no_such_job")
    assert r.rc == 1 and "NOT_FOUND" in r.err
