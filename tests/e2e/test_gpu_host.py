"""A real GPU through the sandbox, on a host that has one (nvidia-smi lists
it; skipped elsewhere, as on the CI machine: tests/e2e/test_gpu_fake_nvidia_smi.py
covers the assignment there). mlengined takes the GPUs nvidia-smi names; a
job that asks for one runs, as its unprivileged identity, with that GPU's
device node and NVIDIA's control devices in its /dev and CUDA working
(a float64 matrix product on the GPU matches the CPU's), cold and forked
from a warm interpreter; a job that asks for none sees no NVIDIA device.

On a GPU host whose torch is not /usr/bin/python3's, name it:
MLE_TEST_PYTHON=/opt/torch/.venv/bin/python3."""

import json
import os
import subprocess

import pytest

from conftest import PYTHON, TRAINERS, Server, config_yaml, make_cli, serve

GPU_PKG = os.path.join(TRAINERS, "gpu", "trainer")
FIRST_UID = 524288  # the default sandbox.first_uid


def host_gpus():
    """[(index, model)] as nvidia-smi reports them; [] without one."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    return [tuple(s.strip() for s in line.split(",", 1)) for line in p.stdout.splitlines() if "," in line]


GPUS = host_gpus()
pytestmark = pytest.mark.skipif(not GPUS, reason="no NVIDIA GPU on this machine (nvidia-smi lists none)")


def host_torch_cuda():
    """Whether the runtime's interpreter, run outside any sandbox, has CUDA."""
    p = subprocess.run([PYTHON, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                       text=True, timeout=300)
    return p.returncode == 0 and p.stdout.strip() == "True"


def gpu_config():
    # Every model nvidia-smi names serves NVIDIA_TESLA_A100 jobs here.
    return config_yaml(gpu_types={"NVIDIA_TESLA_A100": [model for _, model in GPUS]}, warm_preload=["torch"])


@pytest.fixture(scope="module")
def gserver(tmp_path_factory):
    yield from serve(Server(tmp_path_factory.mktemp("gpu-server"), gpu_config()))


@pytest.fixture
def gcli(gserver, tmp_path, names):
    return make_cli(gserver, tmp_path, names)


def run_report(cli, job, *flags):
    r = cli.submit(job, "--scale-tier=custom", *flags, package=GPU_PKG)
    assert r.rc == 0, r
    state = cli.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=300)
    assert state["state"] == "SUCCEEDED", (state, cli.server.server_log())
    lines = [e["message"] for e in cli.server.logs(cli.project, job, "master-replica-0")]
    report = next(json.loads(m[len("REPORT "):]) for m in lines if m.startswith("REPORT "))
    start = next(m for m in lines if m.startswith("mlengine: "))
    return report, start


def test_mlengined_takes_the_hosts_gpus(gserver):
    with open(gserver.stderr_path) as f:
        log = f.read()
    assert f"{len(GPUS)} x NVIDIA_TESLA_A100" in log, log


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_job_with_a_gpu_uses_it_in_its_sandbox(gcli, names, warm):
    cuda = host_torch_cuda()
    flags = ["--master-machine-type=a2-highgpu-1g", "--master-accelerator=type=nvidia-tesla-a100,count=1"]
    if not warm:
        flags += ["--labels", "mlengine-warm-start=false"]
    report, start = run_report(gcli, names.job("gpu"), *flags)
    assert start.startswith("mlengine: warm start" if warm else "mlengine: cold start"), start
    assert report["uid"] >= FIRST_UID, report
    index = report["cuda_visible_devices"]
    assert index in {i for i, _ in GPUS}, report
    # Its own GPU and the control devices; no other GPU's node.
    numbered = [d for d in report["devices"] if d[len("nvidia"):].isdigit()]
    assert numbered == [f"nvidia{index}"], report
    assert "nvidiactl" in report["devices"], report
    if cuda:
        assert report.get("cuda") is True, report
        assert report["count"] == 1, report
        assert report["name"] == dict(GPUS)[index], report
        assert report["matmul_max_error"] < 1e-9, report


def test_a_job_without_a_gpu_sees_none(gcli, names):
    report, _ = run_report(gcli, names.job("nogpu"), "--master-machine-type=n1-standard-4")
    assert report["devices"] == [], report
    assert report.get("cuda") in (False, None), report
