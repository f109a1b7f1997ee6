"""cloudml-hypertune's ``hypertune`` module, as AI Platform trainers import it.

    import hypertune
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=0.93, global_step=10)

mlengine puts this package on every Python package job's path (and in its
own container images), with the distribution metadata of
``cloudml-hypertune``, so a trainer that lists ``cloudml-hypertune`` in its
``install_requires`` installs as it did on AI Platform. The reports go where
mlengined reads them (``$CLOUD_ML_HP_METRIC_FILE``); see
``mlengine.hypertune``, which this is.
"""

from mlengine.hypertune import (  # noqa: F401
    DEFAULT_METRIC_PATH,
    DEFAULT_METRIC_TAG,
    MAX_NUM_METRIC_ENTRIES_TO_PRESERVE,
    HyperTune,
)

__all__ = ["HyperTune"]
