"""jobs.create validation over HTTP: refused jobs report every violation in a
google.rpc.BadRequest and store nothing; the TPU guide's configurations are
accepted and round-trip unchanged."""

import copy

import pytest

from conftest import assert_error, assert_invalid, no_positions, tpu_job, violation_fields, violations

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"

PACKAGE = "gs://my-bucket/tpu_mnist_1/3f2a/official-0.0.0.tar.gz"
PYTORCH_111 = "gcr.io/cloud-ml-public/training/pytorch-xla.1-11"
MASTER_IMAGE = "gcr.io/my-project/your-master-image-name:your-master-tag-name"
WORKER_IMAGE = "gcr.io/my-project/your-worker-image-name:your-worker-tag-name"


def runtime_input(**over):
    t = {"region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7",
         "packageUris": [PACKAGE], "pythonModule": "trainer.task"}
    t.update(over)
    return t


def tpu_worker_input(master, accel=None, count="8", **over):
    t = runtime_input(scaleTier="CUSTOM", masterType=master, workerType="cloud_tpu", workerCount="1")
    if accel:
        t["workerConfig"] = {"acceleratorConfig": {"type": accel, "count": count}}
    t.update(over)
    return t


def container_tpu_input(master_image, worker_image, tpu_tf_version, accel="TPU_V2"):
    worker = {"acceleratorConfig": {"type": accel, "count": "8"}, "tpuTfVersion": tpu_tf_version}
    if worker_image:
        worker["imageUri"] = worker_image
    return {"region": "us-central1", "scaleTier": "CUSTOM", "masterType": "n1-highcpu-16",
            "masterConfig": {"imageUri": master_image}, "workerType": "cloud_tpu", "workerCount": "1",
            "workerConfig": worker}


# Every configuration of the TPU training guide, plus ordinary jobs.
ACCEPTED = {
    "guide_basic_tpu_walkthrough": runtime_input(
        scaleTier="BASIC_TPU", pythonModule="official.vision.image_classification.mnist_main",
        args=["--distribution_strategy=tpu", "--data_dir=gs://tfds-data/datasets",
              "--model_dir=gs://my-bucket/tpu_mnist_1_output"]),
    "guide_legacy_master_cloud_tpu": tpu_worker_input("complex_model_m"),
    "guide_compute_engine_master_tpu_v2": tpu_worker_input("n1-highcpu-16", "TPU_V2"),
    "guide_compute_engine_master_tpu_v3": tpu_worker_input("n1-highcpu-16", "TPU_V3"),
    "guide_tpu_v2_pod_128": tpu_worker_input("n1-highcpu-16", "TPU_V2_POD", "128"),
    "guide_tpu_v3_pod_32": tpu_worker_input("n1-highcpu-16", "TPU_V3_POD", "32"),
    "guide_pytorch_xla_1_11": container_tpu_input(PYTORCH_111, PYTORCH_111, "pytorch-1.11"),
    "guide_custom_containers_tpu_v2": container_tpu_input(MASTER_IMAGE, WORKER_IMAGE, "2.11"),
    "guide_custom_containers_tpu_v3": container_tpu_input(MASTER_IMAGE, WORKER_IMAGE, "2.11", "TPU_V3"),
    "basic_tpu_europe_west4_runtime_1_15_python_2_7": runtime_input(
        scaleTier="BASIC_TPU", region="europe-west4", runtimeVersion="1.15", pythonVersion="2.7"),
    "basic_default_tier": runtime_input(),
    "custom_gpus": runtime_input(
        scaleTier="CUSTOM", masterType="n1-standard-8",
        masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
        workerType="n1-standard-8", workerCount="4",
        workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "2"}},
        parameterServerType="n1-highmem-8", parameterServerCount="2",
        evaluatorType="n1-standard-4", evaluatorCount="1"),
    "hyperparameters": runtime_input(hyperparameters={
        "goal": "MAXIMIZE", "maxTrials": 10, "maxParallelTrials": 2,
        "hyperparameterMetricTag": "accuracy", "algorithm": "RANDOM_SEARCH",
        "params": [
            {"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1,
             "scaleType": "UNIT_LOG_SCALE"},
            {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 8,
             "scaleType": "UNIT_LINEAR_SCALE"},
            {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
            {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [16, 32, 64]},
        ]}),
    "scheduling_and_extras": runtime_input(
        scheduling={"maxRunningTime": "7200s", "maxWaitTime": "1800s", "priority": 1000},
        jobDir="gs://my-bucket/output", args=["--epochs=3"],
        serviceAccount="SERVICE_ACCOUNT",  # replaced by one created in the test's project
        network="projects/12345/global/networks/my-vpc", enableWebAccess=False),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_configuration_round_trips(server, project, name):
    job = {"jobId": name, "trainingInput": copy.deepcopy(ACCEPTED[name]), "labels": {"guide": "tpu"}}
    if job["trainingInput"].get("serviceAccount") == "SERVICE_ACCOUNT":
        status, account = server.call("POST", "/v1/projects/%s/serviceAccounts" % project, {"accountId": "trainer"})
        assert status == 200, account
        job["trainingInput"]["serviceAccount"] = account["email"]
    status, created = server.create(project, job)
    assert status == 200, "%s refused: %s" % (name, created)
    assert created["state"] == "QUEUED"
    assert created["trainingInput"] == job["trainingInput"], "the service changed the trainingInput"
    status, got = server.get(project, name)
    assert status == 200
    assert got["trainingInput"] == job["trainingInput"]
    assert got["labels"] == {"guide": "tpu"}
    status, listed = server.list(project, filter="jobId=" + name)
    assert [j["jobId"] for j in listed["jobs"]] == [name]


def test_every_violation_is_reported_at_once(server, project):
    job = tpu_job("9lives", labels={"Team": "ml"}, **tpu_worker_input("n1-highcpu-16", "TPU_V2", "4"))
    t = job["trainingInput"]
    t.update(region="us-east1", workerCount="2", parameterServerType="n1-highmem-8",
             parameterServerCount="1", packageUris=["s3://bucket/p.tar.gz"], scheduling={"priority": 5000},
             hyperparameters={"goal": "MAXIMIZE", "params": [
                 {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.01},
                 {"parameterName": "lr", "type": "INTEGER", "minValue": 1, "maxValue": 2}]})
    status, body = server.create(project, job)
    err = assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert len(err["details"]) == 1 and err["details"][0]["@type"] == BAD_REQUEST
    assert sorted(violation_fields(body)) == sorted([
        "jobId", "labels.Team", "trainingInput.region", "trainingInput.workerCount",
        "trainingInput.parameterServerCount", "trainingInput.workerConfig.acceleratorConfig.count",
        "trainingInput.packageUris[0]", "trainingInput.scheduling.priority",
        "trainingInput.hyperparameters.params[0].maxValue",
        "trainingInput.hyperparameters.params[1].parameterName"]), violations(body)
    # The message names every field too.
    for field in violation_fields(body):
        assert field in err["message"]
    assert_error(*server.get(project, "9lives"), 404, "NOT_FOUND")


def test_schema_violations_are_all_reported(server, project):
    job = tpu_job("schema_bad", labels=[])
    job["unknownTop"] = 1
    job["trainingInput"]["workerConfig"] = {"acceleratorConfig": {"type": "TPU_V9", "count": "x"}, "bogus": 1}
    job["trainingInput"]["args"] = "not-a-list"
    status, body = server.create(project, job)
    assert_invalid(status, body, "unknownTop", "labels", "trainingInput.workerConfig.acceleratorConfig.type",
                   "trainingInput.workerConfig.acceleratorConfig.count", "trainingInput.workerConfig.bogus",
                   "trainingInput.args")


def test_unknown_field_and_semantic_violations_are_reported_together(server, project):
    # The brief: a body with a bad jobId, an unknown field, CUSTOM without
    # masterType and a cloud_tpu worker with workerCount 2 lists all four.
    job = tpu_job("9bad", scaleTier="CUSTOM", workerType="cloud_tpu", workerCount="2")
    job["bogusField"] = 1
    status, body = server.create(project, job)
    got = assert_invalid(status, body)
    expected = ["bogusField", "jobId", "trainingInput.masterType", "trainingInput.workerCount"]
    missing = [f for f in expected if f not in got]
    assert not missing, (
        "SERVER BUG: jobs.create stops at the schema check when the body has an unknown field, so the "
        "semantic violations %s are not reported (got only %s). Expected every violation in one "
        "BadRequest." % (missing, violations(body)))
    assert_error(*server.get(project, "9bad"), 404, "NOT_FOUND")


REFUSED = [
    # (name, job mutation, expected violation fields (exactly))
    ("missing_region", lambda j: j["trainingInput"].pop("region"), ["trainingInput.region"]),
    ("tpu_in_region_without_tpus", lambda j: j["trainingInput"].update(region="us-east1"),
     ["trainingInput.region"]),
    ("tpu_v2_count_4", lambda j: j["trainingInput"].update(
        tpu_worker_input("n1-highcpu-16", "TPU_V2", "4", scaleTier="CUSTOM")),
     ["trainingInput.workerConfig.acceleratorConfig.count"]),
    ("tpu_v2_pod_64", lambda j: j["trainingInput"].update(
        tpu_worker_input("n1-highcpu-16", "TPU_V2_POD", "64")),
     ["trainingInput.workerConfig.acceleratorConfig.count"]),
    ("cloud_tpu_worker_count_2", lambda j: j["trainingInput"].update(
        tpu_worker_input("complex_model_m", workerCount="2")), ["trainingInput.workerCount"]),
    ("custom_without_master", lambda j: j["trainingInput"].update(scaleTier="CUSTOM"),
     ["trainingInput.masterType"]),
    ("tpu_runtime_2_10", lambda j: j["trainingInput"].update(runtimeVersion="2.10"),
     ["trainingInput.runtimeVersion"]),
    ("pytorch_wrong_tpu_tf_version", lambda j: j["trainingInput"].update(
        container_tpu_input(PYTORCH_111, PYTORCH_111, "pytorch-1.10")) or
     [j["trainingInput"].pop(k) for k in ("runtimeVersion", "pythonVersion", "packageUris", "pythonModule")],
     ["trainingInput.workerConfig.tpuTfVersion"]),
    ("tpu_on_compute_engine_master", lambda j: j["trainingInput"].update(
        tpu_worker_input("n1-highcpu-16", "TPU_V2",
                         masterConfig={"acceleratorConfig": {"type": "TPU_V2", "count": "8"}})),
     ["trainingInput.masterConfig.acceleratorConfig.type"]),
    ("missing_job_id", lambda j: j.pop("jobId"), ["jobId"]),
    ("job_id_too_long", lambda j: j.update(jobId="J" + "_" * 128), ["jobId"]),
    ("job_id_with_dash", lambda j: j.update(jobId="my-job"), ["jobId"]),
    ("label_key_upper_case", lambda j: j.update(labels={"Team": "x"}), ["labels.Team"]),
    ("package_not_gcs", lambda j: j["trainingInput"].update(packageUris=["s3://b/p.tar.gz"]),
     ["trainingInput.packageUris[0]"]),
    ("priority_too_high", lambda j: j["trainingInput"].update(scheduling={"priority": 5000}),
     ["trainingInput.scheduling.priority"]),
    ("max_wait_too_short", lambda j: j["trainingInput"].update(scheduling={"maxWaitTime": "60s"}),
     ["trainingInput.scheduling.maxWaitTime"]),
    ("python_version_not_offered", lambda j: j["trainingInput"].update(pythonVersion="3.5"),
     ["trainingInput.pythonVersion"]),
    ("batch_prediction", lambda j: j.update(predictionInput={"dataFormat": "JSON"}), ["predictionInput"]),
    ("no_training_input", lambda j: j.pop("trainingInput"), ["trainingInput"]),
    ("empty_body", lambda j: j.clear(), ["jobId", "trainingInput"]),
    ("unknown_scale_tier", lambda j: j["trainingInput"].update(scaleTier="HUGE"),
     ["trainingInput.scaleTier"]),
    ("bad_duration", lambda j: j["trainingInput"].update(scheduling={"maxRunningTime": "2 hours"}),
     ["trainingInput.scheduling.maxRunningTime"]),
    # What AI Platform did and this server cannot, refused rather than ignored.
    ("kms_key_without_kms", lambda j: j["trainingInput"].update(
        encryptionConfig={"kmsKeyName": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"}),
     ["trainingInput.encryptionConfig.kmsKeyName"]),
    ("web_access_not_served", lambda j: j["trainingInput"].update(enableWebAccess=True),
     ["trainingInput.enableWebAccess"]),
]


def test_validate_only_checks_everything_and_stores_nothing(server, project):
    """validateOnly=true: what a create would answer, nothing created (the
    CLI asks before it builds and uploads a package)."""
    server.set_up_tpu_access(project)
    before = server.list(project)
    path = "/v1/projects/%s/jobs" % project
    status, body = server.call("POST", path, tpu_job("checked_only"), query={"validateOnly": "true"})
    assert status == 200, body
    assert body["jobId"] == "checked_only" and "createTime" not in body, body
    assert_error(*server.get(project, "checked_only"), 404, "NOT_FOUND")
    assert no_positions(server.list(project)) == no_positions(before)
    bad = tpu_job("checked_only")
    bad["trainingInput"]["region"] = "us-east1"
    status, body = server.call("POST", path, bad, query={"validateOnly": "true"})
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert violation_fields(body) == ["trainingInput.region"], violations(body)
    status, body = server.call("POST", path, tpu_job("checked_only"), query={"validateOnly": "maybe"})
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    # A job that exists already is refused as a create would refuse it.
    server.create_ok(project, tpu_job("there_already"))
    status, body = server.call("POST", path, tpu_job("there_already"), query={"validateOnly": "true"})
    assert_error(status, body, 409, "ALREADY_EXISTS")
    status, body = server.call("POST", path, tpu_job("checked_only"), query={"validateOnly": "false"})
    assert status == 200 and body["state"] == "QUEUED", body


@pytest.mark.parametrize("name,mutate,fields", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_job(server, project, name, mutate, fields):
    server.create_ok(project, tpu_job("already_there"))
    before = server.list(project)
    job = tpu_job("refused_job")
    mutate(job)
    status, body = server.create(project, job)
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert sorted(violation_fields(body)) == sorted(fields), violations(body)
    # Nothing is stored for a refused job.
    assert_error(*server.get(project, job.get("jobId") or "refused_job"), 404, "NOT_FOUND")
    assert no_positions(server.list(project)) == no_positions(before)


def test_refused_job_in_new_project_leaves_it_empty(server, project):
    status, body = server.create(project, tpu_job("9nine"))
    assert_invalid(status, body, "jobId")
    assert server.list(project) == (200, {})
    # The id is free for a valid job afterwards.
    server.create_ok(project, tpu_job("nine"))
    assert [j["jobId"] for j in server.list(project)[1]["jobs"]] == ["nine"]
