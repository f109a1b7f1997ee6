"""A new team's first hour, as AI Platform's users had it: trainers and
configs written for AI Platform run unchanged, and each mistake a newcomer
makes is answered with its fix.

Through the real binaries (mlengined and the mlengine CLI, conftest.py)."""

import json
import os

from conftest import RUNTIME, TRAINERS

AIP_HYPERTUNE = os.path.join(TRAINERS, "aip_hypertune", "trainer")


def test_an_ai_platform_tuning_trainer_runs_unchanged(cli, tmp_path, names):
    """`import hypertune` with cloudml-hypertune in install_requires (no PyPI
    here: mlengine's stand-in meets it) and the sample's free-text tag."""
    job = names.job("aip_tune")
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(json.dumps({"trainingInput": {"scaleTier": "BASIC", "hyperparameters": {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": "Taxi Model Accuracy", "maxTrials": 2,
        "maxParallelTrials": 2,
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}]}}}))
    r = cli.submit(job, "--config", str(config), f"--job-dir=gs://{cli.bucket}/{job}", package=AIP_HYPERTUNE)
    assert r.rc == 0, r
    done = cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=240)
    assert done["state"] == "SUCCEEDED", cli.explain(job)
    out = done["trainingOutput"]
    assert out["hyperparameterMetricTag"] == "Taxi Model Accuracy", out
    trials = out["trials"]
    assert len(trials) == 2, trials
    for t in trials:
        x = float(t["hyperparameters"]["x"])
        assert abs(t["finalMetric"]["objectiveValue"] - (-(x - 0.3) ** 2)) < 1e-9, t
        assert t["finalMetric"]["trainingStep"] == "1000", t


def test_the_readmes_developer_can_submit_and_a_refusal_names_the_role(cli, names, tmp_path):
    """README's onboarding: roles/ml.developer and roles/storage.admin let a
    new user stage a package into a new bucket and submit; with
    roles/ml.developer alone the refusal names the roles that would do."""
    email = f"dev{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    as_dev = {"MLENGINE_TOKEN": token}
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.developer")
    bucket = f"dev-bucket-{names.suffix}".lower().replace("_", "-")
    job = names.job("dev")
    submit = ("jobs", "submit", "training", job, "--staging-bucket", f"gs://{bucket}", "--region", "us-central1",
              "--runtime-version", RUNTIME, "--package-path", AIP_HYPERTUNE, "--module-name", "trainer.task",
              "--", "--x=0.5")
    r = cli(*submit, env=as_dev)
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err, r
    assert "Roles that grant it:" in r.err and "roles/storage.admin" in r.err, r.err
    assert "mlengine projects add-iam-policy-binding" in r.err, r.err
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/storage.admin")
    r = cli(*submit, env=as_dev)
    assert r.rc == 0, r.err
    assert cli.wait_state(job, {"SUCCEEDED", "FAILED"}, timeout=240)["state"] == "SUCCEEDED", cli.explain(job)


def test_auth_login_checks_whose_token_it_is(cli, names, tmp_path):
    """`auth login bob --token-file=alice.token` once said it activated bob
    while the server saw alice."""
    alice = f"alice{names.suffix}@example.com"
    cli.ok("admin", "users", "create", alice)
    token_file = tmp_path / "alice.token"
    token_file.write_text(cli.ok("admin", "users", "create-token", alice, "--lifetime=1h").out)
    r = cli("admin", "users", "create-token", alice, "--lifetime=soon")
    assert r.rc != 0 and "such as 3600s, 60m, 12h or 30d" in r.err, r
    r = cli("admin", "users", "create-token", alice, "--lifetime=400d")
    assert r.rc != 0 and "--lifetime=400d: a user's token lasts at most 366 days" in r.err, r
    assert "JSON payload" not in r.err, r
    r = cli("auth", "login", f"bob{names.suffix}@example.com", f"--token-file={token_file}")
    assert r.rc != 0 and f"is user:{alice}'s, not user:bob{names.suffix}@example.com's" in r.err, r
    assert "Nothing was activated" in r.err, r
    cli.ok("auth", "login", alice, f"--token-file={token_file}")
    assert cli.ok("auth", "list").out.strip() == f"active account: {alice}"
    cli.ok("auth", "revoke")
    # Without a token the user is told how to sign in, not where the
    # operator's file is.
    r = cli("--endpoint", cli.server.endpoint, "jobs", "list", env={"MLENGINE_CONFIG": ""})
    assert r.rc != 0 and "UNAUTHENTICATED" in r.err, r
    assert "mlengine auth login EMAIL --token-file=FILE" in r.err and "operator gave you" in r.err, r.err


def test_a_region_this_cluster_does_not_serve_is_refused_before_anything_is_staged(cli, names):
    """A job refused for its quota in us-central1 once ran at once with
    --region europe-west4 on the same host: a region is a place."""
    job = names.job("elsewhere")
    r = cli("jobs", "submit", "training", job, "--staging-bucket", f"gs://{cli.bucket}", "--region", "europe-west4",
            "--runtime-version", RUNTIME, "--package-path", AIP_HYPERTUNE, "--module-name", "trainer.task")
    assert r.rc == 1, r
    assert "region europe-west4 is not served by this cluster; it serves: us-central1" in r.err, r.err
    assert "Uploading" not in r.err and "Building" not in r.err, r.err


def test_a_viewers_refusals_name_the_role_that_would_do(cli, names):
    """A viewer reads jobs; a submit or a cancel is refused naming the
    permission, the roles that grant it and how an owner grants one."""
    email = f"viewer{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=1h").out.strip()
    as_viewer = {"MLENGINE_TOKEN": token}
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    job = names.job("seen")
    cli.ok("jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz", "--module-name", "m",
           "--region", "us-central1", "--runtime-version", RUNTIME)
    assert json.loads(cli.ok("jobs", "describe", job, "--format=json", env=as_viewer).out)["jobId"] == job
    r = cli("jobs", "submit", "training", names.job("mine"), "--packages", "gs://b/t.tar.gz", "--module-name", "m",
            "--region", "us-central1", "--runtime-version", RUNTIME, env=as_viewer)
    assert r.rc != 0 and "Permission 'ml.jobs.create' denied" in r.err, r
    assert "Roles that grant it: roles/owner, roles/editor, roles/ml.admin, roles/ml.developer" in r.err, r.err
    r = cli("jobs", "cancel", job, env=as_viewer)
    assert r.rc != 0 and "Permission 'ml.jobs.cancel' denied" in r.err and "roles/ml.developer" in r.err, r


def test_a_distributed_job_streams_its_logs_to_success(cli, names):
    """A CUSTOM cluster (a master and a worker) trains over gloo, followed
    with --stream-logs to the end, as a newcomer's second job would be."""
    job = names.job("dist")
    r = cli.submit(job, "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                   "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--stream-logs",
                   package=os.path.join(TRAINERS, "warm", "trainer"), args=["--end=gloo"], timeout=300)
    assert r.rc == 0, (r.err[-3000:], cli.explain(job))
    assert "master-replica-0" in r.out + r.err and "worker-replica-0" in r.out + r.err, r
    assert cli.describe(job)["state"] == "SUCCEEDED"


def test_granting_a_role_in_a_new_project_keeps_its_default_accounts_binding(cli, names):
    """README's order: the operator grants a developer a role in a project
    that has had no job yet. That first binding once replaced the project's
    initial policy, and every job of the project lost its own buckets."""
    project = f"{names.project}-new"
    email = f"new{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    cli.ok("projects", "add-iam-policy-binding", project, f"--member=user:{email}", "--role=roles/ml.developer")
    policy = cli.ok("projects", "get-iam-policy", project, "--format=json").json()
    roles = {b["role"]: b["members"] for b in policy["bindings"]}
    assert roles.get("roles/ml.developer") == [f"user:{email}"], policy
    agents = roles.get("roles/storage.objectAdmin", [])
    assert len(agents) == 1 and agents[0].startswith("serviceAccount:service-") and \
        agents[0].endswith("@cloud-ml.mlengine.iam.local"), policy
