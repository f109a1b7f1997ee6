"""The TPU guide's MNIST walkthrough (scripts/demo.sh), end to end through the
real CLI: stage the digits, train on a simulated TPU, read the model back;
then the distributed variant (master + 2 workers, torch.distributed)."""

import json

from conftest import parse_log_lines


def test_tpu_walkthrough_basic_tpu(cli):
    bucket = f"gs://{cli.bucket}"
    job = "tpu_mnist_1"
    # The walkthrough's command (scripts/demo.sh), run from examples/mnist.
    r = cli.submit_mnist(job, "--scale-tier=BASIC_TPU", "--stream-logs", args=["--distribution_strategy=tpu"])
    assert r.rc == 0, f"{r}\n{cli.explain(job)}"
    assert "TPU_CONFIG" in r.out, r
    assert "SIMULATED" in r.out, r
    assert "mlengine: the accelerator tpu-v2-8 is simulated" in r.out, r
    parsed, _ = parse_log_lines(r.out)
    assert parsed and all(task == "master-replica-0" for _, task, _ in parsed), r

    desc = cli.describe(job)
    assert desc["state"] == "SUCCEEDED", cli.explain(job)
    assert desc["trainingInput"]["scaleTier"] == "BASIC_TPU"

    ls = cli.ok("storage", "ls", f"{bucket}/tpu_mnist_1_output")
    listed = {line.rstrip("/").rsplit("/", 1)[-1] for line in ls.out.split()}
    assert {"model.pt", "metrics.json"} <= listed, ls

    metrics = json.loads(cli.ok("storage", "cat", f"{bucket}/tpu_mnist_1_output/metrics.json").out)
    assert metrics["accuracy"] > 0.85, metrics
    tpu = metrics.get("tpu")
    assert isinstance(tpu, dict) and tpu.get("simulated") is True, f"metrics.json does not record the simulated TPU: {metrics}"
    assert tpu.get("tpu_node_name", "").startswith("tpu-e2e-v2-"), tpu


def test_distributed_master_and_two_workers(cli, names):
    bucket = f"gs://{cli.bucket}"
    job = names.job("dist")
    r = cli.submit_mnist(job, "--config=config_distributed.yaml", args=["--epochs=3"])
    assert r.rc == 0, r
    desc = cli.wait_state(job, {"SUCCEEDED"}, timeout=240)
    assert desc["trainingInput"]["workerCount"] in ("2", 2), desc

    logs = cli.ok("jobs", "stream-logs", job, timeout=120)
    parsed, other = parse_log_lines(logs.out)
    assert not other, f"lines without a timestamp and task name:\n{other}"
    by_task = {}
    for _, task, message in parsed:
        by_task.setdefault(task, []).append(message)
    assert set(by_task) == {"master-replica-0", "worker-replica-0", "worker-replica-1"}, sorted(by_task)
    for task, rank in (("master-replica-0", 0), ("worker-replica-0", 1), ("worker-replica-1", 2)):
        assert any(f"[rank {rank}/3]" in m for m in by_task[task]), \
            f"{task} never logged rank {rank} of world size 3:\n" + "\n".join(by_task[task])
    ls = cli.ok("storage", "ls", f"{bucket}/{job}_output")
    assert "metrics.json" in ls.out and "model.pt" in ls.out, ls


def test_tpu_custom_cloud_tpu_worker(cli, names):
    """The guide's third way to get a TPU: a Compute Engine master and a
    cloud_tpu worker with acceleratorConfig TPU_V2 x 8 (config_tpu_custom.yaml).
    The TPU is a simulated host: TPU_CONFIG reaches the trainer, marked so."""
    bucket = f"gs://{cli.bucket}"
    job = names.job("tpu_custom")
    r = cli.submit_mnist(job, "--config=config_tpu_custom.yaml", "--stream-logs", args=["--epochs=2"])
    assert r.rc == 0, f"{r}\n{cli.explain(job)}"
    assert "TPU_CONFIG" in r.out and "SIMULATED" in r.out, r
    desc = cli.describe(job)
    assert desc["state"] == "SUCCEEDED", cli.explain(job)
    assert desc["trainingInput"]["workerType"] == "cloud_tpu"
    metrics = json.loads(cli.ok("storage", "cat", f"{bucket}/{job}_output/metrics.json").out)
    assert metrics["tpu"]["simulated"] is True, metrics
    assert metrics["tpu"]["tpu_node_name"].startswith("tpu-e2e-v2-"), metrics
