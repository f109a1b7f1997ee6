"""GPU assignment against a FAKE nvidia-smi (no GPU exists on the test
machine): a script named nvidia-smi on the server's PATH reports two Tesla T4s.
Two 1-GPU jobs running together get different devices; a job asking for more
T4s than the machine has is refused at submission."""

import re
import stat

from conftest import config_yaml, make_cli

FAKE_NVIDIA_SMI = """#!/bin/sh
# Fake nvidia-smi for mlengine's e2e tests: two Tesla T4s.
if [ "$1" = "--query-gpu=index,name" ] && [ "$2" = "--format=csv,noheader" ]; then
  printf '0, Tesla T4\\n1, Tesla T4\\n'
  exit 0
fi
echo "fake nvidia-smi: unsupported arguments: $*" >&2
exit 2
"""


def fake_gpu_server(server_factory, tmp_path):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    server = server_factory(config_yaml(gpu_types={"NVIDIA_TESLA_T4": ["T4"]}), path_prefix=bin_dir)
    with open(server.stderr_path) as f:
        log = f.read()
    assert "2 x NVIDIA_TESLA_T4" in log, f"mlengined did not take the fake nvidia-smi's GPUs:\n{log}"
    return server


GPU_FLAGS = ("--scale-tier=custom", "--master-machine-type=n1-standard-4")


def test_gpu_assignment_with_fake_nvidia_smi(server_factory, tmp_path, names):
    server = fake_gpu_server(server_factory, tmp_path)
    cli = make_cli(server, tmp_path, names)
    gate = f"gs://{cli.bucket}/gate"
    jobs = [names.job("gpu1"), names.job("gpu2")]
    for job in jobs:
        r = cli.submit(job, *GPU_FLAGS, "--master-accelerator=type=nvidia-tesla-t4,count=1",
                       args=["--print-env", "CUDA_VISIBLE_DEVICES", "--wait-for", gate])
        assert r.rc == 0, r
    devices = {}
    for job in jobs:
        cli.wait_state(job, {"RUNNING"}, timeout=60)
        entries = cli.wait_log(job, "CUDA_VISIBLE_DEVICES=", timeout=60)
        devices[job] = next(e["message"].split("=", 1)[1] for e in entries
                            if e["message"].startswith("CUDA_VISIBLE_DEVICES="))
    assert sorted(devices.values()) == ["0", "1"], f"two concurrent 1-GPU jobs got {devices}"
    for job in jobs:  # both were running at the same time
        assert cli.describe(job)["state"] == "RUNNING"

    cli.open_gate(gate)
    for job in jobs:
        cli.wait_state(job, {"SUCCEEDED"}, timeout=60)

    too_many = names.job("gpu4")
    r = cli.submit(too_many, *GPU_FLAGS, "--master-accelerator=type=nvidia-tesla-t4,count=4", args=["--lines", "1"])
    assert r.rc == 1, r
    text = r.out + r.err
    assert "FAILED_PRECONDITION" in text, r
    assert "NVIDIA_TESLA_T4" in text and re.search(r"\b2\b", text), \
        f"the refusal does not say the machine has 2 T4s:\n{r}"
    assert cli("jobs", "describe", too_many).rc != 0, "a refused job was created"
