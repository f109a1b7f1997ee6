"""mlengine jobs ... against a real mlengined."""

import json
import os
import re
import socket

import yaml

from conftest import RUNTIME, clean_env, run_mlengine, sha256_hex

RUNTIME_FLAGS = ["--region", "us-central1", "--runtime-version", RUNTIME]


def test_submit_builds_stages_and_creates_the_job(cli, names, trainer, storage_api):
    job = names.job()
    before = sorted(os.listdir(trainer.parent))
    r = cli.ok("jobs", "submit", "training", job, "--package-path", str(trainer),
               "--module-name", "trainer.task", "--staging-bucket", f"gs://{names.staging}",
               "--scale-tier", "basic", *RUNTIME_FLAGS, "--", "--epochs", "3", "--lr=0.1")
    assert f"Job [{job}] submitted successfully." in r.err
    assert f"mlengine jobs describe {job}" in r.err and f"mlengine jobs stream-logs {job}" in r.err
    printed = yaml.safe_load(r.out)
    assert printed["jobId"] == job and printed["state"]
    # The user's tree is untouched (no build/, dist/, *.egg-info, setup.py).
    assert sorted(os.listdir(trainer.parent)) == before

    # Staged at gs://STAGING/JOB/<sha256 of the file>/trainer-0.0.0.tar.gz.
    listing = cli.ok("storage", "ls", "-r", f"gs://{names.staging}/{job}/").out.split()
    assert len(listing) == 1, listing
    m = re.fullmatch(rf"gs://{names.staging}/{job}/([0-9a-f]{{64}})/trainer-0\.0\.0\.tar\.gz", listing[0])
    assert m, listing
    data = run_cat(cli, listing[0])
    assert sha256_hex(data) == m.group(1)

    desc = cli.describe(job)
    ti = desc["trainingInput"]
    assert ti["packageUris"] == [listing[0]]
    assert ti["pythonModule"] == "trainer.task"
    assert ti["args"] == ["--epochs", "3", "--lr=0.1"]
    assert ti["region"] == "us-central1"
    assert ti["scaleTier"] == "BASIC"
    assert ti["runtimeVersion"] == RUNTIME


# gcloud passes what follows `--` through unchanged: brackets, commas,
# quotes, `=`, empty strings, a second `--`.
ODD_ARGS = ["--spec", "[1,2]", "--objs", '[{"a": 1}, {"b": [2, 3]}]', "--list=a,b,c", "--quote", "it's \"x\"",
            "--empty", "", "--eq=k=v", "--", "[", "]", "a b"]


def test_trainer_arguments_arrive_byte_for_byte(cli, names, trainer, storage_api):
    job = names.job()
    cli.ok("jobs", "submit", "training", job, "--package-path", str(trainer), "--module-name", "trainer.task",
           "--staging-bucket", f"gs://{names.staging}", *RUNTIME_FLAGS, "--", *ODD_ARGS)
    assert cli.describe(job)["trainingInput"]["args"] == ODD_ARGS


def test_arguments_after_a_double_dash_are_refused_where_nothing_takes_them(cli, names):
    r = cli("jobs", "list", "--", "--spec", "[1,2]")
    assert r.rc == 2 and "--spec" in r.err, r


def run_cat(cli, uri):
    import subprocess
    from conftest import MLENGINE
    proc = subprocess.run([MLENGINE, "storage", "cat", uri], env=cli.env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_submit_stages_under_job_dir_without_staging_bucket(cli, names, trainer, tmp_path, storage_api):
    job = names.job()
    extra = tmp_path / "extra-1.0.tar.gz"
    extra.write_bytes(b"not really an archive, only staged")
    job_dir = f"gs://{names.bucket}/jobs/{job}"
    cli.ok("jobs", "submit", "training", job, "--package-path", str(trainer),
           "--packages", f"{extra},gs://elsewhere/dep-2.0.tar.gz", "--module-name", "trainer.task",
           "--job-dir", job_dir, *RUNTIME_FLAGS)
    ti = cli.describe(job)["trainingInput"]
    assert ti["jobDir"] == job_dir
    uris = ti["packageUris"]
    assert len(uris) == 3, uris
    m = re.fullmatch(rf"{job_dir}/packages/([0-9a-f]{{64}})/trainer-0\.0\.0\.tar\.gz", uris[0])
    assert m, uris
    assert uris[1] == f"{job_dir}/packages/{m.group(1)}/extra-1.0.tar.gz"
    assert uris[2] == "gs://elsewhere/dep-2.0.tar.gz"
    # One digest over both files' contents, in order.
    assert sha256_hex(run_cat(cli, uris[0]) + extra.read_bytes()) == m.group(1)


def test_submit_refuses_local_packages_without_a_staging_place(cli, names, trainer):
    r = cli("jobs", "submit", "training", names.job(), "--package-path", str(trainer),
            "--module-name", "trainer.task", *RUNTIME_FLAGS)
    assert r.rc == 1, r
    assert "--staging-bucket" in r.err


def test_submit_refuses_duplicate_package_names(cli, names, tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "pkg-1.0.tar.gz").write_text("x")
    r = cli("jobs", "submit", "training", names.job(), "--packages",
            f"{a / 'pkg-1.0.tar.gz'},gs://b/pkg-1.0.tar.gz", "--staging-bucket", "gs://s",
            "--module-name", "m", *RUNTIME_FLAGS)
    assert r.rc == 1, r
    assert "pkg-1.0.tar.gz" in r.err and "same file name" in r.err


def test_config_yaml_is_merged_with_flags_overriding(cli, names, tmp_path):
    job = names.job()
    config = tmp_path / "config.yaml"
    config.write_text(f"""
jobId: ignored_because_the_flag_wins
labels:
  team: vision
  owner: ann
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-4
  workerType: n1-standard-4
  workerCount: 3
  region: europe-west4
  runtimeVersion: {RUNTIME}
  pythonModule: from.config
  args: [--from-config]
  scheduling:
    maxRunningTime: 7200s
""")
    r = cli.ok("jobs", "submit", "training", job, "--config", str(config),
               "--packages", "gs://some-bucket/pkgs/trainer-0.1.tar.gz",
               "--region", "us-central1", "--worker-machine-type", "n1-standard-8", "--worker-count", "2",
               "--module-name", "trainer.task", "--labels", "owner=bob,env=dev", "--", "--from-flags")
    assert f"Job [{job}] submitted successfully." in r.err
    desc = cli.describe(job)
    ti = desc["trainingInput"]
    assert desc["jobId"] == job
    assert ti["scaleTier"] == "CUSTOM"
    assert ti["masterType"] == "n1-standard-4"
    assert ti["workerType"] == "n1-standard-8"
    assert ti["workerCount"] == "2"
    assert ti["region"] == "us-central1"
    assert ti["pythonModule"] == "trainer.task"
    assert ti["args"] == ["--from-flags"]
    assert ti["packageUris"] == ["gs://some-bucket/pkgs/trainer-0.1.tar.gz"]
    assert ti["scheduling"]["maxRunningTime"] == "7200s"
    assert desc["labels"] == {"team": "vision", "owner": "bob", "env": "dev"}


def test_config_json_and_accelerator_flags(cli, names, tmp_path):
    job = names.job()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                                    "region": "us-central1", "runtimeVersion": RUNTIME}}))
    r = cli("jobs", "submit", "training", job, "--config", str(config), "--packages", "gs://b/t.tar.gz",
            "--module-name", "trainer.task", "--master-accelerator", "type=nvidia-tesla-t4,count=1",
            "--format", "json")
    if r.rc == 0:
        assert json.loads(r.out)["jobId"] == job
        accel = cli.describe(job)["trainingInput"]["masterConfig"]["acceleratorConfig"]
        assert accel == {"type": "NVIDIA_TESLA_T4", "count": "1"}
    else:
        # A cluster without T4 GPUs refuses the job at submission, naming what it has.
        assert r.rc == 1 and "NVIDIA_TESLA_T4" in r.err, r


def test_invalid_submission_prints_every_field_violation(cli, names, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(f"""
trainingInput:
  scaleTier: BASIC
  workerCount: 3
  parameterServerCount: 2
  runtimeVersion: {RUNTIME}
""")
    r = cli("jobs", "submit", "training", names.job(), "--config", str(config),
            "--packages", "gs://b/t.tar.gz", "--module-name", "trainer.task")
    assert r.rc == 1, r
    lines = r.err.splitlines()
    assert lines[0].startswith("ERROR: (mlengine.jobs.submit.training) INVALID_ARGUMENT"), r.err
    violations = [l for l in lines if l.startswith("  trainingInput.")]
    fields = {v.split(":")[0].strip() for v in violations}
    assert {"trainingInput.region", "trainingInput.workerCount", "trainingInput.parameterServerCount"} <= fields, r.err
    assert r.out == ""


def test_the_hints_after_a_submit_work_as_printed(cli, names):
    job = names.job()
    r = cli.ok("--project", "team-a", "jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz",
               "--module-name", "m", *RUNTIME_FLAGS)
    hint = next(l for l in r.err.splitlines() if "$ mlengine jobs describe" in l)
    assert hint.strip() == f"$ mlengine jobs describe {job} --project team-a", r.err
    described = cli.ok(*hint.strip()[2:].split()[1:], "--format", "json")
    assert json.loads(described.out)["jobId"] == job


def test_an_unchanged_trainer_submitted_again_is_the_same_package(cli, names, trainer, storage_api):
    """Same sources, same bytes: the same digest in the staged path, so
    mlengined's environment for it is the one it already built."""
    uris = []
    for n in range(2):
        job = f"{names.job()}_{n}"
        cli.ok("jobs", "submit", "training", job, "--package-path", str(trainer), "--module-name", "trainer.task",
               "--staging-bucket", f"gs://{names.staging}", *RUNTIME_FLAGS)
        [uri] = cli.describe(job)["trainingInput"]["packageUris"]
        uris.append(uri)
        os.utime(trainer / "__init__.py", (1e9, 1e9))  # the sources' times do not count
    digests = [u.split("/")[-2] for u in uris]
    assert digests[0] == digests[1], uris
    assert run_cat(cli, uris[0]) == run_cat(cli, uris[1])


def test_a_refused_submission_builds_and_uploads_nothing(cli, names, trainer, storage_api):
    """Six mistakes left six orphan tarballs: the server checks the job
    (validateOnly) before the CLI builds or stages anything."""
    for bad in (["--region", "mars-central1"], ["--runtime-version", "0.9"]):
        job = names.job()
        flags = [f for f in RUNTIME_FLAGS]
        i = flags.index(bad[0])
        flags[i + 1] = bad[1]
        r = cli("jobs", "submit", "training", job, "--package-path", str(trainer), "--module-name", "trainer.task",
                "--staging-bucket", f"gs://{names.staging}", *flags)
        assert r.rc == 1 and "INVALID_ARGUMENT" in r.err, r
        assert "Building the Python package" not in r.err and "Uploading" not in r.err, r.err
    r = cli("jobs", "submit", "training", "bad-id", "--package-path", str(trainer), "--module-name", "trainer.task",
            "--staging-bucket", f"gs://{names.staging}", *RUNTIME_FLAGS)
    assert r.rc == 1 and "jobId" in r.err and "Uploading" not in r.err, r
    listing = cli("storage", "ls", "-r", f"gs://{names.staging}/")
    assert listing.out.strip() == "", listing


def test_gcloud_format_projections(cli, names):
    job = names.job()
    cli.ok("jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz", "--module-name", "m", *RUNTIME_FLAGS)
    assert cli.ok("jobs", "describe", job, "--format=value(state)").out in ("QUEUED\n", "PREPARING\n", "RUNNING\n",
                                                                           "SUCCEEDED\n", "FAILED\n")
    assert cli.ok("jobs", "describe", job, "--format", "value(jobId,trainingInput.region)").out == \
        f"{job}\tus-central1\n"
    listed = cli.ok("jobs", "list", "--format", "csv(jobId,trainingInput.pythonModule)").out.splitlines()
    assert listed[0] == "jobId,trainingInput.pythonModule" and f"{job},m" in listed[1:], listed
    table = cli.ok("jobs", "list", "--format", "table(jobId, trainingInput.pythonModule)").out.splitlines()
    assert table[0].split() == ["JOB_ID", "PYTHON_MODULE"], table
    r = cli("jobs", "describe", job, "--format=value(createTime.date())")
    assert r.rc != 0 and "transforms such as .date() are not supported" in r.err, r
    # As with gcloud, a flag given twice takes its last value (a script
    # overriding what its wrapper put first).
    assert cli.ok("jobs", "describe", job, "--format=json", "--format=value(jobId)").out == f"{job}\n"


def test_a_mistyped_command_is_named_with_what_it_may_have_meant(cli):
    r = cli("jbos", "list")
    assert r.rc == 2 and "Invalid choice: 'jbos'. Maybe you meant: mlengine jobs" in r.err, r
    assert len(r.err.splitlines()) == 2, r.err  # not the whole help
    r = cli("jobs", "lst")
    assert r.rc == 2 and "Maybe you meant: mlengine jobs list" in r.err, r


def test_config_set_get_list_as_gcloud_config(cli, names, tmp_path):
    """`mlengine config set project P` (gcloud's habit), get, unset, list;
    a property something stronger overrides is said to be overridden."""
    env = dict(cli.env)
    env.pop("MLENGINE_PROJECT")
    r = run_mlengine(["config", "set", "project", "team-cfg"], env)
    assert r.rc == 0 and "Updated property [project]" in r.err and "Note:" not in r.err, r
    assert run_mlengine(["config", "get", "project"], env).out == "team-cfg\n"
    assert run_mlengine(["config", "get", "core/project"], env).out == "team-cfg\n"
    listed = run_mlengine(["config", "list"], env).out
    assert "project = team-cfg" in listed and "config.json" in listed, listed
    # Commands use it: the job lands in team-cfg.
    job = names.job()
    run_mlengine(["jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz", "--module-name", "m",
                  *RUNTIME_FLAGS], env)
    assert json.loads(cli.ok("--project", "team-cfg", "jobs", "describe", job, "--format=json").out)["jobId"] == job
    # MLENGINE_PROJECT wins, and set says so.
    r = run_mlengine(["config", "set", "project", "other"], cli.env)
    assert "Note: MLENGINE_PROJECT sets project too" in r.err, r
    assert run_mlengine(["config", "get", "project"], cli.env).out == f"{cli.project}\n"
    r = run_mlengine(["config", "set", "endpoint", "localhost:1"], env)
    assert r.rc == 1 and "must start with http://" in r.err, r
    r = run_mlengine(["config", "set", "zone", "x"], env)
    assert r.rc == 1 and "there is no property \"zone\"" in r.err, r
    r = run_mlengine(["config", "set", "account", "nobody@example.com"], env)
    assert r.rc == 1 and "mlengine auth login nobody@example.com --token-file=FILE" in r.err, r
    assert run_mlengine(["config", "unset", "project"], env).rc == 0
    assert run_mlengine(["config", "get", "project"], env).out == "default\n"


SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "aip_samples")


def test_sample_config_shapes_are_accepted(cli, names):
    """The shapes Google's sample configs use pass validation as on AI
    Platform: each is accepted by the server. A GPU the cluster lacks is the
    one refusal allowed, for the hardware."""
    for name in sorted(f for f in os.listdir(SAMPLES) if f.endswith(".yaml")):
        job = names.job(name[:-5].replace("-", "_"))
        r = cli("jobs", "submit", "training", job, "--config", os.path.join(SAMPLES, name),
                "--packages", "gs://b/t.tar.gz", "--module-name", "trainer.task", *RUNTIME_FLAGS)
        if r.rc != 0 and "NVIDIA_TESLA_T4" in r.err and "never run on this cluster" in r.err:
            continue
        assert r.rc == 0, (name, r.err)


def test_gcloud_flags_are_accepted_and_what_cannot_be_honoured_is_refused_saying_why(cli, names):
    # Output-only global flags: accepted.
    r = cli("--quiet", "--verbosity=error", "jobs", "list", "--format", "json")
    assert r.rc == 0, r
    assert cli("jobs", "list", "-q", "--verbosity", "chatty").rc == 2
    base = ["jobs", "submit", "training", names.job(), "--packages", "gs://b/t.tar.gz", "--module-name", "m",
            *RUNTIME_FLAGS]
    # A key given by id is completed as gcloud completes it, then refused: no KMS here.
    r = cli(*base, "--kms-key", "k", "--kms-keyring", "ring", "--kms-location", "us-central1")
    assert r.rc == 1, r
    assert "trainingInput.encryptionConfig.kmsKeyName" in r.err and "no Cloud KMS" in r.err, r.err
    assert "remove encryptionConfig (gcloud: --kms-key)" in r.err, r.err
    r = cli(*base, "--kms-key", "k")
    assert r.rc == 1 and "--kms-keyring and --kms-location" in r.err, r
    r = cli(*base, "--enable-web-access")
    assert r.rc == 1 and "trainingInput.enableWebAccess" in r.err and "stream-logs" in r.err, r
    job = names.job()
    r = cli("jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz", "--module-name", "m",
            *RUNTIME_FLAGS, "--network", "projects/1/global/networks/vpc", "--quiet")
    assert r.rc == 0, r
    assert cli.describe(job)["trainingInput"]["network"] == "projects/1/global/networks/vpc"


def test_client_side_flag_errors(cli, names):
    base = ["jobs", "submit", "training", names.job(), "--packages", "gs://b/t.tar.gz", "--module-name", "m",
            *RUNTIME_FLAGS]
    for extra, text in [
        (["--worker-count", "2"], "--worker-machine-type and --worker-count"),
        (["--master-accelerator", "type=nvidia-tesla-t4"], "both type and count"),
        (["--master-accelerator", "type=nvidia-h200,count=1"], "invalid choice"),
        (["--scale-tier", "giant"], "invalid choice"),
        (["--master-image-uri", "gcr.io/p/i"], "cannot be used together"),
    ]:
        r = cli(*base, *extra)
        assert r.rc == 1 and text in r.err, r
    r = cli("jobs", "submit", "training", names.job(), "--module-name", "m", *RUNTIME_FLAGS)
    assert r.rc == 1 and "Non-custom jobs must have packages" in r.err, r
    r = cli("jobs", "submit", "training", names.job(), "--config", "/nonexistent.yaml")
    assert r.rc == 1 and "/nonexistent.yaml" in r.err, r


def submit_plain(cli, job, *extra):
    return cli.ok("jobs", "submit", "training", job, "--packages", "gs://b/t.tar.gz",
                  "--module-name", "trainer.task", *RUNTIME_FLAGS, *extra)


def test_list_describe_update(cli, names):
    jobs = [names.job(f"j{i}") for i in range(3)]
    for j in jobs:
        submit_plain(cli, j, "--labels", "team=a,stage=dev")

    table = cli.ok("jobs", "list").out.splitlines()
    assert table[0].split() == ["JOB_ID", "STATUS", "CREATED"]
    listed = {line.split()[0] for line in table[1:]}
    assert set(jobs) <= listed

    # Paging through nextPageToken with a small page size finds them all.
    paged = cli.ok("jobs", "list", "--page-size", "1", "--format", "json").json()
    assert set(jobs) <= {j["jobId"] for j in paged}
    assert len(cli.ok("jobs", "list", "--limit", "2", "--format", "json").json()) == 2
    only = cli.ok("jobs", "list", "--filter", f"jobId:{jobs[1]}", "--format", "json").json()
    assert [j["jobId"] for j in only] == [jobs[1]]
    docs = list(yaml.safe_load_all(cli.ok("jobs", "list", "--format", "yaml").out))
    assert set(jobs) <= {d["jobId"] for d in docs}

    desc = yaml.safe_load(cli.ok("jobs", "describe", jobs[0]).out)
    assert desc["jobId"] == jobs[0]
    assert desc["trainingInput"]["pythonModule"] == "trainer.task"
    assert desc["labels"] == {"team": "a", "stage": "dev"}

    r = cli.ok("jobs", "update", jobs[0], "--update-labels", "team=b,new=1", "--remove-labels", "stage")
    assert f"Updated job [{jobs[0]}]." in r.err
    assert cli.describe(jobs[0])["labels"] == {"team": "b", "new": "1"}
    r = cli.ok("jobs", "update", jobs[0], "--update-labels", "team=b")
    assert "No update to perform." in r.err
    cli.ok("jobs", "update", jobs[0], "--clear-labels")
    assert not cli.describe(jobs[0]).get("labels")
    r = cli("jobs", "update", jobs[0])
    assert r.rc == 1 and "--update-labels" in r.err

    r = cli("jobs", "describe", "no_such_job")
    assert r.rc == 1 and "NOT_FOUND" in r.err and r.out == ""


def test_cancel(cli, names, trainer, storage_api):
    job = names.job()
    cli.ok("jobs", "submit", "training", job, "--package-path", str(trainer), "--module-name", "trainer.task",
           "--staging-bucket", f"gs://{names.staging}", *RUNTIME_FLAGS, "--", "--sleep", "120")
    r = cli.ok("jobs", "cancel", job)
    assert f"Cancelled job [{job}]." in r.err
    final = cli.wait_state(job, {"CANCELLING", "CANCELLED"})
    assert final["state"] in ("CANCELLING", "CANCELLED")
    r = cli("jobs", "cancel", "no_such_job")
    assert r.rc == 1 and "NOT_FOUND" in r.err


def test_no_server_gives_a_clear_message(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    env = clean_env(tmp_path)
    env["MLENGINE_API_ENDPOINT"] = f"http://127.0.0.1:{port}"
    for args in (["jobs", "list"], ["jobs", "describe", "x"], ["storage", "ls"]):
        r = run_mlengine(args, env)
        assert r.rc == 1, r
        assert (f"cannot reach mlengined at http://127.0.0.1:{port}: connection refused; "
                "start it with `mlengined --data-dir DIR` or set MLENGINE_API_ENDPOINT") in r.err, r


def test_wrong_token_is_explained(server, tmp_path):
    env = clean_env(tmp_path)
    env["MLENGINE_CONFIG"] = server.config_path
    r = run_mlengine(["--token", "wrong", "jobs", "list"], env)
    assert r.rc == 1 and "UNAUTHENTICATED" in r.err and "--token" in r.err, r


def test_endpoint_flag_and_env_and_default_config_file(server, tmp_path):
    env = clean_env(tmp_path)
    # Default config file: $HOME/.config/mlengine/config.json.
    cfg = tmp_path / ".config" / "mlengine"
    cfg.mkdir(parents=True)
    (cfg / "config.json").write_text(json.dumps({"endpoint": server.endpoint,
                                                 "token_file": os.path.join(server.data_dir, "admin.token")}))
    assert run_mlengine(["jobs", "list"], env).rc == 0
    # Flags beat the file.
    r = run_mlengine(["--endpoint", "http://127.0.0.1:1", "jobs", "list"], env)
    assert r.rc == 1 and "cannot reach mlengined at http://127.0.0.1:1" in r.err
    # The environment beats the file too; flags after the command work.
    env2 = dict(env, MLENGINE_API_ENDPOINT="http://127.0.0.1:1")
    assert run_mlengine(["jobs", "list"], env2).rc == 1
    assert run_mlengine(["jobs", "list", "--endpoint", server.endpoint], env2).rc == 0


def test_help_is_written_for_people(tmp_path):
    env = clean_env(tmp_path)
    top = run_mlengine(["--help"], env)
    assert top.rc == 0 and "jobs" in top.out and "storage" in top.out and "MLENGINE_CONFIG" in top.out
    sub = run_mlengine(["jobs", "submit", "training", "--help"], env)
    assert sub.rc == 0
    for flag in ("--package-path", "--module-name", "--staging-bucket", "--job-dir", "--packages", "--config",
                 "--region", "--runtime-version", "--python-version", "--scale-tier", "--master-machine-type",
                 "--master-accelerator", "--master-image-uri", "--worker-machine-type", "--worker-count",
                 "--worker-accelerator", "--worker-image-uri", "--parameter-server-machine-type",
                 "--parameter-server-count", "--parameter-server-accelerator", "--parameter-server-image-uri",
                 "--tpu-tf-version", "--labels", "--use-chief-in-tf-config", "--service-account",
                 "--stream-logs"):
        assert flag in sub.out, flag
    assert "nvidia-tesla-t4" in sub.out and "basic-tpu" in sub.out
    bad = run_mlengine(["jobs", "frobnicate"], env)
    assert bad.rc == 2 and "--help" in bad.err
