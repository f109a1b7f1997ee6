"""mlengined --executor slurm, end to end: the real CLI, the real server, a
real four-node Slurm cluster (tpuhost1..4: 2 CPUs and GRES tpu:8 each; see
conftest.py and scripts/slurm/cluster.sh).

Every job is one Slurm job (a heterogeneous one when its roles differ) named
mle-<project>-<job>; its run directory RUN holds batch.sh, slurm_job_id,
slurm-<id>.out (whose first line is the launcher's task@node placement),
outcome, and per task <task>/log, exit and launch.

Nothing sleeps for a fixed time: waits poll with deadlines and fail with the
job's description and log, the server's log, and what Slurm says.
"""
import datetime
import glob
import importlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.skipif(shutil.which("sinfo") is None or os.geteuid() != 0,
                                reason="needs Slurm (apt-get install slurm-wlm munge) and root")

# tests/e2e/conftest.py, loaded under this name by this directory's conftest.py
# (not `from conftest import`: that name is ambiguous between test directories).
e2e = importlib.import_module("mle_e2e_conftest")

ROOT_DIR = pathlib.Path(e2e.SOURCE_DIR)
NODES = ["tpuhost1", "tpuhost2", "tpuhost3", "tpuhost4"]
POD_FLAGS = ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
             "--worker-machine-type", "cloud_tpu", "--worker-count", "1"]
LAUNCH_LINE = re.compile(r" launcher (?:\[\S+\] )?Slurm job (\d+) for projects/(\S+)/jobs/(\S+?):((?: \S+@\S+)+)")
TPU_WORKER_LINE = re.compile(r"TPU worker (\d+) of slice (\S+) on (\S+) \(hosts ([^)]*)\)")


# ---------------------------------------------------------------------------
# Slurm, seen from outside

def slurm(env, *args, timeout=60):
    p = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def state_of(j):
    """job_state is a string in Slurm 22.05's JSON, a list in later versions."""
    s = j.get("job_state")
    return s[0] if isinstance(s, list) and s else s


def squeue_jobs(env):
    """Every job squeue --json lists (finished ones stay for MinJobAge)."""
    return json.loads(slurm(env, "squeue", "--json"))["jobs"]


def het_leader(j):
    """The job id of a job, or of its heterogeneous job's leader."""
    hid = j.get("het_job_id")
    if isinstance(hid, dict):  # later versions: {"set": ..., "number": ...}
        hid = hid.get("number", 0)
    return hid if hid else j["job_id"]


def slurm_components(env, slurm_id):
    """The squeue entries of a Slurm job (every component of a hetjob)."""
    return [j for j in squeue_jobs(env) if het_leader(j) == slurm_id]


def node_states(env):
    out = slurm(env, "sinfo", "-N", "-h", "-o", "%N %t")
    return dict(line.split() for line in out.splitlines() if line.strip())


def wait_nodes_idle(env, timeout=60):
    deadline = time.time() + timeout
    states = node_states(env)
    while time.time() < deadline:
        states = node_states(env)
        if sorted(states) == NODES and all(s == "idle" for s in states.values()):
            return states
        time.sleep(0.2)
    raise AssertionError(f"the cluster's nodes are not all idle after {timeout}s: {states}")


# ---------------------------------------------------------------------------
# A job's run directory

def run_dir(cli, job):
    return cli.run_dir(job)


def slurm_id_of(cli, job):
    text = e2e._read(os.path.join(run_dir(cli, job), "slurm_job_id"))
    assert text and text.strip().isdigit(), f"no RUN/slurm_job_id for {job}\n{explain(cli, job)}"
    return int(text.strip())


def placement_of(cli, job, timeout=60, directory=None):
    """{task: node} from the launcher's first line in RUN/slurm-<id>.out (of
    attempt 1, or of the run in `directory`)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in glob.glob(os.path.join(directory or run_dir(cli, job), "slurm-*.out")):
            m = LAUNCH_LINE.search((e2e._read(path) or b"").decode(errors="replace"))
            if m:
                assert (m.group(2), m.group(3)) == (cli.project, job), m.group(0)
                return dict(item.split("@", 1) for item in m.group(4).split())
        time.sleep(0.1)
    raise AssertionError(f"the launcher never wrote its placement line\n{explain(cli, job)}")


def explain(cli, job):
    """What mlengine and Slurm say about the job, for failure messages."""
    text = cli.explain(job)
    rd = run_dir(cli, job)
    for name in ["batch.sh", "slurm_job_id", "outcome"] + sorted(
            os.path.basename(p) for p in glob.glob(os.path.join(rd, "slurm-*.out"))):
        data = e2e._read(os.path.join(rd, name))
        if data is not None:
            text += f"\n--- RUN/{name}\n{data.decode(errors='replace')[-3000:]}"
    try:
        env = dict(os.environ, SLURM_CONF=cli.server.env["SLURM_CONF"])
        text += "\n--- squeue\n" + subprocess.run(["squeue", "-t", "all"], env=env, capture_output=True,
                                                  text=True, timeout=30).stdout
        text += "--- sinfo\n" + subprocess.run(["sinfo", "-N"], env=env, capture_output=True, text=True,
                                               timeout=30).stdout
    except Exception as e:  # pylint: disable=broad-except
        text += f"\n(squeue/sinfo failed: {e})"
    return text


def task_log(cli, job, task):
    return [e.get("message", "") for e in cli.server.logs(cli.project, job, task)]


def read_object(cli, bucket, name):
    data = e2e._read(cli.server.bucket_path(bucket, name))
    return None if data is None else data.decode()


wait_for = e2e.wait_for


def rfc3339(text):
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", text)
    assert m, text
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + float("0." + (m.group(2) or "0"))


# ---------------------------------------------------------------------------
# The TPU guide's MNIST walkthrough, through Slurm

def test_mnist_walkthrough_basic_tpu(cli, names, slurm_cluster):
    _, env = slurm_cluster
    bucket = f"gs://{cli.bucket}"
    job = names.job("tpu_mnist")
    r = cli.submit_mnist(job, "--scale-tier=BASIC_TPU", "--stream-logs", args=["--distribution_strategy=tpu"],
                         timeout=240)
    assert r.rc == 0, f"{r}\n{explain(cli, job)}"
    desc = cli.describe(job)
    assert desc["state"] == "SUCCEEDED", explain(cli, job)

    # It ran as a Slurm job of this name, which completed.
    sid = slurm_id_of(cli, job)
    comps = slurm_components(env, sid)
    assert comps and all(j["name"] == f"mle-{cli.project}-{job}" for j in comps), comps
    assert {state_of(j) for j in comps} == {"COMPLETED"}, comps

    ls = cli.ok("storage", "ls", f"{bucket}/{job}_output")
    listed = {line.rstrip("/").rsplit("/", 1)[-1] for line in ls.out.split()}
    assert {"model.pt", "metrics.json"} <= listed, ls
    metrics = json.loads(cli.ok("storage", "cat", f"{bucket}/{job}_output/metrics.json").out)
    assert metrics["accuracy"] > 0.85, metrics
    assert isinstance(metrics.get("tpu"), dict) and metrics["tpu"].get("simulated") is True, metrics

    # The TPU host ran as tpu-replica-0 on the master's node; the master found it.
    placement = placement_of(cli, job)
    assert placement["master-replica-0"] == placement["tpu-replica-0"], placement
    tpu_lines = [m for m in task_log(cli, job, "tpu-replica-0") if TPU_WORKER_LINE.search(m)]
    assert tpu_lines, explain(cli, job)
    port = re.search(r"listening on port (\d+)", tpu_lines[0]).group(1)
    master = task_log(cli, job, "master-replica-0")
    found = [m for m in master if "Found TPU worker" in m]
    assert found and f":{port}" in found[0], f"the master never found the TPU worker on port {port}:\n" + \
        "\n".join(master)
    assert any("SIMULATED" in m for m in master), "\n".join(master)


# ---------------------------------------------------------------------------
# The distributed example: master + 2 workers on three Slurm nodes

def test_mnist_distributed_across_nodes(cli, names):
    bucket = f"gs://{cli.bucket}"
    job = names.job("dist")
    r = cli.submit_mnist(job, "--config=config_distributed.yaml", args=["--epochs=3"], timeout=120)
    assert r.rc == 0, r
    cli.wait_state(job, {"SUCCEEDED"}, timeout=150)

    tasks = ["master-replica-0", "worker-replica-0", "worker-replica-1"]
    placement = placement_of(cli, job)
    assert sorted(placement) == tasks, placement
    assert len(set(placement.values())) == 3 and set(placement.values()) <= set(NODES), \
        f"the three replicas did not run on three different Slurm nodes: {placement}"

    finals = {}
    for rank, task in enumerate(tasks):
        lines = task_log(cli, job, task)
        assert any(f"[rank {rank}/3]" in m for m in lines), f"{task} is not rank {rank} of 3:\n" + "\n".join(lines)
        acc = [re.search(r"final test accuracy ([0-9.]+)", m) for m in lines]
        acc = [m.group(1) for m in acc if m]
        assert len(acc) == 1, f"{task}: {acc}\n" + "\n".join(lines)
        finals[task] = acc[0]
    assert len(set(finals.values())) == 1, f"the ranks disagree on the final test accuracy: {finals}"
    metrics = json.loads(cli.ok("storage", "cat", f"{bucket}/{job}_output/metrics.json").out)
    assert metrics["world_size"] == 3 and f"{metrics['accuracy']:.4f}" == finals["master-replica-0"], metrics


def test_googles_node_client_runs_a_vertex_job_of_two_pools_on_two_nodes(cli, names):
    """Vertex AI's googleapis Node.js client, unchanged but for the endpoint
    (tests/vertex_client/run_job.js): a CustomJob of two worker pools runs
    on two Slurm nodes to JOB_STATE_SUCCEEDED, all-reducing over gloo."""
    job = e2e.run_node_job(cli.server, "googleapis", cli.project, f"gloo:{cli.bucket}", timeout=150)
    job_id = job["name"].rsplit("/", 1)[1]
    assert job["state"] == "JOB_STATE_SUCCEEDED", (job, explain(cli, job_id))
    placement = placement_of(cli, job_id)
    assert sorted(placement) == ["master-replica-0", "worker-replica-0"], placement
    assert len(set(placement.values())) == 2 and set(placement.values()) <= set(NODES), placement
    lines = [m for t in placement for m in task_log(cli, job_id, t) if m.startswith("POOL ")]
    assert sorted(lines) == ["POOL workerpool0 ALLREDUCE 3.0 of 2", "POOL workerpool1 ALLREDUCE 3.0 of 2"], lines


# ---------------------------------------------------------------------------
# A TPU v3 pod slice of 32 cores: four TPU hosts at once

def test_tpu_pod_slice_gets_four_hosts(cli, names):
    job = names.job("pod")
    gate = f"gs://{cli.bucket}/{job}/gate"
    cli.ok("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           *POD_FLAGS, "--worker-accelerator", "type=tpu-v3-pod,count=32",
           "--", "--print-env", "TPU_WORKER_HOSTNAMES", "--print-env", "TPU_ACCELERATOR_TYPE", "--wait-for", gate)
    cli.wait_state(job, {"RUNNING"}, timeout=60)

    nodes, ids = [], []
    for i in range(4):
        task = f"tpu-replica-{i}"
        cli.wait_log(job, "TPU worker", task=task, timeout=30)
        lines = [TPU_WORKER_LINE.search(m) for m in task_log(cli, job, task)]
        lines = [m for m in lines if m]
        assert len(lines) == 1, f"{task}: {lines}\n{explain(cli, job)}"
        worker_id, accel, node, hosts = lines[0].groups()
        assert accel == "v3-32", lines[0].group(0)
        assert sorted(hosts.split(",")) == NODES, f"{task} does not list the four hosts: {lines[0].group(0)}"
        launch = json.loads(e2e._read(os.path.join(run_dir(cli, job), task, "launch")))
        assert launch["env"]["TPU_WORKER_ID"] == str(i) == worker_id, (task, launch["env"], lines[0].group(0))
        nodes.append(node)
        ids.append(int(worker_id))
    assert ids == [0, 1, 2, 3]
    assert sorted(nodes) == NODES, f"the four TPU workers are not on four distinct nodes: {nodes}"

    placement = placement_of(cli, job)
    assert [placement[f"tpu-replica-{i}"] for i in range(4)] == nodes, placement
    assert placement["master-replica-0"] == nodes[0], f"the master is not beside TPU worker 0: {placement}"
    # The master may print later than the TPU workers did (it starts beside worker 0).
    cli.wait_log(job, "TPU_ACCELERATOR_TYPE=", task="master-replica-0", timeout=30)
    master = task_log(cli, job, "master-replica-0")
    hostnames = [m.split("=", 1)[1] for m in master if m.startswith("TPU_WORKER_HOSTNAMES=")]
    assert hostnames and sorted(hostnames[0].split(",")) == NODES, "\n".join(master)
    assert "TPU_ACCELERATOR_TYPE=v3-32" in master, "\n".join(master)

    cli.open_gate(gate)
    cli.wait_state(job, {"SUCCEEDED"}, timeout=60)


# ---------------------------------------------------------------------------
# Larger than the cluster: refused at once; too large for now: QUEUED with
#   Slurm's reason, and run once room is made

@pytest.mark.parametrize("flags,needs", [
    (POD_FLAGS + ["--worker-accelerator", "type=tpu-v3-pod,count=128"], "16 TPU hosts"),
    (["--scale-tier", "custom", "--master-machine-type", "n1-standard-4", "--worker-machine-type", "n1-standard-4",
      "--worker-count", "5"], "5 nodes"),
], ids=["tpu_v3_pod_128", "custom_5_workers"])
def test_larger_than_the_cluster_is_refused(cli, names, flags, needs):
    job = names.job("big")
    r = cli.submit(job, *flags)
    assert r.rc != 0, r
    assert "FAILED_PRECONDITION" in r.err, r
    assert needs in r.err, r
    # It names what the cluster has.
    assert "The cluster has 4 nodes" in r.err, r
    for node in NODES:
        assert f"{node} (2 CPUs" in r.err and "tpu:8" in r.err, r
    gone = cli("jobs", "describe", job)
    assert gone.rc != 0 and "NOT_FOUND" in gone.err, gone


def test_queued_behind_a_pod_then_runs(cli, names, slurm_cluster):
    _, env = slurm_cluster
    holder = names.job("holder")
    cli.ok("jobs", "submit", "training", holder, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           *POD_FLAGS, "--worker-accelerator", "type=tpu-v3-pod,count=32",
           "--", "--wait-for", f"gs://{cli.bucket}/{holder}/never")
    cli.wait_state(holder, {"RUNNING"}, timeout=60)

    # One TPU v2 host: every node's tpu:8 is held by the pod.
    queued = names.job("queued")
    cli.ok("jobs", "submit", "training", queued, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           "--scale-tier", "basic-tpu", "--", "--print-env", "TPU_WORKER_HOSTNAMES")

    def waiting_with_reason():
        d = cli.describe(queued)
        m = re.match(r"^Waiting in the Slurm queue: (.+)$", d.get("errorMessage", ""))
        return d if d["state"] == "QUEUED" and m else None
    desc = wait_for(waiting_with_reason, f"{queued} QUEUED with Slurm's reason", 30, lambda: explain(cli, queued))
    assert re.search(r"Resources|Priority", desc["errorMessage"]), desc
    sid = slurm_id_of(cli, queued)
    assert {state_of(j) for j in slurm_components(env, sid)} == {"PENDING"}, slurm_components(env, sid)
    assert cli.describe(holder)["state"] == "RUNNING", explain(cli, holder)

    cli.ok("jobs", "cancel", holder)
    ended = cli.wait_state(holder, {"CANCELLED"}, timeout=60)
    done = cli.wait_state(queued, {"SUCCEEDED"}, timeout=60)
    assert rfc3339(done["startTime"]) >= rfc3339(ended["endTime"]) - 1.0, (ended, done)
    assert any(m.startswith("TPU_WORKER_HOSTNAMES=tpuhost") for m in task_log(cli, queued, "master-replica-0")), \
        explain(cli, queued)


# ---------------------------------------------------------------------------
# Cancel of a running multi-node job

# A job of one replica runs it in the batch step itself (no srun step); one
# with more runs an srun step per role: a cancel stops both kinds.
@pytest.mark.parametrize("workers", [1, 0])
def test_cancel_running_job(cli, names, slurm_cluster, workers):
    _, env = slurm_cluster
    job = names.job(f"cancel{workers}")
    tasks = ["master-replica-0"] + [f"worker-replica-{i}" for i in range(workers)]
    worker_flags = ["--worker-machine-type", "n1-standard-4", "--worker-count", str(workers)] if workers else []
    cli.ok("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           "--scale-tier", "custom", "--master-machine-type", "n1-standard-4", *worker_flags,
           "--", "--child", "--daemon", "setsid", "--daemon", "double-fork", "--sleep", "300")
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    for task in tasks:
        cli.wait_log(job, "sleeping 300", task=task, timeout=30)
        # Helpers that left the replica's session ignore SIGTERM: the shim
        # (a subreaper) keeps them in the step, so Slurm's stop reaches them.
        assert len([e for e in cli.wait_log(job, "daemon pid=", task=task, timeout=30)
                    if "daemon pid=" in e["message"]]) == 2
    sid = slurm_id_of(cli, job)
    rd = run_dir(cli, job)
    assert e2e.procs_of_job(rd, job), "no process of the running job found (the check below would prove nothing)"
    out = "".join((e2e._read(p) or b"").decode(errors="replace") for p in glob.glob(os.path.join(rd, "slurm-*.out")))
    assert ("master-replica-0 runs in the batch step" in out) == (workers == 0), out

    # What the web console shows of it: the replicas on the nodes Slurm gave
    # them, and the cluster as Slurm's nodes with this job placed on them.
    replicas = cli.server.get_json(f"/v1/projects/{cli.project}/jobs/{job}/replicas")["replicas"]
    placed = {r["taskName"]: r["host"] for r in replicas}
    assert sorted(placed) == tasks, replicas
    assert set(placed.values()) <= set(NODES), replicas
    assert all(r["state"] == "RUNNING" for r in replicas), replicas
    cluster = cli.server.get_json("/mlengine/v1/cluster")
    assert cluster["executor"] == "slurm", cluster
    hosts = {h["name"]: h for h in cluster["hosts"]}
    assert set(NODES) <= set(hosts), cluster
    assert all(hosts[n]["state"] for n in NODES), cluster
    on = {(r["taskName"], h["name"]) for h in cluster["hosts"] for r in h.get("replicas", [])
          if r.get("jobId") == job}
    assert on == {(t, n) for t, n in placed.items()}, cluster
    queue = {q["project"]: q for q in cluster["queues"]}
    assert queue[cli.project]["running"] >= 1, cluster

    cli.ok("jobs", "cancel", job)
    cli.wait_state(job, {"CANCELLED"}, timeout=60)
    comps = slurm_components(env, sid)
    assert all(state_of(j) not in ("RUNNING", "PENDING") for j in comps), \
        f"mlengine says CANCELLED, Slurm says {[(j['job_id'], state_of(j)) for j in comps]}\n{explain(cli, job)}"
    # Nothing of it runs: no process naming its run directory, and none (the
    # trainer's --child and daemons included) with CLOUD_ML_JOB_ID=<job> in its environment.
    left = e2e.wait_no_procs(lambda: e2e.procs_of_job(rd, job), timeout=15)
    assert not left, f"processes of the cancelled job are left:\n{e2e.describe_procs(left)}\n{explain(cli, job)}"
    # Slurm settles on CANCELLED (or forgets the job).
    wait_for(lambda: all(state_of(j) == "CANCELLED" for j in slurm_components(env, sid)),
             f"Slurm job {sid} CANCELLED", 30, lambda: explain(cli, job))


# ---------------------------------------------------------------------------
# mlengined restarted (kill -9) mid-job

@pytest.mark.parametrize("when", ["running", "just_submitted", "id_not_recorded"])
def test_server_restart_mid_job(slurm_server_factory, slurm_cluster, names, tmp_path, when):
    """id_not_recorded: killed as if between its sbatch and the record of
    the Slurm job id (RUN/submitting without RUN/slurm_job_id): the new
    server finds the job in Slurm by its name (squeue's listing by --name)
    and follows it instead of submitting it again."""
    _, env = slurm_cluster
    server = slurm_server_factory()
    cli = e2e.make_cli(server, tmp_path, names)
    job = names.job("restart")
    pids = f"{job}/pids"
    gate = f"gs://{cli.bucket}/{job}/gate"
    cli.ok("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
           "--worker-machine-type", "n1-standard-4", "--worker-count", "1",
           "--", "--append-pid", f"gs://{cli.bucket}/{pids}", "--wait-for", gate)

    def appended():
        text = read_object(cli, cli.bucket, pids) or ""
        return len(text.splitlines()) >= 2
    if when in ("running", "id_not_recorded"):
        cli.wait_state(job, {"RUNNING"}, timeout=60)
        wait_for(appended, "both replicas appended their pid", 30, lambda: explain(cli, job))
    server.kill()
    if when == "id_not_recorded":
        run = run_dir(cli, job)
        assert os.path.exists(os.path.join(run, "submitting")), explain(cli, job)
        os.remove(os.path.join(run, "slurm_job_id"))
    server.start()

    wait_for(appended, "both replicas appended their pid", 60, lambda: explain(cli, job))
    cli.open_gate(gate)
    cli.wait_state(job, {"SUCCEEDED"}, timeout=60)

    lines = (read_object(cli, cli.bucket, pids) or "").split()
    assert len(lines) == 2 and len(set(lines)) == 2, \
        f"the job's two replicas should each have run once; the pid log says {lines}\n{explain(cli, job)}"
    name = f"mle-{cli.project}-{job}"
    leaders = {het_leader(j) for j in squeue_jobs(env) if j["name"] == name}
    assert leaders == {slurm_id_of(cli, job)}, f"Slurm jobs named {name}: {leaders}\n{explain(cli, job)}"


# ---------------------------------------------------------------------------
# maxRunningTime: mlengine's limit acts (Slurm's --time is a minute later)

def test_replicas_hold_a_token_of_their_account(cli, names, slurm_cluster):
    """On Slurm too, a job's replicas get a token of the account it runs as
    (here the project's default account, which holds no role: the API
    answers it 403), and the token dies with the job."""
    jobs = f"/v1/projects/{cli.project}/jobs"
    job = names.job("token")
    r = cli.submit(job, "--scale-tier", "basic",
                   args=["--print-env", "MLENGINE_SERVICE_ACCOUNT", "--print-env", "MLENGINE_ACCESS_TOKEN",
                         "--call-api", f"GET {jobs}"])
    assert r.rc == 0, r
    cli.wait_state(job, {"SUCCEEDED"}, timeout=90)
    cli.wait_log(job, "MLENGINE_SERVICE_ACCOUNT=service-", timeout=10)
    entries = cli.wait_log(job, f"api GET {jobs} -> 403", timeout=10)
    token = next(e["message"].split("MLENGINE_ACCESS_TOKEN=", 1)[1].strip()
                 for e in entries if "MLENGINE_ACCESS_TOKEN=" in e["message"])
    r = cli("jobs", "list", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "UNAUTHENTICATED" in r.err, r


def test_max_running_time_cancels_the_slurm_job(cli, names, slurm_cluster, tmp_path):
    _, env = slurm_cluster
    config = tmp_path / "sched.yaml"
    config.write_text("trainingInput:\n  scheduling:\n    maxRunningTime: 3s\n    priority: 700\n")
    job = names.job("maxrun")
    r = cli.submit(job, f"--config={config}", args=["--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    batch = open(os.path.join(run_dir(cli, job), "batch.sh")).read()
    assert "#SBATCH --time=2\n" in batch and "#SBATCH --nice=300\n" in batch, batch  # 3 s + 1 min, rounded up
    desc = cli.wait_state(job, {"CANCELLED"}, timeout=60)
    assert "maxRunningTime" in desc.get("errorMessage", ""), desc
    sid = slurm_id_of(cli, job)
    wait_for(lambda: all(state_of(j) == "CANCELLED" for j in slurm_components(env, sid)),
             f"Slurm job {sid} CANCELLED", 30, lambda: explain(cli, job))


# ---------------------------------------------------------------------------
# A host dies mid-job (last: it takes a node away for a while)

def _node_processes(slurm_dir, conf, node):
    """The processes of `node` of this cluster: its slurmd (`-N node -f conf`),
    its slurmstepds (which hold slurmd-<node>.log open), and the tasks they
    run (SLURMD_NODENAME=node and SLURM_CONF=conf in their environment)."""
    log = os.path.join(slurm_dir, f"slurmd-{node}.log")
    slurmd, stepds, tasks = [], [], []
    for pid, cmd, environ, _ in e2e.processes():
        if cmd[:1] and os.path.basename(cmd[0]) == "slurmd" and " ".join(cmd[1:]).find(f"-N {node} -f {conf}") >= 0:
            slurmd.append(pid)
        elif cmd[:1] and cmd[0].startswith("slurmstepd"):
            try:
                fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                continue
            if log in fds:
                stepds.append(pid)
        elif f"SLURMD_NODENAME={node}" in environ and f"SLURM_CONF={conf}" in environ:
            tasks.append(pid)
    return slurmd, stepds, tasks


def _kill_node(slurm_dir, conf, node):
    """The host dies: SIGKILL its slurmd, its slurmstepds and their tasks."""
    slurmd, stepds, tasks = _node_processes(slurm_dir, conf, node)
    assert len(slurmd) == 1 and stepds and tasks, (node, slurmd, stepds, tasks)
    for pid in slurmd + stepds + tasks:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_lost_host_is_retried_on_another_node(cli, names, slurm_cluster):
    """SIGKILL the slurmd of a worker's node and everything running there, as
    if the host died. What happens (Slurm 22.05, SlurmdTimeout=10): srun does
    not notice its remote step dying; the job keeps RUNNING until slurmctld
    finds the node silent (~SlurmdTimeout + a ping round, ~25 s), sets it DOWN
    and ends the whole job as NODE_FAIL, killing the batch script (so the
    launcher writes no outcome). The attempt is lost to the infrastructure
    (docs/interruptions.md): recorded as INFRASTRUCTURE naming the lost node
    and replica, and run again (scheduling.max_retries, 2 by default) as
    attempt 2, which Slurm places on the nodes still up. Nothing of attempt 1
    may be left."""
    slurm_dir, env = slurm_cluster
    conf = env["SLURM_CONF"]
    job = names.job("lost")
    cli.ok("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
           "--worker-machine-type", "n1-standard-4", "--worker-count", "2", "--", "--sleep", "300")
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    for task in ("master-replica-0", "worker-replica-0", "worker-replica-1"):
        cli.wait_log(job, "sleeping 300", task=task, timeout=30)
    placement = placement_of(cli, job)
    node = placement["worker-replica-1"]
    assert node != placement["master-replica-0"], placement
    rd = run_dir(cli, job)
    killed_at = None
    try:
        _kill_node(slurm_dir, conf, node)
        killed_at = time.time()

        # Bounded: SlurmdTimeout (10 s in cluster.sh) plus slurmctld's ping
        # round and mlengined's poll; about 25 s here.
        desc = e2e.wait_for(lambda: (lambda d: d if d.get("attempts") else None)(cli.describe(job)),
                            "attempt 1 to end", timeout=90, on_fail=lambda: explain(cli, job))
        took = time.time() - killed_at
        first = desc["attempts"][0]
        assert first["end"] == "INFRASTRUCTURE", desc
        assert sorted(first["hosts"]) == sorted(set(placement.values())), (first, placement)
        message = first.get("message", "")
        assert node in message and "worker-replica-1" in message and "stopped responding" in message, (
            f"attempt 1 ended {took:.0f}s after {node} died, but its message does not name the lost node "
            f"({node}) and its replica (worker-replica-1): {message!r}\n{explain(cli, job)}")
        assert "tpuhost" not in message.replace(node, ""), f"a healthy node is blamed: {message!r}"
        left = e2e.wait_no_procs(lambda: e2e.procs_of_job(rd, job), timeout=20)
        assert not left, f"processes of attempt 1 are left:\n{e2e.describe_procs(left)}\n{explain(cli, job)}"

        # Attempt 2 runs on the nodes still up.
        cli.wait_state(job, {"RUNNING"}, timeout=90)
        again = placement_of(cli, job, directory=rd + "@2")
        assert node not in again.values(), (node, again)
        cli.ok("jobs", "cancel", job)
        done = cli.wait_state(job, {"CANCELLED"}, timeout=60)
        assert [(a["attempt"], a["end"]) for a in done["attempts"]] == [(1, "INFRASTRUCTURE"), (2, "CANCELLED")], done
    finally:
        # The host comes back: a fresh slurmd; Slurm returns the node to service.
        if killed_at is not None:
            subprocess.run(["slurmd", "-N", node, "-f", conf], env=env, check=True, timeout=60)
            _remove_cgroups_of_the_lost_host(job)
        wait_nodes_idle(env, timeout=60)


def _remove_cgroups_of_the_lost_host(job):
    """The killed node's launcher could not remove the cgroups it made for
    its replica (a real host takes them down with it when it dies); here
    the host's kernel stays, so the test removes them: empty, as asserted
    above (a group with a process in it refuses rmdir)."""
    projects = set()
    for controller in glob.glob("/sys/fs/cgroup/*"):
        for top, _, _ in os.walk(controller, topdown=False):
            # A replica's group is PROJECT/JOB.TASK (executor/sandboxing.h).
            if "/mlengine/" in top and os.path.basename(top).startswith(job + "."):
                projects.add(os.path.dirname(top))
                try:
                    os.rmdir(top)
                except OSError:
                    pass
    for project in projects:  # once its last job's group went
        try:
            os.rmdir(project)
        except OSError:
            pass


def test_lost_host_with_requeue_runs_the_job_again(slurm_server_factory, slurm_cluster, names, tmp_path):
    """With `slurm.requeue: true` a lost host does not fail the job: Slurm
    requeues it, mlengine shows it QUEUED again (saying why), and it runs to
    SUCCEEDED on the nodes that are left."""
    slurm_dir, env = slurm_cluster
    conf = env["SLURM_CONF"]
    config = e2e_config_with_requeue()
    server = slurm_server_factory(config)
    cli = e2e.make_cli(server, tmp_path, names)
    job = names.job("requeue")
    gate = f"gs://{cli.bucket}/{job}/gate"
    cli.ok("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", e2e.REGION,
           "--runtime-version", e2e.RUNTIME, "--package-path", e2e.TASKS_PKG, "--module-name", "trainer.task",
           "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
           "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--", "--wait-for", gate)
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    placement = placement_of(cli, job)
    node = placement["worker-replica-0"]
    killed = False
    try:
        _kill_node(slurm_dir, conf, node)
        killed = True
        queued = cli.wait_state(job, {"QUEUED"}, timeout=90)
        assert queued.get("errorMessage", "").startswith("Slurm requeued the job (once"), queued
        # Slurm holds a requeued batch job back for a while (BeginTime); an
        # operator may release it sooner, which keeps this test short — once
        # the first run is cleaned up on the surviving node (else Slurm
        # refuses the start: "Job credential revoked").
        sid = slurm_id_of(cli, job)
        wait_for(lambda: any(state_of(j) == "PENDING" for j in slurm_components(env, sid)),
                 f"Slurm job {sid} pending again", 30, lambda: explain(cli, job))
        # Slurm compares credential times in whole seconds: a start in the
        # same second as the revocation counts as revoked, hence the 2 s.
        requeued_at = time.time()
        master_node = placement["master-replica-0"]
        wait_for(lambda: node_states(env).get(master_node) == "idle" and time.time() >= requeued_at + 2,
                 f"{master_node} idle after the first run", 60, lambda: explain(cli, job))
        for j in slurm_components(env, sid):
            start_now(env, j["job_id"])
        running = cli.wait_state(job, {"RUNNING"}, timeout=90)
        again = placement_of_run(cli, job, restart=True)
        assert node not in again.values(), (node, again)
        cli.open_gate(gate)
        done = cli.wait_state(job, {"SUCCEEDED"}, timeout=60)
        assert done["state"] == "SUCCEEDED", (running, done)
    finally:
        if killed:
            subprocess.run(["slurmd", "-N", node, "-f", conf], env=env, check=True, timeout=60)
        wait_nodes_idle(env, timeout=60)


def start_now(env, job_id):
    """Releases a pending Slurm job now. Slurm may have started it on its own
    (its BeginTime came) between the listing and this call: that is fine."""
    p = subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 or "no longer pending" in p.stderr, f"scontrol update -> {p.returncode}\n{p.stderr}"


def e2e_config_with_requeue():
    text = (ROOT_DIR / "config" / "mlengined-slurm.yaml").read_text()
    assert "requeue: false" in text
    return text.replace("requeue: false", "requeue: true")


def placement_of_run(cli, job, restart, timeout=60):
    """The launcher's task@node line of the requeued run (the last one)."""
    sid = slurm_id_of(cli, job)
    path = os.path.join(run_dir(cli, job), f"slurm-{sid}.out")
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = open(path).read() if os.path.exists(path) else ""
        if not restart or "requeued this job" in text:
            lines = [m for m in LAUNCH_LINE.finditer(text)]
            if lines and (not restart or text.rfind("requeued this job") < lines[-1].start()):
                return dict(pair.split("@", 1) for pair in lines[-1].group(4).split())
        time.sleep(0.1)
    raise AssertionError(f"no launcher line for the requeued run in {path}:\n{explain(cli, job)}")



# ---------------------------------------------------------------------------
# Projects as Slurm accounts, quotas as their association limits

def assoc_of(env, account):
    """{user: (GrpJobs, GrpTRES)} of the account's associations ("" is the account's own)."""
    out = slurm(env, "sacctmgr", "-nP", "show", "assoc", "where", f"account={account}",
                "format=Account,User,GrpJobs,GrpTRES")
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return {r[1]: (r[2], r[3]) for r in rows if r[0] == account}


def test_per_project_accounts_carry_the_quotas_into_slurm(slurm_server_factory, slurm_cluster, names, tmp_path):
    """slurm.accounts: per_project. The project's account exists from the
    start with the project's quotas (JOBS 1, CPUS 2) as its GrpJobs/GrpTRES;
    Slurm itself enforces them (a job sbatch'ed straight to the account takes
    its one job, and mlengine's job, within mlengine's own count, then waits
    in Slurm for AssocGrpJobsLimit, said in mlengine's words); the job runs
    under the account; a quota removed at run time is a limit cleared."""
    _, env = slurm_cluster
    account = f"mle-{names.project}"
    config = (ROOT_DIR / "config" / "mlengined-slurm.yaml").read_text()
    assert "  tpu_gres: tpu" in config
    config = config.replace("  tpu_gres: tpu", "  accounts: per_project\n  tpu_gres: tpu", 1)
    defaults = "  defaults: {TPU_V2_POD_CORES: 32, TPU_V3_POD_CORES: 32}\n"
    assert defaults in config
    config = config.replace(defaults, defaults + f"  projects:\n    {names.project}:\n"
                            f"      {e2e.REGION}: {{JOBS: 1, CPUS: 2}}\n", 1)
    server = slurm_server_factory(config)
    cli = e2e.make_cli(server, tmp_path, names)
    assert assoc_of(env, account) == {"": ("1", "cpu=2"), "root": ("", "")}, slurm(env, "sacctmgr", "show", "assoc")

    # Outside mlengine: a job of the account holds its one job.
    foreign = int(slurm(env, "sbatch", "--parsable", f"--account={account}", "--output=/dev/null",
                        "--wrap", "sleep 120").strip().split(";")[0])
    try:
        wait_for(lambda: [state_of(j) for j in slurm_components(env, foreign)] == ["RUNNING"],
                 f"Slurm job {foreign} running", 30, lambda: slurm(env, "squeue"))
        job = names.job("acct")
        r = cli.submit(job, "--scale-tier", "basic", args=["--sleep", "1"])
        assert r.rc == 0, r

        def held_by_slurm():
            d = cli.describe(job)
            return d if d["state"] == "QUEUED" and "AssocGrpJobsLimit" in d.get("errorMessage", "") else None
        desc = wait_for(held_by_slurm, f"{job} held by Slurm for the account's GrpJobs", 30, lambda: explain(cli, job))
        assert desc["errorMessage"] == (f"Waiting in the Slurm queue: the project's Slurm account {account} is at its "
                                        "limit of 1 running job (AssocGrpJobsLimit)"), desc
        sid = slurm_id_of(cli, job)
        comps = slurm_components(env, sid)
        assert [(j["account"], state_of(j), j["state_reason"]) for j in comps] == \
            [(account, "PENDING", "AssocGrpJobsLimit")], comps
    finally:
        slurm(env, "scancel", str(foreign))
    cli.wait_state(job, {"SUCCEEDED"}, timeout=60)
    assert f"#SBATCH --account={account}\n" in open(os.path.join(run_dir(cli, job), "batch.sh")).read()

    # The project's quota removed at run time (an empty projects: replaces the
    # one in force; a file without it would keep it): its limits are cleared
    # in Slurm.
    settings = tmp_path / "quotas.yaml"
    settings.write_text("quotas:\n  defaults: {TPU_V2_POD_CORES: 32, TPU_V3_POD_CORES: 32}\n  projects: {}\n")
    cli.ok("admin", "quotas", "set", str(settings))
    assert assoc_of(env, account) == {"": ("", ""), "root": ("", "")}
