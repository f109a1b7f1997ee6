"""Fixtures of the Slurm suite: one local four-host Slurm cluster for the
whole session (scripts/slurm/cluster.sh in a temporary MLE_SLURM_DIR), and
mlengined with `--executor slurm` on it, driven through the real CLI.

Runs only where Slurm is installed (`sinfo` on PATH) and as root; elsewhere
every test here is skipped.

The e2e suite's helpers (Server, Cli, Names, the process table checks) are
reused, not copied: tests/e2e/conftest.py is loaded as the module
`mle_e2e_conftest` (see load_e2e), which the tests import by that name.

Fixtures:
  slurm_cluster  (session) (dir, env): env has SLURM_CONF and MLE_SLURM_DIR
  slurm_server   (module) mlengined --executor slurm, config/mlengined-slurm.yaml
  slurm_server_factory  make(config_text=None) -> a server of the test's own
                 (restart and requeue tests)
  names, cli     as in the e2e suite, against slurm_server

MLE_KEEP_SLURM_DIR=1 keeps the (stopped) cluster's directory, with
slurmctld.log and the slurmd logs, for a post-mortem.
"""
import importlib.util
import itertools
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(os.environ.get("MLE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SCRIPT = ROOT / "scripts" / "slurm" / "cluster.sh"
SLURM_CONFIG = ROOT / "config" / "mlengined-slurm.yaml"
E2E_CONFTEST = pathlib.Path(__file__).resolve().parents[1] / "e2e" / "conftest.py"

SKIP_REASON = "needs Slurm (apt-get install slurm-wlm munge) and root"
HAVE_SLURM = shutil.which("sinfo") is not None and os.geteuid() == 0


def load_e2e():
    """tests/e2e/conftest.py as the module `mle_e2e_conftest` (loaded once)."""
    name = "mle_e2e_conftest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, E2E_CONFTEST)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


e2e = load_e2e()
_counter = itertools.count()


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running four-node cluster: yields (MLE_SLURM_DIR, env with SLURM_CONF);
    stopped (and its directory removed) at the end of the session."""
    if not HAVE_SLURM:
        pytest.skip(SKIP_REASON)
    d = tempfile.mkdtemp(prefix="mle-slurm-test-")
    env = dict(os.environ, MLE_SLURM_DIR=d)
    env.pop("SLURM_CONF", None)
    try:
        out = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"cluster.sh start -> {out.returncode}\n{out.stdout}\n{out.stderr}"
        assert out.stdout.strip() == f"export SLURM_CONF={d}/slurm.conf", out.stdout
        yield d, dict(env, SLURM_CONF=f"{d}/slurm.conf")
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120)
        if not os.environ.get("MLE_KEEP_SLURM_DIR"):
            shutil.rmtree(d, ignore_errors=True)


def _make_slurm_server(root, cluster, config_text=None):
    _, env = cluster
    return e2e.Server(root, config_text or SLURM_CONFIG.read_text(), extra_args=["--executor", "slurm"],
                      extra_env={"SLURM_CONF": env["SLURM_CONF"], "MLENGINE_SLURM_TRACE": "1"})


@pytest.fixture(scope="module")
def slurm_server(slurm_cluster, tmp_path_factory):
    s = _make_slurm_server(tmp_path_factory.mktemp("slurm-server"), slurm_cluster)
    yield s
    problems = s.finish()
    assert not problems, "\n".join(problems) + "\n" + s.server_log()


@pytest.fixture
def slurm_server_factory(slurm_cluster, tmp_path):
    made = []

    def make(config_text=None):
        s = _make_slurm_server(tmp_path / f"server{len(made)}", slurm_cluster, config_text)
        made.append(s)
        return s
    yield make
    problems = []
    for s in made:
        problems += s.finish()
    assert not problems, "\n".join(problems)


@pytest.fixture
def names(request):
    n = next(_counter)
    base = re.sub(r"[^a-z0-9]", "", request.node.name.lower().replace("test", ""))[:16]
    return e2e.Names(base, f"{os.getpid() % 10000}{n}")


@pytest.fixture
def cli(slurm_server, tmp_path, names):
    return e2e.make_cli(slurm_server, tmp_path, names)
