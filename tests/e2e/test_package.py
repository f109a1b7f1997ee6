"""The Debian package and its systemd unit (docs/operations.md, "Install and
run as a service"): `make package`'s .deb is lintian clean, installs on a
fresh Debian 12 root file system booted with systemd as PID 1 in a podman
container, pulling only Debian's packages; the service starts when it
listens, runs a job, keeps a running job's replicas across `systemctl stop`
and adopts them at the next start, reloads its configuration, logs to the
journal, runs the walkthrough (with the package's Recommends: torch,
scikit-learn), and stops on removal keeping the data directory.

The root file system is the container suites' plain Debian one with torch,
numpy and scikit-learn (scripts/containers/images.sh base pytorch: mmdebstrap,
no mlengine file in it; `make test` builds it while it compiles) with systemd
added: installing torch's 400 packages in the booted container took three
minutes of the suite's four, every run. The package is installed with its
Recommends, which that system already satisfies (the test checks that apt
installs nothing else for them)."""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import SOURCE_DIR, TRAINERS

BUILD_DIR = os.environ.get("MLE_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")

IMAGES_SH = os.path.join(SOURCE_DIR, "scripts", "containers", "images.sh")
SYSTEM_PACKAGES = "systemd systemd-sysv dbus ca-certificates"
RECOMMENDS = ("python3-torch", "python3-sklearn", "python3-numpy")
CONTAINERS_CONF = os.path.join(SOURCE_DIR, "scripts", "containers", "containers.conf")
ENV = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)


def run(*cmd, timeout=600, check=True):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=ENV)
    if check:
        assert p.returncode == 0, f"{cmd} -> {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def deb():
    if os.geteuid() != 0:
        pytest.skip("building and installing the package needs root")
    run("cmake", "--build", BUILD_DIR, "--target", "debian_docs")
    for old in glob.glob(os.path.join(BUILD_DIR, "mlengine_*.deb")):
        os.remove(old)
    p = subprocess.run(["cpack", "-G", "DEB"], cwd=BUILD_DIR, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    debs = glob.glob(os.path.join(BUILD_DIR, "mlengine_*_amd64.deb"))
    assert len(debs) == 1, debs
    return debs[0]


@pytest.fixture(scope="module")
def booted(deb):
    """A fresh Debian 12 with torch, numpy and scikit-learn and systemd as
    PID 1, the package's directory at /deb."""
    base = run(IMAGES_SH, "base", "pytorch", timeout=1500).stdout.strip()
    key = hashlib.sha256(f"{base}\n{SYSTEM_PACKAGES}".encode()).hexdigest()[:16]
    image = f"localhost/mlengine-systemd-test:{key}"
    if run("podman", "image", "exists", image, check=False).returncode != 0:
        # A system as Debian installs it: without the base's dpkg excludes
        # (documentation, manual pages), and nothing of the base's image
        # settings.
        context = tempfile.mkdtemp(prefix="mle-systemd-test-")
        with open(os.path.join(context, "Containerfile"), "w") as f:
            f.write(f"FROM {base}\n"
                    "ENV PYTHONUNBUFFERED=\n"
                    "RUN rm -f /etc/dpkg/dpkg.cfg.d/99mmdebstrap && apt-get update -qq && "
                    "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
                    f"{SYSTEM_PACKAGES} && rm -rf /var/lib/apt/lists/*\n")
        try:
            run("podman", "build", "-q", "-t", image, context, timeout=900)
        finally:
            shutil.rmtree(context)
    name = f"mle-package-{os.getpid()}"
    run("podman", "run", "-d", "--name", name, "--runtime", "runc", "--systemd=always", "--privileged",
        "-v", f"{os.path.dirname(deb)}:/deb:ro", "-v", f"{os.path.join(TRAINERS, 'tasks')}:/root/tasks:ro",
        "-v", f"{os.path.join(SOURCE_DIR, 'examples', 'mnist')}:/root/mnist:ro",
        image, "/sbin/init")
    try:
        deadline = time.time() + 60
        state = ""
        while time.time() < deadline:
            state = run("podman", "exec", name, "systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.5)
        assert state in ("running", "degraded"), f"systemd did not boot in the container: {state}"
        yield name
    finally:
        run("podman", "rm", "-f", "-t", "0", name, check=False)


def sh(container, script, timeout=600, check=True):
    return run("podman", "exec", container, "bash", "-c",
               "export MLENGINE_CONFIG=/var/lib/mlengine/server.json MLENGINE_PROJECT=demo; set -e; " + script,
               timeout=timeout, check=check)


def state_of(container, job):
    return sh(container, f"mlengine jobs describe {job} --format='value(state)'").stdout.strip()


def wait_state(container, job, states, timeout=120):
    deadline = time.time() + timeout
    state = ""
    while time.time() < deadline:
        state = state_of(container, job)
        if state in states:
            return state
        time.sleep(0.5)
    raise AssertionError(f"{job} never reached {states} (last {state})\n"
                         + sh(container, "journalctl -u mlengined --no-pager | tail -40", check=False).stdout)


def submit(container, job, *args):
    sh(container, f"cd /tmp && rm -rf tasks-{job} && cp -r /root/tasks tasks-{job} && cd tasks-{job} && "
                  f"mlengine jobs submit training {job} --staging-bucket gs://demo-bucket --region us-central1 "
                  f"--runtime-version pytorch-1.13-cpu --package-path trainer --module-name trainer.task -- "
                  + " ".join(args))


def test_the_package_is_lintian_clean(deb):
    p = run("lintian", "--fail-on", "error,warning", deb, check=False)
    assert p.returncode == 0, p.stdout + p.stderr


def test_installed_on_debian_12_it_runs_as_a_systemd_service(booted, deb):
    c = booted
    # Only Debian's packages (the container reaches Debian's mirror and nothing else of ours).
    # With its Recommends, which are there already: apt installs the
    # package alone.
    for package in RECOMMENDS:
        assert package in run("dpkg-deb", "-f", deb, "Recommends").stdout
    installed = sh(c, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y "
                      f"/deb/{os.path.basename(deb)}", timeout=900).stdout
    new = installed.split("NEW packages will be installed:")[1].split("newly installed")[0].split()
    assert "mlengine" in new and not set(RECOMMENDS) & set(new), installed
    status = sh(c, "systemctl is-enabled mlengined; systemctl is-active mlengined; "
                   "systemctl show -p StatusText mlengined").stdout
    assert "enabled" in status and "\nactive" in status and "StatusText=Listening on http://127.0.0.1:8080" in status, status
    verify = sh(c, "systemd-analyze verify mlengined.service 2>&1 || true").stdout
    assert "mlengined.service" not in verify, verify  # no complaint about the unit
    assert sh(c, "stat -c %a /var/lib/mlengine").stdout.strip() == "700"
    assert "mlengined 0.9.0" in sh(c, "mlengined --version").stdout

    # A job through the installed CLI and service.
    sh(c, "mlengine storage mb gs://demo-bucket >/dev/null 2>&1")
    submit(c, "first", "--sleep", "1")
    assert wait_state(c, "first", {"SUCCEEDED", "FAILED"}) == "SUCCEEDED"
    assert "done" in sh(c, "mlengine jobs stream-logs first").stdout

    # A stop leaves a running job's replica alone; the next start adopts it.
    submit(c, "across", "--sleep", "8")
    wait_state(c, "across", {"RUNNING"})
    sh(c, "systemctl stop mlengined")
    assert sh(c, "systemctl is-active mlengined || true").stdout.strip() == "inactive"
    assert "--sleep 8" in sh(c, "pgrep -af trainer.task || true").stdout, "the replica did not outlive the stop"
    sh(c, "systemctl start mlengined")
    assert wait_state(c, "across", {"SUCCEEDED", "FAILED"}) == "SUCCEEDED"
    attempts = sh(c, "mlengine jobs describe across --format=json | python3 -c "
                     "'import json,sys; print(len(json.load(sys.stdin).get(\"attempts\", [])))'").stdout.strip()
    assert attempts == "1", f"the job ran again instead of being adopted: {attempts} attempts"

    # reload reads the configuration again; everything is in the journal.
    sh(c, "systemctl reload mlengined")
    deadline = time.time() + 30
    journal = ""
    while time.time() < deadline and "reloaded /etc/mlengine/mlengined.yaml" not in journal:
        time.sleep(0.5)
        journal = sh(c, "journalctl -u mlengined --no-pager").stdout
    assert "reloaded /etc/mlengine/mlengined.yaml" in journal, journal[-3000:]
    assert "listening on http://127.0.0.1:8080" in journal and "created projects/demo/jobs/first" in journal

    # The walkthrough (scripts/demo.sh's first job) against the installed
    # service, with the package's Recommends (torch, scikit-learn): the
    # digits staged, the TPU guide's access steps, BASIC_TPU on a simulated
    # TPU host, the model read back.
    sh(c, "rm -rf /tmp/mnist && cp -r /root/mnist /tmp/mnist && cd /tmp/mnist && "
          "python3 stage_data.py gs://demo-bucket/datasets/digits", timeout=300)
    identity = sh(c, "mlengine services identity create --service=tpu.googleapis.com --format='value(email)'").stdout
    sh(c, f"mlengine projects add-iam-policy-binding --member=serviceAccount:{identity.strip()} "
          "--role=roles/ml.serviceAgent >/dev/null")
    out = sh(c, "cd /tmp/mnist && mlengine jobs submit training walkthrough --staging-bucket=gs://demo-bucket "
                "--package-path=trainer --module-name=trainer.task --runtime-version=pytorch-1.13-cpu "
                "--region=us-central1 --scale-tier=BASIC_TPU --stream-logs -- --distribution_strategy=tpu "
                "--data_dir=gs://demo-bucket/datasets/digits --model_dir=gs://demo-bucket/walkthrough_output",
             timeout=900).stdout
    assert "SIMULATED" in out, out[-3000:]
    assert state_of(c, "walkthrough") == "SUCCEEDED"
    listed = sh(c, "mlengine storage ls gs://demo-bucket/walkthrough_output").stdout
    assert "model.pt" in listed and "metrics.json" in listed, listed
    metrics = json.loads(sh(c, "mlengine storage cat gs://demo-bucket/walkthrough_output/metrics.json").stdout)
    assert metrics["accuracy"] > 0.85, metrics

    # Removed: the service stops; the data directory stays.
    sh(c, "DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq mlengine")
    assert sh(c, "systemctl is-active mlengined || true").stdout.strip() in ("inactive", "unknown")
    assert sh(c, "test -f /var/lib/mlengine/mlengine.db && echo kept").stdout.strip() == "kept"
