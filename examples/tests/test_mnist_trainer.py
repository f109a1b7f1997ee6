"""Runs the MNIST walkthrough trainer as real processes, as replicas would.

Each run is `/usr/bin/python3 -m trainer.task` in examples/mnist with
mlengine's python/ on PYTHONPATH and MLENGINE_GCS_ROOT pointing at a temp
directory where stage_data.py --local put digits.npz (bucket "bkt").
"""

import json
import os
import re
import socket
import subprocess
import sys
import tarfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MNIST = os.path.join(REPO, "examples", "mnist")
MLENGINE_PYTHON = os.path.join(REPO, "python")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
BUCKET = "bkt"
DATA_URI = "gs://%s/datasets/digits" % BUCKET
RUN_TIMEOUT = 120

# Everything of the replica contract is removed from the inherited
# environment, so only what a test sets is seen.
CONTRACT_VARS = (
    "TF_CONFIG", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID", "CLOUD_ML_TRIAL_ID",
    "CLOUD_ML_HP_METRIC_FILE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
    "TPU_CONFIG", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE",
    "MLENGINE_SIMULATED_ACCELERATOR", "MLENGINE_GCS_ROOT", "MLENGINE_TASK_NAME",
)


@pytest.fixture(scope="module")
def gcs_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcs")
    data_dir = root / BUCKET / "datasets" / "digits"
    result = subprocess.run(
        [PYTHON, "stage_data.py", "--local", str(data_dir)], cwd=MNIST,
        capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert (data_dir / "digits.npz").is_file()
    return root


def base_env(gcs_root, metric_file, **extra):
    env = {k: v for k, v in os.environ.items() if k not in CONTRACT_VARS}
    env["PYTHONPATH"] = MLENGINE_PYTHON
    env["MLENGINE_GCS_ROOT"] = str(gcs_root)
    env["CLOUD_ML_HP_METRIC_FILE"] = str(metric_file)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def trainer_command(*args):
    return [PYTHON, "-m", "trainer.task"] + list(args)


def run_trainer(env, *args):
    return subprocess.run(trainer_command(*args), cwd=MNIST, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def output_dir(gcs_root, name):
    return gcs_root / BUCKET / name


def read_metrics(gcs_root, name):
    return json.loads((output_dir(gcs_root, name) / "metrics.json").read_text())


def test_single_replica_trains_and_writes_outputs(gcs_root, tmp_path):
    metric_file = tmp_path / "hp" / "output.metrics"
    env = base_env(gcs_root, metric_file, CLOUD_ML_JOB_ID="mnist_1")
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/single_output",
                         "--epochs", "8", "--distribution_strategy=tpu",
                         "--job-dir", "gs://bkt/single_job")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "ignoring flags this trainer does not use: --distribution_strategy=tpu" in out
    assert "rank 0 of world size 1" in out
    assert sum("epoch %d/8:" % e in out for e in range(1, 9)) == 8
    assert "test_accuracy=" in out and "loss=" in out

    metrics = read_metrics(gcs_root, "single_output")
    assert metrics["accuracy"] > 0.85
    assert metrics["epochs"] == 8 and len(metrics["history"]) == 8
    assert metrics["loss"] > 0
    assert metrics["world_size"] == 1
    assert metrics["tpu"] is None

    import torch  # only the test process needs it from here on
    state = torch.load(str(output_dir(gcs_root, "single_output") / "model.pt"))
    assert "conv1.weight" in state and "fc2.bias" in state
    assert tuple(state["fc2.bias"].shape) == (10,)

    (line,) = metric_file.read_text().splitlines()
    report = json.loads(line)
    assert report["accuracy"] == str(metrics["accuracy"])
    assert report["global_step"] == "8" and report["trial"] == "0"


def test_model_dir_defaults_to_job_dir(gcs_root, tmp_path):
    env = base_env(gcs_root, tmp_path / "m", CLOUD_ML_TRIAL_ID="2")
    result = run_trainer(env, "--data_dir", DATA_URI, "--epochs", "1", "--model", "mlp",
                         "--hypertune_tag", "acc", "--job-dir", "gs://bkt/jobdir_output")
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = read_metrics(gcs_root, "jobdir_output")
    assert metrics["model"] == "mlp" and metrics["epochs"] == 1
    report = json.loads((tmp_path / "m").read_text())
    assert set(report) == {"acc", "checkpoint_path", "global_step", "timestamp", "trial"}
    assert report["trial"] == "2"


def tf_config(task_type, index):
    return json.dumps({
        "cluster": {"master": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
        "task": {"type": task_type, "index": index},
        "job": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                "workerType": "n1-standard-4", "workerCount": 2},
        "environment": "cloud",
    })


def test_distributed_three_processes(gcs_root, tmp_path):
    port = free_port()
    procs = []
    roles = [("master", 0), ("worker", 0), ("worker", 1)]
    for rank, (task_type, index) in enumerate(roles):
        env = base_env(gcs_root, tmp_path / ("hp%d" % rank), TF_CONFIG=tf_config(task_type, index),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=3, RANK=rank)
        procs.append(subprocess.Popen(
            trainer_command("--data_dir", DATA_URI, "--model_dir", "gs://bkt/dist_output",
                            "--epochs", "10", "--dist_timeout_seconds", "60"),
            cwd=MNIST, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=RUN_TIMEOUT)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for rank, (proc, out) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, "rank %d:\n%s" % (rank, out)
        assert "rank %d of world size 3" % rank in out
        assert "[rank %d/3] process group ready" % rank in out
        assert "(479 per process)" in out  # a third of the 1437 examples each

    # The ranks trained one model together: identical figures everywhere,
    # though each saw a different third of the data.
    def finals(out):  # the last epoch's figures, without rank prefix or timing
        return [re.sub(r"\(\d+\.\d+s\)", "", l.split("]", 1)[1])
                for l in out.splitlines() if "epoch 10/10:" in l or "final test accuracy" in l]
    assert finals(outputs[0]) and finals(outputs[0]) == finals(outputs[1]) == finals(outputs[2])
    assert "rank 0 writes the model" in outputs[1] and "rank 0 writes the model" in outputs[2]

    metrics = read_metrics(gcs_root, "dist_output")
    assert metrics["world_size"] == 3
    assert metrics["accuracy"] > 0.85
    assert (output_dir(gcs_root, "dist_output") / "model.pt").stat().st_size > 0
    assert (tmp_path / "hp0").exists()
    assert not (tmp_path / "hp1").exists() and not (tmp_path / "hp2").exists()


@pytest.mark.parametrize("task_type", ["ps", "evaluator"])
def test_parameter_servers_and_evaluators_exit_cleanly(gcs_root, tmp_path, task_type):
    env = base_env(gcs_root, tmp_path / "hp", TF_CONFIG=tf_config(task_type, 0))
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/%s_output" % task_type)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "%s replica 0" % task_type in result.stdout and "exiting" in result.stdout
    assert not output_dir(gcs_root, "%s_output" % task_type).exists()


TPU_CONFIG = {"project": "proj-9", "zone": "us-central1-b", "tpu_node_name": "tpu-mnist-1"}


def tpu_env(gcs_root, metric_file, hosts="127.0.0.1", **extra):
    return base_env(
        gcs_root, metric_file, TPU_CONFIG=json.dumps(TPU_CONFIG), TPU_WORKER_ID=0,
        TPU_WORKER_HOSTNAMES=hosts, TPU_ACCELERATOR_TYPE="v2-8",
        MLENGINE_SIMULATED_ACCELERATOR="tpu-v2-8 (simulated)", **extra)


def test_tpu_job_records_simulated_tpu(gcs_root, tmp_path):
    # As a BASIC_TPU master sees it, WORLD_SIZE counting the TPU host
    # included: the trainer must neither hang nor use torch.distributed.
    env = tpu_env(gcs_root, tmp_path / "hp", TF_CONFIG=json.dumps({
        "cluster": {"master": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]},
        "task": {"type": "master", "index": 0}, "job": {"scaleTier": "BASIC_TPU"},
        "environment": "cloud"}), MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(),
        WORLD_SIZE=2, RANK=0)
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/tpu_output",
                         "--epochs", "6", "--distribution_strategy=tpu")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "TPU_CONFIG: %s" % json.dumps(TPU_CONFIG, sort_keys=True) in out
    assert "TPU is SIMULATED (tpu-v2-8 (simulated))" in out
    assert "SIMULATED TPU" in out  # mlengine.tpu's own log line
    assert "torch.distributed is not used" in out

    metrics = read_metrics(gcs_root, "tpu_output")
    tpu = metrics["tpu"]
    for key, value in TPU_CONFIG.items():
        assert tpu[key] == value
    assert tpu["simulated"] is True
    assert tpu["accelerator_type"] == "v2-8"
    assert tpu["worker_hosts"] == ["127.0.0.1:8470"]
    assert metrics["accuracy"] > 0.85


def test_tpu_never_ready_fails_clearly(gcs_root, tmp_path):
    env = tpu_env(gcs_root, tmp_path / "hp", hosts="")
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/tpu_fail_output")
    assert result.returncode != 0
    assert "Failed to schedule TPU 'tpu-mnist-1' after 3 tries" in result.stderr
    assert "TPU_WORKER_HOSTNAMES is empty" in result.stderr
    assert "Traceback" not in result.stderr
    assert not output_dir(gcs_root, "tpu_fail_output").exists()


def test_tpu_host_replica_has_nothing_to_do(gcs_root, tmp_path):
    env = tpu_env(gcs_root, tmp_path / "hp", TF_CONFIG=tf_config("worker", 0),
                  WORLD_SIZE=2, RANK=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/tpu_host_output")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a TPU host" in result.stdout
    assert not output_dir(gcs_root, "tpu_host_output").exists()


def test_missing_data_fails_clearly(gcs_root, tmp_path):
    env = base_env(gcs_root, tmp_path / "hp")
    result = run_trainer(env, "--data_dir", "gs://bkt/datasets/nothing_here",
                         "--model_dir", "gs://bkt/missing_output")
    assert result.returncode != 0
    assert "ERROR: data set not found: gs://bkt/datasets/nothing_here/digits.npz" in result.stderr
    assert "stage_data.py" in result.stderr
    assert "Traceback" not in result.stderr
    assert not output_dir(gcs_root, "missing_output").exists()


def test_corrupt_data_fails_clearly(gcs_root, tmp_path):
    bad = gcs_root / BUCKET / "datasets" / "corrupt"
    bad.mkdir(parents=True)
    (bad / "digits.npz").write_bytes(b"not a zip file")
    result = run_trainer(base_env(gcs_root, tmp_path / "hp"), "--data_dir", "gs://bkt/datasets/corrupt",
                         "--model_dir", "gs://bkt/corrupt_output")
    assert result.returncode != 0
    assert "ERROR: cannot read the data set gs://bkt/datasets/corrupt/digits.npz" in result.stderr


def test_gs_paths_without_gcs_root_fail_clearly(gcs_root, tmp_path):
    env = base_env(gcs_root, tmp_path / "hp")
    del env["MLENGINE_GCS_ROOT"]
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/x")
    assert result.returncode != 0
    assert "only available inside mlengine replicas" in result.stderr
    assert "Traceback" not in result.stderr


def test_stage_data_is_deterministic(tmp_path):
    import numpy as np
    for name in ("a", "b"):
        subprocess.run([PYTHON, "stage_data.py", "--local", str(tmp_path / name)], cwd=MNIST,
                       check=True, capture_output=True, timeout=RUN_TIMEOUT)
    with np.load(str(tmp_path / "a" / "digits.npz")) as a, \
            np.load(str(tmp_path / "b" / "digits.npz")) as b:
        assert sorted(a.files) == ["x_test", "x_train", "y_test", "y_train"]
        for key in a.files:
            assert np.array_equal(a[key], b[key])
        assert a["x_train"].shape == (1437, 8, 8) and a["x_test"].shape == (360, 8, 8)
        assert a["x_train"].max() <= 16
        assert sorted(set(a["y_test"].tolist())) == list(range(10))


def test_stage_data_uploads_with_the_cli(tmp_path):
    fake = tmp_path / "fake-mlengine"
    record = tmp_path / "argv.json"
    fake.write_text(
        "#!%s\nimport json, shutil, sys\n"
        "json.dump(sys.argv[1:], open(%r, 'w'))\n"
        "shutil.copy(sys.argv[3], %r)\n" % (PYTHON, str(record), str(tmp_path / "uploaded.npz")))
    fake.chmod(0o755)
    env = dict(os.environ, MLENGINE_BIN=str(fake))
    result = subprocess.run([PYTHON, "stage_data.py", "gs://mybucket/datasets/digits"], cwd=MNIST,
                            env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text())
    assert argv[:2] == ["storage", "cp"]
    assert argv[3] == "gs://mybucket/datasets/digits/digits.npz"
    assert argv[2].endswith("/digits.npz")
    assert (tmp_path / "uploaded.npz").stat().st_size > 0
    assert not os.path.exists(argv[2])  # the temporary file is gone


def test_stage_data_reports_cli_failure(tmp_path):
    fake = tmp_path / "failing-mlengine"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    result = subprocess.run([PYTHON, "stage_data.py", "gs://b/datasets/digits"], cwd=MNIST,
                            env=dict(os.environ, MLENGINE_BIN=str(fake)),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 3
    assert "exited with status 3" in result.stderr


def test_sdist_packages_the_trainer(tmp_path):
    # The way `jobs submit --package-path=trainer` builds it (gcloud's args).
    dist = tmp_path / "dist"
    result = subprocess.run(
        [PYTHON, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path), "build",
         "--build-base", str(tmp_path / "b"), "--build-temp", str(tmp_path / "t"),
         "sdist", "--dist-dir", str(dist)],
        cwd=MNIST, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 0, result.stderr
    (archive,) = os.listdir(str(dist))
    assert archive == "trainer-0.1.0.tar.gz"
    with tarfile.open(str(dist / archive)) as tar:
        names = tar.getnames()
    assert "trainer-0.1.0/trainer/task.py" in names
    assert "trainer-0.1.0/trainer/__init__.py" in names


def test_job_configs():
    yaml = pytest.importorskip("yaml")

    def load(name):
        with open(os.path.join(MNIST, name)) as f:
            return yaml.safe_load(f)

    assert load("config_tpu.yaml") == {"trainingInput": {"scaleTier": "BASIC_TPU"}}
    assert load("config_distributed.yaml") == {"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "workerType": "n1-standard-4", "workerCount": 2}}
    assert load("config_tpu_custom.yaml") == {"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-highcpu-16", "workerType": "cloud_tpu",
        "workerCount": 1, "workerConfig": {"acceleratorConfig": {"type": "TPU_V2", "count": 8}}}}


def test_unwritable_tuning_metric_file_fails_the_trial(gcs_root, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = base_env(gcs_root, blocker / "output.metrics", CLOUD_ML_TRIAL_ID="1")
    result = run_trainer(env, "--data_dir", DATA_URI, "--model_dir", "gs://bkt/hp_fail_output",
                         "--epochs", "1")
    assert result.returncode != 0
    assert "ERROR: cannot write the hyperparameter tuning metric" in result.stderr
