"""/metrics, request ids and the server's log, on the real mlengined.

/metrics is parsed with Prometheus' own text-format parser
(prometheus_client.parser), and the values must move as the API is used:
jobs created and cancelled, bad requests, unknown routes.
"""

import json
import re
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from conftest import MLENGINED, assert_error, tpu_job, wait_for

HEX16 = re.compile(r"^[0-9a-f]{16}$")


def scrape(server, token=None):
    """One GET /metrics, parsed: ({(sample name, frozenset(labels)): value}, {family name: type})."""
    r = server.request("GET", "/metrics", token=token)
    assert r.status == 200, r
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    samples = {}
    families = {}
    for family in text_string_to_metric_families(r.text):
        families[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, families


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def requests(samples, route, code, method):
    return value(samples, "mlengine_http_request_duration_seconds_count", route=route, code=str(code), method=method)


def test_metrics_parse_and_move_with_jobs_and_bad_requests(fresh_server):
    s = fresh_server
    before, _ = scrape(s)
    assert value(before, "mlengine_jobs", state="QUEUED") == 0

    project = "metrics-p"
    for i in range(3):
        s.create_ok(project, tpu_job("m%d" % i))
    status, body = s.create(project, {"jobId": "bad", "trainingInput": {"scaleTier": "NO_SUCH_TIER"}})
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    status, body = s.call("GET", "/v1/projects/%s/jobs" % project, token=None)
    assert_error(status, body, 401, "UNAUTHENTICATED")
    status, body = s.call("GET", "/v1/projects/%s/nothing-here" % project)
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = s.cancel(project, "m0")
    assert status == 200, body
    s.wait_state(project, "m0", "CANCELLED")

    after, families = scrape(s)
    assert families["mlengine_http_request_duration_seconds"] == "histogram"
    assert families["mlengine_jobs"] == "gauge"
    assert families["mlengine_store_commit_seconds"] == "histogram"
    assert families["mlengine_scheduling_pass_seconds"] == "histogram"
    assert families["mlengine_placement_seconds"] == "histogram"
    assert value(after, "mlengine_jobs", state="QUEUED") == 2
    assert value(after, "mlengine_jobs", state="CANCELLED") == 1
    assert value(after, "mlengine_jobs", state="RUNNING") == 0
    assert value(after, "mlengine_queue_length", project=project) == 2
    assert value(after, "mlengine_queue_oldest_wait_seconds", project=project) >= 0

    create = "ml.projects.jobs.create"
    assert requests(after, create, 200, "POST") - requests(before, create, 200, "POST") == 3
    assert requests(after, create, 400, "POST") - requests(before, create, 400, "POST") == 1
    assert requests(after, "ml.projects.jobs.list", 401, "GET") == 1
    assert requests(after, "none", 404, "GET") == 1
    assert requests(after, "ml.projects.jobs.cancel", 200, "POST") == 1
    # The histogram is whole: its +Inf bucket counts every observation.
    key = dict(route=create, code="200", method="POST")
    assert value(after, "mlengine_http_request_duration_seconds_bucket", le="+Inf", **key) == \
        value(after, "mlengine_http_request_duration_seconds_count", **key)
    assert value(after, "mlengine_http_request_duration_seconds_sum", **key) > 0

    # 3 creates, a project and a cancel were made durable, in one commit or more.
    commits = value(after, "mlengine_store_commit_seconds_count") - value(before, "mlengine_store_commit_seconds_count")
    assert commits >= 1
    assert value(after, "mlengine_store_commit_batch_size_sum") - \
        value(before, "mlengine_store_commit_batch_size_sum") >= 4
    # The scrapes themselves are requests too.
    assert requests(after, "metrics", 200, "GET") >= 1


def test_scheduler_metrics_move_when_the_local_executor_places_a_job(launcher):
    s = launcher.start(executor="local")
    before, _ = scrape(s)
    project = "metrics-local"
    job = {"jobId": "nopkg", "trainingInput": {"packageUris": ["gs://nowhere/missing-0.1.tar.gz"],
                                              "runtimeVersion": "pytorch-1.13-cpu", "region": "us-central1",
                                              "pythonModule": "trainer.task"}}
    s.create_ok(project, job)
    s.wait_state(project, "nopkg", "FAILED", timeout=30)
    after, _ = scrape(s)
    assert value(after, "mlengine_scheduling_pass_seconds_count") > value(before, "mlengine_scheduling_pass_seconds_count")
    assert value(after, "mlengine_placement_seconds_count") > value(before, "mlengine_placement_seconds_count")
    assert value(after, "mlengine_queue_wait_seconds_count", project=project) == 1
    assert value(after, "mlengine_jobs", state="FAILED") == 1
    # The local watcher's rounds (it wakes at least once a second).
    wait_for(lambda: value(scrape(s)[0], "mlengine_executor_poll_seconds_count", executor="local") >= 1,
             "a round of the local executor's watcher", timeout=10)


def test_metrics_access_by_flag(launcher):
    # Default (loopback): a scraper on this machine needs no token.
    scrape(launcher.start())
    # token: the admin token, even from this machine.
    s = launcher.start(args=["--metrics-access", "token"])
    status, body = s.call("GET", "/metrics", token=None)
    assert_error(status, body, 401, "UNAUTHENTICATED")
    scrape(s, token=s.token)
    r = s.request("GET", "/metrics?access_token=" + s.token, token=None)
    assert r.status == 200, r
    # open: anyone.
    scrape(launcher.start(args=["--metrics-access", "open"]))
    # Only GET (and HEAD) read metrics.
    status, body = s.call("POST", "/metrics", body={})
    assert_error(status, body, 404, "NOT_FOUND")


def test_request_ids_are_returned_and_in_every_log_line_of_the_request(launcher):
    s = launcher.start(args=["--log-format", "json", "--log-level", "debug"])
    s.set_up_tpu_access("rid")
    r = s.request("POST", "/v1/projects/rid/jobs", body=tpu_job("r1"), headers={"X-Request-Id": "client-id-1"})
    assert r.status == 200, r
    assert r.headers["x-request-id"] == "client-id-1"
    # An id that could break a log line or a header is replaced.
    r = s.request("GET", "/v1/projects/rid/jobs", headers={"X-Request-Id": "bad id\"{}"})
    assert r.status == 200, r
    assert HEX16.match(r.headers["x-request-id"]), r.headers
    # Without one, each request gets its own, errors and storage included.
    ids = set()
    for method, path in (("GET", "/v1/projects/rid/jobs/r1"), ("GET", "/v1/projects/rid/jobs/none"),
                         ("GET", "/storage/v1/b"), ("GET", "/metrics")):
        r = s.request(method, path)
        assert HEX16.match(r.headers.get("x-request-id", "")), (path, r.headers)
        ids.add(r.headers["x-request-id"])
    assert len(ids) == 4

    def create_lines():
        lines = [json.loads(line) for line in s.log_lines()]
        mine = [l for l in lines if l.get("request_id") == "client-id-1"]
        return mine if len(mine) >= 2 else None
    mine = wait_for(create_lines, "the create's log lines")
    for line in mine:
        assert set(line) >= {"time", "level", "component", "message", "request_id"}, line
    # The access line (HTTP layer) and the service's line (written on the store's thread).
    components = {l["component"] for l in mine}
    assert {"http", "service"} <= components, mine
    assert any("projects/rid/jobs/r1" in l["message"] for l in mine if l["component"] == "service"), mine
    # Every line of the log is JSON; none carries a token.
    for line in s.log_lines():
        json.loads(line)
        assert s.token not in line


def test_log_level_and_bad_flags(launcher, tmp_path):
    """--log-level warn leaves out info lines; bad values are refused at start, saying what is accepted."""
    s = launcher.start(args=["--log-level", "warn"])
    status, _ = s.create("quiet", tpu_job("q1"))
    assert status == 200
    s.stop()
    assert not [l for l in s.log_lines() if " info " in l], s.log_lines()

    for flag, value_, expected in (("--log-level", "loud", "trace, debug, info, warn, error or off"),
                                   ("--log-format", "xml", "text or json"),
                                   ("--metrics-access", "everyone", "loopback, token or open")):
        p = subprocess.run([MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                            "--executor", "none", flag, value_], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0, p
        assert expected in p.stderr, p.stderr
