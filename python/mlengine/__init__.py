"""Trainer-side helpers of mlengine, a self-hosted AI Platform Training.

Every replica mlengined starts has ``python/`` of mlengine on ``PYTHONPATH``
(see docs/runtime-contract.md), so trainer code can use:

* :mod:`mlengine.gcs` -- ``gs://BUCKET/path`` as local files under
  ``$MLENGINE_GCS_ROOT``;
* :mod:`mlengine.hypertune` -- hyperparameter-tuning metric reports, in the
  file format of ``cloudml-hypertune``;
* :mod:`mlengine.tpu` -- waiting for the job's TPU (``TPU_CONFIG``), with a
  simulated resolver when no real TPU exists;
* :mod:`mlengine.cluster` -- the replica's role, from ``TF_CONFIG``;
* :mod:`mlengine.interruption` -- the preemption notice (SIGTERM), the
  attempt number, and checkpoints that a resumed attempt loads (imported on
  its own: ``from mlengine import interruption``).

Pure standard library.
"""

from . import cluster, gcs, hypertune, tpu  # noqa: F401

__all__ = ["cluster", "gcs", "hypertune", "tpu"]
__version__ = "0.1.0"
