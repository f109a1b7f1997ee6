"""The real Google API client (googleapiclient + httplib2, unchanged) against
mlengined, built from the discovery document in api/ml.v1.json with its root
URL pointed at the server."""

import copy
import json

import httplib2
import pytest
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from conftest import DISCOVERY_DOC, tpu_job, wait_for


class BearerHttp(httplib2.Http):
    """httplib2.Http that sends a fixed bearer token (what google-auth's
    AuthorizedHttp does with real credentials)."""

    def __init__(self, token, **kw):
        super().__init__(timeout=15, proxy_info=None, **kw)
        self._token = token

    def request(self, uri, method="GET", body=None, headers=None, *args, **kw):
        headers = dict(headers or {})
        if self._token is not None:
            headers["authorization"] = "Bearer " + self._token
        return super().request(uri, method, body, headers, *args, **kw)


def load_document(server):
    with open(DISCOVERY_DOC) as f:
        doc = json.load(f)
    doc = copy.deepcopy(doc)
    root = server.url + "/"
    doc["rootUrl"] = root
    doc["baseUrl"] = root + doc.get("servicePath", "")
    return doc


def build_ml(server, token=True):
    http = BearerHttp(server.token if token is True else token)
    return build_from_document(load_document(server), http=http)


@pytest.fixture
def ml(server):
    return build_ml(server)


def error_json(e):
    content = e.content.decode() if isinstance(e.content, bytes) else e.content
    return json.loads(content)


def test_document_points_at_the_server(server):
    doc = load_document(server)
    assert doc["servicePath"] == ""
    assert doc["resources"]["projects"]["resources"]["jobs"]["methods"]["list"]["path"] == "v1/{+parent}/jobs"


def test_get_config(ml, server, project):
    cfg = ml.projects().getConfig(name="projects/" + project).execute()
    assert cfg["serviceAccountProject"].isdigit()
    assert cfg["config"]["tpuServiceAccount"]
    assert server.get_config(project) == (200, cfg)


def test_job_lifecycle(ml, server, project):
    parent = "projects/" + project
    name = parent + "/jobs/tpu_mnist_1"
    jobs = ml.projects().jobs()

    created = jobs.create(parent=parent, body=tpu_job()).execute()
    assert created["jobId"] == "tpu_mnist_1"
    assert created["state"] == "QUEUED"
    assert created["labels"] == {"team": "vision"}

    got = jobs.get(name=name).execute()
    assert got["createTime"] == created["createTime"]
    assert got["etag"] == created["etag"]

    jobs.create(parent=parent, body=tpu_job("census_1", labels={"team": "nlp"})).execute()
    listed = jobs.list(parent=parent, filter="state=QUEUED").execute()
    assert [j["jobId"] for j in listed["jobs"]] == ["census_1", "tpu_mnist_1"]
    listed = jobs.list(parent=parent, filter="jobId:census*").execute()
    assert [j["jobId"] for j in listed["jobs"]] == ["census_1"]

    patched = jobs.patch(name=name, body={"labels": {"team": "vision", "stage": "prod"}},
                         updateMask="labels").execute()
    assert patched["labels"] == {"team": "vision", "stage": "prod"}
    assert patched["etag"] != created["etag"]
    # Optimistic concurrency through the client: the stale etag is refused with 409.
    with pytest.raises(HttpError) as e:
        jobs.patch(name=name, body={"labels": {"x": "y"}, "etag": created["etag"]},
                   updateMask="labels,etag").execute()
    assert e.value.resp.status == 409
    assert error_json(e.value)["error"]["status"] == "ABORTED"

    assert jobs.cancel(name=name, body={}).execute() == {}
    wait_for(lambda: jobs.get(name=name).execute()["state"] == "CANCELLED", "the job to be CANCELLED")
    listed = jobs.list(parent=parent, filter="state=CANCELLED").execute()
    assert [j["jobId"] for j in listed["jobs"]] == ["tpu_mnist_1"]

    with pytest.raises(HttpError) as e:
        jobs.cancel(name=name, body={}).execute()
    assert e.value.resp.status == 400
    assert error_json(e.value)["error"]["status"] == "FAILED_PRECONDITION"


def test_invalid_job_raises_http_error_with_field_violations(ml, project):
    job = tpu_job("9_bad", labels={"Team": "x"}, region="us-east1")
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().create(parent="projects/" + project, body=job).execute()
    assert e.value.resp.status == 400
    err = error_json(e.value)["error"]
    assert err["status"] == "INVALID_ARGUMENT"
    detail = err["details"][0]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    fields = {v["field"] for v in detail["fieldViolations"]}
    assert fields == {"jobId", "labels.Team", "trainingInput.region"}
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().get(name="projects/%s/jobs/9_bad" % project).execute()
    assert e.value.resp.status == 404


def test_not_found_and_already_exists(ml, project):
    jobs = ml.projects().jobs()
    with pytest.raises(HttpError) as e:
        jobs.get(name="projects/%s/jobs/missing" % project).execute()
    assert e.value.resp.status == 404
    assert error_json(e.value)["error"]["status"] == "NOT_FOUND"
    jobs.create(parent="projects/" + project, body=tpu_job("once")).execute()
    with pytest.raises(HttpError) as e:
        jobs.create(parent="projects/" + project, body=tpu_job("once")).execute()
    assert e.value.resp.status == 409
    assert error_json(e.value)["error"]["status"] == "ALREADY_EXISTS"


def test_list_paging_with_list_next(ml, server, project):
    parent = "projects/" + project
    jobs = ml.projects().jobs()
    for i in range(25):
        jobs.create(parent=parent, body=tpu_job("page_%02d" % i)).execute()
    seen, pages = [], 0
    request = jobs.list(parent=parent, pageSize=10)
    while request is not None:
        response = request.execute()
        seen.extend(j["jobId"] for j in response.get("jobs", []))
        pages += 1
        request = jobs.list_next(previous_request=request, previous_response=response)
    assert pages == 3
    assert seen == ["page_%02d" % i for i in reversed(range(25))]
    # An empty project through the client.
    assert jobs.list(parent=parent + "-empty").execute() == {}


def test_custom_job_with_int64_counts(ml, project):
    job = tpu_job("custom_counts", scaleTier="CUSTOM", masterType="n1-highcpu-16", workerType="cloud_tpu",
                  workerCount="1", workerConfig={"acceleratorConfig": {"type": "TPU_V3", "count": "8"}})
    created = ml.projects().jobs().create(parent="projects/" + project, body=job).execute()
    assert created["trainingInput"]["workerCount"] == "1"
    assert created["trainingInput"]["workerConfig"]["acceleratorConfig"] == {"type": "TPU_V3", "count": "8"}


def test_wrong_token_raises_401(server, project):
    ml = build_ml(server, token="not-the-token")
    with pytest.raises(HttpError) as e:
        ml.projects().getConfig(name="projects/" + project).execute()
    assert e.value.resp.status == 401
    assert error_json(e.value)["error"]["status"] == "UNAUTHENTICATED"
    ml = build_ml(server, token=None)
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().list(parent="projects/" + project).execute()
    assert e.value.resp.status == 401


def test_job_iam_methods(ml, project):
    jobs = ml.projects().jobs()
    jobs.create(parent="projects/" + project, body=tpu_job("iam_job")).execute()
    resource = "projects/%s/jobs/iam_job" % project
    policy = jobs.getIamPolicy(resource=resource).execute()
    assert policy.get("bindings") is None and policy["etag"]
    held = jobs.testIamPermissions(resource=resource, body={"permissions": ["ml.jobs.get", "ml.jobs.cancel"]}).execute()
    assert held["permissions"] == ["ml.jobs.get", "ml.jobs.cancel"]  # the operator holds every permission
    with pytest.raises(HttpError) as e:
        jobs.setIamPolicy(resource=resource, body={"policy": {"bindings": [
            {"role": "roles/no.such.role", "members": ["user:a@example.com"]}]}}).execute()
    assert e.value.resp.status == 400 and "roles/no.such.role" in error_json(e.value)["error"]["message"]
