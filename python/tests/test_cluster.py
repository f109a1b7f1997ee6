import json

import pytest

from mlengine import cluster


def env_with(config):
    return {"TF_CONFIG": json.dumps(config)}


MASTER_JOB = {
    "cluster": {"master": ["m:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]},
    "task": {"type": "master", "index": 0},
    "job": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 2},
    "environment": "cloud",
}


def with_task(task, base=MASTER_JOB):
    config = dict(base)
    config["task"] = task
    return env_with(config)


def test_without_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("CLOUD_ML_TRIAL_ID", raising=False)
    assert cluster.task_type() == "master"
    assert cluster.task_index() == 0
    assert cluster.trial_id() is None
    assert cluster.is_chief()
    assert cluster.cluster_spec() == {}
    assert cluster.job() == {}


def test_reads_os_environ(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(MASTER_JOB))
    assert cluster.task_type() == "master"
    assert cluster.cluster_spec()["worker"] == ["w0:2222", "w1:2222"]
    assert cluster.job()["workerCount"] == 2


def test_master():
    env = env_with(MASTER_JOB)
    assert cluster.task_type(env) == "master"
    assert cluster.task_index(env) == 0
    assert cluster.is_chief(env)
    assert cluster.cluster_spec(env) == MASTER_JOB["cluster"]
    assert cluster.job(env) == MASTER_JOB["job"]


def test_chief_is_primary():
    base = dict(MASTER_JOB, cluster={"chief": ["c:2222"], "worker": ["w0:2222"]})
    assert cluster.is_chief(with_task({"type": "chief", "index": 0}, base))
    assert not cluster.is_chief(with_task({"type": "worker", "index": 0}, base))


@pytest.mark.parametrize("task", [
    {"type": "worker", "index": 0},
    {"type": "worker", "index": 1},
    {"type": "ps", "index": 0},
    {"type": "evaluator", "index": 0},
])
def test_other_roles_are_not_chief(task):
    env = with_task(task)
    assert cluster.task_type(env) == task["type"]
    assert cluster.task_index(env) == task["index"]
    assert not cluster.is_chief(env)


def test_worker_zero_is_chief_without_master():
    base = dict(MASTER_JOB, cluster={"worker": ["w0:1", "w1:1"]})
    assert cluster.is_chief(with_task({"type": "worker", "index": 0}, base))
    assert not cluster.is_chief(with_task({"type": "worker", "index": 1}, base))


def test_local_train_single_process_shape():
    env = env_with({"job": {"job_name": "trainer.task", "args": []},
                    "task": {}, "cluster": {}, "environment": "cloud"})
    assert cluster.task_type(env) == "master"
    assert cluster.task_index(env) == 0
    assert cluster.is_chief(env)
    assert cluster.job(env) == {"job_name": "trainer.task", "args": []}


def test_trial_from_task_then_env():
    env = with_task({"type": "master", "index": 0, "trial": "4"})
    env["CLOUD_ML_TRIAL_ID"] = "9"
    assert cluster.trial_id(env) == "4"
    env = with_task({"type": "master", "index": 0})
    env["CLOUD_ML_TRIAL_ID"] = "9"
    assert cluster.trial_id(env) == "9"
    assert cluster.trial_id(with_task({"type": "master", "index": 0, "trial": 2})) == "2"
    assert cluster.trial_id(with_task({"type": "master", "index": 0})) is None


def test_string_index_is_accepted():
    assert cluster.task_index(with_task({"type": "worker", "index": "3"})) == 3


def test_invalid_tf_config():
    with pytest.raises(ValueError, match="TF_CONFIG"):
        cluster.task_type({"TF_CONFIG": "{not json"})
    with pytest.raises(ValueError, match="TF_CONFIG"):
        cluster.cluster_spec({"TF_CONFIG": "[1, 2]"})
    with pytest.raises(ValueError, match="index"):
        cluster.task_index(with_task({"type": "worker", "index": "x"}))


def test_empty_tf_config_is_absent():
    assert cluster.is_chief({"TF_CONFIG": ""})
    assert cluster.cluster_spec({"TF_CONFIG": "  "}) == {}


def test_cluster_spec_is_a_copy():
    env = env_with(MASTER_JOB)
    spec = cluster.cluster_spec(env)
    spec["worker"].append("x")
    assert cluster.cluster_spec(env)["worker"] == ["w0:2222", "w1:2222"]
