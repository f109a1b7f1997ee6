"""Waiting for the job's Cloud TPU, as the TPU training guide's helper does.

In a TPU job mlengined sets ``TPU_CONFIG`` (JSON with ``project``, ``zone``,
``tpu_node_name``) on the replica that drives the TPU, plus
``TPU_WORKER_ID``, ``TPU_WORKER_HOSTNAMES`` and ``TPU_ACCELERATOR_TYPE``.
When no real TPU exists, ``MLENGINE_SIMULATED_ACCELERATOR`` says so (e.g.
``tpu-v2-8 (simulated)``) and :class:`SimulatedTpuClusterResolver` stands in
for TensorFlow's ``TPUClusterResolver``.
"""

import importlib.util
import json
import logging
import os
import socket
import time

__all__ = [
    "CORES_PER_HOST",
    "SimulatedTpuClusterResolver",
    "TPU_PORT",
    "default_resolver_factory",
    "read_tpu_config",
    "wait_for_tpu_cluster_resolver_ready",
]

logger = logging.getLogger("mlengine.tpu")

TPU_PORT = 8470
CORES_PER_HOST = 8


def read_tpu_config(environ=None):
    """The parsed ``TPU_CONFIG``, or None when it is unset or empty.

    Raises ValueError when it is not a JSON object.
    """
    env = os.environ if environ is None else environ
    raw = env.get("TPU_CONFIG", "")
    if not raw.strip():
        return None
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ValueError("TPU_CONFIG is not valid JSON: %s (%r)" % (e, raw)) from e
    if not isinstance(config, dict):
        raise ValueError("TPU_CONFIG must be a JSON object, got %r" % (raw,))
    return config


def _host_port(host):
    host = host.strip()
    if host.startswith("["):  # [ipv6]:port or [ipv6]
        return host if "]:" in host else "%s:%d" % (host, TPU_PORT)
    if host.count(":") == 1:
        return host
    if ":" in host:  # a bare IPv6 address
        return "[%s]:%d" % (host, TPU_PORT)
    return "%s:%d" % (host, TPU_PORT)


def _ask_worker(endpoint, timeout=2.0):
    """The greeting line of the mlengine TPU worker at host:port. Raises
    RuntimeError when it does not answer (not started yet)."""
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            return conn.makefile("r").readline().strip()
    except (OSError, ValueError) as e:
        raise RuntimeError("TPU worker %s is not ready: %s" % (endpoint, e)) from e


class SimulatedTpuClusterResolver(object):
    """A stand-in for TensorFlow's TPUClusterResolver on simulated TPU hosts.

    Built from ``TPU_CONFIG``, ``TPU_WORKER_HOSTNAMES``,
    ``TPU_ACCELERATOR_TYPE`` and ``MLENGINE_SIMULATED_ACCELERATOR``. No TPU
    exists behind it: code using it must run its model on the CPU (or GPU).
    Raises RuntimeError while ``TPU_WORKER_HOSTNAMES`` is empty (the TPU is
    not provisioned yet), which makes the waiting helper retry.
    """

    simulated = True

    def __init__(self, tpu=None, zone=None, project=None, job_name="worker",
                 environ=None):
        env = os.environ if environ is None else environ
        config = read_tpu_config(env) or {}
        if isinstance(tpu, (list, tuple)):
            tpu = tpu[0] if tpu else None
        self.tpu_node_name = tpu or config.get("tpu_node_name", "")
        self.zone = zone or config.get("zone", "")
        self.project = project or config.get("project", "")
        self.job_name = job_name or "worker"
        self.accelerator_type = env.get("TPU_ACCELERATOR_TYPE", "") or "v2-8"
        self.simulated_accelerator = (
            env.get("MLENGINE_SIMULATED_ACCELERATOR", "")
            or "tpu-%s (simulated)" % self.accelerator_type)
        worker_id = env.get("TPU_WORKER_ID", "")
        self.worker_id = int(worker_id) if worker_id.strip().isdigit() else 0
        hosts = [h.strip() for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",")]
        self.worker_hosts = [_host_port(h) for h in hosts if h]
        # Under Slurm each TPU host runs mlengine.tpu_worker: the TPU is ready
        # once every one of them answers.
        endpoints = [e.strip() for e in
                     env.get("MLENGINE_TPU_WORKER_ENDPOINTS", "").split(",") if e.strip()]
        if endpoints:
            self.worker_hosts = endpoints
            self.worker_replies = [_ask_worker(e) for e in endpoints]
        if not self.worker_hosts:
            raise RuntimeError(
                "TPU %r is not ready: TPU_WORKER_HOSTNAMES is empty"
                % (self.tpu_node_name,))
        logger.warning(
            "SIMULATED TPU: %s; node %r (project %r, zone %r), hosts %s. No "
            "real TPU exists here: the model runs on the CPU.",
            self.simulated_accelerator, self.tpu_node_name, self.project,
            self.zone, ",".join(self.worker_hosts))

    def cluster_spec(self):
        """``{"worker": ["host:8470", ...]}`` (a plain dict)."""
        return {self.job_name: list(self.worker_hosts)}

    def master(self, task_type=None, task_id=None, rpc_layer="grpc"):
        """The address of the first TPU host (or of ``task_id``)."""
        index = task_id or 0
        address = self.worker_hosts[index]
        return "%s://%s" % (rpc_layer, address) if rpc_layer else address

    def get_master(self):
        return self.master()

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        """TPU cores per host: ``{"TPU": 8}``."""
        return {"TPU": CORES_PER_HOST}

    def total_cores(self):
        """TPU cores in the whole (simulated) slice."""
        return CORES_PER_HOST * len(self.worker_hosts)

    def environment(self):
        return "google"

    def describe(self):
        """What this resolver stands for, as a JSON-friendly dict."""
        return {
            "tpu_node_name": self.tpu_node_name,
            "zone": self.zone,
            "project": self.project,
            "accelerator_type": self.accelerator_type,
            "worker_hosts": list(self.worker_hosts),
            "worker_id": self.worker_id,
            "cores_per_host": CORES_PER_HOST,
            "total_cores": self.total_cores(),
            "simulated_accelerator": self.simulated_accelerator,
            "simulated": True,
            "worker_replies": list(getattr(self, "worker_replies", [])),
        }

    def __repr__(self):
        return ("SimulatedTpuClusterResolver(SIMULATED %s, tpu=%r, zone=%r, "
                "project=%r, workers=%r)" % (
                    self.simulated_accelerator, self.tpu_node_name, self.zone,
                    self.project, self.worker_hosts))


def _tensorflow_available():
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def default_resolver_factory(tpu, zone, project, job_name="worker"):
    """Builds a resolver: TensorFlow's TPUClusterResolver when TensorFlow is
    importable and the TPU is real; SimulatedTpuClusterResolver otherwise
    (always when MLENGINE_SIMULATED_ACCELERATOR is set, since TensorFlow's
    resolver could never reach a simulated TPU)."""
    if not os.environ.get("MLENGINE_SIMULATED_ACCELERATOR") and _tensorflow_available():
        import tensorflow as tf  # pylint: disable=import-outside-toplevel,import-error
        return tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=[tpu], zone=zone, project=project, job_name=job_name)
    return SimulatedTpuClusterResolver(
        tpu=tpu, zone=zone, project=project, job_name=job_name)


def _as_dict(spec):
    if hasattr(spec, "as_dict"):  # tf.train.ClusterSpec
        spec = spec.as_dict()
    return dict(spec or {})


def wait_for_tpu_cluster_resolver_ready(max_tries=40, delay_seconds=10,
                                        resolver_factory=None, sleep=time.sleep):
    """Waits until the job's TPU is provisioned and returns its resolver.

    Without ``TPU_CONFIG`` logs that the CPU/GPU will be used and returns
    None. Otherwise tries up to ``max_tries`` times, ``delay_seconds`` apart,
    to build a resolver for the node (``resolver_factory(tpu_node_name, zone,
    project, job_name="worker")``) and returns it once its cluster spec has
    a ``worker`` entry. After the last failed try raises RuntimeError saying
    the TPU could not be scheduled, chained to the last failure.
    """
    tpu_config = read_tpu_config()
    if tpu_config is None:
        logger.info("Missing TPU_CONFIG, use CPU/GPU for training.")
        return None
    factory = resolver_factory or default_resolver_factory
    max_tries = max(1, int(max_tries))
    logger.info("Waiting for TPU to be ready: %s", tpu_config)
    last_error = None
    for attempt in range(1, max_tries + 1):
        try:
            resolver = factory(tpu_config.get("tpu_node_name"),
                               zone=tpu_config.get("zone"),
                               project=tpu_config.get("project"),
                               job_name="worker")
            spec = _as_dict(resolver.cluster_spec())
            if spec.get("worker"):
                logger.info("Found TPU worker: %s (%r)", spec, resolver)
                return resolver
            last_error = RuntimeError(
                "cluster spec has no 'worker' entry yet: %r" % (spec,))
        except Exception as e:  # pylint: disable=broad-except
            last_error = e
        if attempt < max_tries:
            logger.info("Still waiting for provisioning of TPU %r (try %d of "
                        "%d failed: %s)", tpu_config.get("tpu_node_name"),
                        attempt, max_tries, last_error)
            sleep(delay_seconds)
    raise RuntimeError(
        "Failed to schedule TPU %r after %d tries: %s"
        % (tpu_config.get("tpu_node_name"), max_tries, last_error)) from last_error
