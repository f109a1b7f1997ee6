"""``hypertune.hypertune``: where cloudml-hypertune defines ``HyperTune``
(``from hypertune.hypertune import HyperTune`` works as it did there)."""

from mlengine.hypertune import (  # noqa: F401
    DEFAULT_METRIC_PATH,
    DEFAULT_METRIC_TAG,
    MAX_NUM_METRIC_ENTRIES_TO_PRESERVE,
    HyperTune,
)
