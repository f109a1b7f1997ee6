"""The gs:// object store over its HTTP API (a subset of the Cloud Storage JSON
API, docs/runtime-contract.md "Storage HTTP API"), against a real mlengined:
streamed uploads and downloads, metadata, listing with prefixes, delimiters
and pages, deletion, name rules (traversal refused with fieldViolations),
symlinks, files written directly by trainers, and authentication."""

import base64
import hashlib
import http.client
import json
import os
import re
import socket
import urllib.parse

import pytest

from conftest import RFC3339_RE, assert_error, assert_invalid, violations, wait_for

MIB = 1024 * 1024
_count = [0]


@pytest.fixture
def bucket(request):
    """A bucket name of the test's own (not created)."""
    _count[0] += 1
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:50]
    return "b%d-%s" % (_count[0], name)


def q(name):
    return urllib.parse.quote(name, safe="")


def buckets_root(server):
    return os.path.join(server.data_dir, "buckets")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def upload(server, bucket, name, body, token=True, headers=None, conn=None, query=None):
    """POSTs body (bytes or a file object, with its length) as the object."""
    params = {"uploadType": "media", "name": name}
    if query:
        params.update(query)
    path = "/upload/storage/v1/b/%s/o?%s" % (q(bucket), urllib.parse.urlencode(params))
    hdrs = {"Content-Type": "application/octet-stream"}
    if token is True:
        hdrs["Authorization"] = "Bearer " + server.token
    elif token:
        hdrs["Authorization"] = "Bearer " + token
    if hasattr(body, "read"):
        hdrs["Content-Length"] = str(os.fstat(body.fileno()).st_size)
    hdrs.update(headers or {})
    own = conn is None
    c = server.connection(timeout=60) if own else conn
    try:
        c.request("POST", path, body=body, headers=hdrs)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        return r.status, (json.loads(text) if text.strip() else None)
    finally:
        if own:
            c.close()


def upload_ok(server, bucket, name, data):
    status, body = upload(server, bucket, name, data)
    assert status == 200, (name, status, body)
    return body


def obj_path(bucket, name):
    return "/storage/v1/b/%s/o/%s" % (q(bucket), q(name))


def download(server, bucket, name):
    """(status, bytes) of GET ...?alt=media, read in pieces."""
    c = server.connection(timeout=60)
    try:
        c.request("GET", obj_path(bucket, name) + "?alt=media",
                  headers={"Authorization": "Bearer " + server.token})
        r = c.getresponse()
        data = bytearray()
        while True:
            chunk = r.read(MIB)
            if not chunk:
                break
            data += chunk
        return r.status, bytes(data), dict((k.lower(), v) for k, v in r.getheaders())
    finally:
        c.close()


def list_objects(server, bucket, **query):
    return server.call("GET", "/storage/v1/b/%s/o" % q(bucket), query=query or None)


def list_all(server, bucket, **query):
    items, prefixes, token, pages = [], [], None, 0
    while True:
        qq = dict(query)
        if token:
            qq["pageToken"] = token
        status, body = list_objects(server, bucket, **qq)
        assert status == 200, body
        assert body["kind"] == "storage#objects"
        items += [i["name"] for i in body.get("items", [])]
        prefixes += body.get("prefixes", [])
        token = body.get("nextPageToken")
        pages += 1
        assert pages < 1000
        if not token:
            return items, prefixes, pages


def assert_object_resource(resource, bucket, name, data=None):
    assert resource["kind"] == "storage#object", resource
    assert resource["bucket"] == bucket
    assert resource["name"] == name
    assert isinstance(resource["size"], str), "size is an int64 string: %r" % resource
    assert RFC3339_RE.match(resource["updated"]), resource
    if data is not None:
        assert resource["size"] == str(len(data))
        assert resource["md5Hash"] == base64.b64encode(hashlib.md5(data).digest()).decode()
        assert int(resource["generation"]) > 0 and resource["metageneration"] == "1"


# ---- uploads and downloads ----

def test_upload_20mib_streamed_then_download(server, bucket, tmp_path):
    data = os.urandom(20 * MIB)
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    upload_ok(server, bucket, "warmup", b"x")  # the server's threads and buffers exist
    before = rss_kib(server.proc.pid)
    with open(src, "rb") as f:
        status, resource = upload(server, bucket, "data/blob.bin", f)
    after = rss_kib(server.proc.pid)
    assert status == 200, resource
    assert_object_resource(resource, bucket, "data/blob.bin", data)
    # Streamed to disk: the body never sat in the server's memory.
    assert after - before < 12 * 1024, "RSS grew by %d KiB during a 20 MiB upload" % (after - before)

    status, got, headers = download(server, bucket, "data/blob.bin")
    assert status == 200
    assert headers["content-length"] == str(len(data))
    assert headers["content-type"] == "application/octet-stream"
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    assert got == data

    # What replicas see: the plain file at $MLENGINE_GCS_ROOT/BUCKET/path.
    with open(os.path.join(buckets_root(server), bucket, "data", "blob.bin"), "rb") as f:
        assert f.read() == data
    # No upload leftovers.
    assert os.listdir(os.path.join(buckets_root(server), ".tmp")) == []

    # The object resource (no alt=media) carries the same metadata.
    status, body = server.call("GET", obj_path(bucket, "data/blob.bin"))
    assert status == 200, body
    assert_object_resource(body, bucket, "data/blob.bin", data)


def test_upload_replaces_and_empty_objects(server, bucket):
    upload_ok(server, bucket, "f", b"one")
    resource = upload_ok(server, bucket, "f", b"")
    assert_object_resource(resource, bucket, "f", b"")
    status, got, _ = download(server, bucket, "f")
    assert (status, got) == (200, b"")


def test_expect_100_continue(server, bucket):
    """libcurl sends Expect: 100-continue: the body follows our 100."""
    body = b"hello over expect"
    path = "/upload/storage/v1/b/%s/o?uploadType=media&name=e.txt" % bucket
    with socket.create_connection((server.host, server.port), timeout=15) as s:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n"
                   "Expect: 100-continue\r\n\r\n" % (path, server.token, len(body))).encode())
        first = s.recv(4096)
        assert first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), first
        s.sendall(body)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200"), reply
    assert download(server, bucket, "e.txt")[1] == body

    # Refused from its headers alone: no 100, the body is never asked for.
    with socket.create_connection((server.host, server.port), timeout=15) as s:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                   "Expect: 100-continue\r\n\r\n" % (path, 50 * MIB)).encode())
        reply = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 401"), reply
        assert b"100 Continue" not in reply


def test_chunked_upload(server, bucket):
    parts = [os.urandom(100000) for _ in range(7)]
    c = server.connection(timeout=60)
    try:
        c.request("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=chunked" % bucket, body=iter(parts),
                  headers={"Authorization": "Bearer " + server.token}, encode_chunked=True)
        r = c.getresponse()
        resource = json.loads(r.read())
        assert r.status == 200, resource
    finally:
        c.close()
    assert_object_resource(resource, bucket, "chunked", b"".join(parts))
    assert download(server, bucket, "chunked")[1] == b"".join(parts)


def test_interrupted_upload_leaves_nothing(server, bucket):
    upload_ok(server, bucket, "kept", b"old")
    path = "/upload/storage/v1/b/%s/o?uploadType=media&name=kept" % bucket
    with socket.create_connection((server.host, server.port), timeout=15) as s:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                   % (path, server.token, 10 * MIB)).encode())
        s.sendall(os.urandom(MIB))
    tmp = os.path.join(buckets_root(server), ".tmp")
    wait_for(lambda: os.listdir(tmp) == [], "the partial upload to be removed")
    assert download(server, bucket, "kept")[1] == b"old"
    assert list_all(server, bucket)[0] == ["kept"]
    server.ping()


def test_api_and_storage_share_a_keep_alive_connection(server, bucket, project):
    c = server.connection()
    try:
        status, _ = upload(server, bucket, "k1", b"one", conn=c)
        assert status == 200
        r = server.request("GET", "/v1/projects/%s:getConfig" % project, conn=c)
        assert r.status == 200, r
        status, _ = upload(server, bucket, "k2", b"two", conn=c)
        assert status == 200
        r = server.request("GET", obj_path(bucket, "k2"), query={"alt": "media"}, conn=c)
        assert (r.status, r.text) == (200, "two")
        r = server.request("GET", "/storage/v1/b/%s/o" % bucket, conn=c)
        assert r.status == 200 and [i["name"] for i in r.json["items"]] == ["k1", "k2"]
    finally:
        c.close()


# ---- buckets ----

def test_bucket_is_created_on_first_upload(server, bucket):
    assert_error(*server.call("GET", "/storage/v1/b/%s" % bucket), 404, "NOT_FOUND")
    upload_ok(server, bucket, "x", b"x")
    status, body = server.call("GET", "/storage/v1/b/%s" % bucket)
    assert status == 200, body
    assert body["kind"] == "storage#bucket" and body["name"] == bucket
    assert RFC3339_RE.match(body["timeCreated"])
    status, body = server.call("GET", "/storage/v1/b", query={"project": "p"})
    assert status == 200, body
    assert body["kind"] == "storage#buckets"
    assert bucket in [b["name"] for b in body["items"]]


def test_create_bucket(server, bucket):
    status, body = server.call("POST", "/storage/v1/b", {"name": bucket}, query={"project": "p"})
    assert status == 200, body
    assert body["name"] == bucket
    assert_error(*server.call("POST", "/storage/v1/b", {"name": bucket}, query={"project": "p"}),
                 409, "ALREADY_EXISTS")
    for bad in ["UPPER", "ab", "-dash", "a/b", "..", ".tmp", "x" * 64]:
        assert_invalid(*server.call("POST", "/storage/v1/b", {"name": bad}, query={"project": "p"}), "name")
    assert_invalid(*server.call("POST", "/storage/v1/b", {}, query={"project": "p"}), "name")
    assert_invalid(*server.call("POST", "/storage/v1/b", "{not json", query={"project": "p"}), "(body)")
    status, body = list_objects(server, bucket)
    assert status == 200 and body["items"] == [] and body["prefixes"] == [], body


def test_missing_bucket_and_object(server, bucket):
    assert_error(*list_objects(server, bucket), 404, "NOT_FOUND")
    assert_error(*server.call("GET", obj_path(bucket, "x")), 404, "NOT_FOUND")
    upload_ok(server, bucket, "there", b"x")
    status, body = server.call("GET", obj_path(bucket, "missing"))
    err = assert_error(status, body, 404, "NOT_FOUND")
    assert "missing" in err["message"]
    assert download(server, bucket, "missing")[0] == 404


# ---- listing ----

def test_list_prefix_delimiter_and_pages(server, bucket):
    names = ["logs/run1/a.txt", "logs/run1/b.txt", "logs/run2/c.txt", "logs/readme", "model/saved.pb",
             "top.txt", "a-c", "a/b", "a0"]
    for n in names:
        upload_ok(server, bucket, n, n.encode())
    items, prefixes, _ = list_all(server, bucket)
    assert items == sorted(names)  # byte order: "a-c" < "a/b" < "a0"
    assert prefixes == []

    items, prefixes, _ = list_all(server, bucket, delimiter="/")
    assert items == ["a-c", "a0", "top.txt"]
    assert prefixes == ["a/", "logs/", "model/"]

    items, prefixes, _ = list_all(server, bucket, prefix="logs/", delimiter="/")
    assert items == ["logs/readme"]
    assert prefixes == ["logs/run1/", "logs/run2/"]

    items, prefixes, _ = list_all(server, bucket, prefix="logs/run")
    assert items == ["logs/run1/a.txt", "logs/run1/b.txt", "logs/run2/c.txt"]

    for page in (1, 2, 4):
        items, prefixes, pages = list_all(server, bucket, maxResults=page)
        assert items == sorted(names), page
        assert pages == (len(names) + page - 1) // page
        items, prefixes, _ = list_all(server, bucket, delimiter="/", maxResults=page)
        assert items == ["a-c", "a0", "top.txt"] and prefixes == ["a/", "logs/", "model/"], page

    status, body = list_objects(server, bucket, prefix="top")
    assert status == 200
    [item] = body["items"]
    assert_object_resource(item, bucket, "top.txt", b"top.txt")
    assert "nextPageToken" not in body

    assert_invalid(*list_objects(server, bucket, pageToken="!!not-a-token!!"), "pageToken")
    assert_invalid(*list_objects(server, bucket, maxResults="zero"), "maxResults")
    assert_invalid(*list_objects(server, bucket, ifGenerationMatch="0"), "ifGenerationMatch")


def test_files_written_by_trainers_are_objects(server, bucket):
    upload_ok(server, bucket, "seed", b"x")
    d = os.path.join(buckets_root(server), bucket, "out")
    os.makedirs(d)
    data = b"written by a replica"
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(data)
    items, _, _ = list_all(server, bucket)
    assert items == ["out/model.bin", "seed"]
    status, body = server.call("GET", obj_path(bucket, "out/model.bin"))
    assert status == 200, body
    assert_object_resource(body, bucket, "out/model.bin", data)
    assert download(server, bucket, "out/model.bin")[1] == data


# ---- deletion ----

def test_delete(server, bucket):
    upload_ok(server, bucket, "dir/doomed", b"bye")
    r = server.request("DELETE", obj_path(bucket, "dir/doomed"))
    assert r.status == 204, r
    assert r.text == ""
    assert_error(*server.call("GET", obj_path(bucket, "dir/doomed")), 404, "NOT_FOUND")
    assert download(server, bucket, "dir/doomed")[0] == 404
    assert_error(*server.call("DELETE", obj_path(bucket, "dir/doomed")), 404, "NOT_FOUND")
    assert list_all(server, bucket, delimiter="/")[:2] == ([], [])
    assert not os.path.exists(os.path.join(buckets_root(server), bucket, "dir"))


# ---- names ----

BAD_NAMES = ["../x", "a/../../b", "..", ".", "/abs", "a//b", "a/", "a\\b", "..\\x", "a\nb", "x" * 1025]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:20] for n in BAD_NAMES])
def test_traversal_and_bad_names_are_refused(server, bucket, name):
    status, body = upload(server, bucket, name, b"evil")
    assert_invalid(status, body, "name")
    assert any("object name" in d for _, d in violations(body)), body
    upload_ok(server, bucket, "legit", b"ok")
    for method in ("GET", "DELETE"):
        assert_invalid(*server.call(method, obj_path(bucket, name)), "object")
    root = buckets_root(server)
    for escaped in ("x", "b", "abs", "evil"):
        assert not os.path.exists(os.path.join(root, escaped))
        assert not os.path.exists(os.path.join(server.data_dir, escaped))
    assert sorted(os.listdir(os.path.join(root, bucket))) == ["legit"]


def test_raw_traversal_in_the_path_is_refused(server, bucket):
    upload_ok(server, bucket, "legit", b"ok")
    for raw in ("/storage/v1/b/%s/o/../../admin.token" % bucket,
                "/storage/v1/b/%s/o/..%%2F..%%2Fadmin.token" % bucket,
                "/storage/v1/b/%s/o/%%2e%%2e/x" % bucket):
        r = server.request("GET", raw + "?alt=media")
        assert_invalid(r.status, r.json, "object")
    r = server.request("GET", "/storage/v1/b/..%2F..%2Fetc/o/passwd?alt=media")
    assert_invalid(r.status, r.json, "bucket")


def test_bad_upload_requests(server, bucket):
    assert_invalid(*upload(server, bucket, "x", b"x", query={"uploadType": "chunked"}), "uploadType")
    # A resumable session's metadata must be JSON.
    assert_invalid(*upload(server, bucket, "x", b"x", query={"uploadType": "resumable"}), "(body)")
    path = "/upload/storage/v1/b/%s/o?uploadType=media" % bucket
    r = server.request("POST", path, body=b"x")
    assert_invalid(r.status, r.json, "name")
    assert_invalid(*upload(server, "Bad_Bucket", "x", b"x"), "bucket")
    r = server.request("POST", "/upload/storage/v1/b/%s/o/x?uploadType=media&name=x" % bucket, body=b"x")
    assert_error(r.status, r.json, 404, "NOT_FOUND")
    assert_error(*list_objects(server, bucket), 404, "NOT_FOUND")  # nothing was created


def test_an_object_cannot_also_be_a_prefix(server, bucket):
    upload_ok(server, bucket, "a", b"file")
    status, body = upload(server, bucket, "a/b", b"x")
    assert_error(status, body, 400, "FAILED_PRECONDITION")
    assert download(server, bucket, "a")[1] == b"file"


def test_symlinks_are_refused(server, bucket, tmp_path):
    upload_ok(server, bucket, "legit", b"ok")
    secret = tmp_path / "secret"
    secret.write_text("secret")
    os.symlink(str(secret), os.path.join(buckets_root(server), bucket, "link"))
    os.symlink(os.path.join(server.data_dir), os.path.join(buckets_root(server), bucket, "data"))
    for name in ("link", "data/admin.token"):
        r = server.request("GET", obj_path(bucket, name), query={"alt": "media"})
        assert_error(r.status, r.json, 400, "FAILED_PRECONDITION")
        assert "secret" not in r.text and server.token not in r.text
        assert_error(*server.call("GET", obj_path(bucket, name)), 400, "FAILED_PRECONDITION")
        assert_error(*upload(server, bucket, name, b"overwrite"), 400, "FAILED_PRECONDITION")
    assert secret.read_text() == "secret"
    assert list_all(server, bucket)[0] == ["legit"]


# ---- authentication ----

def test_every_storage_route_needs_the_token(server, bucket):
    upload_ok(server, bucket, "private", b"secret bytes")
    routes = [("GET", obj_path(bucket, "private") + "?alt=media", None),
              ("GET", obj_path(bucket, "private"), None),
              ("GET", "/storage/v1/b/%s/o" % bucket, None),
              ("DELETE", obj_path(bucket, "private"), None),
              ("GET", "/storage/v1/b/%s" % bucket, None),
              ("GET", "/storage/v1/b", None),
              ("POST", "/storage/v1/b?project=p", {"name": bucket + "-new"}),
              ("GET", "/storage/v1/b/%s/o/no-such-route/x" % bucket, None)]
    for method, path, body in routes:
        for token in (None, "wrong"):
            r = server.request(method, path, body=body, token=token)
            assert_error(r.status, r.json, 401, "UNAUTHENTICATED")
            assert "secret bytes" not in r.text
    for token in (None, "wrong"):
        assert_error(*upload(server, bucket, "sneaky", b"x" * MIB, token=token), 401, "UNAUTHENTICATED")
    assert list_all(server, bucket)[0] == ["private"]
    assert download(server, bucket, "private")[1] == b"secret bytes"
    # access_token works as for the ml API.
    r = server.request("GET", obj_path(bucket, "private"),
                       query={"alt": "media", "access_token": server.token}, token=None)
    assert (r.status, r.text) == (200, "secret bytes")


# ---- wire details (what Google's clients rely on) ----

def multipart(server, bucket, metadata, data, query=None):
    """An uploadType=multipart POST: (status, body)."""
    boundary = "mle-boundary-4f1c"
    payload = (b"--" + boundary.encode() + b"\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" +
               json.dumps(metadata).encode() + b"\r\n--" + boundary.encode() +
               b"\r\nContent-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + boundary.encode() + b"--\r\n")
    params = {"uploadType": "multipart"}
    params.update(query or {})
    r = server.request("POST", "/upload/storage/v1/b/%s/o?%s" % (q(bucket), urllib.parse.urlencode(params)),
                       body=payload, headers={"Content-Type": "multipart/related; boundary=" + boundary})
    return r.status, r.json


def start_session(server, bucket, name):
    """The session URI's path and query (uploadType=resumable)."""
    r = server.request("POST", "/upload/storage/v1/b/%s/o" % q(bucket),
                       query={"uploadType": "resumable", "name": name}, body={})
    assert r.status == 200, (r.status, r.text)
    location = urllib.parse.urlsplit(r.headers["location"])
    assert (location.hostname, location.port) == (server.host, server.port), r.headers
    return location.path + "?" + location.query


def put_piece(server, session, content_range, data=b""):
    return server.request("PUT", session, body=data,
                          headers={"Content-Range": content_range, "Content-Type": "application/octet-stream"})


def test_resumable_session_wire(server, bucket):
    data = os.urandom(256 * 1024 + 1000)
    first, rest = data[:256 * 1024], data[256 * 1024:]
    session = start_session(server, bucket, "big/resumed.bin")
    # Before any byte: 308 and no Range header.
    r = put_piece(server, session, "bytes */*")
    assert r.status == 308 and "range" not in r.headers, (r.status, r.headers)
    r = put_piece(server, session, "bytes 0-%d/*" % (len(first) - 1), first)
    assert (r.status, r.headers.get("range")) == (308, "bytes=0-%d" % (len(first) - 1)), (r.status, r.text)
    # Status queries, with and without the total.
    for status_range in ("bytes */*", "bytes */%d" % len(data)):
        r = put_piece(server, session, status_range)
        assert (r.status, r.headers.get("range")) == (308, "bytes=0-%d" % (len(first) - 1)), status_range
    assert download(server, bucket, "big/resumed.bin")[0] == 404  # nothing installed yet
    r = put_piece(server, session, "bytes %d-%d/%d" % (len(first), len(data) - 1, len(data)), rest)
    assert r.status == 200, (r.status, r.text)
    assert_object_resource(r.json, bucket, "big/resumed.bin", data)
    assert download(server, bucket, "big/resumed.bin")[1] == data


RANGES = [  # (Range header, status, Content-Range, bytes of b"0123456789")
    ("bytes=2-5", 206, "bytes 2-5/10", b"2345"),
    ("bytes=7-", 206, "bytes 7-9/10", b"789"),
    ("bytes=-3", 206, "bytes 7-9/10", b"789"),
    ("bytes=5-100", 206, "bytes 5-9/10", b"56789"),
    ("bytes=10-20", 416, "bytes */10", None),
    ("bytes=50-", 416, "bytes */10", None),
]


@pytest.mark.parametrize("header,status,content_range,expected", RANGES, ids=[r[0] for r in RANGES])
def test_ranged_downloads(server, bucket, header, status, content_range, expected):
    upload_ok(server, bucket, "digits", b"0123456789")
    r = server.request("GET", obj_path(bucket, "digits"), query={"alt": "media"}, headers={"Range": header})
    assert r.status == status, (r.status, r.text)
    assert r.headers.get("content-range") == content_range, r.headers
    if expected is None:
        err = assert_error(r.status, r.json, 416, "OUT_OF_RANGE")
        assert err["errors"][0]["reason"] == "requestedRangeNotSatisfiable", err
    else:
        assert r.text.encode() == expected


def test_precondition_failure_has_googles_error_shape(server, bucket):
    upload_ok(server, bucket, "once", b"first")
    status, body = upload(server, bucket, "once", b"second", query={"ifGenerationMatch": "0"})
    err = assert_error(status, body, 412, "FAILED_PRECONDITION")
    assert err["errors"] == [{"domain": "global", "reason": "conditionNotMet", "message": err["message"]}], err
    assert "once" in err["message"]
    assert download(server, bucket, "once")[1] == b"first"


def test_oversized_custom_metadata_is_refused(server, bucket):
    status, body = multipart(server, bucket, {"name": "m", "metadata": {"k": "v" * 9000}}, b"data")
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert "metadata" in body["error"]["message"], body
    assert download(server, bucket, "m")[0] == 404
    upload_ok(server, bucket, "m", b"data")
    status, body = server.call("PATCH", obj_path(bucket, "m"), body={"metadata": {"k": "v" * 9000}})
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert "metadata" not in server.call("GET", obj_path(bucket, "m"))[1]


def test_multipart_with_a_wrong_md5_installs_nothing(server, bucket):
    wrong = base64.b64encode(hashlib.md5(b"other bytes").digest()).decode()
    status, body = multipart(server, bucket, {"name": "checked", "md5Hash": wrong}, b"the bytes")
    assert_error(status, body, 400, "INVALID_ARGUMENT")
    assert download(server, bucket, "checked")[0] == 404
    assert not os.path.exists(os.path.join(buckets_root(server), bucket, "checked"))
    right = base64.b64encode(hashlib.md5(b"the bytes").digest()).decode()
    status, body = multipart(server, bucket, {"name": "checked", "md5Hash": right}, b"the bytes")
    assert status == 200, body
    assert_object_resource(body, bucket, "checked", b"the bytes")


UNKNOWN_PARAMS = [  # (method, path format, query)
    ("GET", "/storage/v1/b/{b}/o/x", {"frobnicate": "1"}),
    ("GET", "/storage/v1/b/{b}/o", {"ifGenerationMatch": "1"}),  # a precondition where none applies
    ("DELETE", "/storage/v1/b/{b}/o/x", {"ifSourceGenerationMatch": "1"}),
    ("POST", "/upload/storage/v1/b/{b}/o", {"uploadType": "media", "name": "x", "frobnicate": "1"}),
]


@pytest.mark.parametrize("method,path,query", UNKNOWN_PARAMS, ids=["%s-%d" % (m[0], i) for i, m in
                                                                   enumerate(UNKNOWN_PARAMS)])
def test_unknown_query_parameters_are_refused(server, bucket, method, path, query):
    upload_ok(server, bucket, "x", b"kept")
    unknown = [k for k in query if k not in ("uploadType", "name")]
    r = server.request(method, path.format(b=q(bucket)), query=query, body=b"new" if method == "POST" else None)
    assert_invalid(r.status, r.json, *unknown)
    assert download(server, bucket, "x")[1] == b"kept"


@pytest.mark.parametrize("name", ["..", "../x", "a/../../b", "a/./b"])
def test_traversal_names_refused_by_multipart_and_resumable(server, bucket, name):
    status, body = multipart(server, bucket, {"name": name}, b"evil")
    assert_invalid(status, body, "name")
    r = server.request("POST", "/upload/storage/v1/b/%s/o" % q(bucket),
                       query={"uploadType": "resumable", "name": name}, body={})
    assert_invalid(r.status, r.json, "name")
    assert not os.path.exists(os.path.join(buckets_root(server), bucket)) or \
        os.listdir(os.path.join(buckets_root(server), bucket)) == []
    assert not os.path.exists(os.path.join(buckets_root(server), "x"))


def test_path_token_prefix(launcher, bucket):
    srv = launcher.start(args=("--log-level", "debug"))
    bad = "not-" + srv.token[4:]
    prefixed = "/_token/%s/storage/v1/b/%s/o/%s"
    upload_ok(srv, bucket, "t", b"via token")
    r = srv.request("GET", prefixed % (srv.token, bucket, "t"), query={"alt": "media"}, token=None)
    assert (r.status, r.text) == (200, "via token")
    r = srv.request("POST", "/_token/%s/upload/storage/v1/b/%s/o" % (srv.token, bucket),
                    query={"uploadType": "media", "name": "u"}, body=b"uploaded", token=None)
    assert r.status == 200, r.text
    for path in (prefixed % (bad, bucket, "t"), "/_token/%s/upload/storage/v1/b/%s/o?uploadType=media&name=v"
                 % (bad, bucket)):
        r = srv.request("POST" if "upload" in path else "GET", path, body=b"x" if "upload" in path else None,
                        token=None)
        assert_error(r.status, r.json, 401, "UNAUTHENTICATED")
    assert download(srv, bucket, "v")[0] == 404
    log = "\n".join(srv.log_lines())
    assert "/_token/<redacted>/storage/v1/b/%s/o/t" % bucket in log, log[-2000:]
    assert srv.token not in log and bad not in log
