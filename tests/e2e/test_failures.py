"""Jobs that fail, and jobs refused at submission: each failure must say why."""

import io
import os
import re
import tarfile
import time
import uuid

from conftest import RUNTIME, TRAINERS, config_yaml, make_cli


def test_failing_trainer_names_replica_status_and_log_tail(cli, names):
    job = names.job("fail")
    r = cli.submit(job, "--stream-logs", args=["--lines", "2", "--fail", "3"])
    assert r.rc != 0, f"--stream-logs of a FAILED job exited 0\n{r}"
    assert "boom" in r.out, r  # streamed before the end
    desc = cli.wait_state(job, {"FAILED"}, timeout=60)
    msg = desc.get("errorMessage", "")
    assert "master-replica-0" in msg, msg
    assert "non-zero status of 3" in msg, msg
    assert "boom" in msg, f"errorMessage lacks the last log lines: {msg!r}"
    assert "endTime" in desc, desc


def test_a_trainers_exception_leads_the_error_message_with_its_frame(cli, names):
    job = names.job("raise")
    assert cli.submit(job, args=["--lines", "2", "--raise", "bad shape (3, 3)"]).rc == 0
    msg = cli.wait_state(job, {"FAILED"}, timeout=60).get("errorMessage", "")
    assert msg.startswith("The replica master-replica-0 exited with a non-zero status of 1: "
                          "ValueError: bad shape (3, 3) (trainer/task.py, line "), msg
    assert ", in check_shape). Last lines of its log:" in msg, msg


def test_missing_module(cli, names):
    job = names.job("nomod")
    cli.ok("jobs", "submit", "training", job, "--package-path", os.path.join(TRAINERS, "tasks", "trainer"),
           "--module-name", "trainer.nosuch", "--staging-bucket", f"gs://{cli.bucket}", "--region", "us-central1",
           "--runtime-version", RUNTIME)
    desc = cli.wait_state(job, {"FAILED"}, timeout=60)
    msg = desc.get("errorMessage", "")
    assert "No module named" in msg, msg
    assert "master-replica-0" in msg, msg


def test_missing_dependency(cli, names):
    job = names.job("nodep")
    cli.ok("jobs", "submit", "training", job, "--package-path", os.path.join(TRAINERS, "needs_tfds", "trainer"),
           "--module-name", "trainer.task", "--staging-bucket", f"gs://{cli.bucket}", "--region", "us-central1",
           "--runtime-version", RUNTIME)
    desc = cli.wait_state(job, {"FAILED"}, timeout=120)
    msg = desc.get("errorMessage", "")
    assert "tensorflow-datasets" in msg or "tensorflow_datasets" in msg, msg
    assert "dependency is missing" in msg, msg
    assert not os.path.exists(os.path.join(cli.run_dir(job), "master-replica-0", "log")), \
        "a replica was started although its package could not be installed"


def find_files(root, name, payload, depth=None):
    """Every file `name` holding `payload` below `root` (at most `depth`
    directories down when given)."""
    hits = []
    for d, dirs, files in os.walk(root, onerror=lambda e: None):
        if depth is not None and d[len(root):].count(os.sep) >= depth:
            dirs[:] = []
        if name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as f:
                    if f.read() == payload:
                        hits.append(p)
            except OSError:
                pass
    return hits


def test_tarball_with_parent_entries_is_refused(cli, names, server, tmp_path):
    payload = f"evil {uuid.uuid4()}\n".encode()
    archive = tmp_path / "evil-0.1.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("evil-0.1/setup.py", b"from setuptools import setup\nsetup(name='evil', version='0.1')\n"),
                           ("../../evil.txt", payload)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    uri = f"gs://{cli.bucket}/pkgs/evil-0.1.tar.gz"
    cli.ok("storage", "cp", str(archive), uri)

    job = names.job("evil")
    status, text = server.request("POST", f"/v1/projects/{cli.project}/jobs", body={
        "jobId": job,
        "trainingInput": {"packageUris": [uri], "runtimeVersion": RUNTIME, "region": "us-central1",
                          "pythonModule": "x"}})
    assert status == 200, f"POST jobs -> {status}: {text}"
    desc = cli.wait_state(job, {"FAILED"}, timeout=60)
    msg = desc.get("errorMessage", "")
    assert "unsafe path" in msg, msg
    assert "../../evil.txt" in msg, msg
    # Where "../../evil.txt" lands from an unpack directory in the data
    # directory, or from a temporary one of pip's (/tmp/pip-*/..., so /tmp
    # itself, one level below it, or /): not the whole of /tmp, which on a
    # developer's machine holds build trees (a walk took a minute).
    hits = (find_files(server.data_dir, "evil.txt", payload) + find_files("/tmp", "evil.txt", payload, depth=2)
            + find_files("/", "evil.txt", payload, depth=0))
    assert not hits, f"the archive's ../../evil.txt was extracted: {hits}"


def test_runtime_not_installed_is_refused(cli, names):
    job = names.job("rt")
    r = cli("jobs", "submit", "training", job, "--package-path", os.path.join(TRAINERS, "tasks", "trainer"),
            "--module-name", "trainer.task", "--staging-bucket", f"gs://{cli.bucket}", "--region", "us-central1",
            "--runtime-version=2.11")
    assert r.rc == 1, r
    text = r.out + r.err
    assert "FAILED_PRECONDITION" in text, r
    assert "pytorch-1.13-cpu" in text, f"the refusal does not list the installed runtime:\n{r}"
    assert cli("jobs", "describe", job).rc != 0, "a refused job was created"


def pod_config(tmp_path, cores):
    """A config.yaml of the TPU guide's pod form: a master and a TPU_V2_POD of `cores`."""
    config = tmp_path / "pod.yaml"
    config.write_text(
        "trainingInput:\n"
        "  scaleTier: CUSTOM\n"
        "  masterType: n1-highcpu-16\n"
        "  workerType: cloud_tpu\n"
        "  workerCount: 1\n"
        "  workerConfig:\n"
        "    acceleratorConfig:\n"
        "      type: TPU_V2_POD\n"
        f"      count: {cores}\n")
    return config


def test_tpu_pod_larger_than_cluster_is_refused(cli, names, tmp_path):
    config = pod_config(tmp_path, 128)
    job = names.job("pod")
    r = cli.submit(job, f"--config={config}")
    assert r.rc == 1, r
    text = r.out + r.err
    assert "FAILED_PRECONDITION" in text, r
    assert "TPU_V2 host" in text, f"the refusal does not name the TPU hosts:\n{r}"
    assert re.search(r"\b16\b", text) and re.search(r"\b4\b", text), \
        f"the refusal should say 16 TPU_V2 hosts are needed and 4 exist:\n{r}"
    assert cli("jobs", "describe", job).rc != 0, "a refused job was created"


def test_tpu_pod_without_quota_is_refused_naming_the_quota(server_factory, tmp_path, names):
    server = server_factory(config_yaml(pod_quota=False))
    cli = make_cli(server, tmp_path, names)
    config = pod_config(tmp_path, 32)
    job = names.job("pod")
    r = cli.submit(job, f"--config={config}")
    assert r.rc == 1, r
    text = r.out + r.err
    assert "FAILED_PRECONDITION" in text, r
    assert "needs 32 TPU_V2_POD_CORES" in text and " is 0 " in text, f"the refusal does not name the quota:\n{r}"
    assert "quotas.defaults.TPU_V2_POD_CORES" in text, f"the refusal does not say how to raise it:\n{r}"
    assert cli("jobs", "describe", job).rc != 0, "a refused job was created"
