"""Usage accounting (docs/operations.md, "Usage accounting"): each job's
trainingOutput.consumedMLUnits once it ends, from its replicas' machine
types and the time its attempts ran (the operator's rates from the
configuration), the operator's report per project and user (`mlengine admin
usage`), and /metrics. Known jobs, checked against their own recorded
attempts; kept across a restart."""

from datetime import datetime, timedelta

from conftest import REGION, RUNTIME, call_as, config_yaml, make_cli

# The operator's rate for `standard` (BASIC's machine): 3 ML units an hour
# instead of AI Platform's 1. n1-standard-4 keeps the default (1 an hour).
ACCOUNTING = """accounting:
  ml_units_per_hour:
    machine_types: {standard: 3}
    accelerators: {NVIDIA_TESLA_T4: 2}
"""


def parse_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def run_hours(job):
    """Hours the job's attempts ran, from what it recorded of them."""
    total = 0.0
    for a in job.get("attempts", []):
        if "startTime" in a:
            total += (parse_time(a["endTime"]) - parse_time(a["startTime"])).total_seconds() / 3600
    return total


def metric(text, name, project):
    for line in text.splitlines():
        if line.startswith(name + "{") and f'project="{project}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_consumed_ml_units_and_the_usage_report_per_project_and_user(server_factory, tmp_path, names):
    server = server_factory(config_yaml() + ACCOUNTING)
    cli = make_cli(server, tmp_path, names)
    project = cli.project

    # The operator's job: BASIC (one `standard`), 3 seconds.
    basic = names.job("basic")
    assert cli.submit(basic, "--scale-tier=BASIC", args=["--sleep", "3"]).rc == 0
    # A user's job, through the REST API as Google's clients send it: a
    # master and a worker of n1-standard-4.
    email = f"usage{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.developer")
    package = cli.describe(basic)["trainingInput"]["packageUris"]
    custom = names.job("custom")
    status, created = call_as(server, token, "POST", f"/v1/projects/{project}/jobs", {
        "jobId": custom, "trainingInput": {
            "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": "1",
            "region": REGION, "runtimeVersion": RUNTIME, "packageUris": package, "pythonModule": "trainer.task",
            "args": ["--sleep", "2"]}})
    assert status == 200, created
    # A job cancelled before it ran used nothing.
    never = names.job("never")
    assert cli.submit(never, "--scale-tier=BASIC", args=["--sleep", "1"]).rc == 0
    cli.ok("jobs", "cancel", never)

    jobs = {j: cli.wait_state(j, {"SUCCEEDED", "CANCELLED"}, timeout=180) for j in (basic, custom, never)}
    assert jobs[basic]["state"] == "SUCCEEDED" and jobs[custom]["state"] == "SUCCEEDED", jobs
    # consumedMLUnits: the rate per hour times the hours its attempts ran.
    basic_hours, custom_hours = run_hours(jobs[basic]), run_hours(jobs[custom])
    assert basic_hours >= 3 / 3600, jobs[basic]
    assert custom_hours >= 2 / 3600, jobs[custom]
    basic_units = jobs[basic]["trainingOutput"]["consumedMLUnits"]
    custom_units = jobs[custom]["trainingOutput"]["consumedMLUnits"]
    assert abs(basic_units - 3 * basic_hours) < 1e-6, (basic_units, basic_hours)
    assert abs(custom_units - 2 * 1.0 * custom_hours) < 1e-4, (custom_units, custom_hours)
    never_units = jobs[never].get("trainingOutput", {}).get("consumedMLUnits", 0)
    if run_hours(jobs[never]) == 0:
        assert never_units == 0, jobs[never]

    # The operator's report: per project and user.
    report = cli.ok("admin", "usage", "--by=project,user", f"--project={project}", "--format=json").json()
    rows = {r["user"]: r for r in report["rows"]}
    assert set(rows) == {"operator", f"user:{email}"}, report
    op, user = rows["operator"], rows[f"user:{email}"]
    assert op["project"] == project and op["jobs"] == 2, op  # the BASIC job and the one cancelled
    assert user["jobs"] == 1, user
    assert abs(op["mlUnits"] - basic_units - never_units) < 1e-6, (op, basic_units)
    assert abs(user["mlUnits"] - custom_units) < 1e-6, (user, custom_units)
    # CPU hours: what the cluster set aside (local.replica_cpu_milli, one CPU a replica).
    assert abs(user["cpuHours"] - 2 * custom_hours) < 1e-4 and user["gpuHours"] == 0, user
    assert abs(user["runHours"] - custom_hours) < 1e-4, user
    assert user["queueHours"] >= 0 and op["queueHours"] > 0, report
    assert abs(report["total"]["mlUnits"] - op["mlUnits"] - user["mlUnits"]) < 1e-9, report
    table = cli.ok("admin", "usage", "--by=user", f"--project={project}").out
    assert f"user:{email}" in table and "TOTAL" in table and "ML UNITS" in table, table

    # A period: after everything ended, nothing was used; before, nothing either.
    # (endTime is to the microsecond; the server keeps finer times.)
    last_end = max(parse_time(j["endTime"]) for j in jobs.values()) + timedelta(milliseconds=1)
    later = cli.ok("admin", "usage", f"--project={project}", f"--start={last_end.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}",
                   "--format=json").json()
    assert all(r["mlUnits"] == 0 and r["jobs"] == 0 for r in later["rows"]), later
    earlier = cli.ok("admin", "usage", f"--project={project}", "--end=2020-01-01", "--format=json").json()
    assert earlier["rows"] == [], earlier

    # Bad input is refused, saying what is expected.
    r = cli("admin", "usage", "--start=yesterday")
    assert r.rc != 0 and "expected a date" in r.err, r
    status, body = server.request("GET", "/mlengine/v1/usage?groupBy=team")
    assert status == 400 and "groupBy" in body, body
    status, body = server.request("GET", "/mlengine/v1/usage?startTime=2026-02-01T00:00:00Z&endTime=2026-01-01T00:00:00Z")
    assert status == 400 and "endTime" in body, body
    # Only the operator reads everyone's usage.
    status, body = call_as(server, token, "GET", "/mlengine/v1/usage")
    assert status == 403, body

    # /metrics: what each attempt used, by project.
    status, text = server.request("GET", "/metrics")
    assert status == 200
    units = metric(text, "mlengine_usage_ml_units_total", project)
    assert units is not None and abs(units - basic_units - custom_units - never_units) < 1e-6, (units, text[:2000])

    # Kept across a restart: the units, and who created each job.
    server.stop()
    server.start()
    assert cli.describe(custom)["trainingOutput"]["consumedMLUnits"] == custom_units
    again = cli.ok("admin", "usage", "--by=user", f"--project={project}", "--format=json").json()
    # (Times are stored to the microsecond.)
    before = {r["user"]: r["mlUnits"] for r in report["rows"]}
    after = {r["user"]: r["mlUnits"] for r in again["rows"]}
    assert before.keys() == after.keys() and all(abs(before[u] - after[u]) < 1e-8 for u in before), (before, after)
