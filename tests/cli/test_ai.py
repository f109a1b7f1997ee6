"""mlengine ai custom-jobs / hp-tuning-jobs against a real mlengined's Vertex
API (docs/vertex.md): the bodies the flags and --config files make, local
packages built and staged, describe/list/cancel/stream-logs, and the errors.
What the real server cannot take here (a container: it runs none) is checked
against a small fake that records the request."""

import io
import json
import os
import re
import subprocess
import tarfile
import textwrap
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from conftest import MLENGINE, sha256_hex

REGION = "us-central1"
EXECUTOR = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest"
UNREACHABLE = ["--endpoint", "http://127.0.0.1:1"]  # nothing listens: a call would say "cannot reach"


@pytest.fixture
def ai(cli):
    """The `cli` fixture without a region from the environment."""
    cli.env.pop("CLOUDSDK_AI_REGION", None)
    return cli


def pool(*keys, machine="n1-standard-4"):
    return "--worker-pool-spec=" + ",".join([f"machine-type={machine}", *keys])


def create(cli, *args, kind="custom-jobs"):
    r = cli.ok("ai", kind, "create", "--region", REGION, "--format", "json", *args)
    return r, r.json()


def job_id(job):
    return job["name"].rsplit("/", 1)[1]


def cat(cli, uri):
    proc = subprocess.run([MLENGINE, "storage", "cat", uri], env=cli.env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def service_account(cli, name):
    """A service account of the test's project (which projects.getConfig makes)."""
    status, text = cli.server.request("GET", f"/v1/projects/{cli.project}:getConfig")
    assert status == 200, text
    cli.ok("iam", "service-accounts", "create", name)
    return f"{name}@{cli.project}.iam.mlengine.local"


def members(data):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


# ---------------------------------------------------------------- custom jobs


def test_worker_pool_specs_make_the_jobs_pools_in_order(ai, names):
    account = service_account(ai, "trainer")
    packages = ["gs://pkgs/trainer-0.1.tar.gz", "gs://pkgs/dep-2.0.tar.gz"]
    r, job = create(ai, "--display-name", "two pools",
                    pool(f"executor-image-uri={EXECUTOR}", "python-module=trainer.task"),
                    pool(f"executor-image-uri={EXECUTOR}", "python-module=trainer.task", "replica-count=2",
                         machine="n1-standard-8"),
                    f"--python-package-uris={','.join(packages)}", "--args=--epochs=3,--lr=0.1",
                    "--labels=team=vision,env=dev", "--service-account", account)
    assert re.fullmatch(rf"projects/{names.project}/locations/{REGION}/customJobs/\d+", job["name"]), job
    assert f"CustomJob [{job['name']}] submitted successfully." in r.err
    assert f"mlengine ai custom-jobs describe {job['name']}" in r.err
    assert f"mlengine ai custom-jobs stream-logs {job['name']}" in r.err

    def python_pool(machine, count):
        return {"machineSpec": {"machineType": machine}, "replicaCount": count,
                "pythonPackageSpec": {"executorImageUri": EXECUTOR, "pythonModule": "trainer.task",
                                      "packageUris": packages, "args": ["--epochs=3", "--lr=0.1"]}}
    assert job["jobSpec"]["workerPoolSpecs"] == [python_pool("n1-standard-4", "1"), python_pool("n1-standard-8", "2")]
    assert job["jobSpec"]["serviceAccount"] == account
    assert job["displayName"] == "two pools" and job["labels"] == {"team": "vision", "env": "dev"}

    # describe: by id and region, or by the whole name; YAML unless --format.
    described = yaml.safe_load(ai.ok("ai", "custom-jobs", "describe", job_id(job), "--region", REGION).out)
    assert described["name"] == job["name"] and described["jobSpec"] == job["jobSpec"]
    by_name = ai.ok("ai", "custom-jobs", "describe", job["name"], "--format", "json").json()
    assert by_name["jobSpec"] == job["jobSpec"]


class Recorder:
    """A fake Vertex API: answers a create with the body it got."""

    def __init__(self):
        self.requests = []
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _handler(self):
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = urllib.parse.urlparse(self.path).path
                recorder.requests.append((path, body))
                data = json.dumps(dict(body, name=path[len("/v1/"):] + "/42")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        return Handler


@pytest.fixture
def recorder():
    r = Recorder()
    yield r
    r.httpd.shutdown()


def test_container_pools_accelerators_and_empty_pools_as_sent(ai, recorder):
    r = ai("ai", "custom-jobs", "create", "--endpoint", recorder.endpoint, "--display-name", "containers",
           pool("container-image-uri=gcr.io/p/trainer:1", "accelerator-type=nvidia-tesla-t4"),
           "--worker-pool-spec=",
           pool("container-image-uri=gcr.io/p/ps:1", "accelerator-type=NVIDIA_TESLA_V100", "accelerator-count=2",
                "replica-count=3"),
           "--command=python3,-m,trainer.main", "--args=^:^--list=a,b:--x", env={"CLOUDSDK_AI_REGION": "europe-west4"})
    assert r.rc == 0, r
    [(path, body)] = recorder.requests
    assert path == f"/v1/projects/{ai.project}/locations/europe-west4/customJobs"
    command, args = ["python3", "-m", "trainer.main"], ["--list=a,b", "--x"]
    assert body == {"displayName": "containers", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
         "replicaCount": "1",
         "containerSpec": {"imageUri": "gcr.io/p/trainer:1", "command": command, "args": args}},
        {},
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_V100",
                         "acceleratorCount": 2},
         "replicaCount": "3",
         "containerSpec": {"imageUri": "gcr.io/p/ps:1", "command": command, "args": args}}]}}


def test_the_real_server_refuses_what_it_cannot_run_saying_why(ai):
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "c",
           pool("container-image-uri=gcr.io/p/trainer:1"))
    assert r.rc == 1 and "runs no containers" in r.err, r
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "c", "--enable-web-access",
           pool(f"executor-image-uri={EXECUTOR}", "python-module=trainer.task"),
           "--python-package-uris=gs://p/t.tar.gz")
    assert r.rc == 1 and "\n  jobSpec.enableWebAccess: " in r.err, r


def test_config_yaml_with_flags_overriding_and_extending_it(ai, tmp_path):
    account, config_account = service_account(ai, "from-flags"), service_account(ai, "from-config")
    config = tmp_path / "spec.yaml"
    config.write_text(textwrap.dedent(f"""\
        workerPoolSpecs:
        - machineSpec: {{machineType: n1-standard-4}}
          replicaCount: 1
          pythonPackageSpec:
            executorImageUri: {EXECUTOR}
            packageUris: [gs://pkgs/from-config.tar.gz]
            pythonModule: trainer.task
            args: [--from-config, 0.5]
            env:
            - {{name: WORKERS, value: 4}}
        baseOutputDirectory: {{outputUriPrefix: gs://out/run1}}
        scheduling: {{timeout: 7200s}}
        serviceAccount: {config_account}
        """))
    _, job = create(ai, "--display-name", "configured", "--config", str(config),
                    "--service-account", account, "--args=--from-flags",
                    "--python-package-uris=gs://pkgs/from-flags.tar.gz")
    spec = job["jobSpec"]
    assert spec["workerPoolSpecs"] == [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": EXECUTOR, "packageUris": ["gs://pkgs/from-flags.tar.gz"],
                              "pythonModule": "trainer.task",
                              # typed by the schema: strings stay strings
                              "args": ["--from-config", "0.5", "--from-flags"],
                              "env": [{"name": "WORKERS", "value": "4"}]}}]
    assert spec["serviceAccount"] == account
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://out/run1"}
    assert spec["scheduling"]["timeout"] == "7200s"

    # --worker-pool-spec replaces the config's pools; the rest of it stays.
    _, job = create(ai, "--display-name", "replaced", "--config", str(config),
                    pool(f"executor-image-uri={EXECUTOR}", "python-module=other.task"),
                    "--python-package-uris=gs://pkgs/other.tar.gz")
    assert [p["pythonPackageSpec"]["pythonModule"] for p in job["jobSpec"]["workerPoolSpecs"]] == ["other.task"]
    assert job["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://out/run1"}
    assert job["jobSpec"]["serviceAccount"] == config_account


def test_a_config_holding_a_whole_custom_job_is_refused(ai, tmp_path):
    config = tmp_path / "job.yaml"
    config.write_text("displayName: x\njobSpec:\n  workerPoolSpecs: []\n")
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "x", "--config", str(config),
           *UNREACHABLE)
    assert r.rc == 1 and "holds a CustomJob" in r.err and "cannot reach" not in r.err, r


def test_local_package_path_is_built_staged_and_named_by_the_job(ai, names, trainer, storage_api):
    before = sorted(os.listdir(trainer.parent))
    r, job = create(ai, "--display-name", "local build", "--staging-bucket", f"gs://{names.staging}",
                    pool(f"executor-image-uri={EXECUTOR}", f"local-package-path={trainer.parent}",
                         "python-module=trainer.task"),
                    "--python-package-uris=gs://pkgs/dep-1.0.tar.gz")
    assert "Building the Python package" in r.err
    ps = job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert ps["pythonModule"] == "trainer.task"
    staged, dep = ps["packageUris"]
    assert dep == "gs://pkgs/dep-1.0.tar.gz"
    m = re.fullmatch(rf"gs://{names.staging}/local-build/([0-9a-f]{{64}})/trainer-0\.0\.0\.tar\.gz", staged)
    assert m, staged
    assert ai.ok("storage", "ls", "-r", f"gs://{names.staging}/").out.split() == [staged]
    data = cat(ai, staged)
    assert sha256_hex(data) == m.group(1)
    assert "trainer-0.0.0/trainer/task.py" in members(data)
    assert sorted(os.listdir(trainer.parent)) == before  # no build/, dist/, egg-info left behind


SCRIPT = textwrap.dedent("""\
    import os
    import sys

    import helper  # beside the script, as `python train.py` finds it

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "data", "greeting.txt")) as f:
        print("script says", f.read().strip(), helper.ANSWER, sys.argv[1:], flush=True)
    """)


def test_a_script_becomes_a_package_that_runs_it(ai, names, tmp_path, storage_api, logs_api):
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "train.py").write_text(SCRIPT)
    (src / "helper.py").write_text("ANSWER = 42\n")
    (src / "data" / "greeting.txt").write_text("hello\n")
    config = tmp_path / "spec.yaml"
    base = f"gs://{names.bucket}/runs/script"
    config.write_text(f"baseOutputDirectory: {{outputUriPrefix: {base}}}\n")
    _, job = create(ai, "--display-name", "script", "--config", str(config), "--args=--steps,2",
                    pool(f"executor-image-uri={EXECUTOR}", f"local-package-path={src}", "script=train.py"))
    ps = job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert ps["pythonModule"] == "mlengine_script._mlengine_run"
    [staged] = ps["packageUris"]
    assert re.fullmatch(rf"{base}/packages/[0-9a-f]{{64}}/mlengine_script-0\.0\.0\.tar\.gz", staged), staged
    assert {"mlengine_script-0.0.0/mlengine_script/train.py", "mlengine_script-0.0.0/mlengine_script/helper.py",
            "mlengine_script-0.0.0/mlengine_script/data/greeting.txt"} <= set(members(cat(ai, staged)))

    # It runs: stream-logs follows the job until it ends.
    logs = ai.ok("ai", "custom-jobs", "stream-logs", job["name"], timeout=120)
    assert re.search(r" master-replica-0 script says hello 42 \['--steps', '2'\]$", logs.out, re.M), logs
    assert ai.ok("ai", "custom-jobs", "describe", job["name"], "--format", "value(state)").out == \
        "JOB_STATE_SUCCEEDED\n"


def test_local_packages_with_nowhere_to_stage_them_are_refused_before_building(ai, trainer):
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "x", *UNREACHABLE,
           pool(f"executor-image-uri={EXECUTOR}", f"local-package-path={trainer.parent}", "python-module=trainer.task"))
    assert r.rc == 1, r
    assert "--staging-bucket" in r.err and "baseOutputDirectory" in r.err and "Building" not in r.err, r


def sleeping_job(ai, names, trainer, display_name, *extra, kind="custom-jobs"):
    """A job whose trainer sleeps until it is cancelled."""
    _, job = create(ai, "--display-name", display_name, "--staging-bucket", f"gs://{names.staging}",
                    pool(f"executor-image-uri={EXECUTOR}", f"local-package-path={trainer.parent}",
                         "python-module=trainer.task"), "--args=--sleep,300", *extra, kind=kind)
    return job


def test_list_describe_and_cancel_custom_jobs(ai, names, trainer, storage_api):
    a = sleeping_job(ai, names, trainer, "alpha", "--labels=team=a")
    b = sleeping_job(ai, names, trainer, "beta", "--labels=team=b")

    table = ai.ok("ai", "custom-jobs", "list", "--region", REGION).out.splitlines()
    assert table[0].split() == ["ID", "DISPLAY_NAME", "STATE", "CREATE_TIME"]
    assert [line.split()[:2] for line in table[1:]] == [[job_id(b), "beta"], [job_id(a), "alpha"]]  # newest first
    listed = ai.ok("ai", "custom-jobs", "list", "--region", REGION, "--filter", "labels.team=a", "--format",
                   "json").json()
    assert [j["name"] for j in listed] == [a["name"]]
    assert ai.ok("ai", "custom-jobs", "list", "--region", REGION, "--limit", "1", "--page-size", "1",
                 "--format", "value(displayName)").out == "beta\n"
    assert ai.ok("ai", "custom-jobs", "list", "--region", REGION, "--sort-by", "displayName",
                 "--format", "value(displayName)").out == "alpha\nbeta\n"
    assert ai.ok("ai", "custom-jobs", "list", "--region", REGION, "--sort-by", "~display_name", "--limit", "1",
                 "--format", "value(displayName)").out == "beta\n"
    # The region from the environment, as gcloud reads it.
    assert ai.ok("ai", "custom-jobs", "list", "--format", "value(displayName)",
                 env={"CLOUDSDK_AI_REGION": REGION}).out == "beta\nalpha\n"

    r = ai.ok("ai", "custom-jobs", "cancel", job_id(a), "--region", REGION)
    assert f"Request to cancel CustomJob [{a['name']}] has been sent." in r.err
    state = ai.ok("ai", "custom-jobs", "describe", a["name"], "--format", "value(state)").out.strip()
    assert state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    ai.ok("ai", "custom-jobs", "cancel", b["name"])

    # Each collection finds only its own jobs, in its region.
    for args in (["ai", "hp-tuning-jobs", "describe", job_id(a), "--region", REGION],
                 ["ai", "hp-tuning-jobs", "stream-logs", job_id(a), "--region", REGION],
                 ["ai", "custom-jobs", "describe", job_id(a), "--region", "europe-west4"]):
        r = ai(*args)
        assert r.rc == 1 and "NOT_FOUND" in r.err, r


# ---------------------------------------------------------------- tuning jobs

STUDY = textwrap.dedent(f"""\
    studySpec:
      metrics:
      - metricId: accuracy
        goal: MAXIMIZE
      parameters:
      - parameterId: lr
        doubleValueSpec: {{minValue: 0.001, maxValue: 0.1}}
        scaleType: UNIT_LOG_SCALE
      - parameterId: layers
        integerValueSpec: {{minValue: 1, maxValue: 4}}
    maxTrialCount: 4
    parallelTrialCount: 2
    labels: {{team: search}}
    trialJobSpec:
      workerPoolSpecs:
      - machineSpec: {{machineType: n1-standard-4}}
        replicaCount: 1
        pythonPackageSpec:
          executorImageUri: {EXECUTOR}
          packageUris: [gs://pkgs/trainer-0.1.tar.gz]
          pythonModule: trainer.task
    """)


def test_hp_tuning_job_from_a_config_with_its_study(ai, tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    r, job = create(ai, "--display-name", "lr search", "--config", str(config), "--max-trial-count", "6",
                    "--algorithm", "random-search", "--max-failed-trial-count", "2", "--labels=owner=ann",
                    kind="hp-tuning-jobs")
    assert re.fullmatch(rf"projects/{ai.project}/locations/{REGION}/hyperparameterTuningJobs/\d+", job["name"])
    assert f"Hyperparameter tuning job [{job['name']}] submitted successfully." in r.err
    assert job["maxTrialCount"] == 6 and job["parallelTrialCount"] == 2 and job["maxFailedTrialCount"] == 2
    assert job["labels"] == {"team": "search", "owner": "ann"}
    study = job["studySpec"]
    assert study["algorithm"] == "RANDOM_SEARCH"
    assert study["metrics"] == [{"metricId": "accuracy", "goal": "MAXIMIZE"}]
    assert study["parameters"][0]["doubleValueSpec"] == {"minValue": 0.001, "maxValue": 0.1}
    assert study["parameters"][1]["integerValueSpec"] == {"minValue": "1", "maxValue": "4"}
    assert job["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] == \
        ["gs://pkgs/trainer-0.1.tar.gz"]


def test_list_describe_and_cancel_tuning_jobs(ai, names, trainer, tmp_path, storage_api):
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    # The trials' spec from --worker-pool-spec (a local package), the study from the config.
    job = sleeping_job(ai, names, trainer, "tuning", "--config", str(config), kind="hp-tuning-jobs")
    assert job["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"] == ["--sleep", "300"]

    table = ai.ok("ai", "hp-tuning-jobs", "list", "--region", REGION).out.splitlines()
    assert [line.split()[:2] for line in table[1:]] == [[job_id(job), "tuning"]], table
    assert ai.ok("ai", "custom-jobs", "list", "--region", REGION).err == "Listed 0 items.\n"
    described = ai.ok("ai", "hp-tuning-jobs", "describe", job_id(job), "--region", REGION, "--format", "json").json()
    assert described["studySpec"] == job["studySpec"]

    r = ai.ok("ai", "hp-tuning-jobs", "cancel", job["name"])
    assert f"Request to cancel Hyperparameter tuning job [{job['name']}] has been sent." in r.err
    state = ai.ok("ai", "hp-tuning-jobs", "describe", job["name"], "--format", "value(state)").out.strip()
    assert state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


# ---------------------------------------------------------------- errors


def test_a_bad_spec_prints_every_violation_with_its_path(ai):
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "bad",
           pool("executor-image-uri=not-an-image", "python-module=trainer.task", "replica-count=2",
                machine="no-such-machine"),
           "--python-package-uris=gs://pkgs/t.tar.gz")
    assert r.rc == 1, r
    lines = r.err.splitlines()
    assert lines[0] == "ERROR: (mlengine.ai.custom-jobs.create) INVALID_ARGUMENT: The job is invalid.", r
    fields = sorted(line.split(":")[0].strip() for line in lines[1:])
    assert fields == ["jobSpec.workerPoolSpecs[0].machineSpec.machineType",
                      "jobSpec.workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
                      "jobSpec.workerPoolSpecs[0].replicaCount"], r


def test_a_tuning_job_without_a_study_prints_every_violation(ai, tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text("maxTrialCount: 2\n")
    r = ai("ai", "hp-tuning-jobs", "create", "--region", REGION, "--display-name", "no study", "--config", str(config),
           pool(f"executor-image-uri={EXECUTOR}", "python-module=trainer.task"),
           "--python-package-uris=gs://pkgs/t.tar.gz")
    assert r.rc == 1, r
    assert "\n  studySpec.metrics: " in r.err and "\n  studySpec.parameters: " in r.err, r


@pytest.mark.parametrize("args", [
    ["custom-jobs", "create", "--display-name", "x", pool("container-image-uri=i")],
    ["hp-tuning-jobs", "create", "--display-name", "x", "--config", "study.yaml", pool("container-image-uri=i")],
    ["custom-jobs", "list"],
    ["custom-jobs", "describe", "123"],
    ["hp-tuning-jobs", "cancel", "123"],
    ["custom-jobs", "stream-logs", "123"],
])
def test_a_missing_region_is_refused_before_any_call(ai, args):
    r = ai("ai", *args, *UNREACHABLE)
    assert r.rc == 1 and "argument --region: must be given (or set CLOUDSDK_AI_REGION)" in r.err, r


@pytest.mark.parametrize("kind, missing", [("custom-jobs", "--display-name"), ("hp-tuning-jobs", "--display-name"),
                                           ("hp-tuning-jobs", "--config")])
def test_a_missing_display_name_or_study_is_refused_before_any_call(ai, kind, missing):
    given = {"--display-name": ["--display-name", "x"], "--config": ["--config", "study.yaml"]}
    args = [a for flag, pair in given.items() if flag != missing for a in pair]
    r = ai("ai", kind, "create", "--region", REGION, *args, pool("container-image-uri=i"), *UNREACHABLE)
    assert r.rc == 2 and f"{missing} is required" in r.err and "cannot reach" not in r.err, r


@pytest.mark.parametrize("args, message", [
    ([pool("container-image-uri=i", "colour=red")], 'workerPoolSpecs[0]): unknown key "colour"'),
    (["--worker-pool-spec=container-image-uri=i"], "workerPoolSpecs[0]): machine-type is required"),
    ([pool("container-image-uri=i"), pool("replica-count=0", "container-image-uri=i")],
     "workerPoolSpecs[1]): replica-count must be a positive integer"),
    ([pool("container-image-uri=i", "accelerator-type=abacus")], "accelerator-type: invalid choice \"abacus\""),
    ([pool("container-image-uri=i", f"executor-image-uri={EXECUTOR}")], "not both"),
    ([pool()], "give container-image-uri=IMAGE"),
    ([pool(f"executor-image-uri={EXECUTOR}", "script=train.py")], "local-package-path"),
    ([pool(f"executor-image-uri={EXECUTOR}", "python-module=m")], "--python-package-uris"),
    ([pool("container-image-uri=i", "requirements=numpy")], "key requirements is not supported here"),
    (["--worker-pool-spec="], "the first pool (the chief's) cannot be empty"),
    ([pool(f"executor-image-uri={EXECUTOR}", "local-package-path=/no/such/dir", "python-module=m")],
     "local-package-path /no/such/dir is not a directory"),
    ([pool("container-image-uri=i"), "--command=x", "--labels=novalue"], "argument --labels"),
    ([], "the job has no worker pool: give --worker-pool-spec, or workerPoolSpecs in --config"),
])
def test_bad_flags_are_refused_naming_them_before_any_call(ai, args, message):
    r = ai("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "x", *args, *UNREACHABLE)
    assert r.rc == 1 and message in r.err and "cannot reach" not in r.err, r


def test_bad_tuning_flags_and_job_names_are_refused(ai, tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text(STUDY)
    r = ai("ai", "hp-tuning-jobs", "create", "--region", REGION, "--display-name", "x", "--algorithm", "guess",
           "--config", str(config), *UNREACHABLE)
    assert r.rc == 1 and 'argument --algorithm: invalid choice "guess"' in r.err, r
    r = ai("ai", "hp-tuning-jobs", "create", "--region", REGION, "--display-name", "x", "--max-trial-count", "0",
           "--config", str(config), *UNREACHABLE)
    assert r.rc == 2 and "--max-trial-count" in r.err, r
    r = ai("ai", "custom-jobs", "describe", f"projects/p/locations/{REGION}/hyperparameterTuningJobs/1", *UNREACHABLE)
    assert r.rc == 1 and "projects/PROJECT/locations/REGION/customJobs/ID" in r.err, r
