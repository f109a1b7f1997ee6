"""A hostile trainer: tries what a user who may submit a job should not be
able to do on a shared mlengine, and prints one line per attempt:

  ATTACK <name> <blocked|OPEN> <detail>

then "REPORT <json>" with every result. The e2e suite (test_sandbox.py)
submits it as a package (cold and warm-forked) and checks every attack is
blocked and nothing outside the job changed.

  --server-pid PID        mlengined's pid (the test knows it)
  --other-bucket NAME     a bucket of another project (must be invisible)
  --own-bucket NAME       the job's own project's bucket (must be writable)
  --other-run DIR         another job's run directory (must be invisible)
  --hog MIB               then allocate MIB MiB, touching every page
  --spin THREADS:SECONDS  then spin THREADS threads; print "CPU <cpu s> <wall s>"
  --fork-bomb             then fork until refused; print "FORKED <n> <errno>"
"""

import ctypes
import errno
import json
import os
import signal
import sys
import threading
import time
import urllib.request

results = {}


def attempt(name, fn):
    """fn() returns a detail when the attack worked; raises when it was refused."""
    try:
        detail = fn()
        ok = detail is None
        detail = detail or ""
    except OSError as e:
        ok, detail = True, f"{type(e).__name__}: {e.strerror or e}"
    except Exception as e:  # noqa: BLE001 - any refusal counts
        ok, detail = True, f"{type(e).__name__}: {e}"
    results[name] = "blocked" if ok else "OPEN"
    print(f"ATTACK {name} {'blocked' if ok else 'OPEN'} {detail}", flush=True)


def read(path):
    with open(path, "rb") as f:
        return f"read {len(f.read())} bytes of {path}"


def arg(name, default=None):
    argv = sys.argv[1:]
    return argv[argv.index(name) + 1] if name in argv else default


def main():
    gcs = os.environ["MLENGINE_GCS_ROOT"]
    data = os.path.dirname(gcs)
    server_pid = int(arg("--server-pid", "0"))
    other_bucket = arg("--other-bucket")
    own_bucket = arg("--own-bucket")
    other_run = arg("--other-run")

    import grp
    import pwd
    print(f"uid={os.getuid()} gid={os.getgid()} groups={os.getgroups()} user={pwd.getpwuid(os.getuid()).pw_name}"
          f" group={grp.getgrgid(os.getgid()).gr_name}", flush=True)
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    attempt("run-as-root", lambda: "uid 0" if os.getuid() == 0 or os.geteuid() == 0 else None)
    # None effective, permitted or inheritable, and none left in the
    # bounding set that an exec could raise.
    caps = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")}
    attempt("capabilities", lambda: None if all(int(v, 16) == 0 for v in caps.values()) else str(caps))
    attempt("new-privileges", lambda: None if status["NoNewPrivs"].strip() == "1" else "no_new_privs is off")
    attempt("become-root", lambda: (os.setuid(0), "setuid(0) worked")[1])
    attempt("admin-token", lambda: read(os.path.join(data, "admin.token")))
    attempt("database", lambda: read(os.path.join(data, "mlengine.db")))
    attempt("data-dir", lambda: f"listed {os.listdir(data)}" if set(os.listdir(data)) - {"buckets", "runs", "envs"}
            else None)
    # The path to its own run exists (its work directory is bound there);
    # nothing beside it does.
    run = os.environ.get("MLENGINE_RUN_DIR") or os.path.dirname(os.path.dirname(os.getcwd()))  # cwd: RUN/TASK/work
    project_dir = os.path.dirname(run)
    attempt("other-projects-runs", lambda: f"listed {os.listdir(os.path.dirname(project_dir))}"
            if os.listdir(os.path.dirname(project_dir)) != [os.path.basename(project_dir)] else None)
    attempt("other-jobs-runs", lambda: f"listed {os.listdir(project_dir)}"
            if os.listdir(project_dir) != [os.path.basename(run)] else None)
    attempt("own-run-files", lambda: f"listed {sorted(os.listdir(run))}"
            if any(e != "sandbox" and not e.endswith("-replica-0") and "-replica-" not in e for e in os.listdir(run))
            else None)
    attempt("own-log-and-spec", lambda: read(os.path.join(run, "master-replica-0", "sandbox")))
    attempt("own-warm-spec", lambda: read(os.path.join(run, "master-replica-0", "warm-spec.json")))
    attempt("uploads", lambda: f"listed {os.listdir(os.path.join(gcs, '.uploads'))}")
    attempt("bucket-metadata", lambda: f"listed {os.listdir(os.path.join(gcs, '.meta'))}")
    if other_run:
        attempt("other-run-log", lambda: read(os.path.join(other_run, "master-replica-0", "log")))
    if other_bucket:
        attempt("other-bucket-read", lambda: f"listed {os.listdir(os.path.join(gcs, other_bucket))}")
        attempt("other-bucket-write", lambda: (open(os.path.join(gcs, other_bucket, "pwned"), "w").write("x"),
                                               "wrote into another project's bucket")[1])
    attempt("find-server", lambda: next((f"saw pid {p}: {c}" for p, c in processes() if "mlengined" in c), None))
    attempt("find-warm-interpreter", lambda: next((f"saw pid {p}: {c}" for p, c in processes()
                                                   if "mlengine._warm" in c), None))
    attempt("foreign-processes", lambda: next((f"saw pid {p} of uid {u}" for p, u in owners() if u != os.getuid()),
                                              None))
    if server_pid:
        attempt("server-environ", lambda: read(f"/proc/{server_pid}/environ"))
        attempt("signal-server", lambda: (os.kill(server_pid, 0), f"may signal {server_pid}")[1])
        attempt("ptrace-server", lambda: ptrace_attach(server_pid))
    attempt("write-usr", lambda: (open("/usr/pwned", "w"), "wrote /usr/pwned")[1])
    attempt("write-etc", lambda: (open("/etc/pwned", "w"), "wrote /etc/pwned")[1])
    # /etc/passwd and /etc/group are the sandbox's own (written on the view's
    # tmpfs, bound read-only): not writable, and nothing of them elsewhere.
    attempt("write-passwd", lambda: (open("/etc/passwd", "a").write("x::0:0::/:/bin/sh\n"), "appended to /etc/passwd")[1])
    attempt("staged-files", lambda: next((f"found /{e}" for e in os.listdir("/") if e.startswith(".")), None))
    attempt("mount", lambda: mount_tmpfs())
    attempt("host-root", lambda: f"listed {os.listdir('/root')}")
    attempt("host-home", lambda: f"listed {os.listdir('/home')}")
    attempt("metrics", lambda: metrics())
    # A warm-forked replica's memory is a copy of its warm interpreter's:
    # nothing of another replica (its token, its environment) may be there.
    attempt("foreign-tokens-in-memory", lambda: foreign_tokens_in_memory())
    # The cgroup trees name every job on the host (mlengine/PROJECT/JOB.TASK):
    # the view's /sys has none mounted (an empty directory at most).
    attempt("other-jobs-cgroups", lambda: f"listed {os.listdir('/sys/fs/cgroup')}" if os.listdir('/sys/fs/cgroup') else None)
    # What the job may do: its own bucket, its own /tmp, the API.
    if own_bucket:
        path = os.path.join(gcs, own_bucket, "sandbox-own", "written.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("mine\n")
        print(f"OWN wrote {path}", flush=True)
    with open("/tmp/scratch", "w") as f:
        f.write("x")
    print(f"TMP {sorted(os.listdir('/tmp'))}", flush=True)
    print("REPORT " + json.dumps(results), flush=True)

    hog = arg("--hog")
    if hog:
        chunks = []
        for i in range(int(hog)):
            chunks.append(bytearray(1 << 20))  # zero-filled: every page touched
            if i % 64 == 0:
                print(f"HOG {i} MiB", flush=True)
        print("HOG survived", flush=True)
    spin = arg("--spin")
    if spin:
        threads, seconds = (float(x) for x in spin.split(":"))
        start_cpu, start = time.process_time(), time.time()
        stop = time.time() + seconds

        def burn():
            x = 0
            while time.time() < stop:
                x += 1
        # Python's GIL would cap the threads at one core: burn in processes.
        pids = []
        for _ in range(int(threads)):
            pid = os.fork()
            if pid == 0:
                burn()
                os._exit(0)
            pids.append(pid)
        print("SPINNING", flush=True)
        for pid in pids:
            os.waitpid(pid, 0)
        usage = os.times()
        print(f"CPU {usage.children_user + usage.children_system:.2f} {time.time() - start:.2f}", flush=True)
    if "--fork-bomb" in sys.argv:
        children, err = [], 0
        r, w = os.pipe()
        while len(children) < 100000:
            try:
                pid = os.fork()
            except OSError as e:
                err = e.errno
                break
            if pid == 0:
                os.close(w)
                os.read(r, 1)  # until the bomb is over (the parent closes its end)
                os._exit(0)
            children.append(pid)
        print(f"FORKED {len(children)} {errno.errorcode.get(err, err)}", flush=True)
        os.close(w)
        for pid in children:
            os.waitpid(pid, 0)
    print("done", flush=True)


def foreign_tokens_in_memory():
    """mlengine's tokens ("mle1." and 43 base64url characters) anywhere in
    this process's readable memory other than its own."""
    import re
    own = os.environ.get("MLENGINE_ACCESS_TOKEN", "")
    found = set()
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    mem = os.open("/proc/self/mem", os.O_RDONLY)  # its own: read, never a fault
    try:
        for line in maps:
            parts = line.split()
            if "r" not in parts[1] or (len(parts) > 5 and parts[5].startswith("[v")):
                continue  # unreadable, or the kernel's own pages
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if hi - lo > 1 << 30:
                continue
            try:
                data = os.pread(mem, hi - lo, lo)
            except OSError:  # a region that cannot be read holds nothing to find
                continue
            found.update(m.group(0).decode() for m in re.finditer(rb"mle1\.[A-Za-z0-9_-]{43}", data))
    finally:
        os.close(mem)
    foreign = sorted(t for t in found if t != own)
    return f"found {len(foreign)} other tokens: {[t[:10] for t in foreign]}" if foreign else None


def processes():
    """Processes of other identities (a warm-forked replica's own command
    line is its warm interpreter's)."""
    for p in os.listdir("/proc"):
        if p.isdigit() and os.stat(f"/proc/{p}").st_uid != os.getuid():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    yield int(p), f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass


def owners():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                yield int(p), os.stat(f"/proc/{p}").st_uid
            except OSError:
                pass


def ptrace_attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
        return f"attached to {pid}"
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def mount_tmpfs():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None) == 0:
        return "mounted a tmpfs"
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def metrics():
    endpoint = os.environ.get("MLENGINE_API_ENDPOINT", "")
    try:
        with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
            return f"/metrics answered {r.status} without a token"
    except urllib.error.HTTPError as e:
        raise OSError(errno.EACCES, f"/metrics answered {e.code}") from None


if __name__ == "__main__":
    main()
