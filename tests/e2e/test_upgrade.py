"""Upgrades (docs/operations.md, "Upgrades"): a data directory an earlier
release wrote (kept as test data: tests/data/upgrade/) opens with this one
and keeps every job, log, policy, token, study and object, its interrupted
job runs again and new work runs; one a later release wrote (its database
schema newer than this mlengined knows) is refused with a message saying
so, and left exactly as it was."""

import glob
import hashlib
import json
import os
import sqlite3
import subprocess
import tarfile

import pytest

from conftest import MLENGINED, SOURCE_DIR, Cli, Server, call_as, config_yaml, make_cli
from test_backup import put_object

DATA = os.path.join(SOURCE_DIR, "tests", "data", "upgrade")


def digests(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_a_data_directory_of_a_later_release_is_refused_and_left_alone(server_factory, tmp_path, names):
    server = server_factory(config_yaml())
    cli = make_cli(server, tmp_path, names)
    job = names.job("before")
    assert cli.submit(job, args=["--sleep", "0"]).rc == 0
    cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
    server.stop()
    db = os.path.join(server.data_dir, "mlengine.db")
    conn = sqlite3.connect(db)
    known = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute(f"PRAGMA user_version={known + 7}")
    conn.commit()
    conn.close()  # its WAL checkpointed and gone: the directory as a later release leaves it
    before = digests(server.data_dir)

    p = subprocess.run([MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", server.data_dir,
                        "--config", server.config_path], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p
    said = p.stdout + p.stderr
    assert f"schema is version {known + 7} but this mlengined knows only up to {known}" in said, said
    assert "run a newer mlengined" in said, said
    assert digests(server.data_dir) == before, "a refused data directory was changed"


RELEASES = sorted(glob.glob(os.path.join(DATA, "*.tar.gz")))


@pytest.mark.parametrize("archive", RELEASES, ids=[os.path.basename(r)[:-len(".tar.gz")] for r in RELEASES])
def test_a_data_directory_of_an_earlier_release_opens_with_every_job_and_runs_on(archive, tmp_path):
    """tests/data/upgrade/RELEASE.tar.gz: a data directory an earlier
    mlengined wrote (tests/data/upgrade/make.py), one of its jobs running
    when it stopped; RELEASE.json: what its API said of everything."""
    with open(archive[:-len(".tar.gz")] + ".json") as f:
        expected = json.load(f)
    root = tmp_path / "server"
    root.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(root)  # our own test data
    server = Server(root, config_yaml())
    try:
        project, bucket = expected["project"], expected["bucket"]
        server.projects.add(project)
        jobs = {j["jobId"]: j for j in server.list_jobs(project)}
        assert set(jobs) == set(expected["jobs"]), (sorted(jobs), sorted(expected["jobs"]))
        for job_id, before in expected["jobs"].items():
            if job_id == "running":
                continue
            after = jobs[job_id]
            for key in ("state", "createTime", "startTime", "endTime", "trainingInput", "errorMessage", "labels"):
                assert after.get(key) == before.get(key), (job_id, key, before.get(key), after.get(key))
        tuned_before = expected["jobs"]["tuned"]["trainingOutput"]["trials"]
        assert jobs["tuned"]["trainingOutput"]["trials"] == tuned_before
        vertex = call_as(server, server.token, "GET", expected["vertex"]["name"].replace("projects/", "/v1/projects/", 1))
        assert vertex[0] == 200 and vertex[1]["state"] == expected["vertex"]["state"], vertex
        assert call_as(server, server.token, "POST", f"/v1/projects/{project}:getIamPolicy", {})[1] == expected["policy"]
        assert call_as(server, server.token, "GET", f"/v1/projects/{project}/serviceAccounts")[1] == expected["accounts"]
        study = expected["study"]
        assert call_as(server, server.token, "GET", study["name"].replace("projects/", "/v1/projects/", 1))[1] == study
        objects = call_as(server, server.token, "GET", f"/storage/v1/b/{bucket}/o")[1].get("items", [])
        assert sorted(o["name"] for o in objects) == expected["objects"]
        assert [e["message"] for e in server.logs(project, "succeeded")] == expected["logs"]
        # The user's token and role work as they did.
        assert call_as(server, expected["user_token"], "GET", f"/v1/projects/{project}/jobs")[0] == 200
        # The job that was running when the earlier release stopped runs again
        # (its replica ended with that machine) and ends.
        home = tmp_path / "home"
        home.mkdir()
        cli = Cli(server, home, project, bucket)
        put_object(server, bucket, "running/gate", b"open\n")
        done = cli.wait_state("running", {"SUCCEEDED"}, timeout=180)
        assert done["createTime"] == expected["jobs"]["running"]["createTime"], done
        # And new work runs; the database is at this release's schema.
        assert cli.submit("after_upgrade", args=["--sleep", "0"]).rc == 0
        cli.wait_state("after_upgrade", {"SUCCEEDED"}, timeout=180)
    finally:
        problems = server.finish()
    assert not problems, "\n".join(problems)
    conn = sqlite3.connect(os.path.join(server.data_dir, "mlengine.db"))
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= expected["schema_version"]
    finally:
        conn.close()
