"""The local four-host Slurm cluster (scripts/slurm/cluster.sh) gives a real
gang allocation: one task on each of tpuhost1..4, each holding tpu:8.

Runs only where Slurm is installed (`sinfo` on PATH) and as root. The
cluster is the session's (conftest.py's slurm_cluster: its own directory,
stopped at the end, pass or fail).
"""
import os
import pathlib
import shutil
import subprocess
import time

import pytest

ROOT = pathlib.Path(os.environ.get("MLE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SCRIPT = ROOT / "scripts" / "slurm" / "cluster.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("sinfo") is None or os.geteuid() != 0,
    reason="needs Slurm (apt-get install slurm-wlm munge) and root",
)


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster


def test_four_idle_nodes(cluster):
    _, env = cluster
    out = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %t %G"], env=env, capture_output=True, text=True, check=True)
    rows = sorted(line.split() for line in out.stdout.splitlines())
    assert rows == [[f"tpuhost{i}", "idle", "tpu:8"] for i in range(1, 5)]


def test_gang_of_four_hosts(cluster):
    d, env = cluster
    out_file = f"{d}/gang.out"
    sub = subprocess.run(
        ["sbatch", "--parsable", "-N", "4", "--gres=tpu:8", "-o", out_file, "--wrap", "srun env"],
        env=env, capture_output=True, text=True, check=True, cwd=d)
    job_id = sub.stdout.strip().split(";")[0]
    assert job_id.isdigit()
    deadline = time.monotonic() + 60
    state = ""
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"],
                               env=env, capture_output=True, text=True).stdout.strip()
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            break
        time.sleep(0.2)
    assert state == "COMPLETED"
    lines = pathlib.Path(out_file).read_text().splitlines()
    nodes = [l.split("=", 1)[1] for l in lines if l.startswith("SLURMD_NODENAME=")]
    ranks = sorted(int(l.split("=", 1)[1]) for l in lines if l.startswith("SLURM_PROCID="))
    assert sorted(nodes) == ["tpuhost1", "tpuhost2", "tpuhost3", "tpuhost4"]
    assert ranks == [0, 1, 2, 3]


def test_start_again_finds_it_running(cluster):
    d, env = cluster
    env = {k: v for k, v in env.items() if k != "SLURM_CONF"}
    again = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"export SLURM_CONF={d}/slurm.conf"
    status = subprocess.run([str(SCRIPT), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status
