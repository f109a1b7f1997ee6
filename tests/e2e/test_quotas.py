"""Quotas through the real binaries: a job waits for its project's quota,
saying so with the numbers and the job that holds it, and the quota's usage
survives kill -9 (the adopted job still counts)."""

import json

from conftest import config_yaml, make_cli, wait_for


def one_job_at_a_time(server_factory, tmp_path, names):
    """A server whose quota lets the test's project run one job at a time in
    us-central1, and the CLI of that project."""
    config = config_yaml(pod_quota=False) + (
        "quotas:\n"
        "  defaults: {TPU_V2_POD_CORES: 0, TPU_V3_POD_CORES: 0}\n"
        f"  projects:\n    {names.project}:\n      us-central1: {{JOBS: 1}}\n")
    server = server_factory(config)
    return server, make_cli(server, tmp_path, names)


def test_a_job_waits_for_its_projects_quota_and_the_usage_survives_kill_9(server_factory, tmp_path, names):
    server, cli = one_job_at_a_time(server_factory, tmp_path, names)
    gate = f"gs://{cli.bucket}/{names.job('gate')}"
    first, second = names.job("first"), names.job("second")
    r = cli.submit(first, "--scale-tier", "basic", args=["--wait-for", gate])
    assert r.rc == 0, r
    cli.wait_state(first, {"RUNNING"})
    r = cli.submit(second, "--scale-tier", "basic")
    assert r.rc == 0, r
    waiting = cli.describe(second)
    assert waiting["state"] == "QUEUED", waiting
    expected = f"project quota JOBS 1 in us-central1: 1 in use by job {first}"
    assert waiting.get("errorMessage", "").startswith(expected), waiting

    server.kill()
    server.start()
    # Recovery (adoption, then a scheduling pass) is done before the server
    # answers: had the adopted job not counted, the second would have started.
    after = cli.describe(second)
    assert after["state"] == "QUEUED" and after["errorMessage"].startswith(expected), after
    assert cli.describe(first)["state"] == "RUNNING"

    cli.open_gate(gate)
    assert cli.wait_state(first, {"SUCCEEDED"})["state"] == "SUCCEEDED"
    assert cli.wait_state(second, {"SUCCEEDED"})["state"] == "SUCCEEDED"


def test_naming_another_region_served_by_the_same_hosts_does_not_leave_the_quota_behind(server_factory, tmp_path,
                                                                                       names):
    """A job that waited for its quota in us-central1 once ran at once with
    --region europe-west4 on the same host: now what the project runs in
    every region this cluster serves counts against each region's quota."""
    config = config_yaml(pod_quota=False) + (
        "regions: [us-central1, europe-west4]\n"
        "quotas:\n"
        "  defaults: {TPU_V2_POD_CORES: 0, TPU_V3_POD_CORES: 0, JOBS: 1}\n")
    server = server_factory(config)
    cli = make_cli(server, tmp_path, names)
    gate = f"gs://{cli.bucket}/{names.job('gate')}"
    first, second = names.job("first"), names.job("second")
    assert cli.submit(first, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    cli.wait_state(first, {"RUNNING"})
    r = cli.submit(second, "--scale-tier", "basic", "--region", "europe-west4")
    assert r.rc == 0, r
    waiting = cli.describe(second)
    assert waiting["state"] == "QUEUED", waiting
    assert waiting.get("errorMessage", "").startswith(
        f"project quota JOBS 1 in europe-west4: 1 in use by job {first} (in us-central1)"), waiting

    cli.open_gate(gate)
    assert cli.wait_state(first, {"SUCCEEDED"})["state"] == "SUCCEEDED"
    assert cli.wait_state(second, {"SUCCEEDED"})["state"] == "SUCCEEDED"


def test_a_vertex_job_waits_behind_an_ml_job_for_the_same_quota_and_says_why(server_factory, tmp_path, names):
    """One queue and one quota for both APIs: a custom job waits for the
    project's JOBS quota an ml v1 job holds, and says why through
    `jobs/ID/waiting` (Vertex's CustomJob has no field for it; who may read
    it: test_vertex_api.py)."""
    from test_vertex import create_custom_job, custom_job, stage_package, wait_ended
    server, cli = one_job_at_a_time(server_factory, tmp_path, names)
    gate = f"gs://{cli.bucket}/{names.job('gate')}"
    first = names.job("first")
    assert cli.submit(first, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    cli.wait_state(first, {"RUNNING"})
    package = stage_package(cli, tmp_path)
    created = create_custom_job(server, cli.project, custom_job(package, [], workers=0))
    job_id = created["name"].rsplit("/", 1)[1]
    # The reason is the scheduler's, from its first pass over the new job
    # (just after the create's answer).
    def waiting_now():
        status, text = server.request("GET", f"/v1/projects/{cli.project}/jobs/{job_id}/waiting")
        assert status == 200, text
        return json.loads(text)
    wait_for(lambda: "reason" in waiting_now(), "the custom job's reason to wait", timeout=30)
    waiting = waiting_now()
    assert waiting["state"] == "QUEUED" and waiting["position"] == "1", waiting
    assert waiting["reason"].startswith(f"project quota JOBS 1 in us-central1: 1 in use by job {first}"), waiting

    cli.open_gate(gate)
    assert cli.wait_state(first, {"SUCCEEDED"})["state"] == "SUCCEEDED"
    assert wait_ended(server, created["name"])["state"] == "JOB_STATE_SUCCEEDED"
    status, text = server.request("GET", f"/v1/projects/{cli.project}/jobs/{job_id}/waiting")
    assert status == 200 and json.loads(text) == {"state": "SUCCEEDED"}, text
