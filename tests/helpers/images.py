"""The local image registry and mlengine's base images, for test suites.

A suite starts its own docker-registry (scripts/containers/registry.sh) on a
fixed port when it is free (see registry_port), with its blobs kept in
MLE_IMAGE_CACHE/registry so a second run (or the next suite: the suites that
use it never run at the same time, the Slurm one being RUN_SERIAL) pushes
nothing new, and pushes mlengine's base images into it
(scripts/containers/images.sh, which builds them with mmdebstrap the first
time on a machine). Test images are built on top with `podman build`.
"""

import contextlib
import os
import socket
import subprocess
import tempfile

SOURCE_DIR = os.environ.get("MLE_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = os.path.join(SOURCE_DIR, "scripts", "containers")
CACHE = os.environ.get("MLE_IMAGE_CACHE", "/var/cache/mlengine/images")
CONTAINERS_CONF = os.path.join(SCRIPTS, "containers.conf")
PYTORCH_DESCRIPTION = "Debian 12 python3 + torch 1.13 (CPU)"
# The container suites' trainer (its modes: see the file).
TRAINER_TASK = os.path.join(SOURCE_DIR, "tests", "e2e", "trainers", "container", "task.py")
# The TPU guide's image names: its placeholders (mirrored to the trainer) and
# PyTorch's XLA image (mirrored to mlengine/pytorch, simulated).
GUIDE_MASTER = "gcr.io/YOUR_PROJECT_ID/your-master-image-name:your-master-tag-name"
GUIDE_WORKER = "gcr.io/YOUR_PROJECT_ID/your-worker-image-name:your-worker-tag-name"
PYTORCH_XLA = "gcr.io/cloud-ml-public/training/pytorch-xla.1-11"


def podman_env():
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = CONTAINERS_CONF
    return env


def podman(*args, check=True, timeout=600):
    r = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The registry's port when it is free (MLE_REGISTRY_PORT overrides it). The
# same port every run matters: podman remembers which registry already holds
# a layer by the registry's host:port, and only then skips compressing and
# uploading it again (the pytorch base image is gigabytes: minutes of gzip).
# The suites that start a registry never run at the same time; a port taken
# by something else falls back to a free one.
STABLE_PORT = int(os.environ.get("MLE_REGISTRY_PORT", "48765"))


def registry_port():
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", STABLE_PORT))
            return STABLE_PORT
        except OSError:
            pass
    return free_port()


class Registry:
    """docker-registry on 127.0.0.1:<registry_port()> holding mlengine's base images."""

    def __init__(self, images=("python", "pytorch")):
        self.dir = os.path.join(CACHE, "registry")
        self.port = registry_port()
        self.host = f"127.0.0.1:{self.port}"
        subprocess.run([os.path.join(SCRIPTS, "registry.sh"), "start", self.dir, str(self.port)], check=True,
                       timeout=60)
        try:
            subprocess.run([os.path.join(SCRIPTS, "images.sh"), "push", self.host, *images], check=True, timeout=1500,
                           env=podman_env())
        except BaseException:
            self.stop()
            raise

    def stop(self):
        subprocess.run([os.path.join(SCRIPTS, "registry.sh"), "stop", self.dir], check=False, timeout=60)
        # The node's store keeps the images (their layers are shared) but not
        # names with this registry's port, which the next run will not reuse.
        r = podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False)
        for name in r.stdout.split():
            if name.startswith(self.host + "/") and not name.endswith(":<none>"):
                podman("untag", name, name, check=False)

    def ref(self, name):
        return f"{self.host}/{name}"

    def build(self, name, files, base="mlengine/python:bookworm", entrypoint=None, cmd=None):
        """Builds an image FROM a base in this registry with `files`
        ({path in the image: text}) and pushes it as REGISTRY/name; returns
        that reference."""
        with tempfile.TemporaryDirectory() as ctx:
            lines = [f"FROM {self.ref(base)}"]
            for i, (path, text) in enumerate(sorted(files.items())):
                with open(os.path.join(ctx, f"f{i}"), "w") as f:
                    f.write(text)
                lines.append(f"COPY f{i} {path}")
            if entrypoint:
                lines.append("ENTRYPOINT " + _json_list(entrypoint))
            if cmd is not None:
                lines.append("CMD " + _json_list(cmd))
            with open(os.path.join(ctx, "Containerfile"), "w") as f:
                f.write("\n".join(lines) + "\n")
            podman("build", "--quiet", "--network", "none", "--tls-verify=false", "-t", self.ref(name), ctx)
        podman("push", "--quiet", "--tls-verify=false", self.ref(name))
        return self.ref(name)

    def build_trainers(self, task_path):
        """The test trainer (tests/e2e/trainers/container/task.py) as two
        images: e2e/trainer:1 on the python base, e2e/torch-trainer:1 on the
        pytorch one; sets self.trainer and self.torch_trainer."""
        with open(task_path) as f:
            files = {"/app/task.py": f.read()}
        entry = ["python3", "/app/task.py"]
        self.trainer = self.build("e2e/trainer:1", files, entrypoint=entry)
        self.torch_trainer = self.build("e2e/torch-trainer:1", files, base="mlengine/pytorch:bookworm",
                                        entrypoint=entry)

    # The TPU guide's placeholder image names, mirrored to the test trainer.
    GUIDE_MIRRORS = "\n".join([
        "    - name: gcr.io/YOUR_PROJECT_ID/your-master-image-name",
        "      image: e2e/trainer:1",
        "    - name: gcr.io/YOUR_PROJECT_ID/your-worker-image-name",
        "      image: e2e/trainer:1",
    ]) + "\n"

    def server_config(self):
        """The `containers:` section of a server configuration using this
        registry, mirroring the guide's PyTorch XLA images (simulated)."""
        lines = ["containers:", f"  registry: {self.host}", "  mirrors:"]
        for version in ("1.11", "1.10"):
            lines += [
                f"    - name: gcr.io/cloud-ml-public/training/pytorch-xla.{version.replace('.', '-')}",
                "      image: mlengine/pytorch:bookworm",
                f"      tpu_tf_versions: [pytorch-{version}]",
                "      simulated: true",
                f"      description: {PYTORCH_DESCRIPTION}",
            ]
        return "\n".join(lines) + "\n"


@contextlib.contextmanager
def trainer_registry():
    """A Registry with the base images and the trainer images (build_trainers)."""
    r = Registry()
    try:
        r.build_trainers(TRAINER_TASK)
        yield r
    finally:
        r.stop()


def _json_list(words):
    import json
    return json.dumps(list(words))


def containers_of(run_dir):
    """Every container (running or not) labelled with a run directory."""
    r = podman("ps", "--all", "--format", "{{.Names}}", "--filter", f"label=mlengine.run={run_dir}")
    return [line for line in r.stdout.split() if line]


def containers_under(data_dir):
    """Every container (running or not) of a run under a server's data directory."""
    r = podman("ps", "--all", "--format", '{{.Names}} {{index .Labels "mlengine.run"}}')
    prefix = os.path.join(data_dir, "")
    return [line for line in r.stdout.splitlines() if len(line.split()) == 2 and line.split()[1].startswith(prefix)]
