"""The study API (AI Platform Vizier) through Google's own client library
(googleapiclient built from api/ml.v1.json, unchanged but for the root URL)
against the real mlengined: every study, trial, location and operation
method, refused configurations naming their field, access without a role,
and a restart that loses nothing and repeats no trial id."""

import copy
import json
import os
import time

import httplib2
import pytest
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from conftest import SOURCE_DIR

REGION = "us-central1"
TYPE = "type.googleapis.com/google.cloud.ml.v1."


class BearerHttp(httplib2.Http):
    """httplib2.Http sending a fixed bearer token (what google-auth's
    AuthorizedHttp does with real credentials)."""

    def __init__(self, token):
        super().__init__(timeout=30, proxy_info=None)
        self._token = token

    def request(self, uri, method="GET", body=None, headers=None, *args, **kw):
        headers = dict(headers or {})
        headers["authorization"] = "Bearer " + self._token
        return super().request(uri, method, body, headers, *args, **kw)


def ml_client(server, token=None):
    with open(os.path.join(SOURCE_DIR, "api", "ml.v1.json")) as f:
        doc = copy.deepcopy(json.load(f))
    doc["rootUrl"] = server.endpoint + "/"
    doc["baseUrl"] = server.endpoint + "/" + doc.get("servicePath", "")
    return build_from_document(doc, http=BearerHttp(token or server.token))


def error_of(e):
    body = json.loads(e.content.decode() if isinstance(e.content, bytes) else e.content)
    return body["error"]


def violations(e):
    err = error_of(e)
    out = []
    for d in err.get("details", []):
        out += [(v["field"], v["description"]) for v in d.get("fieldViolations", [])]
    return out


CONFIG = {
    "algorithm": "RANDOM_SEARCH",
    "metrics": [{"metric": "accuracy", "goal": "MAXIMIZE"}],
    "parameters": [
        {"parameter": "learning_rate", "type": "DOUBLE",
         "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1}, "scaleType": "UNIT_LOG_SCALE"},
        {"parameter": "layers", "type": "INTEGER", "integerValueSpec": {"minValue": "1", "maxValue": "4"}},
        {"parameter": "optimizer", "type": "CATEGORICAL", "categoricalValueSpec": {"values": ["sgd", "adam"]},
         "childParameterSpecs": [
             {"parameter": "momentum", "type": "DISCRETE", "discreteValueSpec": {"values": [0.5, 0.9, 0.99]},
              "parentCategoricalValues": {"values": ["sgd"]}}]},
    ],
}


class Studies:
    """The study API of one project and region, through Google's client."""

    def __init__(self, ml, project, region=REGION):
        self.ml = ml
        self.parent = f"projects/{project}/locations/{region}"
        self.studies = ml.projects().locations().studies()
        self.trials = self.studies.trials()
        self.operations = ml.projects().locations().operations()

    def create(self, study_id, config=CONFIG):
        return self.studies.create(parent=self.parent, studyId=study_id, body={"studyConfig": config}).execute()

    def name(self, study_id):
        return f"{self.parent}/studies/{study_id}"

    def suggest(self, study_id, count, client_id, timeout=30):
        """suggest, then operations.get until done: the trials it answered."""
        op = self.trials.suggest(parent=self.name(study_id),
                                 body={"suggestionCount": count, "clientId": client_id}).execute()
        assert op["metadata"]["@type"] == TYPE + "SuggestTrialsMetadata", op
        assert op["metadata"]["study"] == self.name(study_id)
        assert op["name"].startswith(self.parent + "/operations/"), op
        deadline = time.time() + timeout
        while not op.get("done"):
            assert time.time() < deadline, f"suggest operation never finished: {op}"
            time.sleep(0.1)
            op = self.operations.get(name=op["name"]).execute()
        assert "error" not in op, op
        assert op["response"]["@type"] == TYPE + "SuggestTrialsResponse", op
        assert self.operations.get(name=op["name"]).execute() == op
        return op["response"].get("trials", []), op

    def complete(self, trial_name, **metrics):
        return self.trials.complete(name=trial_name, body={"finalMeasurement": {
            "stepCount": "10", "metrics": [{"metric": k, "value": v} for k, v in metrics.items()]}}).execute()


def params_of(trial):
    out = {}
    for p in trial["parameters"]:
        out[p["parameter"]] = p.get("floatValue", p.get("intValue", p.get("stringValue")))
    return out


@pytest.fixture
def studies(server, names):
    server.projects.add(names.project)
    return Studies(ml_client(server), names.project)


def test_study_lifecycle(studies):
    created = studies.create("mnist_tuning")
    assert created["name"] == studies.name("mnist_tuning")
    assert created["state"] == "ACTIVE"
    assert created["studyConfig"]["parameters"][1]["integerValueSpec"] == {"minValue": "1", "maxValue": "4"}
    assert created["createTime"].endswith("Z")
    assert studies.studies.get(name=created["name"]).execute() == created
    studies.create("second")
    listed = studies.studies.list(parent=studies.parent).execute()["studies"]
    assert [s["name"] for s in listed] == [studies.name("mnist_tuning"), studies.name("second")]

    with pytest.raises(HttpError) as e:
        studies.create("mnist_tuning")
    assert e.value.resp.status == 409 and error_of(e.value)["status"] == "ALREADY_EXISTS"

    assert studies.studies.delete(name=studies.name("second")).execute() == {}
    with pytest.raises(HttpError) as e:
        studies.studies.get(name=studies.name("second")).execute()
    assert e.value.resp.status == 404
    assert [s["name"] for s in studies.studies.list(parent=studies.parent).execute()["studies"]] == [
        studies.name("mnist_tuning")]


def test_trials_create_measure_complete_stop_delete(studies):
    study = studies.name("manual")
    studies.create("manual")
    body = {"parameters": [{"parameter": "learning_rate", "floatValue": 0.01},
                           {"parameter": "layers", "intValue": "2"},
                           {"parameter": "optimizer", "stringValue": "adam"}]}
    t1 = studies.trials.create(parent=study, body=body).execute()
    assert t1["name"] == f"{study}/trials/1" and t1["state"] == "ACTIVE", t1
    assert params_of(t1) == {"learning_rate": 0.01, "layers": "2", "optimizer": "adam"}
    assert studies.trials.get(name=t1["name"]).execute() == t1

    measured = studies.trials.addMeasurement(name=t1["name"], body={"measurement": {
        "stepCount": "100", "metrics": [{"metric": "accuracy", "value": 0.7}]}}).execute()
    assert measured["measurements"][0]["stepCount"] == "100"
    assert measured["measurements"][0]["elapsedTime"].endswith("s")
    done = studies.trials.complete(name=t1["name"], body={}).execute()  # the latest measurement is final
    assert done["state"] == "COMPLETED" and done["finalMeasurement"]["metrics"] == [
        {"metric": "accuracy", "value": 0.7}], done
    assert done["endTime"]
    with pytest.raises(HttpError) as e:
        studies.trials.complete(name=t1["name"], body={}).execute()
    assert error_of(e.value)["status"] == "FAILED_PRECONDITION"
    with pytest.raises(HttpError) as e:
        studies.trials.addMeasurement(name=t1["name"], body={"measurement": {
            "metrics": [{"metric": "accuracy", "value": 0.8}]}}).execute()
    assert error_of(e.value)["status"] == "FAILED_PRECONDITION"

    t2 = studies.trials.create(parent=study, body=body).execute()
    infeasible = studies.trials.complete(name=t2["name"], body={
        "trialInfeasible": True, "infeasibleReason": "out of memory"}).execute()
    assert infeasible["trialInfeasible"] is True and infeasible["infeasibleReason"] == "out of memory"
    assert "finalMeasurement" not in infeasible

    t3 = studies.trials.create(parent=study, body=body).execute()
    stopping = studies.trials.stop(name=t3["name"], body={}).execute()
    assert stopping["state"] == "STOPPING"
    assert studies.trials.stop(name=t3["name"], body={}).execute()["state"] == "STOPPING"

    listed = studies.trials.list(parent=study).execute()["trials"]
    assert [t["name"].rsplit("/", 1)[1] for t in listed] == ["1", "2", "3"]
    assert studies.trials.delete(name=t3["name"]).execute() == {}
    t4 = studies.trials.create(parent=study, body=body).execute()
    assert t4["name"] == f"{study}/trials/4"  # a deleted trial's id is not reused
    assert [t["name"].rsplit("/", 1)[1] for t in studies.trials.list(parent=study).execute()["trials"]] == [
        "1", "2", "4"]


def test_suggest_gives_a_client_its_pending_trials(studies):
    study = studies.name("suggested")
    studies.create("suggested")
    first, op = studies.suggest("suggested", 2, "worker-1")
    assert op["metadata"]["clientId"] == "worker-1" and op["metadata"]["suggestionCount"] == 2
    assert op["response"]["studyState"] == "ACTIVE"
    assert [t["state"] for t in first] == ["ACTIVE", "ACTIVE"]
    for t in first:
        assert t["clientId"] == "worker-1"
        p = params_of(t)
        assert 0.0001 <= p["learning_rate"] <= 0.1
        assert 1 <= int(p["layers"]) <= 4
        assert p["optimizer"] in ("sgd", "adam")
        assert ("momentum" in p) == (p["optimizer"] == "sgd"), p
        assert p.get("momentum", 0.5) in (0.5, 0.9, 0.99)
    again, _ = studies.suggest("suggested", 2, "worker-1")
    assert [t["name"] for t in again] == [t["name"] for t in first]
    other, _ = studies.suggest("suggested", 1, "worker-2")
    assert other[0]["name"] == f"{study}/trials/3"

    studies.complete(first[0]["name"], accuracy=0.9)
    later, _ = studies.suggest("suggested", 2, "worker-1")
    assert [t["name"] for t in later] == [first[1]["name"], f"{study}/trials/4"]

    with pytest.raises(HttpError) as e:
        studies.ml.projects().locations().operations().cancel(name=_["name"]).execute()
    assert error_of(e.value)["status"] == "FAILED_PRECONDITION"


def test_early_stopping_and_optimal_trials(studies):
    config = {
        "metrics": [{"metric": "accuracy", "goal": "MAXIMIZE"}, {"metric": "latency", "goal": "MINIMIZE"}],
        "parameters": [{"parameter": "layers", "type": "INTEGER",
                        "integerValueSpec": {"minValue": "1", "maxValue": "8"}}],
        "automatedStoppingConfig": {"medianAutomatedStoppingConfig": {"useElapsedTime": False}},
    }
    study = studies.name("pareto")
    created = studies.create("pareto", config)
    assert created["studyConfig"]["automatedStoppingConfig"] == {
        "medianAutomatedStoppingConfig": {"useElapsedTime": False}}
    # (accuracy, latency): the front is 1, 2, 4 and 5; 3 is dominated by 2.
    points = [(0.9, 30.0), (0.8, 10.0), (0.7, 20.0), (0.95, 50.0), (0.5, 5.0)]
    names = []
    for i, (acc, lat) in enumerate(points):
        t = studies.trials.create(parent=study, body={
            "parameters": [{"parameter": "layers", "intValue": str(i + 1)}]}).execute()
        studies.trials.addMeasurement(name=t["name"], body={"measurement": {
            "stepCount": "5", "metrics": [{"metric": "accuracy", "value": acc}, {"metric": "latency", "value": lat}]}}
        ).execute()
        studies.complete(t["name"], accuracy=acc, latency=lat)
        names.append(t["name"])
    optimal = studies.trials.listOptimalTrials(parent=study, body={}).execute()["trials"]
    assert [t["name"] for t in optimal] == [names[0], names[1], names[3], names[4]]

    # A trial far below the median at step 5 should stop; a good one goes on.
    bad = studies.trials.create(parent=study, body={"parameters": [{"parameter": "layers", "intValue": "6"}]}
                                ).execute()
    studies.trials.addMeasurement(name=bad["name"], body={"measurement": {
        "stepCount": "5", "metrics": [{"metric": "accuracy", "value": 0.1}, {"metric": "latency", "value": 1}]}}
    ).execute()
    op = studies.trials.checkEarlyStoppingState(name=bad["name"], body={}).execute()
    assert op["done"] is True, op
    assert op["metadata"]["@type"] == TYPE + "CheckTrialEarlyStoppingStateMetatdata"
    assert op["metadata"]["trial"] == bad["name"]
    assert op["response"]["@type"] == TYPE + "CheckTrialEarlyStoppingStateResponse"
    assert op["response"]["shouldStop"] is True
    assert studies.trials.get(name=bad["name"]).execute()["state"] == "STOPPING"
    assert studies.operations.get(name=op["name"]).execute() == op

    good = studies.trials.create(parent=study, body={"parameters": [{"parameter": "layers", "intValue": "7"}]}
                                 ).execute()
    studies.trials.addMeasurement(name=good["name"], body={"measurement": {
        "stepCount": "5", "metrics": [{"metric": "accuracy", "value": 0.99}, {"metric": "latency", "value": 1}]}}
    ).execute()
    op = studies.trials.checkEarlyStoppingState(name=good["name"], body={}).execute()
    assert op["response"]["shouldStop"] is False


def test_locations(server, names):
    ml = ml_client(server)
    locations = ml.projects().locations()
    got = locations.get(name=f"projects/{names.project}/locations/us-central1").execute()
    assert got["name"] == f"projects/{names.project}/locations/us-central1"
    (training,) = got["capabilities"]
    assert training["type"] == "TRAINING"
    assert {"TPU_V2", "TPU_V3", "NVIDIA_TESLA_T4"} <= set(training["availableAccelerators"])
    listed = locations.list(parent=f"projects/{names.project}").execute()["locations"]
    by_name = {l["name"].rsplit("/", 1)[1]: l for l in listed}
    assert {"us-central1", "europe-west4", "us-east1", "asia-east1"} <= set(by_name)
    for region, location in by_name.items():
        accelerators = set(location["capabilities"][0]["availableAccelerators"])
        assert ("TPU_V2" in accelerators) == (region in ("us-central1", "europe-west4")), (region, accelerators)
        assert "NVIDIA_TESLA_V100" in accelerators
    page = locations.list(parent=f"projects/{names.project}", pageSize=2).execute()
    assert len(page["locations"]) == 2 and page["nextPageToken"]
    with pytest.raises(HttpError) as e:
        locations.get(name=f"projects/{names.project}/locations/mars-north1").execute()
    assert e.value.resp.status == 404


@pytest.mark.parametrize("change, field, says", [
    (lambda c: c.update(parameters=[]), "studyConfig.parameters", "at least one parameter"),
    (lambda c: c["parameters"][0]["doubleValueSpec"].update(minValue=0.5, maxValue=0.1),
     "studyConfig.parameters[0].doubleValueSpec.maxValue", "greater than minValue"),
    (lambda c: c["parameters"][2]["childParameterSpecs"][0]["discreteValueSpec"].update(values=[0.9, 0.5]),
     "studyConfig.parameters[2].childParameterSpecs[0].discreteValueSpec.values[1]", "strictly increasing"),
    (lambda c: c.update(metrics=[]), "studyConfig.metrics", "at least one metric"),
    (lambda c: c.update(algorithm="GRID_SEARCH"), "studyConfig.parameters[0].type", "GRID_SEARCH"),
    (lambda c: c["parameters"][1].update(type="FLOAT"), "studyConfig.parameters[1].type", "is not one of"),
    (lambda c: c.update(maxTrials=3), "studyConfig.maxTrials", "Unknown field"),
])
def test_bad_configs_are_refused_with_the_field(studies, change, field, says):
    config = copy.deepcopy(CONFIG)
    change(config)
    with pytest.raises(HttpError) as e:
        studies.create("refused", config)
    assert e.value.resp.status == 400 and error_of(e.value)["status"] == "INVALID_ARGUMENT"
    assert any(f == field and says in d for f, d in violations(e.value)), violations(e.value)


def test_trial_with_an_unknown_parameter_is_refused(studies):
    studies.create("strict")
    with pytest.raises(HttpError) as e:
        studies.trials.create(parent=studies.name("strict"), body={"parameters": [
            {"parameter": "learning_rate", "floatValue": 0.01}, {"parameter": "layers", "intValue": "2"},
            {"parameter": "optimizer", "stringValue": "adam"}, {"parameter": "dropout", "floatValue": 0.5}]}
        ).execute()
    assert e.value.resp.status == 400
    assert any(f == "parameters[3].parameter" and 'unknown parameter "dropout"' in d
               for f, d in violations(e.value)), violations(e.value)
    with pytest.raises(HttpError) as e:
        studies.studies.create(parent=studies.parent, body={"studyConfig": CONFIG}).execute()
    assert any(f == "studyId" for f, _ in violations(e.value)), violations(e.value)


def test_a_user_without_a_role_is_denied(server, names):
    server.projects.add(names.project)
    email = f"nobody{names.suffix}@example.com"
    status, text = server.request("POST", "/mlengine/v1/users", {"email": email})
    assert status == 200, text
    status, text = server.request("POST", f"/mlengine/v1/users/{email}:generateToken", {})
    assert status == 200, text
    as_user = Studies(ml_client(server, json.loads(text)["accessToken"]), names.project)
    calls = [
        ("ml.studies.list", lambda: as_user.studies.list(parent=as_user.parent).execute()),
        ("ml.studies.create", lambda: as_user.create("denied")),
        ("ml.locations.list", lambda: as_user.ml.projects().locations().list(
            parent=f"projects/{names.project}").execute()),
        ("ml.trials.create", lambda: as_user.trials.suggest(
            parent=as_user.name("x"), body={"suggestionCount": 1, "clientId": "c"}).execute()),
    ]
    for permission, call in calls:
        with pytest.raises(HttpError) as e:
            call()
        err = error_of(e.value)
        assert e.value.resp.status == 403 and err["status"] == "PERMISSION_DENIED", err
        assert permission in err["message"], err


def test_restart_loses_nothing_and_repeats_no_trial_id(server_factory, names):
    server = server_factory()
    server.projects.add(names.project)
    studies = Studies(ml_client(server), names.project)
    study = studies.name("durable")
    studies.create("durable")
    trials, op = studies.suggest("durable", 3, "w")
    studies.complete(trials[0]["name"], accuracy=0.5)
    assert studies.trials.delete(name=trials[2]["name"]).execute() == {}
    before = studies.trials.list(parent=study).execute()
    study_before = studies.studies.get(name=study).execute()

    server.kill()  # kill -9: only what was durable survives
    server.start()
    studies = Studies(ml_client(server), names.project)
    assert studies.studies.get(name=study).execute() == study_before
    assert studies.trials.list(parent=study).execute() == before
    assert studies.operations.get(name=op["name"]).execute() == op
    again, _ = studies.suggest("durable", 2, "w")
    assert [t["name"] for t in again] == [trials[1]["name"], f"{study}/trials/4"]
