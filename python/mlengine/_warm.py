"""The warm interpreter (the zygote): imports what is slow to import, then
forks replicas, each exactly as ``python3 -m MODULE ARGS...`` would have
started it.

    python3 -m mlengine._warm --serve SOCKET --preload torch,numpy,sklearn

It imports the ``--preload`` modules (the time a trainer's first line
waits for), records what is loaded, and listens on the Unix socket SOCKET
(it appears once it answers). mlengine-replica (``--warm SOCKET --spec
FILE``) connects and sends one JSON line with the replica's stdin, stdout
and stderr attached (SCM_RIGHTS)::

    {"module": "trainer.task", "args": [...], "cwd": "...", "env": {...},
     "site_dirs": ["<the job's package environment's site-packages>", ...],
     "prefix": "<that environment>" (optional)}

The zygote forks a child for the connection at once and reads nothing of
it: the child reads the request (every later replica is forked from the
zygote's memory, which therefore never holds one job's token, environment
or arguments), answers, takes those descriptors, a session of its own,
becomes a child subreaper (what it starts stays below it) and turns itself
into the replica (``become``): working directory, environment,
``sys.argv``, ``sys.path`` as ``python3 -m`` builds them, modules loaded
since the preloads dropped, signal dispositions of a fresh interpreter,
numpy's and torch's CPU generators reseeded (Python's ``random`` reseeds
itself after a fork, they do not; CUDA's are seeded when CUDA initializes,
as in a cold start), torch's thread counts taken from the job's
environment (the OpenMP runtime read the zygote's when it loaded), then runs
the module as ``__main__`` with ``runpy``. The exit status is what
``python3 -m`` gives: SystemExit's code, 1 after an uncaught exception (with
its traceback on stderr), death by SIGINT after KeyboardInterrupt. The
zygote answers "pid N" at once and "status S" (the wait status) when the
replica ends; see ``serve`` for what it kills.

What it cannot make fresh is refused by ``check_compatible`` before any
fork: the zygote answers "cold: <why>" and the shim starts the replica cold.
That is a job whose PYTHONHASHSEED differs from the zygote's (string hashes
are fixed at start-up), or whose package environment ships its own copy of
a preloaded module (mlengined checks that one before asking).
"""

import argparse
import gc
import json
import os
import runpy
import signal
import sys

_BASELINE = None  # sys.modules' names once the preloads are in
_SINCE = ([], 0)  # (the names loaded since the baseline, len(sys.modules) when they were listed)
_BASE_PATH = None  # sys.path after the preloads, without the pool's own entries


def preload(names):
    """Imports each of `names` that is installed (a module missing, torch on
    a machine without it, is left to the replicas that ask for it, as a cold
    start would); returns those imported."""
    loaded = []
    for name in names:
        if not name:
            continue
        try:
            __import__(name)
        except ImportError as e:
            print(f"mlengine._warm: not preloading {name}: {e}", file=sys.stderr, flush=True)
            continue
        loaded.append(name)
    global _BASELINE, _BASE_PATH
    _BASELINE = set(sys.modules)
    own = set(_pythonpath(os.environ))
    own.add(os.getcwd())
    own.add("")
    _BASE_PATH = [p for p in sys.path if p not in own]
    return loaded


def _pythonpath(env):
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def check_compatible(spec, preloaded):
    """None, or why this replica must start cold."""
    env = spec.get("env", {})
    seed = env.get("PYTHONHASHSEED")
    if seed is not None and seed != os.environ.get("PYTHONHASHSEED"):
        return "PYTHONHASHSEED differs from the warm interpreter's"
    for site_dir in spec.get("site_dirs", []):
        for name in preloaded:
            top = name.split(".")[0]
            if os.path.exists(os.path.join(site_dir, top)) or os.path.exists(os.path.join(site_dir, top + ".py")):
                return "the job's packages bring their own %s" % top
    return None


def _reset_signals():
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    # What a fresh interpreter installs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _reseed():
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        # The CPU generator, as a fresh interpreter seeds it. CUDA's are
        # made when CUDA initializes in the replica, as in a cold start (the
        # zygote never initializes it); torch.seed() would queue their seed
        # with a formatted stack, reading the source of every frame.
        torch.default_generator.seed()


def _threads(env):
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = env.get(var, "")
        if value.isdigit() and int(value) > 0:
            torch.set_num_threads(int(value))
            return


def become(spec):
    """Turns this interpreter into the replica `spec` describes; returns
    the exit status (the caller exits with it)."""
    env = dict(spec["env"])
    cwd = spec.get("cwd") or os.getcwd()
    os.chdir(cwd)
    # Only what differs from the zygote's: each variable set is Python and
    # libc work in the child, whose pages are the zygote's until written.
    current = os.environ
    for name in [name for name in current if name not in env]:
        del current[name]
    for name, value in env.items():
        if current.get(name) != value:
            current[name] = value
    if spec.get("prefix"):
        sys.prefix = sys.exec_prefix = spec["prefix"]
        sys.executable = os.path.join(spec["prefix"], "bin", "python")
    # As `python3 -m` builds it: the working directory, PYTHONPATH, then the
    # interpreter's own (the job's package environment before the system's).
    tail = list(_BASE_PATH)
    site_dirs = [d for d in spec.get("site_dirs", []) if d not in tail]
    if site_dirs:
        first_site = next((i for i, p in enumerate(tail) if p.endswith("-packages")), len(tail))
        tail[first_site:first_site] = site_dirs
    sys.path[:] = [os.getcwd()] + _pythonpath(env) + tail
    _list_since_baseline()  # listed by the zygote before the fork, unless the child loaded more since
    for name in _SINCE[0]:
        sys.modules.pop(name, None)
    _reset_signals()
    _reseed()
    _threads(env)
    module = spec["module"]
    sys.argv = [module] + list(spec.get("args", []))  # runpy sets argv[0] to the file
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # As the interpreter does: the traceback, then death by SIGINT.
        _print_trainer_traceback()
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException:  # noqa: B902 - as the interpreter reports it
        _print_trainer_traceback()
        return 1
    return 0


def _print_trainer_traceback():
    """The traceback a cold `python -m` would print: without this file's
    frames and runpy's run_module (a cold start has runpy's own
    _run_module_as_main there), from runpy's _run_code down to the trainer."""
    import traceback
    etype, value, tb = sys.exc_info()
    while tb is not None:
        code = tb.tb_frame.f_code
        ours = code.co_filename == __file__
        runner = code.co_filename == runpy.__file__ and code.co_name in ("run_module", "_run_module_code")
        if not (ours or runner):
            break
        tb = tb.tb_next
    traceback.print_exception(etype, value, tb)


PR_SET_CHILD_SUBREAPER = 36


_LIBC = None  # the C library (ctypes), loaded once by the zygote


def _subreaper():
    """Orphans of our descendants re-parent to us, not to init."""
    global _LIBC
    import ctypes
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    if _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _list_since_baseline():
    """The modules loaded since the preloads (the zygote's own: what serves
    the socket), listed in the zygote, which forks a replica, so that the
    replica drops them without walking every loaded module's name: in a
    forked child each object a walk touches is a page copied (about 15 ms
    for torch's 1,600 modules on a virtual machine). Listed again only when
    the zygote has loaded more (it never unloads one)."""
    global _SINCE
    if _SINCE[1] != len(sys.modules):
        _SINCE = ([name for name in sys.modules if name not in _BASELINE], len(sys.modules))


def _exit_as_python(code):
    """Ends a forked replica as the interpreter ends: non-daemon threads
    joined, atexit handlers run, stdio flushed; then _exit (nothing of the
    zygote's own state runs twice)."""
    import atexit
    import threading
    try:
        threading._shutdown()  # noqa: SLF001 - what Py_FinalizeEx does first
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()  # noqa: SLF001
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


_SANDBOX = None  # libmlengine-sandbox.so (ctypes), when replicas are sandboxed


def _load_sandbox(path):
    global _SANDBOX
    import ctypes
    lib = ctypes.CDLL(path, use_errno=True)
    lib.mle_sandbox_enter.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong]
    lib.mle_sandbox_enter.restype = ctypes.c_int
    _SANDBOX = lib


def _enter_sandbox(path):
    """The replica's sandbox (docs/security.md), before anything of the job
    runs: its identity, cgroups and view. Never returns on failure: the
    replica ends with status 126, the reason on its stderr (its log)."""
    import ctypes
    error = ctypes.create_string_buffer(1024)
    if _SANDBOX.mle_sandbox_enter(path.encode(), error, len(error)) != 0:
        os.write(2, b"mlengine-replica: cannot start the replica in its sandbox: " + error.value + b"\n")
        os._exit(126)


# How long a connection may take to send its request (a shim sends it at
# once; one that does not is given up).
REQUEST_SECONDS = 10


def _read_request(conn):
    """The request on `conn`: one JSON line with the replica's stdin, stdout
    and stderr attached (SCM_RIGHTS); (spec or None, fds)."""
    import socket
    conn.settimeout(REQUEST_SECONDS)
    data, fds = b"", []
    while b"\n" not in data:
        msg, got, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        fds += got
        if not msg:
            return None, fds
        data += msg
    return json.loads(data.split(b"\n", 1)[0]), fds


def _replica_child(conn, listener, verdict, preloaded):
    """In the child the zygote forked for a connection: reads the request
    (only here: the zygote never holds a replica's environment, its token,
    its arguments or paths, so no later child inherits them), answers
    "cold: <why>" (the shim starts the replica itself) or "pid N", tells the
    zygote which through `verdict` (a pipe), then takes the replica's stdio,
    a session and subreaper of its own, its sandbox, and becomes it."""
    try:
        listener.close()
        try:
            spec, fds = _read_request(conn)
        except (OSError, ValueError):
            spec, fds = None, []
        if spec is None:
            os.write(verdict, b"x")
            os._exit(0)
        why = "a replica needs its stdin, stdout and stderr" if len(fds) != 3 else check_compatible(spec, preloaded)
        if not why and spec.get("sandbox") and _SANDBOX is None:
            why = "the warm interpreter was started without the sandbox library"
        if why:
            try:
                conn.sendall(("cold: %s\n" % why).encode())
            except OSError:
                pass
            os.write(verdict, b"c")
            os._exit(0)
        conn.sendall(b"pid %d\n" % os.getpid())
        os.write(verdict, b"p")
        conn.close()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        keep = set(range(3))
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) not in keep:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        os.setsid()
        _subreaper()
        if spec.get("sandbox"):
            _enter_sandbox(spec["sandbox"])
        code = become(spec)
    except BaseException:  # noqa: B902 - nothing may return into the zygote's loop
        import traceback
        traceback.print_exc()
        os._exit(1)
    _exit_as_python(code)


def _fork_for(conn, listener, preloaded):
    """Forks the child that reads `conn`'s request and becomes its replica
    (_replica_child); the zygote reads nothing of it. The child's pid once
    it has answered "pid N"; None when it answered "cold: <why>" or no
    request came (then it ends, and is reaped as any child)."""
    import select
    _list_since_baseline()
    verdict_r, verdict_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(verdict_r)
        _replica_child(conn, listener, verdict_w, preloaded)
    os.close(verdict_w)
    ready, _, _ = select.select([verdict_r], [], [], REQUEST_SECONDS + 5)
    said = os.read(verdict_r, 1) if ready else b""
    os.close(verdict_r)
    if said == b"p":
        return pid
    if not said:  # stuck: it goes
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return None


def serve(socket_path, preloaded, server=None):
    """The zygote: forks a replica per connection (while the process that
    started it lives; then it finishes the replicas it runs and ends). A connection sends one
    JSON spec line with the replica's stdin, stdout and stderr attached
    (SCM_RIGHTS) and gets "pid N" back, then "status S" (the raw wait
    status) when the replica ends. A connection that closes first kills its
    replica. Processes re-parented to us that are not replicas (what an
    ended replica left) are killed at once."""
    import selectors
    import socket
    _subreaper()
    try:
        os.unlink(socket_path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".tmp")
    os.rename(socket_path + ".tmp", socket_path)  # it appears once it answers
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    replicas = {}  # pid -> connection
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    lease_over = []
    signal.signal(signal.SIGHUP, lambda *_: lease_over.append(True))
    # The lease: while the server that started us lives, we serve; once it is
    # gone (our parent changed) or lets us go (SIGHUP) we take no more replicas and end with the
    # last one we run (they are jobs: they go on across a server restart).
    if server is None:
        server = os.getppid()
    inode = os.stat(socket_path).st_ino
    serving = True
    # What exists now (the preloads, this loop's own objects) is left out of
    # every collection: a replica's collector then never writes into the
    # zygote's objects (each a page copied), and the zygote's memory stays
    # shared with its replicas. What the loop makes later is collected.
    _list_since_baseline()
    gc.freeze()
    while not stop and (serving or replicas):
        if serving and (lease_over or os.getppid() != server):
            serving = False
            sel.unregister(listener)
            listener.close()
            try:
                if os.stat(socket_path).st_ino == inode:  # not yet a new zygote's
                    os.unlink(socket_path)
            except FileNotFoundError:
                pass
        for key, _ in sel.select(timeout=0.1):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                pid = _fork_for(conn, listener, preloaded)
                if pid is None:
                    conn.close()
                else:
                    replicas[pid] = conn
                    sel.register(conn, selectors.EVENT_READ)
                continue
            # A replica's shim: anything but data means it is gone.
            conn = key.fileobj
            try:
                gone = not conn.recv(4096)
            except OSError:
                gone = True
            if gone:
                for pid, c in list(replicas.items()):
                    if c is conn:
                        _kill_tree(pid)
                sel.unregister(conn)
                conn.close()
        # Only an ending replica leaves orphans (re-parented to us as it
        # exits), and killing one may hand us its children: look after exits.
        if _reap(replicas, sel):
            _kill_adopted(replicas)
    for pid in list(replicas):  # SIGTERM: asked to stop, replicas and all
        _kill_tree(pid)
    if serving:
        try:
            if os.stat(socket_path).st_ino == inode:
                os.unlink(socket_path)
        except FileNotFoundError:
            pass
    return 0


def _children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _kill_tree(pid):
    """SIGKILLs a replica and everything below it (it is a subreaper)."""
    frontier, tree = [pid], []
    while frontier:
        p = frontier.pop()
        tree.append(p)
        frontier.extend(_children_of(p))
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _reap(replicas, sel):
    """Reaps every child that ended (reporting replicas' status); whether any did."""
    ended = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended = True
        conn = replicas.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(b"status %d\n" % status)
            except OSError:
                pass
            try:
                sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            conn.close()


def _kill_adopted(replicas):
    """What an ended replica left re-parents to us: end it."""
    for pid in _children_of(os.getpid()):
        if pid not in replicas:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main(argv=None):
    parser = argparse.ArgumentParser(prog="mlengine._warm")
    parser.add_argument("--preload", default="")
    parser.add_argument("--serve", required=True, help="the Unix socket to fork replicas on")
    parser.add_argument("--server-pid", type=int, default=0,
                        help="serve while this process is our parent (mlengined); end at once otherwise")
    parser.add_argument("--sandbox-lib", default="", help="libmlengine-sandbox.so: forked replicas enter their sandbox")
    args = parser.parse_args(argv)
    server = args.server_pid or os.getppid()
    # A server killed while we start (the imports take a second or two)
    # would leave us serving an unlinked socket for nobody: check before and
    # after the imports, and from then on in every round of serve.
    if os.getppid() != server:
        return 0
    if args.sandbox_lib:
        _load_sandbox(args.sandbox_lib)
    names = [n for n in args.preload.split(",") if n]
    loaded = preload(names)
    if os.getppid() != server:
        return 0
    return serve(args.serve, loaded, server)


if __name__ == "__main__":
    sys.exit(main())
