"""projects.getConfig and projects.jobs.{create,get,list,patch,cancel} over HTTP."""

import base64
import datetime
import threading

import pytest

from conftest import (RFC3339_RE, assert_error, assert_invalid, no_positions, tpu_job, violation_fields,
                      violations, wait_for)


def parse_time(text):
    assert RFC3339_RE.match(text), "not an RFC 3339 timestamp: %r" % text
    head, _, frac = text.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t + datetime.timedelta(microseconds=int((frac + "000000")[:6]) if frac else 0)


def ids(jobs):
    return [j["jobId"] for j in jobs]


def without_position(job):
    return {k: v for k, v in job.items() if k != "jobPosition"}


# ---------------------------------------------------------------------------
# getConfig


def test_get_config_shape_and_stability(server, project):
    status, cfg = server.get_config(project)
    assert status == 200, cfg
    assert set(cfg) == {"serviceAccount", "serviceAccountProject", "config"}, cfg
    number = cfg["serviceAccountProject"]
    assert isinstance(number, str) and number.isdigit() and not number.startswith("0"), cfg
    assert 0 < int(number) < 2 ** 63
    assert "@" in cfg["serviceAccount"], cfg
    assert set(cfg["config"]) == {"tpuServiceAccount"}, cfg
    assert "@" in cfg["config"]["tpuServiceAccount"], cfg
    assert cfg["config"]["tpuServiceAccount"] != cfg["serviceAccount"]
    for _ in range(3):
        assert server.get_config(project) == (200, cfg)
    # Another project has its own number and accounts.
    status, other = server.get_config(project + "-other")
    assert status == 200
    assert other["serviceAccountProject"] != number
    assert other["serviceAccount"] != cfg["serviceAccount"]


def test_get_config_same_number_as_created_by_first_job(server, project):
    # A project first seen through jobs.create gets its number then; getConfig reports that one.
    # (A CPU job: a TPU job needs the project's TPU service account set up first.)
    project = project + "-fresh"
    status, body = server.call("POST", "/v1/projects/%s/jobs" % project, tpu_job("first", scaleTier="BASIC"))
    assert status == 200, body
    status, cfg = server.get_config(project)
    assert status == 200
    assert server.get_config(project) == (200, cfg)


def test_get_config_stable_across_restart(launcher):
    data = launcher.new_data_dir()
    s1 = launcher.start(data)
    status, before = s1.get_config("p1")
    assert status == 200
    status, before2 = s1.get_config("p2")
    assert status == 200
    assert s1.stop() == 0
    s2 = launcher.start(data)
    assert s2.get_config("p1") == (200, before)
    assert s2.get_config("p2") == (200, before2)


def test_get_config_rejects_other_methods(server, project):
    status, body = server.call("POST", "/v1/projects/%s:getConfig" % project, {})
    assert 400 <= status < 500, body
    assert "error" in body


# ---------------------------------------------------------------------------
# create / get


def test_create_returns_the_job(server, project):
    job = tpu_job()
    status, got = server.create(project, job)
    assert status == 200, got
    assert got["jobId"] == "tpu_mnist_1"
    assert got["state"] == "QUEUED"
    assert got["trainingInput"] == job["trainingInput"]
    assert got["labels"] == {"team": "vision"}
    created = parse_time(got["createTime"])
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - created).total_seconds()) < 120, (got["createTime"], now)
    etag = base64.b64decode(got["etag"], validate=True)
    assert etag, got["etag"]
    # Nothing that has not happened yet is reported.
    for absent in ("startTime", "endTime", "errorMessage", "trainingOutput", "predictionOutput", "name"):
        assert absent not in got, got
    if "jobPosition" in got:
        assert isinstance(got["jobPosition"], str) and got["jobPosition"].isdigit()


def test_timestamps_use_0_3_6_or_9_fractional_digits(server, project):
    # proto3 JSON (what Google APIs emit): Z-normalized, with 0, 3, 6 or 9
    # fractional digits. Parsers such as Python < 3.11 datetime.fromisoformat
    # accept only 3 or 6. Microsecond values ending in 0 show trailing-zero
    # trimming, so many jobs are created.
    bad = []
    for i in range(100):
        got = server.create_ok(project, tpu_job("ts_%03d" % i))
        frac = got["createTime"][len("2000-01-01T00:00:00"):-1].lstrip(".")
        if len(frac) not in (0, 3, 6, 9):
            bad.append(got["createTime"])
    assert not bad, (
        "SERVER BUG: timestamps are formatted with a variable number of fractional digits (trailing "
        "zeros trimmed by absl %%E*S in common::FormatRfc3339), e.g. %s; proto3 JSON uses 0, 3, 6 or 9 "
        "digits (use %%E6S for microseconds)." % bad[:3])


def test_get_returns_what_create_returned(server, project):
    created = server.create_ok(project, tpu_job("get_me", labels={"team": "vision", "env": "dev"}))
    status, got = server.get(project, "get_me")
    assert status == 200, got
    assert without_position(got) == without_position(created)
    # Reads do not change the etag.
    assert server.get(project, "get_me")[1]["etag"] == created["etag"]


def test_get_unknown_job_is_404_in_google_format(server, project):
    server.create_ok(project, tpu_job("exists"))
    status, body = server.get(project, "does_not_exist")
    err = assert_error(status, body, 404, "NOT_FOUND")
    assert set(err) == {"code", "message", "status"}, body
    assert "does_not_exist" in err["message"]


def test_get_job_of_unknown_project_is_404(server, project):
    status, body = server.get(project + "-nothing-here", "tpu_mnist_1")
    assert_error(status, body, 404, "NOT_FOUND")


def test_duplicate_job_id_is_409_already_exists(server, project):
    first = server.create_ok(project, tpu_job("dup"))
    status, body = server.create(project, tpu_job("dup", labels={"team": "other"}))
    err = assert_error(status, body, 409, "ALREADY_EXISTS")
    assert "dup" in err["message"]
    # The first job is untouched.
    status, got = server.get(project, "dup")
    assert status == 200
    assert without_position(got) == without_position(first)


def test_same_job_id_in_two_projects(server, project):
    a = server.create_ok(project + "-a", tpu_job("shared_id", labels={"p": "a"}))
    b = server.create_ok(project + "-b", tpu_job("shared_id", labels={"p": "b"}))
    assert a["labels"] == {"p": "a"} and b["labels"] == {"p": "b"}
    assert server.get(project + "-a", "shared_id")[1]["labels"] == {"p": "a"}
    assert server.get(project + "-b", "shared_id")[1]["labels"] == {"p": "b"}


def test_output_only_fields_in_the_body_are_ignored(server, project):
    job = tpu_job("sneaky")
    job.update({"state": "SUCCEEDED", "createTime": "2001-01-01T00:00:00Z", "errorMessage": "x",
                "jobPosition": "7", "endTime": "2001-01-01T00:00:00Z"})
    got = server.create_ok(project, job)
    assert got["state"] == "QUEUED"
    assert not got["createTime"].startswith("2001"), got
    assert "errorMessage" not in got and "endTime" not in got, got


def test_concurrent_creates_of_distinct_jobs(server, project):
    results = []
    lock = threading.Lock()

    def worker(w):
        for i in range(10):
            r = server.create(project, tpu_job("c_%d_%d" % (w, i)))
            with lock:
                results.append(r[0])

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [200] * 60
    listed = server.list_all(project, pageSize=100)
    assert sorted(ids(listed)) == sorted("c_%d_%d" % (w, i) for w in range(6) for i in range(10))
    # Newest first, strictly by createTime.
    times = [parse_time(j["createTime"]) for j in listed]
    assert times == sorted(times, reverse=True)


def test_concurrent_creates_of_the_same_job_id(server, project):
    barrier = threading.Barrier(8)
    results = []
    lock = threading.Lock()

    def worker(w):
        barrier.wait(10)
        r = server.create(project, tpu_job("race", labels={"w": str(w)}))
        with lock:
            results.append(r)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = sorted(s for s, _ in results)
    assert statuses == [200] + [409] * 7, results
    winner = [b for s, b in results if s == 200][0]
    status, got = server.get(project, "race")
    assert got["labels"] == winner["labels"]
    assert ids(server.list_all(project)) == ["race"]


# ---------------------------------------------------------------------------
# list


def test_list_is_newest_first(server, project):
    for name in ("first", "second", "third"):
        server.create_ok(project, tpu_job(name))
    status, body = server.list(project)
    assert status == 200, body
    assert set(body) == {"jobs"}, body  # no nextPageToken on the last page
    assert ids(body["jobs"]) == ["third", "second", "first"]
    for j in body["jobs"]:
        assert j["state"] == "QUEUED"
        assert j["trainingInput"]["scaleTier"] == "BASIC_TPU"


def test_list_of_empty_project_is_exactly_empty_object(server, project):
    r = server.request("GET", "/v1/projects/%s/jobs" % project)
    assert r.status == 200
    assert r.json == {}
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query={"prettyPrint": "false"})
    assert (r.status, r.text) == (200, "{}")
    # A project that exists (has a config) but has no jobs is the same.
    server.get_config(project)
    assert server.list(project) == (200, {})
    # A filter matching nothing too.
    server.create_ok(project, tpu_job("only"))
    assert server.list(project, filter="state=FAILED") == (200, {})


def test_list_paging_25_jobs_by_10(server, project):
    names = ["job_%02d" % i for i in range(25)]
    for n in names:
        server.create_ok(project, tpu_job(n))
    pages = []
    token = None
    while True:
        q = {"pageSize": "10"}
        if token:
            q["pageToken"] = token
        status, body = server.list(project, **q)
        assert status == 200, body
        pages.append(ids(body.get("jobs", [])))
        token = body.get("nextPageToken")
        if not token:
            break
        assert isinstance(token, str) and token
    assert [len(p) for p in pages] == [10, 10, 5]
    flat = [n for p in pages for n in p]
    assert flat == list(reversed(names))
    # Default page size is 20 (also for pageSize=0).
    status, body = server.list(project)
    assert status == 200
    assert len(body["jobs"]) == 20 and body.get("nextPageToken"), body.keys()
    assert no_positions(server.list(project, pageSize="0")) == no_positions((status, body))
    status, rest = server.list(project, pageToken=body["nextPageToken"])
    assert ids(rest["jobs"]) == list(reversed(names))[20:] and "nextPageToken" not in rest
    # Exactly one full page: no token.
    status, body = server.list(project, pageSize="25")
    assert len(body["jobs"]) == 25 and "nextPageToken" not in body
    # A token stays valid while new jobs arrive: the listing continues where it was.
    status, p1 = server.list(project, pageSize="10")
    server.create_ok(project, tpu_job("late_arrival"))
    status, p2 = server.list(project, pageSize="10", pageToken=p1["nextPageToken"])
    assert ids(p2["jobs"]) == list(reversed(names))[10:20]


def test_list_page_size_is_capped_at_100(server, project):
    for i in range(105):
        server.create_ok(project, tpu_job("many_%03d" % i))
    status, body = server.list(project, pageSize="1000")
    assert status == 200
    assert len(body["jobs"]) == 100
    assert body.get("nextPageToken")
    status, rest = server.list(project, pageSize="1000", pageToken=body["nextPageToken"])
    assert ids(rest["jobs"]) == ["many_%03d" % i for i in (4, 3, 2, 1, 0)]
    assert "nextPageToken" not in rest
    status, body = server.list(project, pageSize="100")
    assert len(body["jobs"]) == 100


@pytest.mark.parametrize("size", ["-1", "abc", "1.5", "99999999999999999999"])
def test_list_bad_page_size_is_400(server, project, size):
    status, body = server.list(project, pageSize=size)
    assert_invalid(status, body, "pageSize")


@pytest.fixture
def filter_project(server, project):
    """census_1 (vision, QUEUED), census_2 (nlp, CANCELLED), other_1 (vision, QUEUED, CUSTOM)."""
    server.create_ok(project, tpu_job("census_1", labels={"team": "vision"}))
    server.create_ok(project, tpu_job("census_2", labels={"team": "nlp"}))
    custom = tpu_job("other_1", labels={"team": "vision", "env": "prod"}, scaleTier="CUSTOM",
                     masterType="n1-standard-8")
    server.create_ok(project, custom)
    assert server.cancel(project, "census_2") == (200, {})
    server.wait_state(project, "census_2", "CANCELLED")
    return project


@pytest.mark.parametrize("flt,expected", [
    ("", ["other_1", "census_2", "census_1"]),
    ("state=QUEUED", ["other_1", "census_1"]),
    ("state=CANCELLED", ["census_2"]),
    ("state:CANCELLED", ["census_2"]),
    ("state!=CANCELLED", ["other_1", "census_1"]),
    ("jobId:census*", ["census_2", "census_1"]),
    ("jobId=census_1", ["census_1"]),
    ("labels.team=vision", ["other_1", "census_1"]),
    ("labels.env:*", ["other_1"]),
    ("jobId:census* AND labels.team=vision", ["census_1"]),
    ("jobId:census* labels.team=vision", ["census_1"]),
    ("NOT state=CANCELLED", ["other_1", "census_1"]),
    ("-state=CANCELLED", ["other_1", "census_1"]),
    ("jobId:census* AND NOT labels.team=vision", ["census_2"]),
    ("state=CANCELLED OR labels.env=prod", ["other_1", "census_2"]),
    ("(state=CANCELLED OR labels.env=prod) AND jobId:census*", ["census_2"]),
    ("trainingInput.scaleTier=CUSTOM", ["other_1"]),
    ('labels.team="vision"', ["other_1", "census_1"]),
    ("createTime>2000-01-01", ["other_1", "census_2", "census_1"]),
    ("createTime<2000-01-01", []),
    ('createTime>"2000-01-01T00:00:00Z"', ["other_1", "census_2", "census_1"]),
    ("endTime:*", ["census_2"]),
    ("errorMessage:*", ["census_2"]),
])
def test_list_filter(server, filter_project, flt, expected):
    status, body = server.list(filter_project, filter=flt)
    assert status == 200, body
    assert ids(body.get("jobs", [])) == expected
    # Paging through a filtered listing one at a time gives the same jobs.
    assert ids(server.list_all(filter_project, filter=flt, pageSize="1")) == expected


def test_list_filter_page_token_is_bound_to_its_filter(server, filter_project):
    status, body = server.list(filter_project, filter="state=QUEUED", pageSize="1")
    assert status == 200 and body["nextPageToken"]
    status, other = server.list(filter_project, filter="state=CANCELLED", pageSize="1",
                                pageToken=body["nextPageToken"])
    assert_invalid(status, other, "pageToken")


@pytest.mark.parametrize("flt", [
    "bad((",
    "state=",
    "state",
    "=QUEUED",
    "(state=QUEUED",
    "state=QUEUED)",
    "state=QUEUED AND",
    "nosuchkey=1",
    "state!QUEUED",
    'jobId="unterminated',
])
def test_bad_filter_is_400_on_field_filter(server, project, flt):
    server.create_ok(project, tpu_job("a_job"))
    status, body = server.list(project, filter=flt)
    assert_invalid(status, body, "filter")
    assert violation_fields(body) == ["filter"]


@pytest.mark.parametrize("token", ["garbage!!", "AAAA", "bm90LWEtbnVtYmVyOg", "%%%"])
def test_bad_page_token_is_400(server, project, token):
    server.create_ok(project, tpu_job("a_job"))
    status, body = server.list(project, pageToken=token)
    assert_invalid(status, body, "pageToken")


# ---------------------------------------------------------------------------
# patch


def test_patch_labels(server, project):
    created = server.create_ok(project, tpu_job("patch_me"))
    status, patched = server.patch(project, "patch_me", {"labels": {"team": "nlp", "env": "prod"}}, "labels")
    assert status == 200, patched
    assert patched["labels"] == {"team": "nlp", "env": "prod"}
    assert patched["etag"] != created["etag"]
    base64.b64decode(patched["etag"], validate=True)
    assert patched["trainingInput"] == created["trainingInput"]
    assert patched["createTime"] == created["createTime"]
    assert patched["state"] == "QUEUED"
    status, got = server.get(project, "patch_me")
    assert without_position(got) == without_position(patched)
    # Clearing all labels.
    status, cleared = server.patch(project, "patch_me", {"labels": {}}, "labels")
    assert status == 200, cleared
    assert "labels" not in cleared or cleared["labels"] == {}
    assert cleared["etag"] not in (created["etag"], patched["etag"])


def test_patch_with_current_etag_succeeds_and_stale_etag_is_409_aborted(server, project):
    created = server.create_ok(project, tpu_job("etag_job"))
    old = created["etag"]
    status, p1 = server.patch(project, "etag_job", {"labels": {"v": "1"}, "etag": old}, "labels,etag")
    assert status == 200, p1
    assert p1["labels"] == {"v": "1"}
    status, body = server.patch(project, "etag_job", {"labels": {"v": "2"}, "etag": old}, "labels,etag")
    assert_error(status, body, 409, "ABORTED")
    assert server.get(project, "etag_job")[1]["labels"] == {"v": "1"}
    assert server.get(project, "etag_job")[1]["etag"] == p1["etag"]
    status, p2 = server.patch(project, "etag_job", {"labels": {"v": "2"}, "etag": p1["etag"]}, "labels,etag")
    assert status == 200, p2
    assert p2["labels"] == {"v": "2"}


@pytest.mark.parametrize("mask", ["trainingInput", "labels,trainingInput", "jobId", "state", ""])
def test_patch_with_a_mask_other_than_labels_is_400(server, project, mask):
    created = server.create_ok(project, tpu_job("mask_job"))
    body = {"labels": {"x": "y"}, "trainingInput": {"region": "europe-west4"}}
    status, err = server.patch(project, "mask_job", body, mask)
    assert_invalid(status, err, "updateMask")
    status, got = server.get(project, "mask_job")
    assert without_position(got) == without_position(created)


def test_patch_without_update_mask_is_400(server, project):
    server.create_ok(project, tpu_job("nomask"))
    status, body = server.patch(project, "nomask", {"labels": {"a": "b"}})
    assert_invalid(status, body, "updateMask")


def test_patch_invalid_labels_is_400(server, project):
    server.create_ok(project, tpu_job("badlabels"))
    status, body = server.patch(project, "badlabels", {"labels": {"Upper": "x"}}, "labels")
    assert_invalid(status, body)
    assert any("Upper" in f for f in violation_fields(body)), violations(body)
    assert server.get(project, "badlabels")[1]["labels"] == {"team": "vision"}


def test_patch_unknown_job_is_404(server, project):
    status, body = server.patch(project, "ghost", {"labels": {"a": "b"}}, "labels")
    assert_error(status, body, 404, "NOT_FOUND")


# ---------------------------------------------------------------------------
# cancel


def test_cancel_queued_job(server, project):
    created = server.create_ok(project, tpu_job("cancel_me"))
    status, body = server.cancel(project, "cancel_me")
    assert (status, body) == (200, {})
    status, now = server.get(project, "cancel_me")
    assert now["state"] in ("CANCELLING", "CANCELLED"), now
    done = server.wait_state(project, "cancel_me", "CANCELLED")
    assert done["errorMessage"]
    assert parse_time(done["endTime"]) >= parse_time(created["createTime"])
    assert "jobPosition" not in done
    assert done["etag"] != created["etag"]
    assert done["labels"] == created["labels"]


def test_cancel_of_cancelled_job_is_400_failed_precondition(server, project):
    server.create_ok(project, tpu_job("twice"))
    assert server.cancel(project, "twice") == (200, {})
    final = server.wait_state(project, "twice", "CANCELLED")
    status, body = server.cancel(project, "twice")
    assert_error(status, body, 400, "FAILED_PRECONDITION")
    assert server.get(project, "twice")[1] == final


def test_cancel_without_body_and_unknown_job(server, project):
    server.create_ok(project, tpu_job("nobody"))
    r = server.request("POST", "/v1/projects/%s/jobs/nobody:cancel" % project)
    assert (r.status, r.json) == (200, {})
    server.wait_state(project, "nobody", "CANCELLED")
    status, body = server.cancel(project, "ghost")
    assert_error(status, body, 404, "NOT_FOUND")
    status, body = server.cancel(project, "nobody", {"unexpected": 1})
    assert status == 400, body


def test_cancelled_job_listed_with_its_state(server, project):
    server.create_ok(project, tpu_job("keep"))
    server.create_ok(project, tpu_job("drop"))
    server.cancel(project, "drop")
    server.wait_state(project, "drop", "CANCELLED")
    status, body = server.list(project)
    assert [(j["jobId"], j["state"]) for j in body["jobs"]] == [("drop", "CANCELLED"), ("keep", "QUEUED")]


# ---------------------------------------------------------------------------
# Standard query parameters


@pytest.mark.parametrize("query", [
    {"alt": "json"},
    {"prettyPrint": "true"},
    {"fields": "jobId,state"},
    {"$.xgafv": "2"},
    {"$.xgafv": "1"},
    {"key": "AIzaSyFAKE"},
    {"quotaUser": "someone"},
    {"alt": "json", "prettyPrint": "false", "quotaUser": "q", "key": "k", "$.xgafv": "2"},
])
def test_standard_query_parameters_are_accepted(server, project, query):
    server.create_ok(project, tpu_job("std"))
    r = server.request("GET", "/v1/projects/%s/jobs/std" % project, query=query)
    assert r.status == 200, r
    assert r.json["jobId"] == "std"
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query=query)
    assert r.status == 200, r
    r = server.request("GET", "/v1/projects/%s:getConfig" % project, query=query)
    assert r.status == 200, r


def test_pretty_print_false_gives_compact_json(server, project):
    server.create_ok(project, tpu_job("compact"))
    pretty = server.request("GET", "/v1/projects/%s/jobs/compact" % project)
    compact = server.request("GET", "/v1/projects/%s/jobs/compact" % project, query={"prettyPrint": "false"})
    assert pretty.status == compact.status == 200
    assert "\n" in pretty.text.strip()
    assert "\n" not in compact.text.strip() and ": " not in compact.text and ", " not in compact.text
    assert without_position(compact.json) == without_position(pretty.json)
    assert compact.headers.get("content-type", "").startswith("application/json")
    # Errors honour it too.
    err = server.request("GET", "/v1/projects/%s/jobs/ghost" % project, query={"prettyPrint": "false"})
    assert err.status == 404 and "\n" not in err.text.strip()


@pytest.mark.parametrize("path,query", [
    ("/jobs/std", {"bogus": "1"}),
    ("/jobs", {"page_size": "10"}),
    ("/jobs/std", {"filter": "state=QUEUED"}),  # filter is a jobs.list parameter only
    (":getConfig", {"unknownParam": "x"}),
])
def test_unknown_query_parameter_is_400(server, project, path, query):
    server.create_ok(project, tpu_job("std"))
    status, body = server.call("GET", "/v1/projects/" + project + path, query=query)
    assert_invalid(status, body, list(query)[0])


@pytest.mark.parametrize("query,field", [
    ({"alt": "media"}, "alt"),
    ({"alt": "proto"}, "alt"),
    ({"$.xgafv": "3"}, "$.xgafv"),
    ({"prettyPrint": "maybe"}, "prettyPrint"),
])
def test_unsupported_standard_parameter_values_are_400(server, project, query, field):
    server.create_ok(project, tpu_job("std"))
    status, body = server.call("GET", "/v1/projects/%s/jobs/std" % project, query=query)
    assert_invalid(status, body, field)


def test_unknown_query_parameter_on_create_stores_nothing(server, project):
    status, body = server.call("POST", "/v1/projects/%s/jobs" % project, tpu_job("nope"),
                               query={"dryRun": "true"})
    assert_invalid(status, body, "dryRun")
    assert_error(*server.get(project, "nope"), 404, "NOT_FOUND")


# ---------------------------------------------------------------------------
# jobPosition and priority


def test_job_position_follows_priority_then_age(fresh_server):
    s = fresh_server
    p = "queue"

    def job(name, priority=None):
        j = tpu_job(name)
        if priority is not None:
            j["trainingInput"]["scheduling"] = {"priority": priority}
        return j

    s.create_ok(p, job("old_default"))
    s.create_ok(p, job("young_default"))
    s.create_ok(p, job("old_high", 10))
    s.create_ok(p, job("young_high", "10"))  # int32 given as a string
    s.create_ok(p, job("low", 0))
    s.create_ok(p + "-other", job("elsewhere", 50))  # each project has its queue (fair share orders projects)

    def positions(project, names):
        out = {}
        for n in names:
            status, body = s.get(project, n)
            assert status == 200, body
            if "jobPosition" not in body:
                return None  # the scheduler has not placed it yet
            assert isinstance(body["jobPosition"], str) and body["jobPosition"].isdigit(), body
            out[n] = int(body["jobPosition"])
        return out

    names = ["old_default", "young_default", "old_high", "young_high", "low"]
    got = wait_for(lambda: positions(p, names), "all jobs to have a jobPosition")
    assert got == {"old_high": 1, "young_high": 2, "old_default": 3, "young_default": 4, "low": 5}
    assert wait_for(lambda: positions(p + "-other", ["elsewhere"]), "position") == {"elsewhere": 1}
    # The listing reports the same positions.
    listed = {j["jobId"]: int(j["jobPosition"]) for j in s.list(p)[1]["jobs"]}
    assert listed == got

    # Cancelling the head moves everyone up.
    assert s.cancel(p, "old_high") == (200, {})
    s.wait_state(p, "old_high", "CANCELLED")
    assert "jobPosition" not in s.get(p, "old_high")[1]
    expected = {"young_high": 1, "old_default": 2, "young_default": 3, "low": 4}
    wait_for(lambda: positions(p, list(expected)) == expected, "positions after cancel %s" % expected)


def test_create_response_of_a_queued_job_has_its_job_position(fresh_server):
    # A QUEUED job reports jobPosition; the create response is a QUEUED job too.
    missing = []
    for i in range(100):
        got = fresh_server.create_ok("p", tpu_job("pos_%03d" % i))
        assert got["state"] == "QUEUED"
        if "jobPosition" not in got:
            missing.append(got["jobId"])
        else:
            assert got["jobPosition"] == str(i + 1), got
    assert not missing, (
        "SERVER BUG: the jobs.create response of a QUEUED job has no jobPosition in %d of 100 creates "
        "(%s): JobService::CreateJob calls Scheduler::Submit, which only posts an event, and then "
        "Present() asks QueuePosition before the scheduler thread has placed the job, so the field "
        "appears or not depending on thread timing. A get right after does have it."
        % (len(missing), missing[:5]))


# ---------------------------------------------------------------------------
# int64 on input


@pytest.mark.parametrize("count", ["2", 2])
def test_int64_fields_accept_strings_and_numbers(server, project, count):
    job = tpu_job("custom_%s" % type(count).__name__, scaleTier="CUSTOM", masterType="n1-standard-8",
                  workerType="n1-standard-8", workerCount=count, parameterServerType="n1-standard-4",
                  parameterServerCount=count)
    got = server.create_ok(project, job)
    assert got["trainingInput"]["workerCount"] == "2"
    assert got["trainingInput"]["parameterServerCount"] == "2"
    status, again = server.get(project, job["jobId"])
    assert again["trainingInput"]["workerCount"] == "2"


@pytest.mark.parametrize("count", ["two", 2.5, True, [2], "2.0", ""])
def test_int64_fields_reject_non_integers(server, project, count):
    job = tpu_job("bad_count", scaleTier="CUSTOM", masterType="n1-standard-8",
                  workerType="n1-standard-8", workerCount=count)
    status, body = server.create(project, job)
    assert_invalid(status, body, "trainingInput.workerCount")
    assert_error(*server.get(project, "bad_count"), 404, "NOT_FOUND")


def test_job_iam_policy_round_trips_with_its_etag(server, project):
    server.create_ok(project, tpu_job("iam"))
    status, policy = server.call("GET", "/v1/projects/%s/jobs/iam:getIamPolicy" % project)
    assert status == 200 and "bindings" not in policy and policy["etag"], policy
    status, viewer = server.call("POST", "/mlengine/v1/users", {"email": "job-viewer-%s@example.com" % project})
    assert status == 200, viewer
    bindings = [{"role": "roles/ml.viewer", "members": ["user:" + viewer["email"]]}]
    status, set_ = server.call("POST", "/v1/projects/%s/jobs/iam:setIamPolicy" % project,
                               {"policy": {"bindings": bindings, "etag": policy["etag"]}})
    assert status == 200 and set_["bindings"] == bindings and set_["etag"] != policy["etag"], set_
    # The etag read before the change is stale now.
    status, stale = server.call("POST", "/v1/projects/%s/jobs/iam:setIamPolicy" % project,
                                {"policy": {"bindings": [], "etag": policy["etag"]}})
    assert status == 409 and stale["error"]["status"] == "ABORTED", stale
    assert server.call("GET", "/v1/projects/%s/jobs/iam:getIamPolicy" % project) == (200, set_)
    # A job that does not exist has no policy.
    status, body = server.call("GET", "/v1/projects/%s/jobs/nosuch:getIamPolicy" % project)
    assert status == 404, body


def test_fields_gives_a_partial_response(server, project):
    server.create_ok(project, tpu_job("partial"))
    r = server.request("GET", "/v1/projects/%s/jobs/partial" % project, query={"fields": "jobId,state"})
    assert r.status == 200, r
    assert r.json == {"jobId": "partial", "state": "QUEUED"}
    r = server.request("GET", "/v1/projects/%s/jobs/partial" % project,
                       query={"fields": "trainingInput(scaleTier,region)"})
    assert r.json == {"trainingInput": {"scaleTier": "BASIC_TPU", "region": "us-central1"}}, r.json
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query={"fields": "jobs(jobId),nextPageToken"})
    assert r.status == 200 and r.json == {"jobs": [{"jobId": "partial"}]}, r.json
    # Errors are never trimmed.
    r = server.request("GET", "/v1/projects/%s/jobs/nosuch" % project, query={"fields": "jobId"})
    assert r.status == 404 and r.json["error"]["status"] == "NOT_FOUND"
    r = server.request("GET", "/v1/projects/%s/jobs/partial" % project, query={"fields": "jobs(jobId"})
    assert r.status == 400 and violation_fields(r.json) == ["fields"], r.json
    # A create's answer too: it is encoded after its commit, where it is written.
    r = server.request("POST", "/v1/projects/%s/jobs" % project, body=tpu_job("partial_create"),
                       query={"fields": "jobId,state"})
    assert r.status == 200 and r.json == {"jobId": "partial_create", "state": "QUEUED"}, r.json
