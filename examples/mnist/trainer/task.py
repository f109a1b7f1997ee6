"""The TPU guide's MNIST walkthrough, rebuilt on PyTorch for mlengine.

Trains a small CNN on the 8x8 digits data set (scikit-learn's copy of the
UCI handwritten digits, staged as ``digits.npz`` by ``stage_data.py``)::

    python3 -m trainer.task --data_dir gs://B/datasets/digits \
        --model_dir gs://B/JOB_output [--epochs N] [--batch_size N]
        [--learning_rate F] [--hidden_units N] [--hypertune_tag accuracy]

Follows mlengine's replica contract (docs/runtime-contract.md):

* ``gs://`` paths go through ``mlengine.gcs`` ($MLENGINE_GCS_ROOT);
* with WORLD_SIZE > 1 the master and workers train together through
  torch.distributed (gloo, ``env://``), DistributedDataParallel and a
  DistributedSampler; only rank 0 writes the model and metrics;
* parameter servers and evaluators (no RANK) have nothing to do here;
* with TPU_CONFIG the job's TPU is awaited with
  ``mlengine.tpu.wait_for_tpu_cluster_resolver_ready``; a simulated TPU
  (MLENGINE_SIMULATED_ACCELERATOR) is recorded and the model trains on the
  CPU;
* the test accuracy is reported with ``mlengine.hypertune`` after every
  epoch (the step is the epoch), the last report being the final one: a
  tuning job (hptuning_config.yaml) reads it, and can stop a trial early.

Flags this trainer does not use (e.g. the guide's
``--distribution_strategy=tpu``) are accepted and listed.
"""

import argparse
import datetime
import io
import json
import logging
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import mlengine.cluster
import mlengine.gcs
import mlengine.hypertune
import mlengine.tpu

DATA_FILE = "digits.npz"
ARRAYS = ("x_train", "y_train", "x_test", "y_test")
NUM_CLASSES = 10
# Retries while a simulated TPU comes up: it is either there or not.
SIMULATED_TPU_TRIES = 3
SIMULATED_TPU_DELAY_SECONDS = 1.0

log = logging.getLogger("trainer")


class TrainerError(Exception):
    """A failure with a message for the job's log; the trainer exits 1."""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="trainer.task",
        description="Train a small CNN on the 8x8 digits data (MNIST walkthrough).")
    parser.add_argument("--data_dir", required=True,
                        help="gs:// or local directory holding %s (or the .npz itself)" % DATA_FILE)
    parser.add_argument("--model_dir", default=None,
                        help="where model.pt and metrics.json go (default: --job-dir)")
    parser.add_argument("--job-dir", "--job_dir", dest="job_dir", default=None,
                        help="the job directory mlengine appends (trainingInput.jobDir)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32,
                        help="batch size per process")
    parser.add_argument("--learning_rate", type=float, default=0.005)
    parser.add_argument("--hidden_units", type=int, default=None,
                        help="units of the hidden layer (default: 64 for cnn, 128 for mlp)")
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hypertune_tag", default="accuracy",
                        help="the hyperparameterMetricTag the test accuracy is reported as")
    parser.add_argument("--dist_timeout_seconds", type=float, default=300.0,
                        help="how long torch.distributed waits for the other replicas")
    args, unknown = parser.parse_known_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    if args.batch_size < 1:
        parser.error("--batch_size must be at least 1")
    if args.learning_rate <= 0:
        parser.error("--learning_rate must be positive")
    return args, unknown


def join(base, name):
    """Joins a gs:// or local directory and a file name."""
    if mlengine.gcs.is_gcs_uri(base):
        return base.rstrip("/") + "/" + name
    return os.path.join(base, name)


class DigitsCnn(nn.Module):
    """8x8x1 -> conv 16 -> pool -> conv 32 -> pool -> hidden (64) -> 10."""

    def __init__(self, hidden_units=64):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(32 * 2 * 2, hidden_units)
        self.fc2 = nn.Linear(hidden_units, NUM_CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 16 x 4 x 4
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 32 x 2 x 2
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class DigitsMlp(nn.Module):
    def __init__(self, hidden_units=128):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden_units), nn.ReLU(),
                                 nn.Linear(hidden_units, NUM_CLASSES))

    def forward(self, x):
        return self.net(x)


def build_model(kind, hidden_units=None):
    model = DigitsCnn if kind == "cnn" else DigitsMlp
    return model() if hidden_units is None else model(hidden_units)


def load_data(data_dir):
    """Reads digits.npz from data_dir: (x_train, y_train, x_test, y_test)."""
    uri = data_dir if data_dir.endswith(".npz") else join(data_dir, DATA_FILE)
    hint = ("stage it first: python3 stage_data.py gs://BUCKET/datasets/digits "
            "(then pass --data_dir gs://BUCKET/datasets/digits)")
    try:
        path = mlengine.gcs.local_path(uri)
    except (ValueError, RuntimeError) as e:
        raise TrainerError("cannot read the data set %s: %s" % (uri, e)) from e
    if not os.path.isfile(path):
        raise TrainerError("data set not found: %s (local file %s); %s" % (uri, path, hint))
    try:
        with mlengine.gcs.open(uri, "rb") as f:
            raw = f.read()
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            missing = [name for name in ARRAYS if name not in npz.files]
            if missing:
                raise TrainerError("%s lacks the arrays %s; %s" % (uri, ", ".join(missing), hint))
            arrays = {name: npz[name] for name in ARRAYS}
    except TrainerError:
        raise
    except Exception as e:  # a truncated or foreign file
        raise TrainerError("cannot read the data set %s: %s" % (uri, e)) from e

    def images(x):
        x = torch.as_tensor(np.asarray(x, dtype=np.float32) / 16.0)
        return x.reshape(-1, 1, 8, 8)

    def labels(y):
        return torch.as_tensor(np.asarray(y, dtype=np.int64))

    x_train, y_train = images(arrays["x_train"]), labels(arrays["y_train"])
    x_test, y_test = images(arrays["x_test"]), labels(arrays["y_test"])
    if len(x_train) != len(y_train) or len(x_test) != len(y_test) or not len(x_train):
        raise TrainerError("%s: inconsistent or empty arrays" % uri)
    return uri, x_train, y_train, x_test, y_test


def wait_for_tpu():
    """Waits for the job's TPU; returns its description for metrics.json."""
    simulated = bool(os.environ.get("MLENGINE_SIMULATED_ACCELERATOR"))
    tries, delay = (SIMULATED_TPU_TRIES, SIMULATED_TPU_DELAY_SECONDS) if simulated else (40, 10)
    try:
        resolver = mlengine.tpu.wait_for_tpu_cluster_resolver_ready(
            max_tries=tries, delay_seconds=delay)
    except (RuntimeError, ValueError) as e:
        cause = " (cause: %s)" % e.__cause__ if e.__cause__ is not None else ""
        raise TrainerError("%s%s" % (e, cause)) from e
    if resolver is None:
        return None
    config = mlengine.tpu.read_tpu_config() or {}
    print("TPU_CONFIG: %s" % json.dumps(config, sort_keys=True), flush=True)
    if getattr(resolver, "simulated", False):
        info = dict(config)
        info.update(resolver.describe())
        print("TPU is SIMULATED (%s): no real TPU exists here; training on the CPU. "
              "Cluster spec: %s" % (info["simulated_accelerator"],
                                    json.dumps(resolver.cluster_spec())), flush=True)
        return info
    spec = resolver.cluster_spec()
    spec = spec.as_dict() if hasattr(spec, "as_dict") else dict(spec)
    print("TPU ready: %s; this PyTorch trainer still trains on the CPU" % (spec,), flush=True)
    info = dict(config)
    info.update({"cluster_spec": spec, "simulated": False})
    return info


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return loss, accuracy


def train(args, data, rank, world_size, distributed, prefix, report=None):
    """Trains; ``report(epoch, test_accuracy)`` after every epoch when given."""
    _, x_train, y_train, x_test, y_test = data
    torch.manual_seed(args.seed)
    model = build_model(args.model, args.hidden_units)
    if distributed:
        # Broadcasts rank 0's initial weights; all-reduces the gradients.
        model = nn.parallel.DistributedDataParallel(model)
    dataset = TensorDataset(x_train, y_train)
    if distributed:
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank,
                                     shuffle=True, seed=args.seed)
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    else:
        sampler = None
        generator = torch.Generator().manual_seed(args.seed)
        loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                            generator=generator)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    print("%s training %s on %d examples (%d per process), %d epochs, batch size %d, "
          "learning rate %g" % (prefix, args.model, len(dataset),
                                len(sampler) if sampler is not None else len(dataset),
                                args.epochs, args.batch_size, args.learning_rate), flush=True)

    history = []
    for epoch in range(1, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
        started = time.monotonic()
        for xb, yb in loader:
            optimizer.zero_grad()
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            optimizer.step()
            totals += torch.tensor([loss.item() * len(yb),
                                    (logits.argmax(1) == yb).sum().item(), len(yb)],
                                   dtype=torch.float64)
        if distributed:
            dist.all_reduce(totals)  # the epoch's figures over every process
        train_loss = (totals[0] / totals[2]).item()
        train_accuracy = (totals[1] / totals[2]).item()
        test_loss, test_accuracy = evaluate(model, x_test, y_test)
        history.append({"epoch": epoch, "train_loss": train_loss,
                        "train_accuracy": train_accuracy,
                        "test_loss": test_loss, "test_accuracy": test_accuracy})
        print("%s epoch %d/%d: loss=%.4f accuracy=%.4f test_loss=%.4f test_accuracy=%.4f "
              "(%.2fs)" % (prefix, epoch, args.epochs, train_loss, train_accuracy,
                           test_loss, test_accuracy, time.monotonic() - started), flush=True)
        if report is not None:
            report(epoch, test_accuracy)
    plain = model.module if distributed else model
    return plain, history


def write_outputs(args, model_dir, model, history, extra):
    final = history[-1]
    metrics = {
        "accuracy": final["test_accuracy"],
        "loss": final["test_loss"],
        "train_accuracy": final["train_accuracy"],
        "train_loss": final["train_loss"],
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "model": args.model,
        "history": history,
    }
    metrics.update(extra)
    model_uri = join(model_dir, "model.pt")
    metrics_uri = join(model_dir, "metrics.json")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    with mlengine.gcs.open(model_uri, "wb") as f:
        f.write(buffer.getvalue())
    with mlengine.gcs.open(metrics_uri, "w") as f:
        json.dump(metrics, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote %s and %s" % (model_uri, metrics_uri), flush=True)
    return metrics


def run(argv=None):
    args, unknown = parse_args(argv)
    started = time.monotonic()
    torch.set_num_threads(1)
    task_type = mlengine.cluster.task_type()
    task_index = mlengine.cluster.task_index()
    trial = mlengine.cluster.trial_id()
    print("trainer.task: task %s index %d%s, job %s" % (
        task_type, task_index, ", trial %s" % trial if trial else "",
        os.environ.get("CLOUD_ML_JOB_ID", "(local)")), flush=True)
    if unknown:
        print("ignoring flags this trainer does not use: %s" % " ".join(unknown), flush=True)

    if task_type in ("ps", "evaluator") and "RANK" not in os.environ:
        print("%s replica %d: this PyTorch trainer has no %s work (torch.distributed runs "
              "over the master and workers); exiting" % (task_type, task_index, task_type),
              flush=True)
        return 0

    tpu_job = mlengine.tpu.read_tpu_config() is not None
    if tpu_job and task_type == "worker":
        # The TPU host itself: the master drives it (the guide's two-VM layout).
        print("worker %d is a TPU host (TPU_WORKER_ID=%s, %s); the master replica drives the "
              "TPU, so there is nothing to run here" % (
                  task_index, os.environ.get("TPU_WORKER_ID", "?"),
                  os.environ.get("MLENGINE_SIMULATED_ACCELERATOR") or "real TPU"), flush=True)
        return 0

    model_dir = args.model_dir or args.job_dir
    if not model_dir:
        raise TrainerError("no output directory: pass --model_dir (or --job-dir)")
    try:
        mlengine.gcs.local_path(model_dir)
    except (ValueError, RuntimeError) as e:
        raise TrainerError("cannot write to --model_dir %s: %s" % (model_dir, e)) from e

    rank = int(os.environ.get("RANK", "0") or 0)
    world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    distributed = world_size > 1
    if distributed and tpu_job:
        print("TPU job: the master alone drives the TPU, so torch.distributed is not used "
              "(WORLD_SIZE=%d counts the TPU host)" % world_size, flush=True)
        distributed, rank, world_size = False, 0, 1
    prefix = "[rank %d/%d]" % (rank, world_size)
    print("%s rank %d of world size %d" % (prefix, rank, world_size), flush=True)

    # Everything that can fail for every rank alike happens before the
    # process group forms, so no rank is left waiting for one that quit.
    tpu_info = wait_for_tpu() if tpu_job else None
    data = load_data(args.data_dir)
    print("%s loaded %s: %d training and %d test examples" % (
        prefix, data[0], len(data[1]), len(data[3])), flush=True)

    if distributed:
        print("%s joining torch.distributed (gloo) at %s:%s" % (
            prefix, os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")), flush=True)
        dist.init_process_group(
            backend="gloo", init_method="env://", rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=args.dist_timeout_seconds))
        print("%s process group ready" % prefix, flush=True)
    try:
        model, history = train(args, data, rank, world_size, distributed, prefix,
                               report=epoch_reporter(args, prefix) if rank == 0 else None)
        if distributed:
            dist.barrier()
    finally:
        if distributed:
            dist.destroy_process_group()

    final = history[-1]
    print("%s final test accuracy %.4f, test loss %.4f" % (
        prefix, final["test_accuracy"], final["test_loss"]), flush=True)
    if rank != 0:
        print("%s done; rank 0 writes the model" % prefix, flush=True)
        return 0

    extra = {
        "world_size": world_size,
        "task_type": task_type,
        "trial": trial,
        "hypertune_tag": args.hypertune_tag,
        "ignored_args": unknown,
        "tpu": tpu_info,
        "seconds": round(time.monotonic() - started, 3),
    }
    write_outputs(args, model_dir, model, history, extra)
    try:
        hpt = mlengine.hypertune.HyperTune()
        hpt.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=args.hypertune_tag,
            metric_value=final["test_accuracy"], global_step=args.epochs)
    except OSError as e:
        if os.environ.get("CLOUD_ML_HP_METRIC_FILE"):
            raise TrainerError("cannot write the hyperparameter tuning metric: %s" % e) from e
        # Outside mlengine (default /tmp path) the report is only a courtesy.
        print("%s could not write the hypertune metric file: %s" % (prefix, e), flush=True)
        return 0
    print("%s reported %s=%.4f to %s" % (
        prefix, args.hypertune_tag, final["test_accuracy"], hpt.metric_path), flush=True)
    return 0


def epoch_reporter(args, prefix):
    """Each epoch's test accuracy as an intermediate hypertune report (the
    step is the epoch): what early stopping judges a trial by."""
    try:
        hpt = mlengine.hypertune.HyperTune()
    except OSError as e:
        print("%s cannot report intermediate metrics: %s" % (prefix, e), flush=True)
        return None

    def report(epoch, accuracy):
        try:
            hpt.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=args.hypertune_tag, metric_value=accuracy,
                global_step=epoch)
        except OSError as e:
            print("%s cannot report the metric of epoch %d: %s" % (prefix, epoch, e), flush=True)
    return report


def main(argv=None):
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(argv)
    except TrainerError as e:
        print("ERROR: %s" % e, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
