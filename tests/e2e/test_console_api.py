"""The server side of the web console (docs/console.md), against a real
mlengined: its static files under /console/ (headers, caching, 404s,
traversal refused), and the read-only routes the console needs:
projects.list, whoami, a job's replicas and metrics, the cluster, each as
the operator and as a user who may read one project only."""

import http.client
import json
import os
import urllib.parse

import pytest

from conftest import TRAINERS, Server, config_yaml, make_cli, serve, wait_for

TUNING_PKG = os.path.join(TRAINERS, "tuning", "trainer")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
INDEX = b"<!doctype html><title>console</title>\n"
SCRIPT = b"console.log('mlengine');\n"


@pytest.fixture(scope="module")
def console_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("console-files")
    d = root / "console"
    d.mkdir()
    (d / "index.html").write_bytes(INDEX)
    (d / "app-5e1f2a.js").write_bytes(SCRIPT)
    (d / "app-5e1f2a.css").write_bytes(b"body{}\n")
    (d / ".env").write_bytes(b"secret\n")
    (root / "outside.txt").write_bytes(b"outside\n")
    os.symlink(root / "outside.txt", d / "link-1.txt")
    (d / "sub").mkdir()
    return d


@pytest.fixture(scope="module")
def server(tmp_path_factory, console_dir):
    yield from serve(Server(tmp_path_factory.mktemp("console-server"), config_yaml() + f"console_dir: {console_dir}\n"))


def call(server, method, path, token=None):
    """(status, headers as a dict, body bytes); `token` None: the operator's, "": none."""
    u = urllib.parse.urlparse(server.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    token = server.token if token is None else token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, dict(resp.getheaders()), body
    finally:
        conn.close()


def get_json(server, path, token=None, status=200):
    got, headers, body = call(server, "GET", path, token)
    assert got == status, f"GET {path} -> {got}: {body[:2000]!r}"
    assert headers.get("X-Content-Type-Options") == "nosniff", headers
    return json.loads(body)


def new_user(cli, names, tag):
    email = f"{tag}{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    return email, token


# ---------------------------------------------------------------------------
# /console/

def test_static_files_headers_and_caching(server):
    status, headers, body = call(server, "GET", "/console", token="")
    assert status == 301 and headers["Location"] == "/console/", (status, headers)
    status, headers, _ = call(server, "GET", "/console?project=p1", token="")
    assert status == 301 and headers["Location"] == "/console/?project=p1", (status, headers)

    for path in ("/console/", "/console/index.html"):
        status, headers, body = call(server, "GET", path, token="")
        assert status == 200 and body == INDEX, (path, status, body)
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["Cache-Control"] == "no-cache"
        for name, value in SECURITY_HEADERS.items():
            assert headers.get(name) == value, (path, name, headers)

    status, headers, body = call(server, "GET", "/console/app-5e1f2a.js", token="")
    assert status == 200 and body == SCRIPT
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    status, headers, _ = call(server, "GET", "/console/app-5e1f2a.css", token="")
    assert headers["Content-Type"] == "text/css; charset=utf-8"

    status, headers, body = call(server, "HEAD", "/console/app-5e1f2a.js", token="")
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(SCRIPT)), (status, headers, body)

    status, headers, _ = call(server, "POST", "/console/", token="")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("path", [
    "/console/missing-0000.js",
    "/console/../admin.token",
    "/console/%2e%2e/admin.token",
    "/console/..%2fadmin.token",
    "/console/%2E%2E%2F%2E%2E%2Fmlengined.yaml",
    "/console/link-1.txt",    # a symlink out of the directory
    "/console/.env",          # a dotfile
    "/console/sub",           # a directory
    "/console/sub/index.html",
])
def test_what_is_not_a_plain_file_of_the_directory_is_404(server, path):
    status, headers, body = call(server, "GET", path, token="")
    assert status == 404, (path, status, body)
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, (path, name)
    assert b"secret" not in body and b"outside" not in body


def test_a_server_without_the_console_says_how_to_build_it(server_factory, tmp_path):
    s = server_factory(config=config_yaml() + f"console_dir: {tmp_path / 'not-built'}\n")
    status, headers, body = call(s, "GET", "/console/", token="")
    assert status == 404 and b"cmake --build build --target console" in body, (status, body)
    assert headers["X-Frame-Options"] == "DENY"
    assert "the web console is not built" in s.server_log()


# ---------------------------------------------------------------------------
# projects.list and whoami

def test_projects_list_shows_the_projects_the_caller_may_get(server, tmp_path, names):
    cli_a = make_cli(server, tmp_path, names, "a")
    names_b = type(names)(names.base, names.suffix + "b")
    cli_b = make_cli(server, tmp_path, names_b, "b")
    email, token = new_user(cli_a, names, "lister")
    cli_a.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")

    ids = [p["projectId"] for p in get_json(server, "/v1/projects")["projects"]]
    assert cli_a.project in ids and cli_b.project in ids and ids == sorted(ids), ids
    mine = get_json(server, "/v1/projects", token)
    assert [p["projectId"] for p in mine["projects"]] == [cli_a.project], mine
    project = mine["projects"][0]
    assert project["lifecycleState"] == "ACTIVE" and project["name"] == cli_a.project, project
    assert project == get_json(server, f"/v1/projects/{cli_a.project}", token)
    assert "nextPageToken" not in mine

    # Filters and pages.
    only_b = get_json(server, f"/v1/projects?filter=name:{cli_b.project}")
    assert [p["projectId"] for p in only_b["projects"]] == [cli_b.project]
    assert get_json(server, f"/v1/projects?filter=id:{cli_b.project}", token)["projects"] == []
    first = get_json(server, "/v1/projects?pageSize=1")
    assert len(first["projects"]) == 1 and first["nextPageToken"], first
    second = get_json(server, "/v1/projects?pageSize=1&pageToken=" + first["nextPageToken"])
    assert second["projects"][0]["projectId"] > first["projects"][0]["projectId"]
    bad = get_json(server, "/v1/projects?filter=labels.color:red", status=400)
    assert bad["error"]["status"] == "INVALID_ARGUMENT" and "labels.color" in bad["error"]["message"], bad
    bad = get_json(server, "/v1/projects?orderBy=name", status=400)
    assert "orderBy" in bad["error"]["message"], bad
    assert get_json(server, "/v1/projects", token="", status=401)["error"]["status"] == "UNAUTHENTICATED"


def test_whoami(server, cli, names):
    assert get_json(server, "/mlengine/v1/whoami") == {"principal": "operator", "operator": True}
    email, token = new_user(cli, names, "me")
    assert get_json(server, "/mlengine/v1/whoami", token) == {"principal": f"user:{email}", "operator": False}
    assert get_json(server, "/mlengine/v1/whoami", token="mle1.forged", status=401)["error"]["status"] == \
        "UNAUTHENTICATED"


# ---------------------------------------------------------------------------
# replicas, metrics, cluster

def test_replicas_metrics_and_the_cluster_of_real_jobs(server, tmp_path, names):
    """Project A runs a trainer that reports a metric through the hypertune
    helper; project B runs a job that waits for a gate. A viewer of A sees
    A's job, its replicas and metrics, and B's job on the host only as
    hidden."""
    cli_a = make_cli(server, tmp_path, names, "a")
    names_b = type(names)(names.base, names.suffix + "b")
    cli_b = make_cli(server, tmp_path, names_b, "b")
    email, viewer = new_user(cli_a, names, "viewer")
    cli_a.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")

    gate = f"gs://{cli_b.bucket}/{names_b.job('gate')}"
    other = names_b.job("other")
    assert cli_b.submit(other, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    # A's trainer reports step 1, then waits for its gate (opened once the
    # checks of a running job are done), then reports steps 2 to 4.
    job = names.job("metrics")
    a_gate = f"gs://{cli_a.bucket}/{job}/gate"
    assert cli_a.submit(job, "--scale-tier", "basic", package=TUNING_PKG,
                        args=["--x", "0.5", "--steps", "4", "--step-seconds", "0.2", "--gate", a_gate]).rc == 0
    a_jobs = f"/v1/projects/{cli_a.project}/jobs/{job}"

    # While it runs: the replica runs on localhost; the first report is there.
    def running_with_a_point():
        replicas = get_json(server, f"{a_jobs}/replicas", viewer)
        series = get_json(server, f"{a_jobs}/metrics", viewer)["series"]
        if series and replicas["replicas"] and replicas["replicas"][0]["state"] == "RUNNING":
            return replicas, series
        return None
    replicas, series = wait_for(running_with_a_point, "the job running with a metric reported")
    assert replicas == {"replicas": [{"taskName": "master-replica-0", "host": "localhost", "gpus": [],
                                      "state": "RUNNING"}],
                        "tpuHosts": [], "tpuSimulated": False}, replicas
    assert series[0]["tag"] == "training/hptuning/metric" and series[0]["points"][0]["step"] == "1", series

    # The cluster while both run: the operator sees both jobs; the viewer
    # sees its own and B's only as hidden, never named.
    cli_b.wait_log(other, "waiting for", timeout=120)
    cluster = get_json(server, "/mlengine/v1/cluster")
    assert cluster["executor"] == "local", cluster
    localhost = next(h for h in cluster["hosts"] if h["name"] == "localhost")
    assert localhost["state"] == "up" and localhost["cpuMilli"] > 0 and localhost["tpuType"] == "", localhost
    shown = [(r.get("project"), r.get("jobId"), r.get("taskName")) for r in localhost["replicas"]]
    assert (cli_a.project, job, "master-replica-0") in shown, cluster
    assert (cli_b.project, other, "master-replica-0") in shown, cluster
    tpu_hosts = [h for h in cluster["hosts"] if h["tpuType"]]
    assert tpu_hosts and all(h["simulated"] for h in tpu_hosts), cluster
    queues = {q["project"]: q for q in cluster["queues"]}
    assert queues[cli_b.project]["running"] >= 1, cluster

    seen, _, body = call(server, "GET", "/mlengine/v1/cluster", viewer)
    assert seen == 200, body
    assert cli_b.project.encode() not in body and other.encode() not in body, body
    cluster = json.loads(body)
    localhost = next(h for h in cluster["hosts"] if h["name"] == "localhost")
    assert {"project": cli_a.project, "jobId": job, "taskName": "master-replica-0"} in localhost["replicas"], cluster
    assert {"hidden": True} in localhost["replicas"], cluster
    assert [q["project"] for q in cluster["queues"]] in ([cli_a.project], []), cluster
    # Nor may the viewer read B's job's replicas.
    b_jobs = f"/v1/projects/{cli_b.project}/jobs/{other}"
    assert get_json(server, f"{b_jobs}/replicas", viewer, status=403)["error"]["status"] == "PERMISSION_DENIED"
    assert get_json(server, f"{b_jobs}/replicas")["replicas"][0]["state"] == "RUNNING"

    # After the end: every report, by step, with its time; the exit status.
    cli_a.open_gate(a_gate)
    cli_a.wait_state(job, {"SUCCEEDED"}, timeout=120)
    replicas = get_json(server, f"{a_jobs}/replicas", viewer)["replicas"]
    assert replicas == [{"taskName": "master-replica-0", "host": "localhost", "gpus": [], "state": "SUCCEEDED",
                         "exitCode": 0}], replicas
    series = get_json(server, f"{a_jobs}/metrics", viewer)["series"]
    assert len(series) == 1 and series[0]["taskName"] == "master-replica-0" and "trialId" not in series[0], series
    points = series[0]["points"]
    assert [p["step"] for p in points] == ["1", "2", "3", "4"], points
    assert abs(points[-1]["value"] - (-(0.5 - 0.3) ** 2)) < 1e-9, points
    assert all(p["time"].endswith("Z") for p in points), points
    bad = get_json(server, f"{a_jobs}/metrics?trialId=1", viewer, status=400)
    assert "trialId" in json.dumps(bad), bad
    assert get_json(server, f"{a_jobs}/metrics?step=1", viewer, status=400)["error"]["status"] == "INVALID_ARGUMENT"
    assert get_json(server, f"/v1/projects/{cli_a.project}/jobs/nope/replicas", status=404)

    cli_b.open_gate(gate)
    cli_b.wait_state(other, {"SUCCEEDED"}, timeout=120)
    replicas = get_json(server, f"{b_jobs}/replicas")["replicas"]
    assert replicas[0]["state"] == "SUCCEEDED" and replicas[0]["exitCode"] == 0, replicas
