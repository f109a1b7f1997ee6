"""mlengine._warm: a replica started from a warm interpreter (torch and
numpy imported before the job was known) is indistinguishable to the
trainer from one started cold with `python3 -m`: the same argv, working
directory, sys.path, environment, __main__, signal dispositions and torch
thread counts; its own random streams; the same exit status."""

import json
import os
import signal
import subprocess
import textwrap

import pytest

PYTHON = "/usr/bin/python3"
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = textwrap.dedent('''
    import json, os, random, signal, sys
    import numpy, torch
    import probe_helper
    out = {
        "argv": sys.argv, "cwd": os.getcwd(), "path": sys.path, "name": __name__,
        "file": os.path.basename(__file__), "spec": __spec__.name,
        "env": {k: v for k, v in os.environ.items() if k.startswith("PROBE_") or k in ("OMP_NUM_THREADS", "PYTHONPATH")},
        "signals": {name: str(signal.getsignal(getattr(signal, name)))
                    for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGHUP", "SIGCHLD", "SIGUSR1")},
        "threads": torch.get_num_threads(),
        "helper": probe_helper.__file__,
        "random": [random.random(), float(numpy.random.rand()), float(torch.rand(1))],
    }
    print(json.dumps(out), flush=True)
    how = os.environ.get("PROBE_END", "")
    if how == "raise":
        raise RuntimeError("the probe failed on purpose")
    if how == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
''')


@pytest.fixture
def trainer(tmp_path):
    pkg = tmp_path / "code" / "probe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text(PROBE)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "probe_helper.py").write_text("")
    return tmp_path


def job_env(trainer, **extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(trainer / "lib"),
           "PYTHONUNBUFFERED": "1", "PROBE_VALUE": "x y", "OMP_NUM_THREADS": "2"}
    env.update(extra)
    return env


def cold(trainer, env, args):
    return subprocess.run([PYTHON, "-m", "probe.main", *args], cwd=trainer / "code", env=env,
                          capture_output=True, text=True, timeout=120)


def warm(trainer, env, args, site_dirs=()):
    """Starts a warm interpreter (its own environment, another directory),
    waits until it is ready, then hands it the replica."""
    control_r, control_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pool_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHON_DIR, "PYTHONUNBUFFERED": "1", "POOL_ONLY": "1"}
    proc = subprocess.Popen([PYTHON, "-m", "mlengine._warm", "--preload", "torch,numpy,sklearn",
                             "--control-fd", str(control_r), "--ready-fd", str(ready_w)],
                            cwd="/", env=pool_env, pass_fds=(control_r, ready_w),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(control_r)
    os.close(ready_w)
    with os.fdopen(ready_r) as ready:
        assert ready.readline().startswith("ready "), proc.communicate(timeout=60)
    spec = {"module": "probe.main", "args": list(args), "cwd": str(trainer / "code"), "env": env,
            "site_dirs": list(site_dirs)}
    with os.fdopen(control_w, "w") as control:
        control.write(json.dumps(spec) + "\n")
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def probe_output(result):
    assert result.stdout, result
    return json.loads(result.stdout.splitlines()[0])


def test_a_warm_replica_sees_what_a_cold_one_sees(trainer):
    env = job_env(trainer)
    args = ["--lr=0.1", "two words"]
    c, w1, w2 = cold(trainer, env, args), warm(trainer, env, args), warm(trainer, env, args)
    assert c.returncode == w1.returncode == 0, (c, w1)
    pc, p1, p2 = probe_output(c), probe_output(w1), probe_output(w2)
    for key in ("argv", "cwd", "path", "name", "file", "spec", "env", "signals", "threads", "helper"):
        assert p1[key] == pc[key], (key, p1[key], pc[key])
    assert pc["threads"] == 2
    # Fresh random streams in every process: Python's, numpy's and torch's.
    for i in range(3):
        assert len({pc["random"][i], p1["random"][i], p2["random"][i]}) == 3, (pc["random"], p1["random"], p2["random"])


@pytest.mark.parametrize("end,code", [("exit", 3), ("raise", 1), ("signal", -signal.SIGTERM)])
def test_exit_status_is_the_same(trainer, end, code):
    env = job_env(trainer, PROBE_END=end, PROBE_EXIT="3")
    c, w = cold(trainer, env, []), warm(trainer, env, [])
    assert c.returncode == w.returncode == code, (c, w)
    if end == "raise":
        assert "RuntimeError: the probe failed on purpose" in c.stderr
        assert "RuntimeError: the probe failed on purpose" in w.stderr


def test_a_package_with_its_own_numpy_starts_cold(trainer, tmp_path):
    site = tmp_path / "venv-site"
    (site / "numpy").mkdir(parents=True)
    r = warm(trainer, job_env(trainer), [], site_dirs=[str(site)])
    assert r.returncode == 111 and "bring their own numpy" in r.stderr, r
    assert r.stdout == "", "the trainer never ran"


def test_a_different_hash_seed_starts_cold(trainer):
    r = warm(trainer, job_env(trainer, PYTHONHASHSEED="7"), [])
    assert r.returncode == 111 and "PYTHONHASHSEED" in r.stderr, r
