"""mlengine._warm: a replica started from a warm interpreter (torch and
numpy imported before the job was known) is indistinguishable to the
trainer from one started cold with `python3 -m`: the same argv, working
directory, sys.path, environment, __main__, signal dispositions and torch
thread counts; its own random streams; the same exit status."""

import json
import os
import signal
import socket
import subprocess
import textwrap
import time

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
    if how == "sleep":
        import time
        time.sleep(600)
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
    """Starts a zygote (its own environment, another directory), waits until
    it serves, has it fork the replica, and returns what a subprocess.run of
    a cold start would: the exit code (negative for a signal), stdout, stderr.
    When the zygote refuses (the replica must start cold): exit code None and
    its answer as stderr."""
    sock = str(trainer / ("zygote-%d.sock" % time.monotonic_ns()))
    pool_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHON_DIR, "PYTHONUNBUFFERED": "1", "POOL_ONLY": "1"}
    zygote = subprocess.Popen([PYTHON, "-m", "mlengine._warm", "--serve", sock, "--preload", "torch,numpy,sklearn"],
                              cwd="/", env=pool_env)
    try:
        for _ in range(1200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open("/dev/null", os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX)
        conn.connect(sock)
        spec = {"module": "probe.main", "args": list(args), "cwd": str(trainer / "code"), "env": env,
                "site_dirs": list(site_dirs)}
        socket.send_fds(conn, [(json.dumps(spec) + "\n").encode()], [null, out_w, err_w])
        for fd in (null, out_w, err_w):
            os.close(fd)
        with os.fdopen(out_r) as out, os.fdopen(err_r) as err, conn.makefile("rb") as answers:
            first = answers.readline().decode()
            if first.startswith("cold: "):
                return subprocess.CompletedProcess(zygote.args, None, out.read(), first)
            assert first.startswith("pid "), first
            stdout, stderr = out.read(), err.read()
            status = answers.readline().decode()
        conn.close()
        assert status.startswith("status "), status
        code = os.waitstatus_to_exitcode(int(status.split()[1]))
        return subprocess.CompletedProcess(zygote.args, code, stdout, stderr)
    finally:
        zygote.terminate()
        zygote.wait(timeout=30)


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
    assert r.returncode is None and r.stderr == "cold: the job's packages bring their own numpy\n", r
    assert r.stdout == "", "the trainer never ran"


def test_a_different_hash_seed_starts_cold(trainer):
    r = warm(trainer, job_env(trainer, PYTHONHASHSEED="7"), [])
    assert r.returncode is None and "PYTHONHASHSEED" in r.stderr, r
    assert r.stdout == "", "the trainer never ran"


# --- the zygote (--serve): a replica per connection, forked ------------------

@pytest.fixture
def zygote(zygote_with_pid):
    return zygote_with_pid[0]


def start_zygote(tmp_path, *extra):
    """A zygote preloading numpy (`extra`: more of its arguments), once it
    serves; (its socket, its process)."""
    sock = str(tmp_path / "zygote.sock")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHON_DIR, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([PYTHON, "-m", "mlengine._warm", "--serve", sock, "--preload", "numpy", *extra],
                            cwd="/", env=env)
    for _ in range(600):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    assert os.path.exists(sock), "the zygote never listened"
    return sock, proc


@pytest.fixture
def zygote_with_pid(tmp_path):
    sock, proc = start_zygote(tmp_path)
    yield sock, proc.pid
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def connect_replica(sock, trainer, env, args=(), **fields):
    """Connects as mlengine-replica would: the spec (with `fields` added)
    and the replica's stdio; (connection, its reader, stdout, stderr)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open("/dev/null", os.O_RDONLY)
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(sock)
    spec = {"module": "probe.main", "args": list(args), "cwd": str(trainer / "code"), "env": env, **fields}
    socket.send_fds(conn, [(json.dumps(spec) + "\n").encode()], [null, out_w, err_w])
    for fd in (null, out_w, err_w):
        os.close(fd)
    return conn, conn.makefile("rb"), os.fdopen(out_r), os.fdopen(err_r)


def start_replica(sock, trainer, env, args=()):
    """connect_replica, once the zygote answered "pid N"; (connection, its
    reader, N, stdout, stderr)."""
    conn, reader, out, err = connect_replica(sock, trainer, env, args)
    line = reader.readline().decode()
    assert line.startswith("pid "), line
    return conn, reader, int(line.split()[1]), out, err


def test_the_zygote_forks_replicas_that_see_what_a_cold_one_sees(zygote, trainer):
    env = job_env(trainer, PROBE_EXIT="4")
    c = cold(trainer, env, ["x"])
    conn, reader, pid, out, err = start_replica(zygote, trainer, env, ["x"])
    line = out.readline()
    assert line, err.read()
    p1 = json.loads(line)
    status = reader.readline().decode()
    assert status.startswith("status "), status
    assert os.waitstatus_to_exitcode(int(status.split()[1])) == c.returncode == 4
    pc = probe_output(c)
    for key in ("argv", "cwd", "path", "name", "env", "signals", "threads", "helper"):
        assert p1[key] == pc[key], (key, p1[key], pc[key])
    conn2, _, _, out2, _ = start_replica(zygote, trainer, env, ["x"])  # the connection lives while it runs
    p2 = json.loads(out2.readline())
    conn2.close()
    assert len({p1["random"][1], p2["random"][1], pc["random"][1]}) == 3, "numpy reseeded per fork"


def test_what_a_replica_leaves_and_a_replica_whose_shim_is_gone_are_killed(zygote, trainer, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    (trainer / "code" / "probe" / "daemon.py").write_text(textwrap.dedent(f'''
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open({str(pidfile)!r}, "w").write(str(os.getpid()))
                time.sleep(600)
            os._exit(0)
        time.sleep(0.5)
    '''))
    env = job_env(trainer)
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(zygote)
    null = os.open("/dev/null", os.O_RDWR)
    spec = {"module": "probe.daemon", "args": [], "cwd": str(trainer / "code"), "env": env}
    socket.send_fds(conn, [(json.dumps(spec) + "\n").encode()], [null, null, null])
    reader = conn.makefile("rb")
    assert reader.readline().startswith(b"pid ")
    assert reader.readline().startswith(b"status ")
    daemon = int(pidfile.read_text())
    for _ in range(100):
        if not os.path.exists(f"/proc/{daemon}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{daemon}"), "the daemon outlived its replica"
    # A shim that goes away takes its replica with it.
    conn2, _, pid, _, _ = start_replica(zygote, trainer, job_env(trainer, PROBE_END="sleep"))
    conn2.close()
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")


def _sandbox_lib():
    """libmlengine-sandbox.so beside the mlengined under test (the build's)."""
    mlengined = os.environ.get("MLENGINED")
    if not mlengined:
        pytest.skip("MLENGINED (the build's mlengined) not set")
    lib = os.path.join(os.path.dirname(os.path.dirname(mlengined)), "sandbox", "libmlengine-sandbox.so")
    if not os.path.exists(lib):
        pytest.skip(f"{lib} not built")
    return lib


def test_a_sandbox_spec_that_cannot_be_read_ends_the_replica_saying_why(trainer, tmp_path):
    """A sandboxed replica's child enters the spec its request names
    (mle_sandbox_enter): one that cannot be read ends that replica with
    status 126 and the reason on its stderr; the trainer never runs, and
    the next replica's reason is its own."""
    sock, proc = start_zygote(tmp_path, "--sandbox-lib", _sandbox_lib())
    try:
        for missing in ("first", "second"):
            conn, reader, out, err = connect_replica(sock, trainer, job_env(trainer),
                                                     sandbox=str(tmp_path / f"no-such-{missing}-spec"))
            assert reader.readline().decode().startswith("pid ")
            status = reader.readline().decode()
            assert status.startswith("status "), status
            assert os.waitstatus_to_exitcode(int(status.split()[1])) == 126
            with out, err:
                assert out.read() == "", "the trainer never ran"
                said = err.read()
            assert "cannot start the replica in its sandbox" in said and f"no-such-{missing}-spec" in said, said
            conn.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def _memory_holds(pid, needle):
    """Whether `needle` is anywhere in process `pid`'s readable memory."""
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read().splitlines()
    mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        for line in maps:
            parts = line.split()
            if "r" not in parts[1] or (len(parts) > 5 and parts[5].startswith("[v")):
                continue  # unreadable, or the kernel's own pages
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            try:
                if needle in os.pread(mem, hi - lo, lo):
                    return True
            except OSError:  # a region that cannot be read holds nothing to find
                continue
    finally:
        os.close(mem)
    return False


def test_the_zygote_never_holds_a_replicas_request(zygote_with_pid, trainer):
    """A replica's request (its environment: its token; its arguments) is
    read by the child the zygote forked for it, never by the zygote itself:
    every later replica is forked from the zygote's memory, so what the
    zygote held of one job a replica of another could read in its own."""
    sock, pid = zygote_with_pid
    secret = "mle1." + os.urandom(32).hex()[:43]
    env = job_env(trainer, MLENGINE_ACCESS_TOKEN=secret)
    conn, reader, _, out, _ = start_replica(sock, trainer, env, ["an-argument-" + secret[5:20]])
    assert json.loads(out.readline())["env"] is not None  # the replica ran, with its request
    assert reader.readline().decode().startswith("status ")
    for needle in (secret, "an-argument-" + secret[5:20]):
        assert not _memory_holds(pid, needle.encode()), f"the zygote's memory holds {needle[:16]}..."
    conn.close()
