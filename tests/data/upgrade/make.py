"""Makes the test data of tests/e2e/test_upgrade.py: a data directory
written by an older mlengined, with what it should read back.

    python3 tests/data/upgrade/make.py OLD_BUILD_DIR OUT_PREFIX

OLD_BUILD_DIR is the build tree of the older release (its mlengined and
mlengine; e.g. a git worktree of that commit, built). It runs the e2e
suite's trainer there: jobs that succeed, fail and are cancelled, a
hyperparameter tuning job, a Vertex AI custom job, a user with a token and a
role, a service account, a study, objects, and one job still running (it
waits for a gate object) when the server is stopped. Then it writes
OUT_PREFIX.tar.gz (the data directory without what is rebuilt: package
environments, warm interpreters' sockets, the lock) and OUT_PREFIX.json
(what the API said of it all just before, and the user's token)."""

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "..", "e2e")


def main(old_build, out_prefix):
    os.environ["MLENGINED"] = os.path.join(old_build, "src/server/mlengined")
    os.environ["MLENGINE"] = os.path.join(old_build, "src/cli/mlengine")
    sys.path.insert(0, E2E)
    import conftest  # noqa: E402  (reads MLENGINED and MLENGINE)
    from conftest import REGION, RUNTIME, Cli, Server, call_as, config_yaml

    root = tempfile.mkdtemp(prefix="mle-upgrade-")
    server = Server(os.path.join(root, "server"), config_yaml())
    home = os.path.join(root, "home")
    os.makedirs(home)
    cli = Cli(server, home, "upgrade-project", "upgrade-bucket")
    bucket = cli.bucket

    def submit(job, *args, flags=()):
        r = cli.submit(job, *flags, args=list(args))
        assert r.rc == 0, r

    submit("succeeded", "--lines", "5", "--write", f"gs://{bucket}/succeeded/marker")
    submit("failed", "--fail", "3")
    cli.wait_state("succeeded", {"SUCCEEDED"}, timeout=180)
    cli.wait_state("failed", {"FAILED"}, timeout=180)
    submit("cancelled", "--sleep", "600")
    cli.wait_state("cancelled", {"RUNNING"}, timeout=180)
    cli.ok("jobs", "cancel", "cancelled")
    cli.wait_state("cancelled", {"CANCELLED"}, timeout=180)
    # A tuning job of two trials.
    config = os.path.join(root, "hp.yaml")
    with open(config, "w") as f:
        f.write("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    maxTrials: 2\n"
                "    maxParallelTrials: 2\n    hyperparameterMetricTag: training/hptuning/metric\n"
                "    params:\n    - {parameterName: x, type: DOUBLE, minValue: 0, maxValue: 1}\n")
    r = cli("jobs", "submit", "training", "tuned", f"--staging-bucket=gs://{bucket}", f"--region={REGION}",
            f"--runtime-version={RUNTIME}", f"--package-path={os.path.join(conftest.TRAINERS, 'tuning', 'trainer')}",
            "--module-name=trainer.task", f"--config={config}")
    assert r.rc == 0, r
    cli.wait_state("tuned", {"SUCCEEDED", "FAILED"}, timeout=300)
    # A Vertex AI custom job, the package of the first job.
    package = cli.describe("succeeded")["trainingInput"]["packageUris"][0]
    status, vertex = call_as(server, server.token, "POST",
                             f"/v1/projects/{cli.project}/locations/{REGION}/customJobs",
                             {"displayName": "vertex-before", "jobSpec": {"workerPoolSpecs": [{
                                 "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                                 "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest",
                                                       "packageUris": [package], "pythonModule": "trainer.task",
                                                       "args": ["--lines", "2"]}}]}})
    assert status == 200, vertex
    # A user with a role and a token; a service account; a study; objects.
    email = "alice@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=31536000s").out.strip()
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.developer")
    cli.ok("iam", "service-accounts", "create", "trainer", "--display-name=Trainer")
    status, study = call_as(server, server.token, "POST",
                            f"/v1/projects/{cli.project}/locations/{REGION}/studies?studyId=kept_study",
                            {"studyConfig": {"algorithm": "RANDOM_SEARCH",
                                             "metrics": [{"metric": "accuracy", "goal": "MAXIMIZE"}],
                                             "parameters": [{"parameter": "lr", "type": "DOUBLE",
                                                             "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1}}]}})
    assert status == 200, study
    # And one job running when the server stops.
    submit("running", "--wait-for", f"gs://{bucket}/running/gate")
    cli.wait_state("running", {"RUNNING"}, timeout=180)
    cli.wait_log("running", "waiting for", timeout=120)
    deadline = time.time() + 180
    while time.time() < deadline:
        state = call_as(server, server.token, "GET", vertex["name"].replace("projects/", "/v1/projects/", 1))[1]["state"]
        if state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            break
        time.sleep(0.5)

    expected = {
        "project": cli.project,
        "bucket": bucket,
        "user": email,
        "user_token": token,
        "jobs": {j["jobId"]: j for j in server.list_jobs(cli.project)},
        "vertex": call_as(server, server.token, "GET", vertex["name"].replace("projects/", "/v1/projects/", 1))[1],
        "policy": call_as(server, server.token, "POST", f"/v1/projects/{cli.project}:getIamPolicy", {})[1],
        "accounts": call_as(server, server.token, "GET", f"/v1/projects/{cli.project}/serviceAccounts")[1],
        "study": call_as(server, server.token, "GET", study["name"].replace("projects/", "/v1/projects/", 1))[1],
        "objects": sorted(o["name"] for o in call_as(server, server.token, "GET",
                                                       f"/storage/v1/b/{bucket}/o")[1].get("items", [])),
        "logs": [e["message"] for e in server.logs(cli.project, "succeeded")],
        "schema_version": None,
    }
    server.stop()  # the running job's replica goes on; it ends with this machine
    import sqlite3
    conn = sqlite3.connect(os.path.join(server.data_dir, "mlengine.db"))
    expected["schema_version"] = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    skip = {"envs", "warm", "lock", "sandbox-check"}
    with tarfile.open(out_prefix + ".tar.gz", "w:gz") as tar:
        for entry in sorted(os.listdir(server.data_dir)):
            if entry in skip or entry.endswith(".sock"):
                continue
            tar.add(os.path.join(server.data_dir, entry), arcname=f"data/{entry}",
                    filter=lambda t: None if t.name.endswith(".sock") else t)
    with open(out_prefix + ".json", "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    # The replica left running belongs to this run only.
    subprocess.run(["pkill", "-f", f"{server.data_dir}/runs"], check=False)
    print(out_prefix + ".tar.gz", out_prefix + ".json")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
