"""The sandbox under Slurm (docs/security.md): the hostile trainer
(tests/e2e/trainers/hostile) submitted with `mlengined --executor slurm`
runs as the job's identity on its node, in a view of only what its account
may reach, and every attack it tries fails; a memory hog is killed at its
limit there and the job's errorMessage says so."""

import importlib
import json
import os
import re
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("sinfo") is None or os.geteuid() != 0,
                                reason="needs Slurm (apt-get install slurm-wlm munge) and root")

e2e = importlib.import_module("mle_e2e_conftest")
HOSTILE_PKG = os.path.join(e2e.TRAINERS, "hostile", "trainer")


def ended(cli, job, timeout=240):
    return cli.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=timeout)


def test_a_hostile_trainer_is_refused_everything_on_its_node(slurm_server, cli, names, tmp_path):
    other = e2e.other_project_with_a_secret(cli, tmp_path, names)

    job = names.job("hostile")
    r = cli.submit(job, package=HOSTILE_PKG, args=[
        "--server-pid", str(slurm_server.proc.pid), "--other-bucket", other.bucket, "--own-bucket", cli.bucket])
    assert r.rc == 0, r
    desc = ended(cli, job)
    assert desc["state"] == "SUCCEEDED", cli.explain(job)
    text = slurm_server.log_text(cli.project, job)
    line = next(l for l in text.splitlines() if "REPORT " in l)
    results = json.loads(line.split("REPORT ", 1)[1])
    opened = {k: v for k, v in results.items() if v != "blocked"}
    assert not opened, f"attacks that worked under Slurm: {opened}\n{text[-4000:]}"
    assert int(re.search(r"uid=(\d+)", text).group(1)) >= 524288, text
    assert cli.ok("storage", "cat", f"gs://{cli.bucket}/sandbox-own/written.txt").out == "mine\n"
    e2e.assert_secret_untouched(other)


def test_a_memory_hog_is_killed_at_its_limit_on_its_node(slurm_server, cli, names):
    # config/mlengined-slurm.yaml gives n1-highmem-2 400 MiB: Slurm allocates
    # it, and the node's launcher makes it the replica's limit.
    job = names.job("hog")
    assert cli.submit(job, "--scale-tier", "custom", "--master-machine-type", "n1-highmem-2",
                      package=HOSTILE_PKG, args=["--hog", "2000"]).rc == 0
    desc = ended(cli, job)
    assert desc["state"] == "FAILED", cli.explain(job)
    assert "ran out of memory" in desc["errorMessage"] and "400 MiB" in desc["errorMessage"], desc
    assert "master-replica-0" in desc["errorMessage"], desc
