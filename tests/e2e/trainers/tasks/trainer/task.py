"""The e2e suite's trainer: every flag is one behaviour, done in this order.

  --print-env VAR        print "VAR=<value>" (repeatable)
  --call-api "M PATH"    call mlengined's API (MLENGINE_API_ENDPOINT) with the
                         job's token (MLENGINE_ACCESS_TOKEN); print
                         "api M PATH -> STATUS" (repeatable)
  --lines N              print N numbered lines to stdout and one to stderr
  --scratch BYTES        write BYTES bytes to scratch.bin in the working directory
  --ignore-term          ignore SIGTERM (so only SIGKILL ends it)
  --child                start a child process that sleeps (600 s)
  --stubborn-child       start a child process that ignores SIGTERM and sleeps
  --daemon MODE          start a helper that escapes the replica's process
                         group and ignores SIGTERM: "setsid" (a child in a
                         session of its own) or "double-fork" (a classic
                         daemon: fork, setsid, fork, the middle one exits)
  --print-fds            print "fds: <fd>=<target> ..." of the open descriptors
  --append-pid URI       append this process's pid to the gs:// object URI
  --wait-for URI         wait (at most 120 s, printing a line every 0.5 s)
                         until the gs:// object URI exists
  --sleep S              sleep S seconds
  --barrier URI          workers write URI/<task>; the master waits until
                         every worker (WORLD_SIZE - 1) has written its file
  --write URI            write "done" to the gs:// object URI
  --fail N               print "boom" to stderr and exit with status N
  --raise MESSAGE        raise ValueError(MESSAGE) from check_shape()
then print "done" and exit 0. Unknown flags (e.g. --job-dir) are ignored.
"""

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from mlengine import gcs


def log(*parts, err=False):
    print(*parts, file=sys.stderr if err else sys.stdout, flush=True)


def parse(argv):
    opts = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--ignore-term", "--child", "--stubborn-child", "--print-fds"):
            opts[a[2:]] = True
        elif a.startswith("--") and i + 1 < len(argv):
            opts.setdefault(a[2:], []).append(argv[i + 1])
            i += 1
        i += 1
    return opts


def wait_until(predicate, what, timeout=120.0):
    deadline = time.time() + timeout
    n = 0
    while not predicate():
        if time.time() > deadline:
            log(f"gave up waiting for {what}", err=True)
            sys.exit(4)
        if n % 5 == 0:
            log(f"waiting for {what} ({n // 5})")
        n += 1
        time.sleep(0.1)


DAEMON_CODE = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"


def start_daemon(mode):
    """Starts a helper that ignores SIGTERM outside the replica's process
    group; returns its pid."""
    if mode == "setsid":
        return subprocess.Popen([sys.executable, "-c", DAEMON_CODE], start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL).pid
    if mode == "double-fork":
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.close(r)
            os.setsid()
            grandchild = os.fork()
            if grandchild == 0:
                os.close(w)
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.execv(sys.executable, [sys.executable, "-c", DAEMON_CODE])
            os.write(w, str(grandchild).encode())
            os._exit(0)
        os.close(w)
        pid = int(os.read(r, 64).decode())
        os.close(r)
        os.waitpid(middle, 0)
        return pid
    raise SystemExit(f"unknown --daemon mode {mode}")


def main(argv):
    opts = parse(argv)
    task = os.environ.get("MLENGINE_TASK_NAME", "?")
    log(f"started task={task} pid={os.getpid()} world_size={os.environ.get('WORLD_SIZE')} "
        f"rank={os.environ.get('RANK')} job={os.environ.get('CLOUD_ML_JOB_ID')}")
    for var in opts.get("print-env", []):
        log(f"{var}={os.environ.get(var, '<unset>')}")
    for call in opts.get("call-api", []):
        method, path = call.split(" ", 1)
        req = urllib.request.Request(os.environ["MLENGINE_API_ENDPOINT"] + path, method=method,
                                     data=b"{}" if method == "POST" else None,
                                     headers={"Authorization": "Bearer " + os.environ["MLENGINE_ACCESS_TOKEN"],
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        log(f"api {method} {path} -> {status}")
    for n in opts.get("scratch", []):
        with open("scratch.bin", "wb") as f:
            f.write(os.urandom(int(n)))
        log(f"wrote {n} bytes to scratch.bin in {os.getcwd()}")
    for n in opts.get("lines", []):
        for i in range(int(n)):
            log(f"{task} line {i}")
        log(f"{task} stderr line", err=True)
    if opts.get("ignore-term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        log("ignoring SIGTERM")
    if opts.get("child") or opts.get("stubborn-child"):
        code = "import signal, time\n"
        if opts.get("stubborn-child"):
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        child = subprocess.Popen([sys.executable, "-c", code + "time.sleep(600)\n"])
        log(f"child pid={child.pid}")
    for mode in opts.get("daemon", []):
        log(f"daemon pid={start_daemon(mode)} mode={mode}")
    if opts.get("print-fds"):
        fds = []
        for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
            try:
                fds.append(f"{fd}={os.readlink(f'/proc/self/fd/{fd}')}")
            except OSError:
                pass  # the directory listing's own descriptor, already closed
        log("fds: " + " ".join(fds))
    for uri in opts.get("append-pid", []):
        with gcs.open(uri, "a") as f:
            f.write(f"{os.getpid()}\n")
        log(f"appended pid {os.getpid()} to {uri}")
    for uri in opts.get("wait-for", []):
        wait_until(lambda: gcs.exists(uri), uri)
        log(f"gate opened: {uri}")
    for s in opts.get("sleep", []):
        log(f"sleeping {s} s")
        time.sleep(float(s))
    for uri in opts.get("barrier", []):
        if task.startswith("master"):
            want = int(os.environ.get("WORLD_SIZE", "1")) - 1
            wait_until(lambda: gcs.isdir(uri) and len(gcs.listdir(uri)) >= want, f"{want} workers at {uri}")
        else:
            with gcs.open(f"{uri.rstrip('/')}/{task}", "w") as f:
                f.write("here\n")
    for uri in opts.get("write", []):
        with gcs.open(uri, "w") as f:
            f.write("done\n")
        log(f"wrote {uri}")
    for n in opts.get("fail", []):
        log("boom", err=True)
        sys.exit(int(n))
    for message in opts.get("raise", []):
        check_shape(message)
    log("done")


def check_shape(message):
    raise ValueError(message)


if __name__ == "__main__":
    main(sys.argv[1:])
