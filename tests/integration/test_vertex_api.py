"""Vertex AI's aiplatform v1 customJobs through Google's Python client
(googleapiclient, unchanged), built from api/aiplatform.v1.json with its
root URL pointed at mlengined: create, get, list with paging, cancel, the
errors of a bad spec in Google's format, and the two APIs kept apart (an ml
v1 list does not show a custom job and a custom job's id is no ml v1 job).
The server of this suite runs no job (control plane only): they stay
queued. docs/vertex.md."""

import copy
import json
import os

import pytest
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from conftest import SOURCE_DIR, wait_for
from test_google_client import BearerHttp, error_json

AIPLATFORM_DOC = os.path.join(SOURCE_DIR, "api", "aiplatform.v1.json")
REGION = "us-central1"


def build_aiplatform(server, token=True):
    with open(AIPLATFORM_DOC) as f:
        doc = copy.deepcopy(json.load(f))
    root = server.url + "/"
    doc["rootUrl"] = root
    doc["baseUrl"] = root + doc.get("servicePath", "")
    return build_from_document(doc, http=BearerHttp(server.token if token is True else token))


@pytest.fixture
def vertex(server):
    return build_aiplatform(server).projects().locations()


def package_job(name="vertex-package", **spec):
    body = {
        "displayName": name,
        "labels": {"team": "vision"},
        "jobSpec": {
            "workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "pythonPackageSpec": {
                    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest",
                    "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
                    "pythonModule": "trainer.task",
                    "args": ["--epochs", "2"],
                },
            }],
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/out"},
        },
    }
    body["jobSpec"].update(spec)
    return body


def test_create_get_list_cancel(vertex, server, project):
    parent = f"projects/{project}/locations/{REGION}"
    jobs = vertex.customJobs()
    created = jobs.create(parent=parent, body=package_job()).execute()
    name = created["name"]
    assert name.startswith(parent + "/customJobs/") and name.rsplit("/", 1)[1].isdigit(), created
    assert created["state"] == "JOB_STATE_QUEUED"
    assert created["displayName"] == "vertex-package"
    assert created["labels"] == {"team": "vision"}
    pool = created["jobSpec"]["workerPoolSpecs"][0]
    assert pool["replicaCount"] == "1" and pool["pythonPackageSpec"]["pythonModule"] == "trainer.task"
    assert created["createTime"] and created["updateTime"]

    got = jobs.get(name=name).execute()
    assert got == created

    # Paging: three more, two a page, newest first.
    names = [name] + [jobs.create(parent=parent, body=package_job(f"more-{i}")).execute()["name"] for i in range(3)]
    seen, token = [], None
    while True:
        page = jobs.list(parent=parent, pageSize=2, pageToken=token).execute()
        seen += [j["name"] for j in page.get("customJobs", [])]
        token = page.get("nextPageToken")
        if not token:
            break
    assert seen == list(reversed(names))
    # Another location lists none of them.
    assert jobs.list(parent=f"projects/{project}/locations/europe-west4").execute() == {}
    # Raw, as a client asking for enums as numbers and a partial answer sees a create.
    r = server.request("POST", f"/v1/{parent}/customJobs", body=package_job("numbers"),
                       query={"$alt": "json;enum-encoding=int", "fields": "displayName,state"})
    assert r.status == 200 and r.json == {"displayName": "numbers", "state": 1}, r.json

    assert jobs.cancel(name=name, body={}).execute() == {}
    assert jobs.get(name=name).execute()["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


def test_the_two_apis_keep_their_own_jobs(vertex, server, project):
    parent = f"projects/{project}/locations/{REGION}"
    created = vertex.customJobs().create(parent=parent, body=package_job()).execute()
    job_id = created["name"].rsplit("/", 1)[1]
    r = server.request("GET", f"/v1/projects/{project}/jobs/{job_id}")
    assert r.status == 404, r
    r = server.request("GET", f"/v1/projects/{project}/jobs")
    assert r.status == 200 and r.json.get("jobs", []) == [], r
    # An ml v1 job is no custom job.
    r = server.request("POST", f"/v1/projects/{project}/jobs", {
        "jobId": "ml_one", "trainingInput": {"scaleTier": "BASIC", "region": REGION, "runtimeVersion": "pytorch-1.13-cpu",
                                             "packageUris": ["gs://bucket/p.tar.gz"], "pythonModule": "t.task"}})
    assert r.status == 200, r
    with pytest.raises(HttpError) as e:
        vertex.customJobs().get(name=f"{parent}/customJobs/ml_one").execute()
    assert e.value.resp.status == 404
    assert error_json(e.value)["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize("spec,fields", [
    ({"workerPoolSpecs": []}, ["jobSpec.workerPoolSpecs"]),
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2",
                           "containerSpec": {"imageUri": "gcr.io/p/i"}}]},
     ["jobSpec.workerPoolSpecs[0].replicaCount"]),
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                                           "acceleratorCount": 3},
                           "replicaCount": "1", "containerSpec": {"imageUri": "gcr.io/p/i"}}]},
     ["jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount"]),
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "no-such-machine"}, "replicaCount": "1",
                           "containerSpec": {"imageUri": "gcr.io/p/i"}}],
      "enableWebAccess": True, "persistentResourceId": "pool"},
     ["jobSpec.workerPoolSpecs[0].machineSpec.machineType", "jobSpec.enableWebAccess",
      "jobSpec.persistentResourceId"]),
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                           "pythonPackageSpec": {"executorImageUri": "docker.io/me/mine:1",
                                                 "packageUris": ["gs://b/p.tar.gz"], "pythonModule": "t.task"}}]},
     ["jobSpec.workerPoolSpecs[0].pythonPackageSpec.executorImageUri"]),
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                           "containerSpec": {"imageUri": "gcr.io/p/i"}, "bogus": 1}]},
     ["jobSpec.workerPoolSpecs[0].bogus"]),
])
def test_a_bad_spec_is_refused_with_every_violation(vertex, project, spec, fields):
    body = {"displayName": "bad", "jobSpec": spec}
    with pytest.raises(HttpError) as e:
        vertex.customJobs().create(parent=f"projects/{project}/locations/{REGION}", body=body).execute()
    assert e.value.resp.status == 400
    error = error_json(e.value)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    got = [v["field"] for d in error["details"] for v in d.get("fieldViolations", [])]
    for field in fields:
        assert field in got, (field, error)


def test_a_display_name_is_required_and_nothing_is_stored(vertex, project):
    parent = f"projects/{project}/locations/{REGION}"
    body = package_job()
    del body["displayName"]
    with pytest.raises(HttpError) as e:
        vertex.customJobs().create(parent=parent, body=body).execute()
    assert e.value.resp.status == 400 and "displayName" in e.value.content.decode()
    assert vertex.customJobs().list(parent=parent).execute() == {}


def test_an_unknown_job_and_a_caller_without_the_permission(vertex, server, project):
    parent = f"projects/{project}/locations/{REGION}"
    with pytest.raises(HttpError) as e:
        vertex.customJobs().get(name=f"{parent}/customJobs/123").execute()
    assert e.value.resp.status == 404
    anonymous = build_aiplatform(server, token=None).projects().locations()
    with pytest.raises(HttpError) as e:
        anonymous.customJobs().create(parent=parent, body=package_job()).execute()
    assert e.value.resp.status == 401


def test_delete_takes_an_ended_job_for_good(launcher):
    server = launcher.start()
    project = "delete-project"
    server.set_up_tpu_access(project)
    jobs = build_aiplatform(server).projects().locations().customJobs()
    parent = f"projects/{project}/locations/{REGION}"
    name = jobs.create(parent=parent, body=package_job()).execute()["name"]
    with pytest.raises(HttpError) as e:
        jobs.delete(name=name).execute()  # still queued
    assert e.value.resp.status == 400
    error = error_json(e.value)["error"]
    assert error["status"] == "FAILED_PRECONDITION" and "Cancel it first" in error["message"], error
    jobs.cancel(name=name, body={}).execute()
    # CANCELLING until the scheduler has taken it out of the queue, as on Vertex.
    wait_for(lambda: jobs.get(name=name).execute()["state"] == "JOB_STATE_CANCELLED", "the cancel to end")
    op = jobs.delete(name=name).execute()
    assert op["done"] is True and op["name"].startswith(parent + "/operations/"), op
    assert op["response"]["@type"] == "type.googleapis.com/google.protobuf.Empty"
    with pytest.raises(HttpError) as e:
        jobs.get(name=name).execute()
    assert e.value.resp.status == 404
    assert jobs.list(parent=parent).execute() == {}
    # Gone across a restart too.
    data_dir = server.data_dir
    assert server.stop() == 0
    again = launcher.start(data_dir)
    with pytest.raises(HttpError) as e:
        build_aiplatform(again).projects().locations().customJobs().get(name=name).execute()
    assert e.value.resp.status == 404


def test_list_filters_as_vertex_does(vertex, project):
    parent = f"projects/{project}/locations/{REGION}"
    jobs = vertex.customJobs()
    a = jobs.create(parent=parent, body=dict(package_job("alpha"), labels={"team": "vision"})).execute()["name"]
    b = jobs.create(parent=parent, body=dict(package_job("beta"), labels={"team": "speech"})).execute()["name"]
    jobs.cancel(name=b, body={}).execute()
    wait_for(lambda: jobs.get(name=b).execute()["state"] == "JOB_STATE_CANCELLED", "the cancel to end")

    def names(flt):
        return [j["name"] for j in jobs.list(parent=parent, filter=flt).execute().get("customJobs", [])]

    assert names('display_name="alpha"') == [a]
    assert names("labels.team=speech") == [b]
    assert names('state="JOB_STATE_CANCELLED"') == [b]
    assert names('state="JOB_STATE_QUEUED" OR state="JOB_STATE_CANCELLED"') == [b, a]
    assert names('NOT display_name="alpha" AND labels.team:*') == [b]
    assert names('create_time>"2000-01-01T00:00:00Z"') == [b, a]
    with pytest.raises(HttpError) as e:
        jobs.list(parent=parent, filter="jobId=x").execute()
    assert e.value.resp.status == 400 and "display_name" in e.value.content.decode()


# The console's views of a job (docs/console.md) beside its log: each asks
# for the permission that reads the job, by the API that made it.
JOB_VIEWS = ("logs", "replicas", "metrics", "waiting")


def test_a_vertex_user_reads_the_log_and_views_of_a_custom_job_and_no_other(fresh_server):
    from test_iam import grant, new_user
    server = fresh_server
    project = "vertex-logs"
    user = new_user(server, "vx@example.com")
    grant(server, project, "user:vx@example.com", "roles/aiplatform.user")
    viewer = new_user(server, "mlv@example.com")
    grant(server, project, "user:mlv@example.com", "roles/ml.viewer")
    jobs = build_aiplatform(server, token=user).projects().locations().customJobs()
    name = jobs.create(parent=f"projects/{project}/locations/{REGION}", body=package_job()).execute()["name"]
    job_id = name.rsplit("/", 1)[1]
    r = server.request("GET", f"/v1/projects/{project}/jobs/{job_id}/logs", token=user)
    assert r.status == 200 and r.json["entries"] == [], r
    r = server.request("GET", f"/v1/projects/{project}/jobs/{job_id}/waiting", token=user)
    assert r.status == 200 and r.json["state"] in ("QUEUED", "PREPARING", "RUNNING", "FAILED"), r
    for view in JOB_VIEWS:
        r = server.request("GET", f"/v1/projects/{project}/jobs/{job_id}/{view}", token=user)
        assert r.status == 200, (view, r)
        r = server.request("GET", f"/v1/projects/{project}/jobs/{job_id}/{view}", token=viewer)
        assert r.status == 403 and "aiplatform.customJobs.get" in r.text, (view, r)
    # An ml v1 job's log asks for ml.jobs.get, which a Vertex user lacks.
    r = server.request("POST", f"/v1/projects/{project}/jobs", {
        "jobId": "ml_job", "trainingInput": {"scaleTier": "BASIC", "region": REGION, "runtimeVersion": "2.11",
                                             "packageUris": ["gs://bucket/p.tar.gz"], "pythonModule": "t.task"}})
    assert r.status == 200, r
    for view in JOB_VIEWS:
        r = server.request("GET", f"/v1/projects/{project}/jobs/ml_job/{view}", token=user)
        assert r.status == 403 and "ml.jobs.get" in r.text, (view, r)
        r = server.request("GET", f"/v1/projects/{project}/jobs/ml_job/{view}", token=viewer)
        assert r.status == 200, (view, r)


@pytest.mark.parametrize("location", ["us-east9", "mars-1"])
def test_a_list_in_a_location_not_served_says_so(vertex, project, location):
    for jobs in (vertex.customJobs(), vertex.hyperparameterTuningJobs()):
        with pytest.raises(HttpError) as e:
            jobs.list(parent=f"projects/{project}/locations/{location}").execute()
        assert e.value.resp.status == 400, e.value.content
        assert f"Location {location} is not served by this cluster; it serves: " in e.value.content.decode()


def test_list_read_mask_keeps_only_the_fields_named(vertex, project):
    parent = f"projects/{project}/locations/{REGION}"
    jobs = vertex.customJobs()
    name = jobs.create(parent=parent, body=package_job("masked")).execute()["name"]
    page = jobs.list(parent=parent, readMask="name,display_name,job_spec.base_output_directory").execute()
    assert page["customJobs"] == [{"name": name, "displayName": "masked",
                                   "jobSpec": {"baseOutputDirectory": {"outputUriPrefix": "gs://bucket/out"}}}], page
    with pytest.raises(HttpError) as e:
        jobs.list(parent=parent, readMask="name,(").execute()
    assert e.value.resp.status == 400 and "readMask" in e.value.content.decode()


def tuning_job(name="vertex-tuning", **extra):
    trial = package_job()["jobSpec"]
    body = {
        "displayName": name,
        "studySpec": {
            "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [
                {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1},
                 "scaleType": "UNIT_LOG_SCALE"},
                {"parameterId": "opt", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
            ],
            "algorithm": "RANDOM_SEARCH",
        },
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "trialJobSpec": trial,
    }
    body.update(extra)
    return body


def test_tuning_jobs_are_their_own_collection(vertex, server, project):
    parent = f"projects/{project}/locations/{REGION}"
    tuning = vertex.hyperparameterTuningJobs()
    created = tuning.create(parent=parent, body=tuning_job()).execute()
    name = created["name"]
    assert name.startswith(parent + "/hyperparameterTuningJobs/") and name.rsplit("/", 1)[1].isdigit(), created
    assert created["state"] == "JOB_STATE_QUEUED"
    assert created["studySpec"] == tuning_job()["studySpec"]
    assert created["maxTrialCount"] == 4 and created["parallelTrialCount"] == 2
    assert created["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] == "trainer.task"
    # Its first trials are asked for (off the create's thread); the server
    # runs none: they wait.
    def with_trials():
        job = tuning.get(name=name).execute()
        return job if job.get("trials") else None
    got = wait_for(with_trials, "its first trials")
    trials = got.pop("trials")
    assert got == {k: v for k, v in created.items() if k != "trials"}
    assert 1 <= len(trials) <= 2 and all(t["state"] == "REQUESTED" for t in trials), trials
    for t in trials:
        values = {p["parameterId"]: p["value"] for p in t["parameters"]}
        assert 0.001 <= values["lr"] <= 0.1 and values["opt"] in ("adam", "sgd"), t
    custom = vertex.customJobs().create(parent=parent, body=package_job()).execute()["name"]

    # Each collection lists and gets its own kind; ml v1 sees neither.
    assert [j["name"] for j in tuning.list(parent=parent).execute()["hyperparameterTuningJobs"]] == [name]
    assert [j["name"] for j in vertex.customJobs().list(parent=parent).execute()["customJobs"]] == [custom]
    with pytest.raises(HttpError) as e:
        vertex.customJobs().get(name=name.replace("hyperparameterTuningJobs", "customJobs")).execute()
    assert e.value.resp.status == 404
    with pytest.raises(HttpError) as e:
        tuning.get(name=custom.replace("customJobs", "hyperparameterTuningJobs")).execute()
    assert e.value.resp.status == 404 and "HyperparameterTuningJob does not exist" in e.value.content.decode()
    r = server.request("GET", f"/v1/projects/{project}/jobs/{name.rsplit('/', 1)[1]}")
    assert r.status == 404, r

    # Cancelled, then deleted: a done operation, found again by its name
    # (get, wait, list), under /ui/ too, and then deleted itself.
    tuning.cancel(name=name, body={}).execute()
    # Its trials are stopped first: CANCELLING, then CANCELLED.
    wait_for(lambda: tuning.get(name=name).execute()["state"] == "JOB_STATE_CANCELLED", "the cancel to end")
    op = tuning.delete(name=name).execute()
    assert op["done"] is True and op["name"].startswith(parent + "/operations/"), op
    assert op["metadata"]["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
    operations = vertex.operations()
    assert operations.get(name=op["name"]).execute() == op
    assert operations.wait(name=op["name"], timeout="10s").execute() == op
    assert operations.list(name=parent).execute()["operations"] == [op]
    assert operations.list(name=parent, filter="done=false").execute() == {}
    r = server.request("GET", "/ui/" + op["name"])
    assert r.status == 200 and r.json == op, r
    # The job's own operations: those on it, under its name.
    op_id = op["name"].rsplit("/", 1)[1]
    job_ops = tuning.operations()
    assert job_ops.list(name=name).execute()["operations"] == [op]
    assert job_ops.get(name=f"{name}/operations/{op_id}").execute() == op
    assert job_ops.wait(name=f"{name}/operations/{op_id}", timeout="1s").execute() == op
    job_ops.cancel(name=f"{name}/operations/{op_id}").execute()
    other = f"{parent}/hyperparameterTuningJobs/1234567890123456789"
    assert job_ops.list(name=other).execute() == {}
    with pytest.raises(HttpError) as e:
        job_ops.get(name=f"{other}/operations/{op_id}").execute()
    assert e.value.resp.status == 404 and f"{other}/operations/{op_id} not found" in e.value.content.decode()
    with pytest.raises(HttpError) as e:
        vertex.customJobs().operations().delete(name=f"{parent}/customJobs/{name.rsplit('/', 1)[1]}"
                                                     f"/operations/{op_id}").execute()
    assert e.value.resp.status == 404
    operations.cancel(name=op["name"]).execute()  # done: nothing to cancel
    operations.delete(name=op["name"]).execute()
    with pytest.raises(HttpError) as e:
        operations.get(name=op["name"]).execute()
    assert e.value.resp.status == 404
    assert job_ops.list(name=name).execute() == {}
    with pytest.raises(HttpError) as e:
        tuning.get(name=name).execute()
    assert e.value.resp.status == 404


@pytest.mark.parametrize("study,fields", [
    ({"metrics": [], "parameters": []}, ["studySpec.metrics", "studySpec.parameters"]),
    ({"metrics": [{"metricId": "a", "goal": "MAXIMIZE"}, {"metricId": "b", "goal": "MINIMIZE"}],
      "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 2, "maxValue": 1}}]},
     ["studySpec.metrics", "studySpec.parameters[0].doubleValueSpec.maxValue"]),
    ({"metrics": [{"metricId": "a", "goal": "MAXIMIZE"}],
      "parameters": [{"parameterId": "x", "integerValueSpec": {"minValue": "1", "maxValue": "3"},
                      "categoricalValueSpec": {"values": ["a"]}}],
      "convexAutomatedStoppingSpec": {}},
     ["studySpec.parameters[0]", "studySpec.convexAutomatedStoppingSpec"]),
])
def test_a_bad_study_is_refused_with_every_violation(vertex, project, study, fields):
    parent = f"projects/{project}/locations/{REGION}"
    with pytest.raises(HttpError) as e:
        vertex.hyperparameterTuningJobs().create(parent=parent, body=tuning_job(studySpec=study)).execute()
    assert e.value.resp.status == 400
    error = error_json(e.value)["error"]
    got = [v["field"] for d in error["details"] if "fieldViolations" in d for v in d["fieldViolations"]]
    for f in fields:
        assert f in got, error
    assert not any(f.startswith("trainingInput") for f in got), error
    assert "hyperparameterTuningJobs" not in json.dumps(vertex.hyperparameterTuningJobs().list(parent=parent).execute())


def test_operations_keep_their_own_permissions(fresh_server):
    from test_iam import grant, new_user
    server = fresh_server
    project = "vertex-ops"
    server.set_up_tpu_access(project)
    viewer = new_user(server, "vxv@example.com")
    grant(server, project, "user:vxv@example.com", "roles/aiplatform.viewer")
    ml_viewer = new_user(server, "mlv2@example.com")
    grant(server, project, "user:mlv2@example.com", "roles/ml.viewer")
    parent = f"projects/{project}/locations/{REGION}"
    jobs = build_aiplatform(server).projects().locations().customJobs()
    name = jobs.create(parent=parent, body=package_job()).execute()["name"]
    jobs.cancel(name=name, body={}).execute()
    op = jobs.delete(name=name).execute()
    ops = build_aiplatform(server, token=viewer).projects().locations().operations()
    assert ops.get(name=op["name"]).execute()["done"] is True
    with pytest.raises(HttpError) as e:
        ops.delete(name=op["name"]).execute()
    assert e.value.resp.status == 403 and "aiplatform.operations.delete" in e.value.content.decode()
    # An ml v1 viewer reads ml v1's study operations by this path, not Vertex's.
    r = server.request("GET", "/v1/" + op["name"], token=ml_viewer)
    assert r.status == 403 and "aiplatform.operations.list" in r.text, r
    r = server.request("GET", f"/v1/{parent}/operations/12345", token=ml_viewer)
    assert r.status == 404, r
