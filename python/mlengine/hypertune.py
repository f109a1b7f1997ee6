"""Hyperparameter-tuning metric reports, compatible with ``cloudml-hypertune``.

``HyperTune().report_hyperparameter_tuning_metric(tag, value, global_step)``
keeps the last 100 reports of this object and rewrites the whole metric file
on each call, one JSON object per line with sorted keys::

    {"accuracy": "0.93", "checkpoint_path": "", "global_step": "10",
     "timestamp": 1700000000.5, "trial": "3"}

All values but ``timestamp`` are strings. The file is
``$CLOUD_ML_HP_METRIC_FILE`` (default ``/tmp/hypertune/output.metrics``), the
trial ``$CLOUD_ML_TRIAL_ID`` (default ``"0"``). mlengined reads the tag named
by the job's ``hyperparameterMetricTag``.
"""

import collections
import json
import os
import time

__all__ = [
    "DEFAULT_METRIC_PATH",
    "DEFAULT_METRIC_TAG",
    "HyperTune",
    "MAX_NUM_METRIC_ENTRIES_TO_PRESERVE",
]

DEFAULT_METRIC_TAG = "training/hptuning/metric"
DEFAULT_METRIC_PATH = "/tmp/hypertune/output.metrics"
MAX_NUM_METRIC_ENTRIES_TO_PRESERVE = 100


class HyperTune(object):
    """Writes hyperparameter-tuning metrics where mlengined collects them."""

    def __init__(self, clock=time.time):
        self.metric_path = os.environ.get("CLOUD_ML_HP_METRIC_FILE") or DEFAULT_METRIC_PATH
        parent = os.path.dirname(self.metric_path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.trial_id = os.environ.get("CLOUD_ML_TRIAL_ID", "0")
        self.metrics_queue = collections.deque(maxlen=MAX_NUM_METRIC_ENTRIES_TO_PRESERVE)
        self._clock = clock

    def _dump_metrics_to_file(self):
        # Written beside the target and renamed over it, so a reader never
        # sees a half-written file.
        tmp = "%s.tmp.%d" % (self.metric_path, os.getpid())
        with open(tmp, "w") as metric_file:
            for metric in self.metrics_queue:
                metric_file.write(json.dumps(metric, sort_keys=True) + "\n")
        os.replace(tmp, self.metric_path)

    def report_hyperparameter_tuning_metric(self, hyperparameter_metric_tag,
                                            metric_value, global_step=None,
                                            checkpoint_path=""):
        """Records one metric value and rewrites the metric file.

        Args:
          hyperparameter_metric_tag: the metric's name; should equal the job's
            ``hyperparameterMetricTag``. Empty: ``training/hptuning/metric``.
          metric_value: a number (anything ``float()`` accepts).
          global_step: the training step of this value (default 0).
          checkpoint_path: a checkpoint that can warm-start from this point.
        """
        metric_value = float(metric_value)
        metric_tag = hyperparameter_metric_tag or DEFAULT_METRIC_TAG
        metric_body = {
            "timestamp": self._clock(),
            "trial": str(self.trial_id),
            metric_tag: str(metric_value),
            "global_step": str(int(global_step) if global_step else 0),
            "checkpoint_path": checkpoint_path,
        }
        self.metrics_queue.append(metric_body)
        self._dump_metrics_to_file()
