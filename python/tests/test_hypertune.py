import json

import pytest

from mlengine import hypertune


class FakeClock(object):
    def __init__(self, start=1700000000.25, step=1.0):
        self.now = start - step
        self.step = step

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.fixture
def metric_file(tmp_path, monkeypatch):
    path = tmp_path / "hp" / "sub" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    monkeypatch.delenv("CLOUD_ML_TRIAL_ID", raising=False)
    return path


def test_exact_file_format(metric_file, monkeypatch):
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    hpt = hypertune.HyperTune(clock=FakeClock())
    assert metric_file.parent.is_dir()  # created by the constructor
    hpt.report_hyperparameter_tuning_metric("accuracy", 0.5, global_step=10)
    hpt.report_hyperparameter_tuning_metric("accuracy", 0.75, global_step=20,
                                            checkpoint_path="gs://b/ckpt-20")
    assert metric_file.read_text() == (
        '{"accuracy": "0.5", "checkpoint_path": "", "global_step": "10", '
        '"timestamp": 1700000000.25, "trial": "3"}\n'
        '{"accuracy": "0.75", "checkpoint_path": "gs://b/ckpt-20", "global_step": "20", '
        '"timestamp": 1700000001.25, "trial": "3"}\n')


def test_defaults_trial_step_and_tag(metric_file):
    hpt = hypertune.HyperTune(clock=lambda: 5.5)
    hpt.report_hyperparameter_tuning_metric("", 1)
    hpt.report_hyperparameter_tuning_metric(None, "2.5", global_step=7.9)
    lines = metric_file.read_text().splitlines()
    assert lines == [
        '{"checkpoint_path": "", "global_step": "0", "timestamp": 5.5, '
        '"training/hptuning/metric": "1.0", "trial": "0"}',
        '{"checkpoint_path": "", "global_step": "7", "timestamp": 5.5, '
        '"training/hptuning/metric": "2.5", "trial": "0"}',
    ]


def test_lines_are_json_with_sorted_keys_and_string_values(metric_file):
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric("loss", 0.125, global_step=3)
    (line,) = metric_file.read_text().splitlines()
    record = json.loads(line)
    assert line == json.dumps(record, sort_keys=True)
    assert set(record) == {"loss", "checkpoint_path", "global_step", "timestamp", "trial"}
    assert isinstance(record["timestamp"], float)
    assert all(isinstance(v, str) for k, v in record.items() if k != "timestamp")
    assert record["loss"] == "0.125"


def test_keeps_last_100_and_rewrites_whole_file(metric_file):
    metric_file.parent.mkdir(parents=True)
    metric_file.write_text("stale content from an earlier process\n")
    hpt = hypertune.HyperTune(clock=lambda: 1.0)
    for step in range(1, 106):
        hpt.report_hyperparameter_tuning_metric("acc", step / 1000.0, global_step=step)
    lines = metric_file.read_text().splitlines()
    assert len(lines) == 100
    assert json.loads(lines[0])["global_step"] == "6"
    assert json.loads(lines[-1])["global_step"] == "105"
    assert "stale" not in metric_file.read_text()
    assert sorted(p.name for p in metric_file.parent.iterdir()) == ["output.metrics"]


def test_separate_objects_do_not_share_history(metric_file):
    hypertune.HyperTune().report_hyperparameter_tuning_metric("a", 1)
    hypertune.HyperTune().report_hyperparameter_tuning_metric("a", 2)
    (line,) = metric_file.read_text().splitlines()
    assert json.loads(line)["a"] == "2.0"


def test_non_numeric_value_is_refused(metric_file):
    hpt = hypertune.HyperTune()
    with pytest.raises(ValueError):
        hpt.report_hyperparameter_tuning_metric("acc", "high")
    assert not metric_file.exists()


def test_default_metric_path(tmp_path, monkeypatch):
    assert hypertune.DEFAULT_METRIC_PATH == "/tmp/hypertune/output.metrics"
    monkeypatch.delenv("CLOUD_ML_HP_METRIC_FILE", raising=False)
    default = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setattr(hypertune, "DEFAULT_METRIC_PATH", str(default))
    hpt = hypertune.HyperTune()
    assert hpt.metric_path == str(default)
    hpt.report_hyperparameter_tuning_metric("acc", 0.5)
    assert default.exists()


def test_metric_file_in_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", "metrics.out")
    hypertune.HyperTune().report_hyperparameter_tuning_metric("acc", 0.5)
    assert (tmp_path / "metrics.out").exists()
