"""Every job in a sandbox (docs/security.md). A hostile trainer
(trainers/hostile) tries what a user who may submit a job must not be able
to do on a shared mlengine: read the operator's token, the database,
another project's bucket or another job's run; find, read or signal
mlengined or a warm interpreter; become root; write the system; mount.
Each attempt must fail, cold and warm-forked, and nothing outside the job
may change. Then the limits: a memory hog ends FAILED naming its limit
while a neighbour finishes, a spinner with 8 processes counted as one CPU
gets about one, a fork bomb stops at the pids limit. A replica's cgroup
that ended clean serves the next replica of its project; none is left
once mlengined stops."""

import json
import os
import re

import pytest

from conftest import (TRAINERS, Server, assert_secret_untouched, config_yaml, make_cli,
                      other_project_with_a_secret, serve, warm_ready, REGION, RUNTIME)

HOSTILE_PKG = os.path.join(TRAINERS, "hostile", "trainer")
MEMORY_MIB = 256
PIDS_LIMIT = 64


def sandbox_config():
    text = config_yaml(replica_cpu_milli=1000, warm_preload=["numpy"])
    text = text.replace("local:\n", f"local:\n  replica_memory_mib: {MEMORY_MIB}\n")
    return text + f"sandbox: {{pids_limit: {PIDS_LIMIT}}}\n"


@pytest.fixture(scope="module")
def sserver(tmp_path_factory):
    yield from serve(Server(tmp_path_factory.mktemp("sandbox-server"), sandbox_config()))


@pytest.fixture
def scli(sserver, tmp_path, names):
    return make_cli(sserver, tmp_path, names)


def report(cli, job):
    line = cli.wait_log(job, "REPORT ")
    text = next(e["message"] for e in line if e["message"].startswith("REPORT "))
    return json.loads(text[len("REPORT "):])


def ended(cli, job, timeout=180):
    return cli.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=timeout)


def cgroups_of(job):
    """The cgroup directories of `job`'s replicas in every hierarchy of
    this host (`mlengine/PROJECT/JOB.TASK`)."""
    found = []
    for controller in os.listdir("/sys/fs/cgroup"):
        for top, dirs, _ in os.walk(os.path.join("/sys/fs/cgroup", controller)):
            found += [os.path.join(top, d) for d in dirs if "/mlengine/" in top + "/" and d.startswith(job + ".")]
    return found


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_a_hostile_trainer_is_refused_everything_outside_its_job(sserver, scli, names, tmp_path, start):
    # Another project with a bucket holding a secret, and a finished job of
    # its own; warm-forked too in the warm case, so that its replica's
    # request (its token) went through the warm interpreter first.
    if start == "warm":
        warm_ready(sserver)
    other = other_project_with_a_secret(scli, tmp_path, names)
    other_job = names.job("other")
    assert other.submit(other_job, args=["--lines", "2"]).rc == 0
    assert ended(other, other_job)["state"] == "SUCCEEDED"
    if start == "warm":
        assert "mlengine: warm start" in sserver.log_text(other.project, other_job)
    token = open(os.path.join(sserver.data_dir, "admin.token")).read()

    job = names.job(f"hostile_{start}")
    flags = ["--labels", "mlengine-warm-start=false"] if start == "cold" else []
    r = scli.submit(job, *flags, package=HOSTILE_PKG, args=[
        "--server-pid", str(sserver.proc.pid), "--other-bucket", other.bucket, "--own-bucket", scli.bucket,
        "--other-run", sserver.run_dir(other.project, other_job)])
    assert r.rc == 0, r
    desc = ended(scli, job)
    assert desc["state"] == "SUCCEEDED", scli.explain(job)
    results = report(scli, job)
    opened = {k: v for k, v in results.items() if v != "blocked"}
    assert not opened, f"attacks that worked: {opened}\n{scli.explain(job)}"
    assert len(results) >= 25, results
    text = sserver.log_text(scli.project, job)
    assert ("mlengine: warm start" in text) == (start == "warm"), text[:2000]
    # The job's own bucket and /tmp worked; nothing else changed.
    assert "OWN wrote" in text, text
    assert scli.ok("storage", "cat", f"gs://{scli.bucket}/sandbox-own/written.txt").out == "mine\n"
    assert_secret_untouched(other)
    assert open(os.path.join(sserver.data_dir, "admin.token")).read() == token
    assert sserver.proc.poll() is None
    uid = int(re.search(r"uid=(\d+)", text).group(1))
    assert uid >= 524288, text
    assert "user=mlengine-job group=mlengine-job" in text, text


def test_a_memory_hog_fails_naming_its_limit_while_a_neighbour_finishes(scli, names):
    neighbour = names.job("neighbour")
    hog = names.job("hog")
    assert scli.submit(neighbour, args=["--sleep", "3"]).rc == 0
    assert scli.submit(hog, package=HOSTILE_PKG, args=["--hog", str(4 * MEMORY_MIB)]).rc == 0
    desc = ended(scli, hog)
    assert desc["state"] == "FAILED", scli.explain(hog)
    assert "ran out of memory" in desc["errorMessage"] and f"{MEMORY_MIB} MiB" in desc["errorMessage"], desc
    assert "master-replica-0" in desc["errorMessage"], desc
    assert ended(scli, neighbour)["state"] == "SUCCEEDED", scli.explain(neighbour)
    # A job's groups are gone before it is reported ended.
    assert cgroups_of(hog) == [] and cgroups_of(neighbour) == []


def test_eight_spinning_processes_counted_as_one_cpu_get_about_one(scli, names):
    job = names.job("spin")
    assert scli.submit(job, package=HOSTILE_PKG, args=["--spin", "8:3"]).rc == 0
    scli.wait_log(job, "SPINNING")
    groups = cgroups_of(job)  # one per hierarchy (v1: cpu, memory, pids), named for the replica
    assert groups and all(g.endswith(f"/{job}.master-replica-0") for g in groups), groups
    assert ended(scli, job)["state"] == "SUCCEEDED", scli.explain(job)
    assert cgroups_of(job) == []
    line = next(e["message"] for e in scli.wait_log(job, "CPU ") if e["message"].startswith("CPU "))
    cpu, wall = (float(x) for x in line.split()[1:])
    # One CPU's worth (the CFS quota), with room for the start and the end.
    assert cpu / wall < 1.3, line


def test_a_fork_bomb_stops_at_the_pids_limit(scli, names):
    job = names.job("bomb")
    assert scli.submit(job, package=HOSTILE_PKG, args=["--fork-bomb"]).rc == 0
    assert ended(scli, job)["state"] == "SUCCEEDED", scli.explain(job)
    line = next(e["message"] for e in scli.wait_log(job, "FORKED ") if e["message"].startswith("FORKED "))
    n, err = line.split()[1:]
    assert int(n) < PIDS_LIMIT and err == "EAGAIN", line
    assert cgroups_of(job) == []


def spares_of(project):
    """(path, inode) of the spare groups in `project`'s group of every
    hierarchy (`mlengine/PROJECT/.spare-N`, src/sandbox/cgroup_pool.h)."""
    found = []
    for controller in os.listdir("/sys/fs/cgroup"):
        for top, dirs, _ in os.walk(os.path.join("/sys/fs/cgroup", controller)):
            if top.endswith(f"/mlengine/{project}"):
                found += [(os.path.join(top, d), os.stat(os.path.join(top, d)).st_ino)
                          for d in dirs if d.startswith(".spare-")]
    return found


def cgroup_v1():
    return os.path.isdir("/sys/fs/cgroup/memory") and os.path.isdir("/sys/fs/cgroup/pids")


def test_a_clean_replicas_group_serves_the_next_replica_and_none_outlives_the_server(tmp_path_factory, names):
    # A server of its own: every spare it holds is this test's.
    server = Server(tmp_path_factory.mktemp("pool-server"), sandbox_config())
    try:
        cli = make_cli(server, tmp_path_factory.mktemp("pool-cli"), names)
        first = names.job("first")
        assert cli.submit(first, args=["--lines", "1"]).rc == 0
        assert ended(cli, first)["state"] == "SUCCEEDED", cli.explain(first)
        assert cgroups_of(first) == []
        spares = spares_of(cli.project)
        if cgroup_v1():
            assert len(spares) == 3, spares  # cpu, memory and pids, renamed
            second = names.job("second")
            assert cli.submit(second, args=["--sleep", "5"]).rc == 0
            cli.wait_state(second, {"RUNNING"})
            groups = cgroups_of(second)
            assert groups and {os.stat(g).st_ino for g in groups} == {ino for _, ino in spares}, (groups, spares)
            assert spares_of(cli.project) == []
            assert ended(cli, second)["state"] == "SUCCEEDED", cli.explain(second)
            assert len(spares_of(cli.project)) == 3
            # A replica the kernel refused forks took that group, which then
            # goes: its counters would tell the next replica's story.
            bomb = names.job("bomb")
            assert cli.submit(bomb, package=HOSTILE_PKG, args=["--fork-bomb"]).rc == 0
            assert ended(cli, bomb)["state"] == "SUCCEEDED", cli.explain(bomb)
            assert spares_of(cli.project) == [] and cgroups_of(bomb) == []
        else:
            assert spares == []  # cgroup v2 renames no group: each is made and removed
    finally:
        problems = server.finish()
    assert not problems, "\n".join(problems)
    assert spares_of(cli.project) == []


def test_a_package_build_runs_sandboxed_too(sserver, scli, names):
    # pip runs the package's setup.py when mlengined installs it: as an
    # identity of its own, seeing nothing of the data directory.
    job = names.job("build")
    pkg = os.path.join(TRAINERS, "hostile_build", "trainer")  # its setup.py beside it, as gcloud takes it
    token = open(os.path.join(sserver.data_dir, "admin.token")).read()
    assert scli.submit(job, package=pkg).rc == 0
    assert ended(scli, job)["state"] == "SUCCEEDED", scli.explain(job)
    line = next(e["message"] for e in scli.wait_log(job, "BUILD ") if e["message"].startswith("BUILD "))
    found = json.loads(line[len("BUILD "):])
    assert int(found.pop("uid")) >= 524288, found
    # It could leave a link in the environment it built; mlengined wrote
    # its ready marker beside it, never through it.
    assert found.pop("ready-link") == "planted", found
    assert open(os.path.join(sserver.data_dir, "admin.token")).read() == token
    assert all(v.startswith("blocked") for v in found.values()), found


def test_a_package_linked_to_another_projects_object_is_never_installed(sserver, scli, names, tmp_path):
    # A job that may write its bucket can leave a symbolic link there (the
    # hostile trainer writes its bucket; the test plants the link on disk as
    # it would). A later job naming the link as its package must not get the
    # other project's package installed by mlengined, which reads as root.
    other = other_project_with_a_secret(scli, tmp_path, names)
    other_job = names.job("victim")
    assert other.submit(other_job).rc == 0
    assert ended(other, other_job)["state"] == "SUCCEEDED", other.explain(other_job)
    staged = [o for o in other.ok("storage", "ls", "-r", f"gs://{other.bucket}").out.split() if o.endswith(".tar.gz")]
    assert staged, other.ok("storage", "ls", "-r", f"gs://{other.bucket}").out
    target = sserver.bucket_path(other.bucket, staged[0][len(f"gs://{other.bucket}/"):])
    scli.make_bucket()
    os.makedirs(sserver.bucket_path(scli.bucket, "links"), exist_ok=True)
    os.symlink(target, sserver.bucket_path(scli.bucket, "links", "stolen-1.0.tar.gz"))
    os.symlink(sserver.bucket_path(other.bucket), sserver.bucket_path(scli.bucket, "linked-bucket"))
    for i, uri in enumerate((f"gs://{scli.bucket}/links/stolen-1.0.tar.gz",
                             f"gs://{scli.bucket}/linked-bucket/" + staged[0][len(f"gs://{other.bucket}/"):])):
        job = names.job(f"stolen{i}")
        r = scli("jobs", "submit", "training", job, "--region", REGION, "--runtime-version", RUNTIME,
                 "--packages", uri, "--module-name", "trainer.task")
        if r.rc != 0:
            assert "not found" in r.err.lower() or "no such" in r.err.lower(), r
            continue  # refused at submission: never run
        desc = ended(scli, job)
        assert desc["state"] == "FAILED", scli.explain(job)
        assert "not a plain file" in desc["errorMessage"], desc
    assert_secret_untouched(other)
