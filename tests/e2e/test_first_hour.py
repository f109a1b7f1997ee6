"""A new team's first hour, as AI Platform's users had it: trainers and
configs written for AI Platform run unchanged, and each mistake a newcomer
makes is answered with its fix.

Through the real binaries (mlengined and the mlengine CLI, conftest.py)."""

import json
import os

from conftest import TRAINERS

AIP_HYPERTUNE = os.path.join(TRAINERS, "aip_hypertune", "trainer")


def test_an_ai_platform_tuning_trainer_runs_unchanged(cli, tmp_path, names):
    """`import hypertune` with cloudml-hypertune in install_requires (no PyPI
    here: mlengine's stand-in meets it) and the sample's free-text tag."""
    job = names.job("aip_tune")
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(json.dumps({"trainingInput": {"scaleTier": "BASIC", "hyperparameters": {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": "Taxi Model Accuracy", "maxTrials": 2,
        "maxParallelTrials": 2,
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}]}}}))
    r = cli.submit(job, "--config", str(config), f"--job-dir=gs://{cli.bucket}/{job}", package=AIP_HYPERTUNE)
    assert r.rc == 0, r
    done = cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=240)
    assert done["state"] == "SUCCEEDED", cli.explain(job)
    out = done["trainingOutput"]
    assert out["hyperparameterMetricTag"] == "Taxi Model Accuracy", out
    trials = out["trials"]
    assert len(trials) == 2, trials
    for t in trials:
        x = float(t["hyperparameters"]["x"])
        assert abs(t["finalMetric"]["objectiveValue"] - (-(x - 0.3) ** 2)) < 1e-9, t
        assert t["finalMetric"]["trainingStep"] == "1000", t
