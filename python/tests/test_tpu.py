import json
import logging
import sys
import types

import pytest

from mlengine import tpu

TPU_CONFIG = {"project": "proj-1", "zone": "us-central1-b", "tpu_node_name": "job-tpu-0"}
TPU_ENV_VARS = ("TPU_CONFIG", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE",
                "MLENGINE_SIMULATED_ACCELERATOR")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in TPU_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tpu_env(monkeypatch):
    monkeypatch.setenv("TPU_CONFIG", json.dumps(TPU_CONFIG))


class FakeSleep(object):
    def __init__(self):
        self.calls = []

    def __call__(self, seconds):
        self.calls.append(seconds)


class FakeResolver(object):
    def __init__(self, spec):
        self.spec = spec

    def cluster_spec(self):
        return self.spec


class ScriptedFactory(object):
    """Plays back a list of outcomes: exceptions are raised, specs returned."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.calls = []

    def __call__(self, tpu_name, zone=None, project=None, job_name=None):
        self.calls.append((tpu_name, zone, project, job_name))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return FakeResolver(outcome)


def test_without_tpu_config_returns_none_and_logs(caplog):
    factory = ScriptedFactory([])
    sleep = FakeSleep()
    with caplog.at_level(logging.INFO, logger="mlengine.tpu"):
        assert tpu.wait_for_tpu_cluster_resolver_ready(resolver_factory=factory, sleep=sleep) is None
    assert factory.calls == [] and sleep.calls == []
    assert "Missing TPU_CONFIG, use CPU/GPU for training." in caplog.text


def test_empty_tpu_config_is_absent(monkeypatch):
    monkeypatch.setenv("TPU_CONFIG", "")
    assert tpu.wait_for_tpu_cluster_resolver_ready(resolver_factory=ScriptedFactory([])) is None


def test_returns_once_worker_appears(tpu_env):
    factory = ScriptedFactory([RuntimeError("not yet"), {"ps": ["x"]}, {"worker": ["h:8470"]}])
    sleep = FakeSleep()
    resolver = tpu.wait_for_tpu_cluster_resolver_ready(
        max_tries=5, delay_seconds=7, resolver_factory=factory, sleep=sleep)
    assert resolver.cluster_spec() == {"worker": ["h:8470"]}
    assert factory.calls == [("job-tpu-0", "us-central1-b", "proj-1", "worker")] * 3
    assert sleep.calls == [7, 7]


def test_first_try_success_does_not_sleep(tpu_env):
    sleep = FakeSleep()
    tpu.wait_for_tpu_cluster_resolver_ready(
        resolver_factory=ScriptedFactory([{"worker": ["h:1"]}]), sleep=sleep)
    assert sleep.calls == []


def test_accepts_tf_cluster_spec_objects(tpu_env):
    class ClusterSpec(object):
        def as_dict(self):
            return {"worker": ["10.0.0.2:8470"]}

    resolver = tpu.wait_for_tpu_cluster_resolver_ready(
        resolver_factory=ScriptedFactory([ClusterSpec()]), sleep=FakeSleep())
    assert isinstance(resolver.cluster_spec(), ClusterSpec)


def test_retries_max_tries_then_raises_with_cause(tpu_env):
    errors = [ConnectionError("try %d" % i) for i in range(1, 5)]
    factory = ScriptedFactory(errors)
    sleep = FakeSleep()
    with pytest.raises(RuntimeError) as info:
        tpu.wait_for_tpu_cluster_resolver_ready(
            max_tries=4, delay_seconds=10, resolver_factory=factory, sleep=sleep)
    assert len(factory.calls) == 4
    assert sleep.calls == [10, 10, 10]
    assert "Failed to schedule TPU" in str(info.value)
    assert "job-tpu-0" in str(info.value)
    assert info.value.__cause__ is errors[-1]


def test_default_is_40_tries_10_seconds_apart(tpu_env):
    factory = ScriptedFactory([OSError("down")] * 40)
    sleep = FakeSleep()
    with pytest.raises(RuntimeError):
        tpu.wait_for_tpu_cluster_resolver_ready(resolver_factory=factory, sleep=sleep)
    assert len(factory.calls) == 40
    assert sleep.calls == [10] * 39


def test_spec_without_worker_counts_as_failure(tpu_env):
    factory = ScriptedFactory([{}, {"worker": []}])
    with pytest.raises(RuntimeError, match="Failed to schedule TPU") as info:
        tpu.wait_for_tpu_cluster_resolver_ready(
            max_tries=2, resolver_factory=factory, sleep=FakeSleep())
    assert "worker" in str(info.value.__cause__)


def test_invalid_tpu_config(monkeypatch):
    monkeypatch.setenv("TPU_CONFIG", "{oops")
    with pytest.raises(ValueError, match="TPU_CONFIG"):
        tpu.wait_for_tpu_cluster_resolver_ready(resolver_factory=ScriptedFactory([]))
    monkeypatch.setenv("TPU_CONFIG", '"a string"')
    with pytest.raises(ValueError, match="TPU_CONFIG"):
        tpu.read_tpu_config()


def simulated_env(monkeypatch, hosts="tpu-host-0,tpu-host-1", accel="v2-16"):
    monkeypatch.setenv("TPU_CONFIG", json.dumps(TPU_CONFIG))
    monkeypatch.setenv("TPU_WORKER_ID", "0")
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", hosts)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", accel)
    monkeypatch.setenv("MLENGINE_SIMULATED_ACCELERATOR", "tpu-%s (simulated)" % accel)


def test_simulated_resolver_through_default_factory(monkeypatch, caplog):
    simulated_env(monkeypatch)
    with caplog.at_level(logging.INFO, logger="mlengine.tpu"):
        resolver = tpu.wait_for_tpu_cluster_resolver_ready(sleep=FakeSleep())
    assert isinstance(resolver, tpu.SimulatedTpuClusterResolver)
    assert resolver.simulated is True
    assert resolver.cluster_spec() == {"worker": ["tpu-host-0:8470", "tpu-host-1:8470"]}
    assert resolver.master() == "grpc://tpu-host-0:8470"
    assert resolver.master(rpc_layer="") == "tpu-host-0:8470"
    assert resolver.num_accelerators() == {"TPU": 8}
    assert resolver.total_cores() == 16
    assert "SIMULATED" in repr(resolver) and "tpu-v2-16 (simulated)" in repr(resolver)
    assert "SIMULATED TPU" in caplog.text
    info = resolver.describe()
    assert info["simulated"] is True
    assert info["tpu_node_name"] == "job-tpu-0"
    assert info["project"] == "proj-1" and info["zone"] == "us-central1-b"
    assert info["accelerator_type"] == "v2-16"
    assert info["worker_hosts"] == ["tpu-host-0:8470", "tpu-host-1:8470"]
    json.dumps(info)  # JSON-friendly


def test_simulated_resolver_logs_even_without_logging_setup(monkeypatch, caplog):
    simulated_env(monkeypatch, hosts="h")
    with caplog.at_level(logging.WARNING, logger="mlengine.tpu"):
        tpu.SimulatedTpuClusterResolver()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "simulated" in caplog.records[0].getMessage().lower()


def test_simulated_resolver_keeps_ports_and_trims(monkeypatch):
    simulated_env(monkeypatch, hosts=" a:1234 , b ,,")
    resolver = tpu.SimulatedTpuClusterResolver()
    assert resolver.cluster_spec() == {"worker": ["a:1234", "b:8470"]}


def test_simulated_resolver_default_names(monkeypatch):
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "h")
    resolver = tpu.SimulatedTpuClusterResolver(tpu="node", zone="z", project="p")
    assert resolver.accelerator_type == "v2-8"
    assert resolver.simulated_accelerator == "tpu-v2-8 (simulated)"
    assert resolver.tpu_node_name == "node"


def test_simulated_tpu_not_ready_retries_then_raises(monkeypatch):
    simulated_env(monkeypatch, hosts="")
    sleep = FakeSleep()
    with pytest.raises(RuntimeError, match="Failed to schedule TPU") as info:
        tpu.wait_for_tpu_cluster_resolver_ready(max_tries=3, delay_seconds=2, sleep=sleep)
    assert sleep.calls == [2, 2]
    assert "TPU_WORKER_HOSTNAMES" in str(info.value.__cause__)


def install_fake_tensorflow(monkeypatch):
    calls = []

    class TPUClusterResolver(object):
        def __init__(self, **kwargs):
            calls.append(kwargs)

        def cluster_spec(self):
            return {"worker": ["10.1.2.3:8470"]}

    tf = types.ModuleType("tensorflow")
    tf.distribute = types.SimpleNamespace(
        cluster_resolver=types.SimpleNamespace(TPUClusterResolver=TPUClusterResolver))
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    monkeypatch.setattr(tpu, "_tensorflow_available", lambda: True)
    return TPUClusterResolver, calls


def test_default_factory_uses_tensorflow_for_real_tpus(tpu_env, monkeypatch):
    resolver_class, calls = install_fake_tensorflow(monkeypatch)
    resolver = tpu.wait_for_tpu_cluster_resolver_ready(sleep=FakeSleep())
    assert isinstance(resolver, resolver_class)
    assert calls == [{"tpu": ["job-tpu-0"], "zone": "us-central1-b", "project": "proj-1",
                      "job_name": "worker"}]


def test_default_factory_prefers_simulation_when_simulated(monkeypatch):
    _, calls = install_fake_tensorflow(monkeypatch)
    simulated_env(monkeypatch)
    resolver = tpu.wait_for_tpu_cluster_resolver_ready(sleep=FakeSleep())
    assert isinstance(resolver, tpu.SimulatedTpuClusterResolver)
    assert calls == []


def test_default_factory_without_tensorflow_simulates(monkeypatch):
    monkeypatch.setattr(tpu, "_tensorflow_available", lambda: False)
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "h0")
    resolver = tpu.default_resolver_factory("n", zone="z", project="p")
    assert isinstance(resolver, tpu.SimulatedTpuClusterResolver)
    assert resolver.cluster_spec() == {"worker": ["h0:8470"]}


def test_resolver_waits_for_every_tpu_worker_endpoint(monkeypatch):
    """Under Slurm the master gets MLENGINE_TPU_WORKER_ENDPOINTS; the resolver
    is ready only once every mlengine.tpu_worker answers."""
    import os
    import subprocess
    import sys
    import socket as socket_mod
    from mlengine import tpu

    def free_port():
        with socket_mod.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    ports = [free_port(), free_port()]
    env = {"TPU_CONFIG": '{"project": "p", "zone": "z", "tpu_node_name": "j-tpu"}',
           "TPU_WORKER_HOSTNAMES": "h1,h2", "TPU_ACCELERATOR_TYPE": "v3-16",
           "MLENGINE_SIMULATED_ACCELERATOR": "tpu-v3-16 (simulated)",
           "MLENGINE_TPU_WORKER_ENDPOINTS": ",".join("127.0.0.1:%d" % p for p in ports)}
    with pytest.raises(RuntimeError, match="not ready"):
        tpu.SimulatedTpuClusterResolver(environ=env)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    procs = []
    try:
        for i, p in enumerate(ports):
            wenv = dict(os.environ, TPU_WORKER_ID=str(i), TPU_WORKER_HOSTNAMES="h1,h2",
                        TPU_ACCELERATOR_TYPE="v3-16", MLENGINE_TPU_PORT=str(p),
                        PYTHONPATH=here)
            procs.append(subprocess.Popen([sys.executable, "-m", "mlengine.tpu_worker"], env=wenv,
                                          stdout=subprocess.PIPE, text=True))
        for proc in procs:
            assert "listening on port" in proc.stdout.readline()
        resolver = tpu.SimulatedTpuClusterResolver(environ=env)
        assert resolver.worker_hosts == ["127.0.0.1:%d" % p for p in ports]
        assert [r.split()[1] for r in resolver.worker_replies] == ["0", "1"]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
