"""Custom containers on the local 4-node Slurm cluster: the TPU guide's two
container configurations, gloo across replicas on different nodes, and a
cancel that leaves no container. Each node pulls the job's pinned image from
the registry (Debian's docker-registry) and runs it with podman through
mlengine-replica, inside the srun step mlengine-slurm-launch starts.
"""

import json
import os
import sys

import pytest

from conftest import e2e, _make_slurm_server, SLURM_CONFIG

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import images  # noqa: E402

from images import GUIDE_MASTER, GUIDE_WORKER, PYTORCH_XLA  # noqa: E402


@pytest.fixture(scope="module")
def registry():
    with images.trainer_registry() as r:
        yield r


@pytest.fixture(scope="module")
def cserver(slurm_cluster, registry, tmp_path_factory):
    config = SLURM_CONFIG.read_text() + "\n" + registry.server_config() + images.Registry.GUIDE_MIRRORS
    s = _make_slurm_server(tmp_path_factory.mktemp("slurm-containers"), slurm_cluster, config)
    yield s
    problems = s.finish()
    assert not problems, "\n".join(problems) + "\n" + s.server_log()
    assert images.containers_under(s.data_dir) == [], "containers left behind"


@pytest.fixture
def ccli(cserver, tmp_path, names):
    return e2e.make_cli(cserver, tmp_path, names)


def submit(cli, job, training_input, *args, tmp_path):
    path = tmp_path / f"{job}.json"
    path.write_text(json.dumps({"trainingInput": training_input}))
    cmd = ["jobs", "submit", "training", job, "--region", e2e.REGION, "--config", str(path)]
    if args:
        cmd += ["--", *args]
    r = cli(*cmd, timeout=300)
    assert r.rc == 0, r


def tpu_input(image, version):
    return {"scaleTier": "CUSTOM", "masterType": "n1-highcpu-16", "masterConfig": {"imageUri": image[0]},
            "workerType": "cloud_tpu", "workerCount": 1,
            "workerConfig": {"imageUri": image[1], "tpuTfVersion": version,
                             "acceleratorConfig": {"type": "TPU_V2", "count": 8}}}


def assert_nothing_left(cli, job):
    run_dir = cli.run_dir(job)
    assert images.containers_of(run_dir) == []
    left = e2e.wait_no_procs(lambda: e2e.procs_of_job(run_dir, job), timeout=15)
    assert not left, e2e.describe_procs(left)


def test_the_guides_pytorch_xla_configuration_on_slurm(ccli, names, tmp_path):
    job = names.job("pt")
    xla = PYTORCH_XLA
    code = ("import os, torch; from mlengine import tpu; r = tpu.wait_for_tpu_cluster_resolver_ready(); "
            "print('XLA-STANDIN', torch.__version__, os.environ['TPU_WORKER_HOSTNAMES'], "
            "os.environ['MLENGINE_TPU_RUNTIME_VERSION'], os.path.exists('/run/.containerenv'), "
            "'simulated here by' in os.environ.get('MLENGINE_SIMULATED_IMAGE', ''))")
    submit(ccli, job, tpu_input((xla, xla), "pytorch-1.11"), "python3", "-c", code, tmp_path=tmp_path)
    done = ccli.wait_state(job, e2e.TERMINAL, timeout=300)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    line = next(e["message"] for e in ccli.wait_log(job, "XLA-STANDIN") if "XLA-STANDIN" in e.get("message", ""))
    words = line.split()
    assert words[2].startswith("tpuhost") and words[3:] == ["pytorch-1.11", "True", "True"], line
    assert_nothing_left(ccli, job)


def test_the_guides_custom_container_tpu_configuration_on_slurm(ccli, names, tmp_path):
    job = names.job("tpu")
    submit(ccli, job, tpu_input((GUIDE_MASTER, GUIDE_WORKER), "2.11"), "tpu", tmp_path=tmp_path)
    done = ccli.wait_state(job, e2e.TERMINAL, timeout=300)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    # The guide's helper waited for the (simulated) TPU workers Slurm started.
    ccli.wait_log(job, "TPU ready")
    assert_nothing_left(ccli, job)


def test_gloo_across_nodes_in_containers(ccli, names, registry, tmp_path):
    job = names.job("gloo")
    submit(ccli, job, {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                       "masterConfig": {"imageUri": registry.torch_trainer},
                       "workerType": "n1-standard-4", "workerCount": 1}, "gloo", "10", tmp_path=tmp_path)
    done = ccli.wait_state(job, e2e.TERMINAL, timeout=400)
    assert done["state"] == "SUCCEEDED", ccli.explain(job)
    lines = [e["message"] for e in ccli.server.logs(ccli.project, job) if e.get("message", "").startswith("GLOO")]
    assert len(lines) == 2 and all("world=2 sum=3" in l and "same_weights=True" in l for l in lines), lines
    assert_nothing_left(ccli, job)


def test_cancel_on_slurm_leaves_no_container(ccli, names, tmp_path):
    job = names.job("cancel")
    submit(ccli, job, {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                       "masterConfig": {"imageUri": GUIDE_MASTER},
                       "workerType": "n1-standard-4", "workerCount": 1}, "sleep", tmp_path=tmp_path)
    for task in ("master-replica-0", "worker-replica-0"):
        ccli.wait_log(job, "SLEEPING", task=task, timeout=120)
    assert len(images.containers_of(ccli.run_dir(job))) == 2
    ccli.ok("jobs", "cancel", job)
    assert ccli.wait_state(job, {"CANCELLED"}, timeout=120)["state"] == "CANCELLED"
    assert_nothing_left(ccli, job)
