"""The replica's place in its job, from ``TF_CONFIG``.

mlengined sets ``TF_CONFIG`` on every replica (docs/runtime-contract.md)::

    {"cluster": {"master": ["h:p"], "worker": [...], "ps": [...]},
     "task": {"type": "master", "index": 0, "trial": "1"},
     "job": {...trainingInput...}, "environment": "cloud"}

``chief`` replaces ``master`` for 2.x runtimes. Without ``TF_CONFIG`` (or
with an empty ``task``, as ``gcloud ai-platform local train`` gives a
single process) the process is the only replica: the master, index 0.
Every function takes an optional ``environ`` mapping (default os.environ).
"""

import json
import os

__all__ = [
    "cluster_spec",
    "is_chief",
    "job",
    "task_index",
    "task_type",
    "tf_config",
    "trial_id",
]

PRIMARY_TYPES = ("master", "chief")


def tf_config(environ=None):
    """The parsed ``TF_CONFIG`` ({} when unset or empty).

    Raises ValueError when it is not a JSON object.
    """
    env = os.environ if environ is None else environ
    raw = env.get("TF_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ValueError("TF_CONFIG is not valid JSON: %s" % (e,)) from e
    if not isinstance(config, dict):
        raise ValueError("TF_CONFIG must be a JSON object, got %r" % (raw,))
    return config


def _task(environ):
    task = tf_config(environ).get("task") or {}
    return task if isinstance(task, dict) else {}


def task_type(environ=None):
    """``master``, ``chief``, ``worker``, ``ps`` or ``evaluator``.

    ``master`` when TF_CONFIG or its task type is absent.
    """
    return _task(environ).get("type") or "master"


def task_index(environ=None):
    """The replica's 0-based index among replicas of its type (0 if absent)."""
    index = _task(environ).get("index", 0)
    try:
        return int(index)
    except (TypeError, ValueError):
        raise ValueError("TF_CONFIG task.index is not an integer: %r" % (index,))


def trial_id(environ=None):
    """The hyperparameter-tuning trial id (a string), or None outside tuning.

    From TF_CONFIG's ``task.trial``, else ``CLOUD_ML_TRIAL_ID``.
    """
    env = os.environ if environ is None else environ
    trial = _task(env).get("trial")
    if trial is None or trial == "":
        trial = env.get("CLOUD_ML_TRIAL_ID") or None
    return None if trial is None else str(trial)


def cluster_spec(environ=None):
    """``{"master": ["host:port"], "worker": [...], ...}`` ({} if absent)."""
    cluster = tf_config(environ).get("cluster") or {}
    return {role: list(addresses) for role, addresses in cluster.items()}


def job(environ=None):
    """The job's ``trainingInput`` as a dict ({} if absent)."""
    return dict(tf_config(environ).get("job") or {})


def is_chief(environ=None):
    """True for the replica that should write checkpoints and exports.

    That is master/chief index 0, the only process when there is no
    TF_CONFIG, or worker 0 of a cluster without a master/chief.
    """
    config = tf_config(environ)
    task = config.get("task") or {}
    if not config or not task.get("type"):
        return True
    kind, index = task_type(environ), task_index(environ)
    if kind in PRIMARY_TYPES:
        return index == 0
    cluster = config.get("cluster") or {}
    if kind == "worker" and not any(cluster.get(role) for role in PRIMARY_TYPES):
        return index == 0
    return False
