"""The tuning suite's trainer: a known objective of its hyperparameters.

Each trial gets ``--x=F`` (and optionally ``--n=INT``, ``--kind=NAME``)
from mlengined and reports, through ``mlengine.hypertune``, the value of
``objective = -(x - 0.3)^2 + n_bonus + kind_bonus`` approached step by step:
at step s of --steps it reports objective - 0.1 * (steps - s) / steps, so the
last report (the final one) is the objective itself, and a worse trial is
worse at every step. Other flags:

  --step-seconds S    sleep S seconds before each report
  --slow-above T      ... only when x > T (others report at once)
  --fail-above T      exit 1 (after printing why) when x > T: a failing trial
  --fail-below U      ... but only when also x < U
  --silent            report nothing (an infeasible trial)
  --gate URI          after the first report, wait (at most 120 s) until the
                      gs:// object URI exists: the job runs until a test
                      has seen what it wants to see
  --record URI_DIR    write URI_DIR/trial-<id>.json: the trial id it was given
                      (CLOUD_ML_TRIAL_ID, TF_CONFIG's task.trial), its
                      --job-dir, AIP_MODEL_DIR and its arguments
  --tag TAG           the metric's tag (default training/hptuning/metric;
                      a Vertex study's metricId)
"""

import argparse
import json
import os
import sys
import time

from mlengine import gcs, hypertune


def objective(x, n, kind):
    value = -(x - 0.3) ** 2
    if n is not None:
        value += 0.01 * min(n, 7)
    if kind == "good":
        value += 0.05
    return value


def wait_for_gate(uri):
    print("waiting for %s" % uri, flush=True)
    deadline = time.time() + 120
    while not gcs.exists(uri):
        if time.time() > deadline:
            raise SystemExit("the gate %s did not open within 120 s" % uri)
        time.sleep(0.1)
    print("gate opened: %s" % uri, flush=True)


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--kind", default=None)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--slow-above", type=float, default=None)
    parser.add_argument("--fail-above", type=float, default=None)
    parser.add_argument("--fail-below", type=float, default=None)
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--gate", default=None)
    parser.add_argument("--record", default=None)
    parser.add_argument("--job-dir", default=None)
    parser.add_argument("--tag", default="training/hptuning/metric")
    args, unknown = parser.parse_known_args(argv)
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    print("trial %s x=%s n=%s kind=%s" % (trial, args.x, args.n, args.kind), flush=True)
    if args.record:
        record = {"trial": trial, "tf_config_trial": tf_config.get("task", {}).get("trial"),
                  "job_id": os.environ.get("CLOUD_ML_JOB_ID"), "job_dir": args.job_dir,
                  "argv": argv, "metric_file": os.environ.get("CLOUD_ML_HP_METRIC_FILE"),
                  "aip_model_dir": os.environ.get("AIP_MODEL_DIR")}
        with gcs.open(args.record.rstrip("/") + "/trial-%s.json" % trial, "w") as f:
            json.dump(record, f)
    if args.fail_above is not None and args.x > args.fail_above and (args.fail_below is None or args.x < args.fail_below):
        print("x=%s is above %s: failing" % (args.x, args.fail_above), file=sys.stderr, flush=True)
        return 1
    if args.silent:
        return 0
    hpt = hypertune.HyperTune()
    value = objective(args.x, args.n, args.kind)
    for step in range(1, args.steps + 1):
        if args.step_seconds and (args.slow_above is None or args.x > args.slow_above):
            time.sleep(args.step_seconds)
        hpt.report_hyperparameter_tuning_metric(
            args.tag, value - 0.1 * (args.steps - step) / args.steps, global_step=step)
        if step == 1 and args.gate:
            wait_for_gate(args.gate)
    print("done: objective %.6f" % value, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
