"""Every request needs the admin token: Authorization: Bearer <token> or ?access_token=."""

import os
import re
import stat

import pytest

from conftest import assert_error, tpu_job

ROUTES = [
    ("GET", "/v1/projects/%s:getConfig", None),
    ("GET", "/v1/projects/%s/jobs", None),
    ("POST", "/v1/projects/%s/jobs", tpu_job("unauth_job")),
    ("GET", "/v1/projects/%s/jobs/unauth_job", None),
    ("PATCH", "/v1/projects/%s/jobs/unauth_job?updateMask=labels", {"labels": {"a": "b"}}),
    ("POST", "/v1/projects/%s/jobs/unauth_job:cancel", {}),
    ("GET", "/v1/projects/%s/no/such/route", None),
]


def assert_unauthenticated(r):
    assert_error(r.status, r.json, 401, "UNAUTHENTICATED")
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers


def bad_headers(token):
    wrong = ("0" if token[0] != "0" else "1") + token[1:]  # same length, one character off
    return {
        "none": None,
        "empty": "",
        "wrong_token": "Bearer not-the-token",
        "same_length_wrong_token": "Bearer " + wrong,
        "token_prefix": "Bearer " + token[:-1],
        "token_with_suffix": "Bearer " + token + "x",
        "basic_scheme": "Basic " + token,
        "no_scheme": token,
        "bearer_without_token": "Bearer ",
        "bearer_only": "Bearer",
    }


@pytest.mark.parametrize("case", list(bad_headers("x" * 64)))
@pytest.mark.parametrize("method,path,body", ROUTES, ids=[m + p for m, p, _ in ROUTES])
def test_bad_credentials_are_401(server, project, case, method, path, body):
    value = bad_headers(server.token)[case]
    headers = {} if value is None else {"Authorization": value}
    r = server.request(method, path % project, body=body, token=None, headers=headers)
    assert_unauthenticated(r)


def test_unauthenticated_writes_change_nothing(server, project):
    r = server.request("POST", "/v1/projects/%s/jobs" % project, body=tpu_job("sneak"), token="nope")
    assert_unauthenticated(r)
    assert_error(*server.get(project, "sneak"), 404, "NOT_FOUND")
    server.create_ok(project, tpu_job("mine"))
    r = server.request("POST", "/v1/projects/%s/jobs/mine:cancel" % project, body={}, token=None)
    assert_unauthenticated(r)
    r = server.request("PATCH", "/v1/projects/%s/jobs/mine" % project, body={"labels": {"x": "y"}},
                       query={"updateMask": "labels"}, token="nope")
    assert_unauthenticated(r)
    status, job = server.get(project, "mine")
    assert job["state"] == "QUEUED" and job["labels"] == {"team": "vision"}


def test_authentication_is_checked_before_the_body(server, project):
    # A malformed body without credentials is 401, not 400: nothing is parsed first.
    r = server.request("POST", "/v1/projects/%s/jobs" % project, body="{not json", token=None)
    assert_unauthenticated(r)
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query={"bogus": "1"}, token=None)
    assert_unauthenticated(r)


def test_access_token_query_parameter(server, project):
    r = server.request("GET", "/v1/projects/%s:getConfig" % project, query={"access_token": server.token},
                       token=None)
    assert r.status == 200, r
    assert r.json["serviceAccountProject"].isdigit()
    r = server.request("POST", "/v1/projects/%s/jobs" % project, body=tpu_job("via_query"),
                       query={"access_token": server.token}, token=None)
    assert r.status == 200, r
    assert server.get(project, "via_query")[0] == 200
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query={"access_token": "wrong"}, token=None)
    assert_unauthenticated(r)
    r = server.request("GET", "/v1/projects/%s/jobs" % project, query={"access_token": ""}, token=None)
    assert_unauthenticated(r)


def test_bearer_scheme_is_case_insensitive(server, project):
    for scheme in ("bearer", "BEARER", "Bearer"):
        r = server.request("GET", "/v1/projects/%s/jobs" % project, token=None,
                           headers={"Authorization": "%s %s" % (scheme, server.token)})
        assert r.status == 200, (scheme, r)


def test_admin_token_file(fresh_server):
    data = fresh_server.data_dir
    path = os.path.join(data, "admin.token")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    assert len(lines) == 1, repr(text)
    token = lines[0]
    assert len(token) >= 32 and re.fullmatch(r"[A-Za-z0-9_\-.~+/=]+", token), token
    assert stat.S_IMODE(os.stat(data).st_mode) & 0o077 == 0, "data dir is readable by others"
    assert fresh_server.get_config("p")[0] == 200


def test_token_is_kept_across_restart_and_differs_between_data_dirs(launcher):
    data = launcher.new_data_dir()
    s1 = launcher.start(data)
    token = s1.token
    assert s1.stop() == 0
    s2 = launcher.start(data)
    assert s2.token == token
    assert s2.get_config("p")[0] == 200
    other = launcher.start()
    assert other.token != token
    # One server's token does not open another's.
    r = other.request("GET", "/v1/projects/p:getConfig", token=token)
    assert_unauthenticated(r)


def test_empty_admin_token_file_does_not_brick_the_data_dir(launcher):
    # A first start killed between creating admin.token and writing it leaves
    # an empty file. The next start must still come up (with a usable token).
    data = launcher.new_data_dir()
    os.makedirs(data)
    path = os.path.join(data, "admin.token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        s = launcher.start(data)
    except AssertionError as e:
        raise AssertionError(
            "SERVER BUG: with an empty DATA_DIR/admin.token (what a crash during the first start "
            "leaves) mlengined refuses to start ever again ('cannot create .../admin.token: File "
            "exists'); LoadOrCreateAdminToken falls through to open(O_CREAT|O_EXCL). It should write a "
            "new token (atomically: temp file + fsync + rename) instead. Startup failure: %s"
            % str(e)[:300])
    assert s.token
    assert s.get_config("p")[0] == 200
