"""Backups and restores (docs/operations.md): `mlengined backup` while a
server serves, jobs run and clients write, then `mlengined restore` into a
new data directory and a second mlengined on it: every job, log, policy,
token, study and object from before the backup is there as it was, and
nothing is there that the first server never had."""

import http.client
import json
import os
import subprocess
import threading
import urllib.parse

from conftest import MLENGINED, REGION, Server, call_as, config_yaml, make_cli, wait_for


def mlengined(*args, timeout=300):
    p = subprocess.run([MLENGINED, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def put_object(server, bucket, name, data):
    u = urllib.parse.urlparse(server.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request("POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
                     + urllib.parse.quote(name, safe=""), body=data,
                     headers={"Authorization": f"Bearer {server.token}", "Content-Type": "text/plain"})
        resp = conn.getresponse()
        text = resp.read().decode()
    finally:
        conn.close()
    assert resp.status == 200, f"upload gs://{bucket}/{name} -> {resp.status}: {text}"
    return json.loads(text)


def objects(server, bucket):
    """name -> (generation, metageneration, size, md5Hash, crc32c) of every object (the checksums None
    where the server has not computed them yet: a file a trainer wrote)."""
    out, token = {}, ""
    while True:
        page = server.get_json(f"/storage/v1/b/{bucket}/o?maxResults=1000&pageToken={urllib.parse.quote(token)}")
        for o in page.get("items", []):
            out[o["name"]] = (o["generation"], o["metageneration"], o["size"], o.get("md5Hash"), o.get("crc32c"))
        token = page.get("nextPageToken", "")
        if not token:
            return out


def content(server, bucket, name):
    status, text = server.request("GET", f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media")
    assert status == 200, (status, text)
    return text


def comparable(job):
    """What a restore keeps of a job that had ended."""
    return {k: job.get(k) for k in ("jobId", "state", "createTime", "startTime", "endTime", "trainingInput",
                                    "errorMessage", "labels", "etag")}


def test_backup_under_load_restores_every_job_log_policy_token_study_and_object(server_factory, tmp_path, names):
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    project, bucket = cli.project, cli.bucket

    # What exists before the backup: an ended job with its logs, a job
    # running (it waits for a gate), a user with a token and a role, a
    # study, objects (one written twice: its second generation).
    done_job, running_job = names.job("done"), names.job("running")
    assert cli.submit(done_job, args=["--write", f"gs://{bucket}/{done_job}/marker"]).rc == 0
    cli.wait_state(done_job, {"SUCCEEDED"}, timeout=120)
    gate = f"gs://{bucket}/{running_job}/gate"
    assert cli.submit(running_job, args=["--wait-for", gate]).rc == 0
    cli.wait_state(running_job, {"RUNNING"}, timeout=120)
    cli.wait_log(running_job, "waiting for", timeout=60)
    email = f"backup{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    user_token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    study = f"projects/{project}/locations/{REGION}/studies/backup_study"
    status, text = server.request("POST", f"/v1/projects/{project}/locations/{REGION}/studies?studyId=backup_study",
                                  {"studyConfig": {"algorithm": "RANDOM_SEARCH",
                                                   "metrics": [{"metric": "accuracy", "goal": "MAXIMIZE"}],
                                                   "parameters": [{"parameter": "lr", "type": "DOUBLE",
                                                                   "doubleValueSpec": {"minValue": 0.001,
                                                                                       "maxValue": 0.1}}]}})
    assert status == 200, text
    put_object(server, bucket, "data/twice.txt", b"first\n")
    put_object(server, bucket, "data/twice.txt", b"second\n")
    for i in range(20):
        put_object(server, bucket, f"data/{i:03d}.txt", f"object {i}\n".encode() * (i + 1))

    before_jobs = {j["jobId"]: j for j in server.list_jobs(project)}
    before_objects = objects(server, bucket)
    before_policy = server.request("POST", f"/v1/projects/{project}:getIamPolicy", {})[1]
    done_logs = [e["message"] for e in server.logs(project, done_job)]
    assert done_logs, "the ended job logged nothing"

    # Load while the backup is taken: objects written and jobs created.
    stop = threading.Event()
    written, created, errors = [], [], []
    package = before_jobs[done_job]["trainingInput"]["packageUris"]

    def load():
        i = 0
        while not stop.is_set():
            try:
                put_object(server, bucket, f"load/{i:05d}.txt", f"load {i}\n".encode() * 50)
                written.append(f"load/{i:05d}.txt")
                if i % 5 == 0:
                    job_id = f"{names.job('load')}_{i}"
                    status, text = server.request("POST", f"/v1/projects/{project}/jobs", {
                        "jobId": job_id, "trainingInput": {
                            "scaleTier": "BASIC", "region": REGION, "runtimeVersion": "pytorch-1.13-cpu",
                            "packageUris": package, "pythonModule": "trainer.task"}})
                    assert status == 200, text
                    created.append(job_id)
            except Exception as e:  # pylint: disable=broad-except
                errors.append(repr(e))
            i += 1

    loader = threading.Thread(target=load)
    loader.start()
    try:
        wait_for(lambda: len(written) >= 10, "the load to get going", timeout=60)
        backup_dir = str(tmp_path / "backup")
        rc, out, err = mlengined("backup", "--data-dir", server.data_dir, "--to", backup_dir)
        assert rc == 0, f"backup -> {rc}\n{out}\n{err}\n{server.server_log()}"
        assert "backed up (online" in out, out
        wait_for(lambda: len(written) >= len(before_objects) + 30, "more load after the backup", timeout=60)
    finally:
        stop.set()
        loader.join(60)
    assert not errors, errors
    with open(os.path.join(backup_dir, "backup.json")) as f:
        summary = json.load(f)
    assert summary["format"] == "mlengine-backup-v1", summary

    # A second server on the restored data directory, beside the first.
    restored_root = tmp_path / "restored"
    rc, out, err = mlengined("restore", "--from", backup_dir, "--data-dir", str(restored_root / "data"))
    assert rc == 0, f"restore -> {rc}\n{out}\n{err}"
    # The copy serves beside the first server as a control plane only: on
    # one machine two mlengined started from one cgroup would name their
    # jobs' cgroups alike (docs/operations.md), and this job of the copy
    # would be that of the first.
    copy = Server(restored_root, config_yaml(), extra_args=["--executor", "none"])
    copy.projects.add(project)
    try:
        assert copy.token == server.token, "the operator's token is not the one backed up"
        after_jobs = {j["jobId"]: j for j in copy.list_jobs(project)}
        assert len(after_jobs) == summary["jobs"], (len(after_jobs), summary)
        # Every job from before, as it was; every other one was made during the backup.
        for job_id, job in before_jobs.items():
            assert job_id in after_jobs, f"{job_id} was lost"
            if job_id != running_job:
                assert comparable(after_jobs[job_id]) == comparable(job), (after_jobs[job_id], job)
        assert set(after_jobs) <= set(before_jobs) | set(created), set(after_jobs) - set(before_jobs) - set(created)
        assert [e["message"] for e in copy.logs(project, done_job)] == done_logs

        # Objects: each from before with its generation and checksums; each
        # one of the load whole; none the first server never had.
        after_objects = objects(copy, bucket)
        for name, described in before_objects.items():
            got = after_objects.get(name)
            assert got is not None and got[:3] == described[:3], (name, got, described)
            assert described[3] is None or got[3:] == described[3:], (name, got, described)
        assert content(copy, bucket, "data/twice.txt") == "second\n"
        assert set(after_objects) <= set(before_objects) | set(written)
        assert len(after_objects) == summary["objects"], (len(after_objects), summary)
        for name in set(after_objects) - set(before_objects):
            assert content(copy, bucket, name) == f"load {int(name[5:10])}\n" * 50, name

        # The policy, the user's token and role, the study.
        assert copy.request("POST", f"/v1/projects/{project}:getIamPolicy", {})[1] == before_policy
        assert call_as(copy, user_token, "GET", f"/v1/projects/{project}/jobs")[0] == 200
        assert call_as(copy, user_token, "POST", f"/v1/projects/{project}/jobs", {"jobId": "x"})[0] == 403
        assert copy.get_json(f"/v1/{study}")["name"] == study

        # The job that ran at the backup is, to the copy, one whose start was
        # undone: its manifest names no process or uid of this machine (the
        # first server's job goes on, untouched, and ends when its gate opens).
        with open(os.path.join(copy.run_dir(project, running_job), "replicas")) as f:
            manifest = f.read()
        assert "stage starting" in manifest and "\npid " not in manifest and "\nuid " not in manifest, manifest
        assert server.job(project, running_job)["state"] == "RUNNING", server.explain(project, running_job)
    finally:
        problems = copy.finish()
    assert not problems, "\n".join(problems)
    put_object(server, bucket, f"{running_job}/gate", b"open\n")
    cli.wait_state(running_job, {"SUCCEEDED"}, timeout=120)


def test_backup_and_restore_refuse_what_would_lose_or_mix_data(server_factory, tmp_path):
    server = server_factory()
    # The destination must be new or empty, outside the data directory.
    rc, out, err = mlengined("backup", "--data-dir", server.data_dir, "--to", os.path.join(server.data_dir, "b"))
    assert rc == 1 and "lies in the data directory" in err, (rc, out, err)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("mine\n")
    rc, out, err = mlengined("backup", "--data-dir", server.data_dir, "--to", str(full))
    assert rc == 1 and "is not empty" in err and (full / "keep").read_text() == "mine\n", (rc, out, err)
    status, text = server.request("POST", "/mlengine/v1/backups", {"destination": "relative/dir"})
    assert status == 400 and "absolute path" in text, (status, text)
    status, text = server.request("POST", "/mlengine/v1/backups", {})
    assert status == 400 and "destination" in text, (status, text)

    good = str(tmp_path / "good")
    rc, out, err = mlengined("backup", "--data-dir", server.data_dir, "--to", good)
    assert rc == 0, (rc, out, err)
    # Not into a data directory that holds anything.
    rc, out, err = mlengined("restore", "--from", good, "--data-dir", server.data_dir)
    assert rc == 1 and "is not empty" in err, (rc, out, err)
    # Not a backup a later mlengined made, nor one that is not whole.
    with open(os.path.join(good, "backup.json")) as f:
        summary = json.load(f)
    summary["schemaVersion"] = 999
    with open(os.path.join(good, "backup.json"), "w") as f:
        json.dump(summary, f)
    rc, out, err = mlengined("restore", "--from", good, "--data-dir", str(tmp_path / "new1"))
    assert rc == 1 and "made by a later mlengined" in err, (rc, out, err)
    assert not (tmp_path / "new1").exists()
    os.unlink(os.path.join(good, "backup.json"))
    rc, out, err = mlengined("restore", "--from", good, "--data-dir", str(tmp_path / "new2"))
    assert rc == 1 and "not a whole mlengine backup" in err, (rc, out, err)

    # With no mlengined serving it, mlengined backs the directory up itself.
    server.stop()
    rc, out, err = mlengined("backup", "--data-dir", server.data_dir, "--to", str(tmp_path / "offline"))
    assert rc == 0 and "no mlengined was serving it" in out, (rc, out, err)
    server.start()
