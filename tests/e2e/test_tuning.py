"""Hyperparameter tuning jobs end to end on the local executor: the config a
user submitted to AI Platform (`--config hptuning_config.yaml`), trials run as
jobs of their own with their parameters as flags, CLOUD_ML_TRIAL_ID, the
trial in TF_CONFIG and JOB_DIR/TRIAL_ID; metrics read from the hypertune
file; trials best first; failing trials, infeasible trials, early stopping,
cancel, resume, a kill -9 of the server, and bad specs refused with the field.

The trainer (trainers/tuning) reports a known objective of its parameters, so
the order of the trials is checked against what they were given."""

import json
import os
import signal
import time

from googleapiclient.errors import HttpError

from conftest import REGION, TRAINERS, config_yaml, describe_procs, make_cli, procs_of_job, wait_no_procs
from test_studies import error_of, ml_client

TUNING_PKG = os.path.join(TRAINERS, "tuning", "trainer")


def objective(hp):
    """trainers/tuning/trainer/task.py's objective, from a trial's hyperparameters."""
    x = float(hp["x"])
    value = -(x - 0.3) ** 2
    if "n" in hp:
        value += 0.01 * min(int(hp["n"]), 7)
    if hp.get("kind") == "good":
        value += 0.05
    return value


def write_config(tmp_path, hyperparameters, name="hptuning_config.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps({"trainingInput": {"scaleTier": "BASIC", "hyperparameters": hyperparameters}}))
    return str(path)


def x_param(**extra):
    p = {"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}
    p.update(extra)
    return p


def submit(cli, job, config, *args, flags=()):
    return cli.submit(job, "--config", config, f"--job-dir=gs://{cli.bucket}/{job}", *flags,
                      package=TUNING_PKG, args=list(args))


def trials_of(cli, job):
    return cli.describe(job).get("trainingOutput", {}).get("trials", [])


def wait_trials(cli, job, predicate, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        trials = trials_of(cli, job)
        if predicate(trials):
            return trials
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s\n{cli.explain(job)}")


def read_object(server, bucket, name):
    with open(server.bucket_path(bucket, name)) as f:
        return f.read()


def test_trials_run_with_their_parameters_and_come_back_best_first(server, cli, tmp_path, names):
    job = names.job("tune")
    config = write_config(tmp_path, {
        "goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2,
        "params": [x_param(), {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 10},
                   {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["good", "bad"]}]})
    r = submit(cli, job, config, "--record", f"gs://{cli.bucket}/{job}/records")
    assert r.rc == 0, r
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=240)
    out = done["trainingOutput"]
    assert out["isHyperparameterTuningJob"] is True
    assert out["hyperparameterMetricTag"] == "training/hptuning/metric"
    assert out["completedTrialCount"] == "4"
    # What it used is its trials' (docs/operations.md, "Usage accounting"):
    # the operator's report counts them as its project's, and one job.
    usage = cli.ok("admin", "usage", f"--project={cli.project}", "--format=json").json()["total"]
    assert out["consumedMLUnits"] > 0 and abs(usage["mlUnits"] - out["consumedMLUnits"]) < 1e-9, (out, usage)
    assert usage["jobs"] == 1 and usage["runHours"] > 0, usage
    trials = out["trials"]
    assert sorted(t["trialId"] for t in trials) == ["1", "2", "3", "4"], trials
    values = [t["finalMetric"]["objectiveValue"] for t in trials]
    assert values == sorted(values, reverse=True), f"best first: {trials}"
    for t in trials:
        hp = t["hyperparameters"]
        assert set(hp) == {"x", "n", "kind"}, t
        assert 0.0 <= float(hp["x"]) <= 1.0 and 1 <= int(hp["n"]) <= 10 and hp["kind"] in ("good", "bad"), t
        assert abs(t["finalMetric"]["objectiveValue"] - objective(hp)) < 1e-9, t
        assert t["finalMetric"]["trainingStep"] == "3", t
        assert [m["trainingStep"] for m in t["allMetrics"]] == ["1", "2", "3"], t
        assert t["state"] == "SUCCEEDED" and t["startTime"] <= t["endTime"], t
        record = json.loads(read_object(cli.server, cli.bucket, f"{job}/records/trial-{t['trialId']}.json"))
        assert record["trial"] == t["trialId"] and record["tf_config_trial"] == t["trialId"], record
        assert record["job_id"] == job, record
        assert record["job_dir"] == f"gs://{cli.bucket}/{job}/{t['trialId']}", record
        assert f"--x={hp['x']}" in record["argv"] and f"--kind={hp['kind']}" in record["argv"], record
    # Trials are not jobs of the user's.
    listed = [j["jobId"] for j in json.loads(cli.ok("jobs", "list", "--format", "json").out)]
    assert listed == [job], listed
    # The job's log is its trials', each line marked; one trial alone on request.
    logs = cli.ok("jobs", "stream-logs", job).out
    for t in trials:
        assert f"master-replica-0 trial={t['trialId']} trial {t['trialId']} x=" in logs, logs
    one = cli.ok("jobs", "stream-logs", job, "--trial", "2").out
    assert "trial=2 " in one and "trial=1 " not in one, one
    r = cli("jobs", "stream-logs", job, "--trial", "9")
    assert r.rc != 0 and "has no trial 9" in r.err, r

    # The tuning job is a study too, read through Google's client.
    studies = ml_client(server).projects().locations().studies()
    name = f"projects/{cli.project}/locations/{REGION}/studies/{job}"
    study = studies.get(name=name).execute()
    assert study["state"] == "COMPLETED", study
    assert [p["parameter"] for p in study["studyConfig"]["parameters"]] == ["x", "n", "kind"], study
    assert study["studyConfig"]["metrics"] == [{"metric": "training/hptuning/metric", "goal": "MAXIMIZE"}], study
    listed = studies.list(parent=f"projects/{cli.project}/locations/{REGION}").execute().get("studies", [])
    assert name in [s["name"] for s in listed], listed
    st = studies.trials().list(parent=name).execute()["trials"]
    assert [t["name"].rsplit("/", 1)[1] for t in st] == ["1", "2", "3", "4"], st
    by_id = {t["trialId"]: t for t in trials}
    for t in st:
        out = by_id[t["name"].rsplit("/", 1)[1]]
        params = {p["parameter"]: p.get("floatValue", p.get("intValue", p.get("stringValue"))) for p in t["parameters"]}
        assert str(params["n"]) == out["hyperparameters"]["n"] and params["kind"] == out["hyperparameters"]["kind"], t
        assert t["state"] == "COMPLETED", t
        assert t["finalMeasurement"]["metrics"][0]["value"] == out["finalMetric"]["objectiveValue"], t
        assert len(t["measurements"]) == 3, t
    best = studies.trials().listOptimalTrials(parent=name, body={}).execute()["trials"]
    assert [b["name"].rsplit("/", 1)[1] for b in best] == [trials[0]["trialId"]], best
    try:
        studies.trials().create(parent=name, body={"parameters": [{"parameter": "x", "floatValue": 0.5}]}).execute()
        raise AssertionError("a tuning job's study took a trial")
    except HttpError as e:
        assert error_of(e)["status"] == "FAILED_PRECONDITION", error_of(e)


def test_failing_trials_fail_the_job_with_the_reason(cli, tmp_path, names):
    job = names.job("fail")
    config = write_config(tmp_path, {"goal": "MAXIMIZE", "maxTrials": 5, "maxParallelTrials": 1, "maxFailedTrials": 2,
                                     "algorithm": "RANDOM_SEARCH", "params": [x_param()]})
    assert submit(cli, job, config, "--fail-above", "-1").rc == 0
    done = cli.wait_state(job, {"FAILED"}, timeout=180)
    assert "2 trials failed (maxFailedTrials is 2)" in done["errorMessage"], done
    assert "exited with" in done["errorMessage"], done
    assert [t["state"] for t in done["trainingOutput"]["trials"]] == ["FAILED", "FAILED"], done


def test_a_trial_that_reports_nothing_is_infeasible_not_a_crash(cli, tmp_path, names):
    job = names.job("silent")
    config = write_config(tmp_path, {"goal": "MINIMIZE", "maxTrials": 2, "maxParallelTrials": 2,
                                     "algorithm": "RANDOM_SEARCH", "params": [x_param()]})
    assert submit(cli, job, config, "--silent").rc == 0
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=180)
    trials = done["trainingOutput"]["trials"]
    assert len(trials) == 2 and all("finalMetric" not in t and t["state"] == "SUCCEEDED" for t in trials), done


def test_grid_search_visits_each_point_once(cli, tmp_path, names):
    # 2 x 3 points in grid order (first parameter slowest); maxTrials 8 ends at 6.
    job = names.job("grid")
    config = write_config(tmp_path, {
        "goal": "MAXIMIZE", "maxTrials": 8, "maxParallelTrials": 2, "algorithm": "GRID_SEARCH",
        "params": [{"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["good", "bad"]},
                   {"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.1, 0.3, 0.5]}]})
    assert submit(cli, job, config).rc == 0
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=240)
    trials = done["trainingOutput"]["trials"]
    by_id = {t["trialId"]: (t["hyperparameters"]["kind"], t["hyperparameters"]["x"]) for t in trials}
    assert by_id == {"1": ("good", "0.1"), "2": ("good", "0.3"), "3": ("good", "0.5"),
                     "4": ("bad", "0.1"), "5": ("bad", "0.3"), "6": ("bad", "0.5")}, by_id
    assert by_id[trials[0]["trialId"]] == ("good", "0.3"), "best first"


def test_early_stopping_stops_a_trial_below_the_median(cli, tmp_path, names):
    # One trial at a time over a grid: three good points finish at once, then
    # x=0.95 reports slowly (30 steps of 0.5 s) and worse at every step.
    job = names.job("stop")
    config = write_config(tmp_path, {
        "goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 1, "algorithm": "GRID_SEARCH",
        "enableTrialEarlyStopping": True,
        "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.25, 0.3, 0.35, 0.95]}]})
    r = submit(cli, job, config, "--steps", "30", "--step-seconds", "0.5", "--slow-above", "0.5")
    assert r.rc == 0, r
    done = cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=300)
    assert done["state"] == "SUCCEEDED", done
    trials = done["trainingOutput"]["trials"]
    assert [t["hyperparameters"]["x"] for t in trials] == ["0.3", "0.25", "0.35", "0.95"], "best first"
    bad = trials[-1]
    assert bad.get("isTrialStoppedEarly") is True and bad["state"] == "SUCCEEDED", done
    assert int(bad["finalMetric"]["trainingStep"]) < 30, bad
    assert not any(t.get("isTrialStoppedEarly") for t in trials[:3]), done


def test_cancel_stops_every_trial(server, cli, tmp_path, names):
    job = names.job("cancel")
    config = write_config(tmp_path, {"goal": "MAXIMIZE", "maxTrials": 6, "maxParallelTrials": 2,
                                     "algorithm": "RANDOM_SEARCH", "params": [x_param()]})
    assert submit(cli, job, config, "--steps", "1", "--step-seconds", "600").rc == 0
    wait_trials(cli, job, lambda ts: sum(t["state"] == "RUNNING" for t in ts) == 2, "two trials running")
    cli.ok("jobs", "cancel", job)
    done = cli.wait_state(job, {"CANCELLED"}, timeout=60)
    trials = done["trainingOutput"]["trials"]
    assert len(trials) == 2 and all(t["state"] == "CANCELLED" for t in trials), done
    # Every trial's processes carry CLOUD_ML_JOB_ID=<the tuning job>.
    left = wait_no_procs(lambda: procs_of_job(server.run_dir(cli.project, job), job))
    assert not left, describe_procs(left)


def test_resume_continues_the_study(cli, tmp_path, names):
    first, second = names.job("first"), names.job("second")
    spec = {"goal": "MAXIMIZE", "maxTrials": 2, "maxParallelTrials": 2, "algorithm": "RANDOM_SEARCH",
            "params": [x_param()]}
    assert submit(cli, first, write_config(tmp_path, spec, "a.yaml")).rc == 0
    before = cli.wait_state(first, {"SUCCEEDED"}, timeout=180)["trainingOutput"]["trials"]
    spec = dict(spec, maxTrials=4, resumePreviousJobId=first)
    assert submit(cli, second, write_config(tmp_path, spec, "b.yaml")).rc == 0
    after = cli.wait_state(second, {"SUCCEEDED"}, timeout=180)["trainingOutput"]["trials"]
    assert sorted(t["trialId"] for t in after) == ["1", "2", "3", "4"], after
    old = {t["trialId"]: t["hyperparameters"] for t in before}
    assert {t["trialId"]: t["hyperparameters"] for t in after if t["trialId"] in old} == old
    # A study can only resume a finished one of the same parameters.
    other = dict(spec, params=[x_param(), {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 3}])
    r = submit(cli, names.job("third"), write_config(tmp_path, other, "c.yaml"))
    assert r.rc != 0 and "resumePreviousJobId" in r.err, r


def test_kill_9_mid_tuning_loses_no_trial_and_repeats_no_id(server_factory, tmp_path, names):
    server = server_factory(config_yaml())
    cli = make_cli(server, tmp_path, names)
    job = names.job("crash")
    config = write_config(tmp_path, {"goal": "MAXIMIZE", "maxTrials": 5, "maxParallelTrials": 2,
                                     "algorithm": "RANDOM_SEARCH", "params": [x_param()]})
    assert submit(cli, job, config, "--steps", "2", "--step-seconds", "1").rc == 0
    wait_trials(cli, job, lambda ts: any(t["state"] == "RUNNING" for t in ts), "a trial running")
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()
    server.start()
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=240)
    ids = [t["trialId"] for t in done["trainingOutput"]["trials"]]
    assert sorted(ids, key=int) == ["1", "2", "3", "4", "5"], done
    assert all("finalMetric" in t for t in done["trainingOutput"]["trials"]), done


def test_bad_specs_are_refused_with_the_field(cli, tmp_path, names):
    hp = "trainingInput.hyperparameters"
    cases = [
        ({"goal": "MAXIMIZE", "maxTrials": 2, "params": []}, f"{hp}.params"),
        ({"goal": "MAXIMIZE", "maxTrials": 2, "params": [x_param(minValue=2.0)]}, f"{hp}.params[0].maxValue"),
        ({"goal": "MAXIMIZE", "maxTrials": 2,
          "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.3, 0.1]}]},
         f"{hp}.params[0].discreteValues[1]"),
        ({"goal": "MAXIMIZE", "maxTrials": 2, "maxParallelTrials": 3, "params": [x_param()]},
         f"{hp}.maxParallelTrials"),
        ({"goal": "MAXIMIZE", "maxTrials": 2, "hyperparameterMetricTag": "my\naccuracy", "params": [x_param()]},
         f"{hp}.hyperparameterMetricTag"),
        ({"goal": "MAXIMIZE", "maxTrials": 2, "resumePreviousJobId": "no_such_job", "params": [x_param()]},
         f"{hp}.resumePreviousJobId"),
    ]
    for i, (spec, field) in enumerate(cases):
        r = submit(cli, names.job(f"bad{i}"), write_config(tmp_path, spec, f"bad{i}.yaml"))
        assert r.rc != 0 and field in r.err, (spec, r)
    assert json.loads(cli.ok("jobs", "list", "--format", "json").out or "[]") == []


def test_trials_share_the_queue_and_a_waiting_one_says_why(server_factory, tmp_path, names):
    # One replica slot, held by an ordinary job: the tuning job's trial waits
    # in the same queue, and the tuning job says why.
    cores = os.sysconf("SC_NPROCESSORS_ONLN")
    server = server_factory(config_yaml(cpu_oversubscription=1, replica_cpu_milli=cores * 1000))
    cli = make_cli(server, tmp_path, names)
    blocker = names.job("blocker")
    assert cli.submit(blocker, args=["--sleep", "600"]).rc == 0
    cli.wait_state(blocker, {"RUNNING"}, timeout=60)
    job = names.job("tune")
    config = write_config(tmp_path, {"goal": "MAXIMIZE", "maxTrials": 2, "maxParallelTrials": 2,
                                     "algorithm": "RANDOM_SEARCH", "params": [x_param()]})
    assert submit(cli, job, config).rc == 0
    deadline = time.time() + 30
    desc = cli.describe(job)
    while time.time() < deadline and not desc.get("errorMessage"):
        time.sleep(0.2)
        desc = cli.describe(job)
    assert desc["state"] == "QUEUED", desc
    assert desc.get("errorMessage", "").startswith("Trial 1: "), desc
    assert "CPU" in desc["errorMessage"], desc
    cli.ok("jobs", "cancel", blocker)
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
    assert len(done["trainingOutput"]["trials"]) == 2 and "errorMessage" not in done, done
