"""Warm starts end to end on the local executor: with `warm_start` on the
runtime, a python replica is forked from an interpreter that imported
torch, numpy and sklearn before the job existed. The trainer must not be
able to tell: the probe (trainers/warm) prints what it sees and the suite
compares a warm job with the same job started cold (label
mlengine-warm-start=false): argv, cwd, sys.path, sys.executable,
sys.prefix, environment, signals, thread counts, exit status; random values
differ. A package with its own numpy starts cold, a gloo job trains warm,
and a cancel leaves no warm replica behind."""

import glob
import json
import os
import re

import pytest

from conftest import TRAINERS, config_yaml, make_cli, serve, warm_ready

WARM_PKG = os.path.join(TRAINERS, "warm", "trainer")
OWN_NUMPY_PKG = os.path.join(TRAINERS, "warm_own_numpy", "trainer")


def warm_config():
    return config_yaml(warm_preload=["torch", "numpy", "sklearn"])


@pytest.fixture(scope="module")
def wserver(tmp_path_factory):
    from conftest import Server
    s = Server(tmp_path_factory.mktemp("warm-server"), warm_config())
    yield from serve(s)
    assert not glob.glob(os.path.join(s.data_dir, "warm", "*.sock")), "a warm interpreter still serves"


@pytest.fixture
def wcli(wserver, tmp_path, names):
    return make_cli(wserver, tmp_path, names)


def probe_of(cli, job, task="master-replica-0"):
    for e in cli.server.logs(cli.project, job, task):
        if e["message"].startswith("PROBE "):
            return json.loads(e["message"][len("PROBE "):])
    raise AssertionError(f"no probe line in {job}\n{cli.explain(job)}")


def start_line(cli, job, task="master-replica-0"):
    return [e["message"] for e in cli.server.logs(cli.project, job, task)
            if e["message"].startswith("mlengine: ")][0]


def run(cli, job, end, *flags, cold=False, package=WARM_PKG, states=("SUCCEEDED", "FAILED")):
    extra = ["--labels", "mlengine-warm-start=false"] if cold else []
    r = cli.submit(job, *flags, *extra, package=package, args=["--x=1", "two words", f"--end={end}"])
    assert r.rc == 0, r
    return cli.wait_state(job, set(states), timeout=180)


def test_a_warm_replica_sees_what_a_cold_one_sees(wserver, wcli, names):
    warm_ready(wserver)
    warm = run(wcli, names.job("warm"), "exit:0")
    cold = run(wcli, names.job("cold"), "exit:0", cold=True)
    assert warm["state"] == cold["state"] == "SUCCEEDED", (warm, cold)
    assert start_line(wcli, warm["jobId"]) == ("mlengine: warm start: forked from an interpreter that imported "
                                               "torch, numpy, sklearn")
    assert start_line(wcli, cold["jobId"]) == "mlengine: cold start: the job's label mlengine-warm-start is false"
    # Each job has its own run directory and package environment (their
    # sdists differ): compare with them written RUN and ENV.
    def same_places(job):
        text = json.dumps(probe_of(wcli, job)).replace(wcli.run_dir(job), "RUN")
        return json.loads(re.sub(r"/envs/([^/]+)/[0-9a-f]{32}", r"/envs/\1/ENV", text))
    w, c = same_places(warm["jobId"]), same_places(cold["jobId"])
    for key in ("argv", "cwd", "path", "executable", "prefix", "name", "signals", "threads"):
        assert w[key] == c[key], (key, w[key], c[key])
    assert w["env"] == c["env"], set(w["env"].items()) ^ set(c["env"].items())
    assert all(a != b for a, b in zip(w["random"], c["random"])), (w["random"], c["random"])


@pytest.mark.parametrize("end", ["exit:3", "raise", "signal"])
def test_failures_are_reported_as_from_a_cold_start(wserver, wcli, names, end):
    warm_ready(wserver)
    warm = run(wcli, names.job("warm"), end)
    cold = run(wcli, names.job("cold"), end, cold=True)
    assert warm["state"] == cold["state"] == "FAILED", (warm, cold)
    # The same sentence (the log lines quoted after it are each job's own).
    first = [j["errorMessage"].split(" Last lines of its log")[0] for j in (warm, cold)]
    assert first[0] == first[1], first
    assert start_line(wcli, warm["jobId"]).startswith("mlengine: warm start")
    if end == "raise":
        # The trainer's traceback as a cold start prints it: no frame of
        # mlengine's own.
        logs = wcli.ok("jobs", "stream-logs", warm["jobId"]).out
        assert "RuntimeError: the probe failed on purpose" in logs and "trainer/task.py" in logs, logs
        assert "_warm.py" not in logs and "mlengine/" not in logs.split("Traceback")[1], logs


def test_a_package_with_its_own_numpy_starts_cold(wserver, wcli, names):
    warm_ready(wserver)
    job = names.job("own")
    r = wcli.submit(job, package=OWN_NUMPY_PKG)
    assert r.rc == 0, r
    wcli.wait_state(job, {"SUCCEEDED"}, timeout=180)
    lines = [e["message"] for e in wserver.logs(wcli.project, job)]
    assert "mlengine: cold start: the job's packages bring their own numpy" in lines, lines
    assert "numpy 0.0-own" in lines, lines


def test_gloo_trains_across_warm_replicas(wserver, wcli, names):
    warm_ready(wserver)
    job = names.job("gloo")
    done = run(wcli, job, "gloo", "--scale-tier=custom", "--master-machine-type=n1-standard-4",
               "--worker-machine-type=n1-standard-4", "--worker-count=1")
    assert done["state"] == "SUCCEEDED", wcli.explain(job)
    for task in ("master-replica-0", "worker-replica-0"):
        assert start_line(wcli, job, task).startswith("mlengine: warm start"), task
        assert any("ALLREDUCE 3.0 of 2" in e["message"] for e in wserver.logs(wcli.project, job, task)), task


def test_cancel_leaves_no_warm_replica(wserver, wcli, names):
    warm_ready(wserver)
    job = names.job("cancel")
    r = wcli.submit(job, package=WARM_PKG, args=["--end=sleep"])
    assert r.rc == 0, r
    wcli.wait_log(job, "PROBE ", timeout=60)
    pid = probe_of(wcli, job)["pid"]
    assert os.path.exists(f"/proc/{pid}")
    wcli.ok("jobs", "cancel", job)
    wcli.wait_state(job, {"CANCELLED"}, timeout=60)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
    assert start_line(wcli, job).startswith("mlengine: warm start")


def test_a_warm_interpreter_never_outlives_a_server_killed_while_it_imports(tmp_path):
    """kill -9 of mlengined while its warm interpreter still imports torch
    (the first second or two after a start): the interpreter ends once it
    sees its server gone, instead of serving an unlinked socket for nobody
    (a crash loop would pile them up, about 280 MiB each)."""
    from conftest import Server, describe_procs, procs_of_data_dir, wait_no_procs
    config = warm_config()
    for attempt in range(2):  # twice: the second server must not find the first's interpreter
        s = Server(tmp_path / "crash", config)
        s.kill()
        left = wait_no_procs(lambda: [p for p in procs_of_data_dir(s.data_dir) if "mlengine._warm" in " ".join(p[1])],
                             timeout=30)
        assert not left, f"start {attempt + 1}: warm interpreters outlived their killed server:\n{describe_procs(left)}"
    assert not glob.glob(os.path.join(s.data_dir, "warm", "*.sock"))
