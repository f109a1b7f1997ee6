"""Hostile and malformed input: every request gets a 4xx answer (or a closed
connection for garbage that is not HTTP), and the server keeps serving."""

import http.client
import json
import socket

import pytest

from conftest import assert_error, assert_invalid, tpu_job, violation_fields


@pytest.fixture
def project_with_job(server, project):
    server.create_ok(project, tpu_job("existing"))
    return project


def assert_still_serving(server, project):
    server.ping()
    status, job = server.get(project, "existing")
    assert status == 200 and job["jobId"] == "existing"


def raw_exchange(server, data, read_timeout=5.0, shut_write=False):
    """Sends raw bytes; returns everything the server sends back until it closes
    (or until read_timeout of silence after some data)."""
    s = socket.create_connection((server.host, server.port), timeout=read_timeout)
    try:
        s.sendall(data)
        if shut_write:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
            if response_complete(out):
                break
        return out
    finally:
        s.close()


def response_complete(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v.strip())
    return False


def parse_raw_response(data):
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    assert parts[0].startswith("HTTP/1."), status_line
    return int(parts[1]), (json.loads(body) if body.strip() else None)


def auth_header(server):
    return ("Authorization: Bearer %s\r\n" % server.token).encode()


# ---------------------------------------------------------------------------
# Bodies


@pytest.mark.parametrize("body", [
    b'{"jobId": ',
    b'{"jobId": "x",}',
    b"{'jobId': 'x'}",
    b"not json at all",
    b'{"jobId": "x"} trailing',
    b'{"jobId": NaN}',
    b"\x00\x01\x02",
], ids=["truncated", "trailing_comma", "single_quotes", "text", "trailing_text", "nan", "binary"])
def test_malformed_json_is_400(server, project_with_job, body):
    status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, body)
    assert_invalid(status, err)
    assert_still_serving(server, project_with_job)


@pytest.mark.parametrize("body", [b"[]", b'[{"jobId": "x"}]', b'"a string"', b"42", b"null", b"true"])
def test_non_object_json_body_is_400(server, project_with_job, body):
    status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, body)
    assert_invalid(status, err)
    assert_still_serving(server, project_with_job)


def test_empty_body_is_400(server, project_with_job):
    for body in (b"", b"   \n"):
        status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, body)
        assert_invalid(status, err)
    assert_still_serving(server, project_with_job)


@pytest.mark.parametrize("mutate,field", [
    (lambda j: j.update(jobId=5), "jobId"),
    (lambda j: j.update(jobId=None, labels=[]), "labels"),
    (lambda j: j.update(labels=[]), "labels"),
    (lambda j: j.update(labels={"team": 5}), "labels.team"),
    (lambda j: j.update(labels="team=vision"), "labels"),
    (lambda j: j.update(trainingInput="x"), "trainingInput"),
    (lambda j: j.update(trainingInput=[]), "trainingInput"),
    (lambda j: j["trainingInput"].update(packageUris="gs://b/p.tar.gz"), "trainingInput.packageUris"),
    (lambda j: j["trainingInput"].update(packageUris=[1]), "trainingInput.packageUris[0]"),
    (lambda j: j["trainingInput"].update(region=["us-central1"]), "trainingInput.region"),
    (lambda j: j["trainingInput"].update(enableWebAccess="yes"), "trainingInput.enableWebAccess"),
    (lambda j: j["trainingInput"].update(scheduling={"priority": "high"}), "trainingInput.scheduling.priority"),
    (lambda j: j["trainingInput"].update(scheduling={"priority": 2 ** 40}), "trainingInput.scheduling.priority"),
    (lambda j: j["trainingInput"].update(workerCount="99999999999999999999"), "trainingInput.workerCount"),
    (lambda j: j.update(etag="!!not base64!!"), "etag"),
], ids=["jobId_number", "null_jobId_labels_list", "labels_list", "label_value_number", "labels_string",
        "trainingInput_string", "trainingInput_list", "packageUris_string", "packageUris_number",
        "region_list", "bool_string", "int32_string", "int32_overflow", "int64_overflow", "etag_not_base64"])
def test_wrong_types_are_400_naming_the_field(server, project_with_job, mutate, field):
    job = tpu_job("typed")
    mutate(job)
    status, err = server.create(project_with_job, job)
    assert_invalid(status, err, field)
    assert_error(*server.get(project_with_job, "typed"), 404, "NOT_FOUND")
    assert_still_serving(server, project_with_job)


def test_wrong_types_in_patch_are_400(server, project_with_job):
    status, err = server.patch(project_with_job, "existing", {"labels": []}, "labels")
    assert_invalid(status, err, "labels")
    status, err = server.patch(project_with_job, "existing", [1], "labels")
    assert_invalid(status, err)
    assert server.get(project_with_job, "existing")[1]["labels"] == {"team": "vision"}


def test_body_over_one_mebibyte_is_refused(server, project_with_job):
    # The headers announce 2 MiB; the server answers without reading the body.
    size = 2 * 1024 * 1024
    req = ("POST /v1/projects/%s/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n" % (project_with_job, size)).encode() + auth_header(server) + b"\r\n"
    status, body = parse_raw_response(raw_exchange(server, req))
    assert status in (413, 400), (status, body)
    assert body["error"]["code"] == status
    assert_still_serving(server, project_with_job)


def test_large_json_body_sent_in_full_is_refused_with_a_readable_413(server, project_with_job):
    # An ordinary client (http.client, as httplib2 does) writes the whole 2 MiB
    # body before it reads the answer. It must get the 413, not a broken pipe.
    job = tpu_job("huge")
    job["trainingInput"]["args"] = ["x" * 1024] * 2048  # ~2 MiB
    outcomes = []
    for _ in range(3):
        try:
            r = server.request("POST", "/v1/projects/%s/jobs" % project_with_job, body=job)
            outcomes.append(r.status)
        except (ConnectionResetError, BrokenPipeError) as e:
            outcomes.append(type(e).__name__)
        assert_error(*server.get(project_with_job, "huge"), 404, "NOT_FOUND")
        assert_still_serving(server, project_with_job)
    assert all(o in (413, 400) for o in outcomes), (
        "SERVER BUG: a client that sends a 2 MiB body gets %s instead of an HTTP 413 response: on "
        "body_limit the server writes the 413 and closes the socket with the rest of the body unread, "
        "so the kernel resets the connection before the client reads the answer. The server should "
        "drain (discard) the body, or half-close and keep reading for a bounded time, before closing."
        % outcomes)


def test_chunked_body_over_the_limit_is_refused(server, project_with_job):
    chunk = b"x" * 65536
    head = ("POST /v1/projects/%s/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            % project_with_job).encode() + auth_header(server) + b"\r\n"
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(24))  # 1.5 MiB
    s = socket.create_connection((server.host, server.port), timeout=5)
    try:
        s.sendall(head)
        try:
            s.sendall(body)
        except (ConnectionResetError, BrokenPipeError):
            pass
        data = b""
        try:
            while not response_complete(data):
                chunk_in = s.recv(65536)
                if not chunk_in:
                    break
                data += chunk_in
        except (ConnectionResetError, socket.timeout):
            pass
    finally:
        s.close()
    if data:
        status, _ = parse_raw_response(data)
        assert status in (413, 400), data[:200]
    assert_still_serving(server, project_with_job)


def test_body_just_under_the_limit_is_parsed(server, project_with_job):
    job = tpu_job("big_but_ok")
    job["trainingInput"]["args"] = ["y" * 1000] * 1000  # ~1 MB < 1 MiB
    status, got = server.create(project_with_job, job)
    assert status == 200, got
    assert len(got["trainingInput"]["args"]) == 1000


@pytest.mark.parametrize("opener,closer", [("[", "]"), ('{"a":', "}")])
def test_deeply_nested_json_is_400(server, project_with_job, opener, closer):
    body = opener * 10000 + closer * 10000
    status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, body)
    assert_invalid(status, err)
    # Unbalanced and nested inside a valid-looking job too.
    body = '{"jobId": "deep", "labels": ' + "[" * 10000
    status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, body)
    assert_invalid(status, err)
    status, err = server.call("POST", "/v1/projects/%s/jobs/existing:cancel" % project_with_job, "[" * 10000)
    assert_invalid(status, err)
    status, err = server.call("PATCH", "/v1/projects/%s/jobs/existing" % project_with_job, "[" * 10000,
                              query={"updateMask": "labels"})
    assert_invalid(status, err)
    assert_still_serving(server, project_with_job)


def test_moderate_nesting_is_a_schema_error_not_a_crash(server, project_with_job):
    job = tpu_job("nested")
    value = "v"
    for _ in range(40):
        value = {"k": value}
    job["labels"] = {"team": value}
    status, err = server.create(project_with_job, job)
    assert_invalid(status, err, "labels.team")


@pytest.mark.parametrize("payload", [
    b'{"jobId": "bad\xff\xfe", "trainingInput": {}}',
    b'{"jobId": "ok_id", "labels": {"team": "\xc3\x28"}}',
    b'{"jobId": "ok_id", "labels": {"\xed\xa0\x80": "x"}}',  # an encoded surrogate
    b'{"jobId": "ok_id", "labels": {"team": "\xf8\x88\x80\x80\x80"}}',  # 5-byte sequence
    b'{"jobId": "ok_\\ud800", "trainingInput": {}}',  # a lone surrogate escape
], ids=["ff_fe", "bad_continuation", "encoded_surrogate", "five_bytes", "lone_surrogate_escape"])
def test_invalid_utf8_is_400(server, project_with_job, payload):
    status, err = server.call("POST", "/v1/projects/%s/jobs" % project_with_job, payload)
    assert_invalid(status, err)
    # The error body itself is valid JSON/UTF-8 (parsed above) and the server keeps serving.
    assert_still_serving(server, project_with_job)
    assert [j["jobId"] for j in server.list(project_with_job)[1]["jobs"]] == ["existing"]


def test_non_ascii_utf8_is_fine_where_allowed(server, project_with_job):
    job = tpu_job("unicode")
    job["trainingInput"]["args"] = ["--name=Zoë 日本 🚀"]
    status, got = server.create(project_with_job, job)
    assert status == 200, got
    assert got["trainingInput"]["args"] == ["--name=Zoë 日本 🚀"]
    status, err = server.create(project_with_job, tpu_job("jöb"))
    assert_invalid(status, err, "jobId")


# ---------------------------------------------------------------------------
# Requests that are not (valid) HTTP, and routes that do not exist


@pytest.mark.parametrize("data", [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS ClientHello
    b"GET /v1/projects/p:getConfig HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    b"GET /v1/projects/p:getConfig HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
    b"GET /v1/projects/p:getConfig HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\r\n\r\n\r\n",
    b"GET /v1/\x00\x01 HTTP/1.1\r\n\r\n",
], ids=["word", "method_only", "bad_version", "tls", "bad_content_length", "bad_header", "bad_chunk",
        "blank_lines", "nul_in_target"])
def test_garbage_request_gets_400(server, project_with_job, data):
    out = raw_exchange(server, data, read_timeout=3.0, shut_write=True)
    assert out, "no answer at all to %r" % data[:40]
    status, body = parse_raw_response(out)
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert_still_serving(server, project_with_job)


def test_huge_header_is_refused(server, project_with_job):
    req = (b"GET /v1/projects/p:getConfig HTTP/1.1\r\nHost: x\r\n" + auth_header(server) +
           b"X-Big: " + b"a" * (200 * 1024) + b"\r\n\r\n")
    status, body = parse_raw_response(raw_exchange(server, req))
    assert status in (400, 431), (status, body)
    assert body["error"]["code"] == status
    assert_still_serving(server, project_with_job)


def test_truncated_body_then_close(server, project_with_job):
    req = ("POST /v1/projects/%s/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
           % project_with_job).encode() + auth_header(server) + b'\r\n{"jobId": "trunc'
    out = raw_exchange(server, req, read_timeout=0.5, shut_write=True)
    assert out == b"" or 400 <= parse_raw_response(out)[0] < 500
    assert_error(*server.get(project_with_job, "trunc"), 404, "NOT_FOUND")
    assert_still_serving(server, project_with_job)


@pytest.mark.parametrize("path", [
    "/",
    "/v1",
    "/v2/projects/p/jobs",
    "/v1/folders",  # (GET /v1/projects is cloudresourcemanager's projects.list)
    "/v1/projects/p/models",
    "/v1/projects/p/jobs/existing/extra",
    "/v1/projects/p/jobs/existing:explode",
    "/v1/projects/p:predict",
    "/v1/projects/p/operations",
    "/favicon.ico",
    "/v1/projects/p/jobs/../../../etc/passwd",
])
def test_unknown_route_is_404(server, project_with_job, path):
    status, body = server.call("GET", path)
    assert_error(status, body, 404, "NOT_FOUND")
    assert_still_serving(server, project_with_job)


@pytest.mark.parametrize("method,path", [
    ("DELETE", "/v1/projects/{p}/jobs/existing"),
    ("PUT", "/v1/projects/{p}/jobs/existing"),
    ("POST", "/v1/projects/{p}/jobs/existing"),
    ("DELETE", "/v1/projects/{p}/jobs"),
    ("PATCH", "/v1/projects/{p}/jobs"),
    ("GET", "/v1/projects/{p}/jobs/existing:cancel"),
    ("PUT", "/v1/projects/{p}:getConfig"),
    ("OPTIONS", "/v1/projects/{p}/jobs"),
    ("BREW", "/v1/projects/{p}/jobs"),
])
def test_unsupported_method_is_4xx(server, project_with_job, method, path):
    r = server.request(method, path.format(p=project_with_job), body={} if method in ("PUT", "POST", "PATCH")
                       else None)
    assert 400 <= r.status < 500, r
    assert r.json and r.json["error"]["code"] == r.status, r
    status, job = server.get(project_with_job, "existing")
    assert status == 200 and job["state"] == "QUEUED"
    assert_still_serving(server, project_with_job)


@pytest.mark.parametrize("project_path", ["a%2Fb", "a%2F", "%2F"])
def test_project_id_with_a_slash_is_refused(server, project_with_job, project_path):
    # Resource names are projects/{project}/jobs/{job} with no '/' inside a
    # segment (discovery: ^projects/[^/]+$); an encoded slash must not make
    # a project "a/b" whose job names are ambiguous.
    results = [server.call("GET", "/v1/projects/%s:getConfig" % project_path),
               server.call("POST", "/v1/projects/%s/jobs" % project_path, tpu_job("slash_job")),
               server.call("GET", "/v1/projects/%s/jobs" % project_path)]
    statuses = [st for st, _ in results]
    assert all(st in (400, 404) for st in statuses), (
        "SERVER BUG: a project id with an encoded '/' (%s) is accepted: getConfig/create/list answered "
        "%s, so a project named %r now exists. Expected 400 INVALID_ARGUMENT (or 404)."
        % (project_path, statuses, project_path.replace("%2F", "/")))
    for st, body in results:
        assert body["error"]["code"] == st


@pytest.mark.parametrize("project_path", ["%FF", "%C3%28", "ok%80"])
def test_project_id_with_invalid_utf8_does_not_crash_the_server(fresh_server, project_path):
    # Run on a server of its own: with the bug, this request kills the process.
    s = fresh_server
    s.create_ok("p", tpu_job("existing"))
    outcome = []
    for method, path, body in [("GET", "/v1/projects/%s:getConfig" % project_path, None),
                               ("POST", "/v1/projects/%s/jobs" % project_path, tpu_job("utf8_job")),
                               ("GET", "/v1/projects/%s/jobs" % project_path, None)]:
        try:
            r = s.request(method, path, body=body)
            outcome.append((method, path, r.status))
            assert r.json is not None and (r.status == 200 or r.json["error"]["code"] == r.status), r
        except (OSError, http.client.HTTPException) as e:
            outcome.append((method, path, type(e).__name__))
            break
    assert s.alive(), (
        "SERVER BUG: mlengined crashed (std::terminate on an uncaught nlohmann::json type_error 316 "
        "'invalid UTF-8 byte') when a project id in the path is not valid UTF-8: %s. The project id "
        "is percent-decoded and never validated, and codec::SerializeJobForStorage dumps it with the "
        "throwing error handler. Any authenticated client can kill the server this way. Expected a "
        "400 INVALID_ARGUMENT. stderr: %s" % (outcome, s.stderr_text()[-300:]))
    for _, _, status in outcome:
        assert status in (200, 400, 404), outcome
    assert s.get("p", "existing")[0] == 200


def test_head_response_has_no_body(server, project_with_job):
    # RFC 9110 9.3.2: a HEAD response has no content. Whatever the status, the
    # next response on the same connection must start right after the headers.
    def req(method, path):
        return ("%s %s HTTP/1.1\r\nHost: x\r\n" % (method, path)).encode() + auth_header(server) + b"\r\n"

    path = "/v1/projects/%s/jobs/existing" % project_with_job
    s = socket.create_connection((server.host, server.port), timeout=5)
    try:
        s.sendall(req("HEAD", path) + req("GET", path))
        f = s.makefile("rb")
        head_status = f.readline()
        assert head_status.startswith(b"HTTP/1.1 "), head_status
        while f.readline() not in (b"\r\n", b""):
            pass
        next_line = f.readline()
        f.close()
    finally:
        s.close()
    assert next_line.startswith(b"HTTP/1.1 200"), (
        "SERVER BUG: the response to HEAD %s (%s) carries a body, so the next response on the "
        "keep-alive connection starts with %r instead of a status line. HEAD responses must have no "
        "body (or HEAD must be refused without one)." % (path, head_status.strip().decode(), next_line[:40]))
    assert_still_serving(server, project_with_job)


def test_bad_percent_encoding_is_400(server, project_with_job):
    status, body = server.call("GET", "/v1/projects/%s/jobs/ex%%ZZisting" % project_with_job)
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    status, body = server.call("GET", "/v1/projects/%s/jobs?filter=%%G1" % project_with_job)
    assert_invalid(status, body)
    assert_still_serving(server, project_with_job)


def test_percent_encoded_path_reaches_the_job(server, project_with_job):
    status, job = server.call("GET", "/v1/projects/%s/jobs/%%65xisting" % project_with_job)
    assert status == 200 and job["jobId"] == "existing"
    status, body = server.call("GET", "/v1/projects/%s/jobs?filter=jobId%%3Dexisting" % project_with_job)
    assert status == 200 and [j["jobId"] for j in body["jobs"]] == ["existing"]


# ---------------------------------------------------------------------------
# Connections


def test_many_requests_on_one_keep_alive_connection(server, project_with_job):
    conn = server.connection()
    try:
        conn.connect()
        sock = conn.sock
        for i in range(200):
            kind = i % 4
            if kind == 0:
                r = server.request("GET", "/v1/projects/%s/jobs/existing" % project_with_job, conn=conn)
                assert r.status == 200 and r.json["jobId"] == "existing", r
            elif kind == 1:
                r = server.request("POST", "/v1/projects/%s/jobs" % project_with_job,
                                   body=tpu_job("ka_%03d" % i), conn=conn)
                assert r.status == 200, r
            elif kind == 2:
                r = server.request("GET", "/v1/projects/%s/jobs/nope" % project_with_job, conn=conn)
                assert r.status == 404, r  # an API error keeps the connection
            else:
                r = server.request("POST", "/v1/projects/%s/jobs" % project_with_job, body="{bad", conn=conn)
                assert r.status == 400, r
            assert conn.sock is sock, "the server closed the keep-alive connection after request %d" % i
    finally:
        conn.close()
    assert len(server.list_all(project_with_job, pageSize="100")) == 51


def test_pipelined_requests_are_answered_in_order(server, project_with_job):
    def req(path):
        return ("GET %s HTTP/1.1\r\nHost: x\r\n" % path).encode() + auth_header(server) + b"\r\n"

    p = project_with_job
    data = (req("/v1/projects/%s/jobs/existing" % p) + req("/v1/projects/%s/jobs/missing" % p) +
            req("/v1/projects/%s:getConfig" % p))
    s = socket.create_connection((server.host, server.port), timeout=5)
    try:
        s.sendall(data)
        f = s.makefile("rb")
        statuses = []
        for _ in range(3):
            line = f.readline()
            statuses.append(int(line.split()[1]))
            length = 0
            while True:
                h = f.readline()
                if h in (b"\r\n", b""):
                    break
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            body = json.loads(f.read(length))
            assert isinstance(body, dict)
        f.close()
    finally:
        s.close()
    assert statuses == [200, 404, 200]


def test_connection_close_is_honoured(server, project_with_job):
    r = server.request("GET", "/v1/projects/%s/jobs/existing" % project_with_job,
                       headers={"Connection": "close"})
    assert r.status == 200
    assert r.headers.get("connection", "").lower() == "close"


def test_many_idle_connections_do_not_block_service(server, project_with_job):
    socks = [socket.create_connection((server.host, server.port), timeout=5) for _ in range(50)]
    try:
        for s in socks[:25]:
            s.sendall(b"GET /v1/projects/p:getConfig HTTP/1.1\r\n")  # an unfinished request
        assert_still_serving(server, project_with_job)
    finally:
        for s in socks:
            s.close()
    assert_still_serving(server, project_with_job)
