"""Vertex AI custom jobs run on the same engine (docs/vertex.md): a
CustomJob of two worker pools, as Vertex's REST API takes it, runs its
package to JOB_STATE_SUCCEEDED on the local executor, sandboxed, each
replica with Vertex's contract (CLUSTER_SPEC naming workerpool0 and
workerpool1, TF_CONFIG's chief, AIP_MODEL_DIR under the base output
directory, the pool's env); its log reads as an ml v1 job's; a trainer that
fails ends JOB_STATE_FAILED with the reason in `error`; and the queue
counts it beside ml v1's jobs."""

import io
import json
import os
import tarfile
import time

from conftest import REGION, TASKS_PKG, TRAINERS, wait_for

EXECUTOR = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest"


def sdist_of(package_dir, name="trainer", version="0.1"):
    """An sdist (setup.py + the package) of `package_dir`, as bytes."""
    buf = io.BytesIO()
    base = f"{name}-{version}"
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        def add(path, data):
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("setup.py", f'from setuptools import setup\nsetup(name="{name}", version="{version}", '
                        f'packages=["trainer"])\n'.encode())
        add("PKG-INFO", f"Metadata-Version: 1.0\nName: {name}\nVersion: {version}\n".encode())
        for f in sorted(os.listdir(package_dir)):
            if f.endswith(".py"):
                add(f"trainer/{f}", open(os.path.join(package_dir, f), "rb").read())
    return buf.getvalue()


def stage_package(cli, tmp_path, package_dir=TASKS_PKG):
    path = tmp_path / "trainer-0.1.tar.gz"
    path.write_bytes(sdist_of(package_dir))
    uri = f"gs://{cli.bucket}/vertex/{os.path.basename(os.path.dirname(package_dir))}/trainer-0.1.tar.gz"
    cli.ok("storage", "cp", str(path), uri)
    return uri


def custom_job(package, args, workers=1, env=()):
    def pool(count):
        return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": str(count),
                "pythonPackageSpec": {"executorImageUri": EXECUTOR, "packageUris": [package],
                                      "pythonModule": "trainer.task", "args": list(args),
                                      "env": [{"name": k, "value": v} for k, v in env]}}
    pools = [pool(1)] + ([pool(workers)] if workers else [])
    return {"displayName": "e2e vertex", "jobSpec": {"workerPoolSpecs": pools}}


def vertex_call(server, method, path, body=None):
    status, text = server.request(method, path, body)
    return status, json.loads(text) if text.strip() else {}


def create_custom_job(server, project, body):
    """customJobs.create of `body` in `project` (us-central1): the CustomJob."""
    status, created = vertex_call(server, "POST", f"/v1/projects/{project}/locations/{REGION}/customJobs", body)
    assert status == 200, created
    return created


def wait_ended(server, name, timeout=240):
    def ended():
        status, job = vertex_call(server, "GET", f"/v1/{name}")
        assert status == 200, job
        return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None
    return wait_for(ended, f"{name} to end", timeout=timeout)


def test_a_custom_job_of_two_pools_runs_with_vertexs_contract(server, cli, tmp_path):
    package = stage_package(cli, tmp_path)
    base = f"gs://{cli.bucket}/vertex-out"
    body = custom_job(package, ["--print-env", "CLUSTER_SPEC", "--print-env", "TF_CONFIG",
                                "--print-env", "AIP_MODEL_DIR", "--print-env", "RANK", "--print-env", "FROM_SPEC",
                                # The chief ends the job: it waits for the worker.
                                "--barrier", f"gs://{cli.bucket}/vertex-barrier"],
                      env=[("FROM_SPEC", "pool-env")])
    body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base}
    parent = f"projects/{cli.project}/locations/{REGION}"
    created = create_custom_job(server, cli.project, body)
    assert created["state"] == "JOB_STATE_QUEUED"
    job = wait_ended(server, created["name"])
    job_id = created["name"].rsplit("/", 1)[1]
    assert job["state"] == "JOB_STATE_SUCCEEDED", (job, server.logs(cli.project, job_id))
    assert job["startTime"] and job["endTime"] and "error" not in job

    lines = [e for e in server.logs(cli.project, job_id)]
    by_task = {}
    for e in lines:
        by_task.setdefault(e["taskName"], []).append(e["message"])
    assert set(by_task) == {"master-replica-0", "worker-replica-0"}, by_task.keys()
    for task, pool, tf_type, rank in (("master-replica-0", "workerpool0", "chief", "0"),
                                      ("worker-replica-0", "workerpool1", "worker", "1")):
        text = "\n".join(by_task[task])
        env = dict(line.split("=", 1) for line in by_task[task] if "=" in line and line.split("=", 1)[0].isupper())
        spec = json.loads(env["CLUSTER_SPEC"])
        assert set(spec["cluster"]) == {"workerpool0", "workerpool1"}, spec
        assert spec["task"] == {"type": pool, "index": 0}, spec
        assert spec["job"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] == "trainer.task"
        tf = json.loads(env["TF_CONFIG"])
        assert tf["task"]["type"] == tf_type and set(tf["cluster"]) == {"chief", "worker"}, tf
        assert env["AIP_MODEL_DIR"] == base + "/model/", env
        assert env["RANK"] == rank and env["FROM_SPEC"] == "pool-env", env
        assert "--job-dir" not in text

    # The queue counted it as it counts ml v1's; ml v1's list does not show it.
    status, listed = vertex_call(server, "GET", f"/v1/{parent}/customJobs")
    assert status == 200 and [j["name"] for j in listed["customJobs"]] == [created["name"]], listed
    status, ml = vertex_call(server, "GET", f"/v1/projects/{cli.project}/jobs")
    assert status == 200 and ml.get("jobs", []) == [], ml


def test_a_failing_trainer_ends_failed_with_the_reason(server, cli, tmp_path):
    package = stage_package(cli, tmp_path)
    created = create_custom_job(server, cli.project, custom_job(package, ["--fail", "3"], workers=0))
    job = wait_ended(server, created["name"])
    assert job["state"] == "JOB_STATE_FAILED", job
    assert job["error"]["code"] == 3 and "non-zero status of 3" in job["error"]["message"], job


def test_cancel_stops_a_running_custom_job(server, cli, tmp_path):
    package = stage_package(cli, tmp_path)
    created = create_custom_job(server, cli.project, custom_job(package, ["--sleep", "300"], workers=0))
    wait_for(lambda: vertex_call(server, "GET", f"/v1/{created['name']}")[1]["state"] == "JOB_STATE_RUNNING",
             "the job to run")
    t0 = time.time()
    status, empty = vertex_call(server, "POST", f"/v1/{created['name']}:cancel", {})
    assert status == 200 and empty == {}, empty
    job = wait_ended(server, created["name"], timeout=60)
    assert job["state"] == "JOB_STATE_CANCELLED" and job["error"]["code"] == 1, job
    assert time.time() - t0 < 30


def test_a_tuning_job_runs_its_trials_with_vertexs_contract(server, cli, tmp_path):
    """A hyperparameterTuningJob: each trial runs the trialJobSpec with its
    parameters as flags and AIP_MODEL_DIR under its own number; the trials
    come back with Vertex's parameters and measurements under the study's
    metricId (the trainer reports it with cloudml-hypertune's call)."""
    package = stage_package(cli, tmp_path, os.path.join(TRAINERS, "tuning", "trainer"))
    base = f"gs://{cli.bucket}/vertex-tuning"
    records = f"gs://{cli.bucket}/vertex-tuning-records"
    trial_spec = custom_job(package, ["--tag", "accuracy", "--record", records], workers=0)["jobSpec"]
    trial_spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    body = {
        "displayName": "e2e vertex tuning",
        "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                      "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0.0, "maxValue": 1.0}}],
                      "algorithm": "RANDOM_SEARCH"},
        "maxTrialCount": 3, "parallelTrialCount": 2, "trialJobSpec": trial_spec,
    }
    parent = f"projects/{cli.project}/locations/{REGION}"
    status, created = vertex_call(server, "POST", f"/v1/{parent}/hyperparameterTuningJobs", body)
    assert status == 200, created
    job = wait_ended(server, created["name"])
    job_id = created["name"].rsplit("/", 1)[1]
    assert job["state"] == "JOB_STATE_SUCCEEDED", (job, server.logs(cli.project, job_id))
    trials = job["trials"]
    assert sorted(t["id"] for t in trials) == ["1", "2", "3"], trials
    for t in trials:
        assert t["state"] == "SUCCEEDED" and t["startTime"] <= t["endTime"], t
        [param] = t["parameters"]
        assert param["parameterId"] == "x" and isinstance(param["value"], float), t
        x = param["value"]
        final = t["finalMeasurement"]
        assert final["stepCount"] == "3" and final["metrics"][0]["metricId"] == "accuracy", t
        assert abs(final["metrics"][0]["value"] - (-(x - 0.3) ** 2)) < 1e-6, t
        assert [m["stepCount"] for m in t["measurements"]] == ["1", "2", "3"], t
        with open(server.bucket_path(cli.bucket, f"vertex-tuning-records/trial-{t['id']}.json")) as f:
            record = json.load(f)
        assert record["trial"] == t["id"] and record["job_id"] == job_id, record
        assert record["aip_model_dir"] == f"{base}/{t['id']}/model/", record
        assert f"--x={x!r}" in record["argv"] or any(a.startswith("--x=") for a in record["argv"]), record
        assert record["job_dir"] is None, record  # Vertex passes no --job-dir
    # A tuning job is not a custom job.
    status, listed = vertex_call(server, "GET", f"/v1/{parent}/customJobs")
    assert status == 200 and created["name"] not in json.dumps(listed), listed
