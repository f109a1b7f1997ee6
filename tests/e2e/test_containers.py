"""Custom containers end to end: the TPU guide's two container configurations
(PyTorch's prebuilt XLA image, and custom images on the master and the TPU
worker), a distributed container job training with gloo, the environment
contract inside a container, cancel and failures leaving no container, a
restart of mlengined finding its containers again, and images refused at
submission.

Real parts: Debian's docker-registry (scripts/containers/registry.sh) holding
mlengine's base images built with mmdebstrap (scripts/containers/images.sh),
podman with runc, mlengined and the CLI. No TPU exists here: the TPU hosts
and the PyTorch XLA image are simulated stand-ins, as the docs say.
"""

import json
import os
import sys

import pytest

from conftest import (REGION, TERMINAL, Server, assert_secret_untouched, config_yaml, make_cli, run_node_job,
                      other_project_with_a_secret, procs_of_job, wait_for, wait_no_procs)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import images  # noqa: E402

from images import GUIDE_MASTER, GUIDE_WORKER, PYTORCH_XLA as XLA  # noqa: E402
from test_retention import metric, wait_counted  # noqa: E402
from test_vertex import create_custom_job, wait_ended  # noqa: E402


@pytest.fixture(scope="module")
def registry():
    with images.trainer_registry() as r:
        yield r


@pytest.fixture(scope="module")
def cserver(tmp_path_factory, registry):
    config = config_yaml() + registry.server_config() + images.Registry.GUIDE_MIRRORS
    s = Server(tmp_path_factory.mktemp("containers"), config)
    yield s
    s.finish()
    assert images.containers_under(s.data_dir) == [], "containers left behind"


@pytest.fixture
def ccli(cserver, tmp_path, names):
    return make_cli(cserver, tmp_path, names)


def tpu_config(master_image, worker_image, tpu_tf_version):
    """The guide's container configurations: an n1-highcpu-16 master and a
    cloud_tpu worker (TPU_V2 x 8), each with its image."""
    return {"scaleTier": "CUSTOM", "masterType": "n1-highcpu-16", "masterConfig": {"imageUri": master_image},
            "workerType": "cloud_tpu", "workerCount": 1,
            "workerConfig": {"imageUri": worker_image, "tpuTfVersion": tpu_tf_version,
                             "acceleratorConfig": {"type": "TPU_V2", "count": 8}}}


def write_config(tmp_path, training_input):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"trainingInput": training_input}))
    return str(path)


def submit(cli, job_id, config_path, *args, flags=()):
    cmd = ["jobs", "submit", "training", job_id, "--region", REGION, "--config", config_path, *flags]
    if args:
        cmd += ["--", *args]
    return cli(*cmd, timeout=300)


def wait_end(cli, job_id, timeout=300):
    return cli.wait_state(job_id, TERMINAL, timeout=timeout)


def contract_of(cli, job_id, task="master-replica-0"):
    for e in cli.server.logs(cli.project, job_id, task):
        message = e.get("message", "")
        if message.startswith("CONTRACT "):
            return json.loads(message[len("CONTRACT "):])
    raise AssertionError(f"{task} of {job_id} printed no contract\n{cli.explain(job_id)}")


def assert_nothing_left(cli, job_id):
    run_dir = cli.run_dir(job_id)
    assert images.containers_of(run_dir) == []
    wait_no_procs(lambda: procs_of_job(run_dir, job_id))


def test_the_guides_pytorch_xla_configuration_runs_on_a_simulated_tpu(ccli, names, tmp_path):
    job = names.job("pt")
    config = write_config(tmp_path, tpu_config(XLA, XLA, "pytorch-1.11"))
    code = ("import os, torch; from mlengine import tpu; r = tpu.wait_for_tpu_cluster_resolver_ready(); "
            "print('XLA-STANDIN', torch.__version__, os.environ['TPU_ACCELERATOR_TYPE'], "
            "os.environ['MLENGINE_TPU_RUNTIME_VERSION'], r is not None, os.path.exists('/run/.containerenv')); "
            "print('IMAGE-NOTE', os.environ.get('MLENGINE_SIMULATED_IMAGE'))")
    r = submit(ccli, job, config, "python3", "-c", code)
    assert r.rc == 0, r
    done = wait_end(ccli, job)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    entries = ccli.wait_log(job, "XLA-STANDIN")
    line = next(e["message"] for e in entries if "XLA-STANDIN" in e.get("message", ""))
    assert line.split()[2:] == ["v2-8", "pytorch-1.11", "True", "True"], line
    # The stand-in says what it is, as simulated TPU hosts do.
    note = next(e["message"] for e in entries if e.get("message", "").startswith("IMAGE-NOTE"))
    assert note == ("IMAGE-NOTE gcr.io/cloud-ml-public/training/pytorch-xla.1-11 (simulated here by "
                    "mlengine/pytorch:bookworm: Debian 12 python3 + torch 1.13 (CPU))"), note
    assert_nothing_left(ccli, job)


def test_the_guides_custom_container_tpu_configuration_waits_for_the_tpu(ccli, names, tmp_path):
    job = names.job("tpu")
    config = write_config(tmp_path, tpu_config(GUIDE_MASTER, GUIDE_WORKER, "2.11"))
    r = submit(ccli, job, config, "tpu")
    assert r.rc == 0, r
    done = wait_end(ccli, job)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    ccli.wait_log(job, "TPU ready")
    c = contract_of(ccli, job)
    assert c["in_container"] is True
    assert json.loads(c["TPU_CONFIG"])["project"] == ccli.project
    assert c["TPU_ACCELERATOR_TYPE"] == "v2-8"
    assert c["MLENGINE_TPU_RUNTIME_VERSION"] == "2.11"
    assert "(simulated)" in c["MLENGINE_SIMULATED_ACCELERATOR"]
    assert json.loads(c["TF_CONFIG"])["task"] == {"type": "master", "index": 0}
    assert c["CLOUD_ML_JOB_ID"] == job and c["MLENGINE_TASK_NAME"] == "master-replica-0"
    assert c["argv"] == ["tpu"]
    assert_nothing_left(ccli, job)


def test_a_distributed_container_job_trains_with_gloo_across_replicas(ccli, names, registry, tmp_path):
    job = names.job("gloo")
    # gcloud's flags for a custom container cluster.
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--scale-tier", "CUSTOM",
             "--master-machine-type", "n1-standard-4", "--master-image-uri", registry.torch_trainer,
             "--worker-machine-type", "n1-standard-4", "--worker-count", "2",
             "--worker-image-uri", registry.torch_trainer, "--", "gloo", "15", timeout=300)
    assert r.rc == 0, r
    spec = ccli.describe(job)["trainingInput"]
    assert spec["workerConfig"]["imageUri"] == registry.torch_trainer and spec["workerCount"] == "2", spec
    done = wait_end(ccli, job, timeout=400)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    lines = [e["message"] for e in ccli.server.logs(ccli.project, job) if e.get("message", "").startswith("GLOO")]
    ranks = sorted(int(l.split()[1].split("=")[1]) for l in lines)
    assert ranks == [0, 1, 2], lines
    assert all("world=3 sum=6" in l and "same_weights=True" in l for l in lines), lines
    # Each replica saw the cluster, torch's rendezvous, and its own rank.
    for task, rank in (("master-replica-0", 0), ("worker-replica-0", 1), ("worker-replica-1", 2)):
        c = contract_of(ccli, job, task)
        assert c["RANK"] == str(rank) and c["WORLD_SIZE"] == "3", c
        assert len(json.loads(c["TF_CONFIG"])["cluster"]["worker"]) == 2
    assert_nothing_left(ccli, job)


def test_inside_a_container_the_contract_buckets_and_credentials_are_the_same(ccli, names, tmp_path):
    job = names.job("env")
    out = f"gs://{ccli.bucket}/{job}/hello.txt"
    # The job runs as the project's default account, which uses the
    # project's buckets: the project's initial policy grants it
    # roles/storage.objectAdmin (docs/security.md).
    account = ccli.server.get_json(f"/v1/projects/{ccli.project}:getConfig")["serviceAccount"]
    status, text = ccli.server.request("POST", f"/v1/projects/{ccli.project}:getIamPolicy", {})
    assert status == 200, text
    policy = json.loads(text)
    assert {"role": "roles/storage.objectAdmin", "members": [f"serviceAccount:{account}"]} in [
        {"role": b["role"], "members": b["members"]} for b in policy["bindings"]], policy
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", GUIDE_MASTER,
             "--scale-tier", "BASIC", "--", "write", out, "from a container", timeout=300)
    assert r.rc == 0, r
    done = wait_end(ccli, job)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    assert ccli.ok("storage", "cat", out).out == "from a container"
    c = contract_of(ccli, job)
    assert c["in_container"] is True and c["MLENGINE_ACCESS_TOKEN_SET"] is True
    assert c["MLENGINE_API_ENDPOINT"] == ccli.server.endpoint
    assert c["STORAGE_EMULATOR_HOST"].startswith(ccli.server.endpoint + "/_token/")
    assert c["MLENGINE_SERVICE_ACCOUNT"] == account
    ccli.wait_log(job, f'LISTED ["{job}/hello.txt"]')
    assert c["hostname_net"] >= 2  # the host's interfaces, not a private network's
    assert c["argv"] == ["write", out, "from a container"]
    assert_nothing_left(ccli, job)


def test_cancel_stops_the_container_and_everything_in_it(ccli, names, tmp_path):
    job = names.job("cancel")
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", GUIDE_MASTER,
             "--scale-tier", "BASIC", "--", "sleep", timeout=300)
    assert r.rc == 0, r
    ccli.wait_log(job, "SLEEPING")
    run_dir = ccli.run_dir(job)
    running = images.containers_of(run_dir)
    assert len(running) == 1, running
    # The container runs the image pinned at submission, by digest.
    image = images.podman("inspect", "--format", "{{.ImageName}}", running[0]).stdout.strip()
    assert "@sha256:" in image, image
    ccli.ok("jobs", "cancel", job)
    done = wait_end(ccli, job, timeout=120)
    assert done["state"] == "CANCELLED", ccli.explain(job)
    assert_nothing_left(ccli, job)


def test_max_running_time_stops_the_container(ccli, names, tmp_path):
    job = names.job("timeout")
    config = write_config(tmp_path, {"scaleTier": "BASIC", "masterConfig": {"imageUri": GUIDE_MASTER},
                                     "scheduling": {"maxRunningTime": "3s"}})
    r = submit(ccli, job, config, "sleep")
    assert r.rc == 0, r
    done = wait_end(ccli, job, timeout=120)
    assert done["state"] == "CANCELLED", ccli.explain(job)  # as for a process replica
    assert "maxRunningTime" in done["errorMessage"], done
    assert_nothing_left(ccli, job)


def test_a_failing_container_fails_the_job_with_its_status_and_log(ccli, names):
    job = names.job("fail")
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", GUIDE_MASTER,
             "--scale-tier", "BASIC", "--", "fail", "3", timeout=300)
    assert r.rc == 0, r
    done = wait_end(ccli, job)
    assert done["state"] == "FAILED"
    assert "master-replica-0 exited with a non-zero status of 3" in done["errorMessage"], done
    assert "failing on purpose" in done["errorMessage"], done
    assert_nothing_left(ccli, job)


def test_a_restarted_server_finds_its_running_container_again(ccli, names):
    job = names.job("adopt")
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", GUIDE_MASTER,
             "--scale-tier", "BASIC", "--", "sleep", timeout=300)
    assert r.rc == 0, r
    ccli.wait_log(job, "SLEEPING")
    server = ccli.server
    server.kill()
    server.start()
    assert ccli.describe(job)["state"] == "RUNNING", ccli.explain(job)
    assert len(images.containers_of(ccli.run_dir(job))) == 1
    ccli.ok("jobs", "cancel", job)
    assert wait_end(ccli, job, timeout=120)["state"] == "CANCELLED"
    assert_nothing_left(ccli, job)


@pytest.mark.parametrize("image,expected", [
    ("{registry}/e2e/no-such-image:1", "was not found in the image registry"),
    ("gcr.io/some-project/not-mirrored:1", "is not available on this cluster"),
    ("localhost/no-such-local-image:1", "is not in this node's image store"),
])
def test_a_missing_image_is_refused_at_submission_naming_what_is_available(ccli, names, registry, image, expected):
    job = names.job("missing")
    uri = image.format(registry=registry.host)
    r = ccli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", uri,
             "--scale-tier", "BASIC", timeout=120)
    assert r.rc != 0, r
    assert expected in r.err, r
    assert "FAILED_PRECONDITION" in r.err or "failed precondition" in r.err.lower(), r
    if "registry" in expected:
        assert "mlengine/python:bookworm" in r.err, r  # what the registry holds
    if "not available" in expected:
        assert "gcr.io/cloud-ml-public/training/pytorch-xla.1-11" in r.err, r  # the mirrors
    # Nothing was created.
    assert ccli("jobs", "describe", job).rc != 0


def test_a_tpu_tf_version_that_does_not_go_with_the_image_is_refused(ccli, names, tmp_path):
    job = names.job("tfv")
    config = write_config(tmp_path, tpu_config(XLA, XLA, "pytorch-1.10"))
    r = submit(ccli, job, config)
    assert r.rc != 0, r
    assert "pytorch-1.11" in r.err, r


HOSTILE_CONTAINER = r'''
import json, os, sys
gcs = os.environ["MLENGINE_GCS_ROOT"]; data = os.path.dirname(gcs); other = sys.argv[1]; own = sys.argv[2]
st = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
found = {"uid": os.getuid(), "cap_eff": st["CapEff"].strip(), "no_new_privs": st["NoNewPrivs"].strip()}
def attempt(name, fn):
    try:
        found[name] = "OPEN " + str(fn())
    except Exception as e:
        found[name] = "blocked " + type(e).__name__
attempt("admin-token", lambda: open(os.path.join(data, "admin.token")).read()[:4])
attempt("database", lambda: len(open(os.path.join(data, "mlengine.db"), "rb").read()))
attempt("other-bucket", lambda: os.listdir(os.path.join(gcs, other)))
attempt("other-bucket-write", lambda: open(os.path.join(gcs, other, "pwned"), "w").write("x"))
attempt("become-root", lambda: os.setuid(0))
attempt("find-server", lambda: next(p for p in os.listdir("/proc") if p.isdigit() and os.path.basename(open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0]) == b"mlengined"))
os.makedirs(os.path.join(gcs, own, "from-container"), exist_ok=True)
open(os.path.join(gcs, own, "from-container", "ok.txt"), "w").write("mine\n")
print("FOUND " + json.dumps(found), flush=True)
'''


def test_a_hostile_container_is_refused_everything_outside_its_job(cserver, ccli, names, tmp_path):
    """The sandbox in a container: not root on the host, no capabilities,
    only its project's bucket mounted (docs/security.md)."""
    other = other_project_with_a_secret(ccli, tmp_path, names)
    job = names.job("hostile")
    config = write_config(tmp_path, {"scaleTier": "BASIC", "masterConfig": {
        "imageUri": GUIDE_MASTER, "containerCommand": ["python3", "-c", HOSTILE_CONTAINER],
        "containerArgs": [other.bucket, ccli.bucket]}})
    r = ccli("jobs", "submit", "training", job, "--region", REGION, f"--config={config}", timeout=300)
    assert r.rc == 0, r
    done = wait_end(ccli, job)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    line = next(e["message"] for e in ccli.wait_log(job, "FOUND ") if e["message"].startswith("FOUND "))
    found = json.loads(line[len("FOUND "):])
    assert found.pop("uid") >= 524288, found
    assert int(found.pop("cap_eff"), 16) == 0 and found.pop("no_new_privs") == "1", found
    assert all(v.startswith("blocked") for v in found.values()), found
    assert ccli.ok("storage", "cat", f"gs://{ccli.bucket}/from-container/ok.txt").out == "mine\n"
    assert_secret_untouched(other)


CONTAINER_MEMORY_MIB = 128


def test_a_container_killed_at_its_memory_limit_says_so(registry, tmp_path_factory, tmp_path, names):
    """The kernel kills a container's process at the replica's memory limit;
    podman says only "137" (its OOMKilled stays false on a cgroup v1 host):
    mlengine finds the kill by the container's id in the kernel log and says
    so in errorMessage, naming the replica, the process and the limit."""
    config = (config_yaml() + registry.server_config() + images.Registry.GUIDE_MIRRORS
              + f"local:\n  replica_memory_mib: {CONTAINER_MEMORY_MIB}\n")
    server = Server(tmp_path_factory.mktemp("container-memory"), config)
    try:
        cli = make_cli(server, tmp_path, names)
        job = names.job("hog")
        hog = f"x = bytearray({4 * CONTAINER_MEMORY_MIB} * 1024 * 1024); print('SURVIVED', len(x), flush=True)"
        config_path = write_config(tmp_path, {"scaleTier": "BASIC", "masterConfig": {
            "imageUri": GUIDE_MASTER, "containerCommand": ["python3", "-c", hog]}})
        r = submit(cli, job, config_path)
        assert r.rc == 0, r
        done = wait_end(cli, job)
        assert done["state"] == "FAILED", cli.explain(job)
        message = done.get("errorMessage", "")
        assert message.startswith("The replica master-replica-0 ran out of memory"), done
        assert "python3" in message and f"{CONTAINER_MEMORY_MIB} MiB" in message, done
        assert not any("SURVIVED" in e.get("message", "") for e in server.logs(cli.project, job, "master-replica-0"))
        assert_nothing_left(cli, job)
    finally:
        problems = server.finish()
    assert not problems, problems
    assert images.containers_under(server.data_dir) == [], "containers left behind"


def test_a_registry_that_does_not_answer_holds_up_only_the_jobs_that_need_it(tmp_path_factory, names):
    """Pinning a container job's image asks the registry (up to 10 s). A
    registry that holds every answer: more creates that need it than the
    server has HTTP threads are in admission at once, and jobs.get and
    jobs.list keep answering at once all the while; once the registry
    answers, each create is answered with what it said."""
    import http.client
    import threading
    import time
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    release = threading.Event()
    asked = []

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, body=b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', status=404):
            asked.append(self.path)
            release.wait(30)
            if self.path.startswith("/v2/_catalog"):
                status, body = 200, b'{"repositories":[]}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = answer

    registry = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=registry.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{registry.server_address[1]}"
    server = Server(tmp_path_factory.mktemp("slow-registry"), config_yaml() + f"containers:\n  registry: {host}\n")
    try:
        project = names.project
        u = urllib.parse.urlparse(server.endpoint)

        def call(method, path, body=None):
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            r = conn.getresponse()
            out = (r.status, json.loads(r.read() or b"{}"))
            conn.close()
            return out

        creates = {}

        def create(i):
            job = {"jobId": f"slow_{i}", "trainingInput": {"scaleTier": "BASIC", "region": REGION,
                                                           "masterConfig": {"imageUri": f"{host}/team/slow:{i}"}}}
            creates[i] = call("POST", f"/v1/projects/{project}/jobs", job)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 20
        while len(asked) < 4 and time.time() < deadline:
            time.sleep(0.01)
        assert len(asked) >= 4, f"the creates did not reach the registry: {asked}"
        # Every create waits on the registry now; the API answers anyway.
        slowest = 0.0
        for _ in range(10):
            t0 = time.time()
            status, _ = call("GET", f"/v1/projects/{project}/jobs")
            assert status == 200
            status, _ = call("GET", f"/v1/projects/{project}/jobs/no_such_job")
            assert status == 404
            slowest = max(slowest, time.time() - t0)
        assert slowest < 1.0, f"a get and a list took {slowest:.2f} s while the registry held its answers"
        assert not creates, f"a create was answered before the registry did: {creates}"
        release.set()
        for t in threads:
            t.join(60)
        assert sorted(creates) == [0, 1, 2, 3], creates
        for status, body in creates.values():
            assert status == 400 and "was not found in the image registry" in body["error"]["message"], body
    finally:
        release.set()
        problems = server.finish()
        registry.shutdown()
    assert not problems, problems


def run_custom_job(cli, body, node_client=None):
    """Vertex AI's customJobs.create of `body` in the CLI's project, run to
    JOB_STATE_SUCCEEDED (through Google's Node.js client `node_client`,
    "googleapis" or "gax", when one is named): its id."""
    if node_client:
        job = run_node_job(cli.server, node_client, cli.project, body)
        job_id = job["name"].rsplit("/", 1)[1]
    else:
        created = create_custom_job(cli.server, cli.project, body)
        job_id = created["name"].rsplit("/", 1)[1]
        job = wait_ended(cli.server, created["name"], timeout=300)
    assert job["state"] == "JOB_STATE_SUCCEEDED", (job, cli.server.logs(cli.project, job_id))
    return job_id


def test_a_vertex_custom_job_runs_its_container_with_vertexs_contract(ccli, names):
    """Vertex AI's customJobs.create with a containerSpec (docs/vertex.md),
    sent by @google-cloud/aiplatform's Node.js client in its REST mode: the
    guide's master image, mirrored and pinned as ml v1's are, runs with its
    args, CLUSTER_SPEC naming workerpool0 and TF_CONFIG's chief."""
    out = f"gs://{ccli.bucket}/vertex/hello.txt"
    body = {"displayName": "vertex container",
            "jobSpec": {"workerPoolSpecs": [{
                "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                "containerSpec": {"imageUri": GUIDE_MASTER, "args": ["write", out, "from vertex"]}}]}}
    job_id = run_custom_job(ccli, body, node_client="gax")
    assert ccli.ok("storage", "cat", out).out == "from vertex"
    c = contract_of(ccli, job_id)
    assert c["in_container"] is True and c["argv"] == ["write", out, "from vertex"], c
    spec = json.loads(c["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool0", "index": 0} and list(spec["cluster"]) == ["workerpool0"], spec
    assert json.loads(c["TF_CONFIG"])["task"]["type"] == "chief"
    assert c["CLOUD_ML_JOB_ID"] == job_id
    assert_nothing_left(ccli, job_id)


def test_the_guides_pytorch_xla_configuration_as_a_custom_job(ccli, names):
    """The TPU guide's PyTorch 1.11 configuration (the pytorch-xla image on
    the master and a cloud_tpu worker of TPU_V2 x 8) as Vertex AI's
    CustomJobSpec: the image's TPU runtime (pytorch-1.11) is chosen for the
    cloud-tpu pool, as the guide's tpuTfVersion says, and the master's code
    finds its (simulated) TPU as in the ml v1 job."""
    code = ("import os, torch; from mlengine import tpu; r = tpu.wait_for_tpu_cluster_resolver_ready(); "
            "print('XLA-STANDIN', torch.__version__, os.environ['TPU_ACCELERATOR_TYPE'], "
            "os.environ['MLENGINE_TPU_RUNTIME_VERSION'], r is not None, os.path.exists('/run/.containerenv'))")
    pools = [{"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "1",
              "containerSpec": {"imageUri": XLA, "command": ["python3", "-c", code]}},
             {"machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2", "acceleratorCount": 8},
              "replicaCount": "1", "containerSpec": {"imageUri": XLA}}]
    job_id = run_custom_job(ccli, {"displayName": "guide pytorch-xla", "jobSpec": {"workerPoolSpecs": pools}})
    entries = ccli.wait_log(job_id, "XLA-STANDIN")
    line = next(e["message"] for e in entries if "XLA-STANDIN" in e.get("message", ""))
    assert line.split()[2:] == ["v2-8", "pytorch-1.11", "True", "True"], line
    assert_nothing_left(ccli, job_id)


def test_the_guides_custom_container_tpu_configuration_as_a_custom_job(ccli, names):
    """The TPU guide's custom-container configuration (config_tpu_container.yaml:
    the guide's images on the master and a cloud_tpu worker of TPU_V2 x 8) as
    Vertex AI's CustomJobSpec: pool 0 the master, pool 1 a cloud-tpu machine
    with the accelerator. It runs as the ml v1 job does: the master waits for
    its (simulated) TPU, and the job ends SUCCEEDED with Vertex's contract."""
    pools = [{"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "1",
              "containerSpec": {"imageUri": GUIDE_MASTER, "args": ["tpu"]}},
             {"machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2", "acceleratorCount": 8},
              "replicaCount": "1", "containerSpec": {"imageUri": GUIDE_WORKER, "args": ["tpu"]}}]
    job_id = run_custom_job(ccli, {"displayName": "guide tpu containers", "jobSpec": {"workerPoolSpecs": pools}})
    # As in the ml v1 job, the cloud_tpu worker is the (simulated) TPU the
    # master's code drives, not a process of its own.
    c = contract_of(ccli, job_id)
    assert c["in_container"] is True and c["argv"] == ["tpu"], c
    assert c["TPU_ACCELERATOR_TYPE"] == "v2-8"
    assert "(simulated)" in c["MLENGINE_SIMULATED_ACCELERATOR"]
    assert json.loads(c["TPU_CONFIG"])["project"] == ccli.project
    assert c["MLENGINE_TPU_RUNTIME_VERSION"], c  # chosen for the image: Vertex has no tpuTfVersion
    spec = json.loads(c["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool0", "index": 0}, spec
    assert spec["job"]["workerPoolSpecs"][1]["machineSpec"]["machineType"] == "cloud-tpu", spec
    assert json.loads(c["TF_CONFIG"])["task"]["type"] == "chief"
    ccli.wait_log(job_id, "TPU ready")
    assert_nothing_left(ccli, job_id)


def image_present(reference):
    return images.podman("image", "exists", reference, check=False).returncode == 0


def test_images_no_unfinished_job_pins_are_pruned_and_pulled_again(registry, tmp_path_factory, tmp_path, names):
    """Retention's images (docs/operations.md, "Retention") under a budget
    of 0: an ended job's image goes, a running job's stays until it ends;
    images no job of the server pinned (the module's trainer) and the
    operator's own (localhost/...) are never touched; a job pinning a
    removed image pulls it again and runs."""
    with open(images.TRAINER_TASK) as f:
        task = f.read()
    entry = ["python3", "/app/task.py"]
    # Images of their own (their own contents, so no other name shares them).
    keep = registry.build("e2e/retention-keep:1", {"/app/task.py": task, "/app/which": names.job("keep")},
                          entrypoint=entry)
    drop = registry.build("e2e/retention-drop:1", {"/app/task.py": task, "/app/which": names.job("drop")},
                          entrypoint=entry)
    config = (config_yaml() + registry.server_config()
              + "retention:\n  images: {max_size_mb: 0}\n  check_seconds: 1\n")
    server = Server(tmp_path_factory.mktemp("container-retention"), config)
    try:
        cli = make_cli(server, tmp_path, names)

        def run(job, image, *args):
            r = cli("jobs", "submit", "training", job, "--region", REGION, "--master-image-uri", image,
                    "--scale-tier", "BASIC", "--", *args, timeout=300)
            assert r.rc == 0, r

        running = names.job("running")
        run(running, keep, "sleep")
        cli.wait_log(running, "SLEEPING")
        ended = names.job("ended")
        run(ended, drop, "contract")
        assert wait_end(cli, ended)["state"] == "SUCCEEDED", cli.explain(ended)
        wait_for(lambda: not image_present(drop), "the ended job's image removed", timeout=60)
        assert image_present(keep), "a running job's image is kept"
        assert image_present(registry.trainer), "an image no job of this server pinned is kept"
        assert image_present("localhost/mlengine/python:bookworm"), "the operator's own image is kept"
        wait_counted(server, "mlengine_retention_freed_bytes_total", "images", 1)
        assert metric(server, "mlengine_retention_removed_total", "images") >= 1
        assert "images no unfinished job pins" in open(server.stderr_path).read()

        # Pinned again: pulled again from the registry, and it runs.
        again = names.job("again")
        run(again, drop, "contract")
        assert wait_end(cli, again)["state"] == "SUCCEEDED", cli.explain(again)
        assert contract_of(cli, again)["in_container"] is True

        # Once the running job ends, its image goes too.
        cli.ok("jobs", "cancel", running)
        assert wait_end(cli, running, timeout=120)["state"] == "CANCELLED"
        wait_for(lambda: not image_present(keep), "the image removed once its job ended", timeout=60)
        assert_nothing_left(cli, running)
    finally:
        problems = server.finish()
    assert not problems, problems
    assert images.containers_under(server.data_dir) == [], "containers left behind"
