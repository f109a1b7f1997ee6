"""Hyperparameter tuning jobs on the local 4-node Slurm cluster: each trial is
a Slurm job of its own (mle-<project>-<job>.<trial>), parallel trials on
different nodes, a failing trial, early stopping from the metrics a node's
replica reports, cancel, resume, and a kill -9 of the server mid-tuning.
The trainer is the local suite's (tests/e2e/trainers/tuning)."""

import json
import os
import signal
import time

from conftest import e2e

TUNING_PKG = os.path.join(e2e.TRAINERS, "tuning", "trainer")


def submit(cli, job, tmp_path, hyperparameters, *args):
    path = tmp_path / f"{job}.json"
    path.write_text(json.dumps({"trainingInput": {"scaleTier": "BASIC", "hyperparameters": hyperparameters}}))
    r = cli.submit(job, "--config", str(path), f"--job-dir=gs://{cli.bucket}/{job}", package=TUNING_PKG,
                   args=list(args), timeout=300)
    assert r.rc == 0, r


def x_param():
    return {"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}


def wait_trials(cli, job, predicate, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        trials = cli.describe(job).get("trainingOutput", {}).get("trials", [])
        if predicate(trials):
            return trials
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s\n{cli.explain(job)}")


def test_parallel_trials_a_failing_one_and_early_stopping(cli, names, tmp_path):
    # Grid, two at a time: x=0.9 fails, the good points finish at once, and
    # x=0.95 reports slowly and worse than the median: stopped early.
    job = names.job("tune")
    submit(cli, job, tmp_path, {
        "goal": "MAXIMIZE", "maxTrials": 6, "maxParallelTrials": 2, "maxFailedTrials": 3,
        "algorithm": "GRID_SEARCH", "enableTrialEarlyStopping": True,
        "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.25, 0.3, 0.35, 0.4, 0.9, 0.95]}]},
        "--steps", "40", "--step-seconds", "0.5", "--slow-above", "0.92", "--fail-above", "0.85",
        "--fail-below", "0.92")
    done = cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=300)
    assert done["state"] == "SUCCEEDED", cli.explain(job)
    trials = {t["hyperparameters"]["x"]: t for t in done["trainingOutput"]["trials"]}
    assert trials["0.9"]["state"] == "FAILED", trials
    assert trials["0.95"].get("isTrialStoppedEarly") is True, trials
    assert done["trainingOutput"]["trials"][0]["hyperparameters"]["x"] == "0.3", "best first"
    logs = cli.ok("jobs", "stream-logs", job, "--trial", "5").out
    assert "x=0.9 is above" in logs, logs


def test_cancel_stops_every_trial_on_the_cluster(cli, names, tmp_path):
    job = names.job("cancel")
    submit(cli, job, tmp_path, {"goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2,
                                "algorithm": "RANDOM_SEARCH", "params": [x_param()]},
           "--steps", "1", "--step-seconds", "600")
    wait_trials(cli, job, lambda ts: sum(t["state"] == "RUNNING" for t in ts) == 2, "two trials running", 120)
    cli.ok("jobs", "cancel", job)
    done = cli.wait_state(job, {"CANCELLED"}, timeout=90)
    assert [t["state"] for t in done["trainingOutput"]["trials"]] == ["CANCELLED", "CANCELLED"], done


def test_resume_and_kill_9_mid_tuning(slurm_server_factory, names, tmp_path):
    server = slurm_server_factory()
    cli = e2e.make_cli(server, tmp_path, names)
    first, second = names.job("first"), names.job("second")
    spec = {"goal": "MAXIMIZE", "maxTrials": 2, "maxParallelTrials": 2, "algorithm": "RANDOM_SEARCH",
            "params": [x_param()]}
    submit(cli, first, tmp_path, spec)
    cli.wait_state(first, {"SUCCEEDED"}, timeout=180)
    submit(cli, second, tmp_path, dict(spec, maxTrials=5, resumePreviousJobId=first), "--steps", "2",
           "--step-seconds", "1")
    wait_trials(cli, second, lambda ts: any(t["state"] == "RUNNING" for t in ts), "a trial running", 120)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    server.start()
    done = cli.wait_state(second, {"SUCCEEDED"}, timeout=300)
    ids = sorted((t["trialId"] for t in done["trainingOutput"]["trials"]), key=int)
    assert ids == ["1", "2", "3", "4", "5"], done
