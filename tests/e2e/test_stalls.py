"""A running job that writes nothing and uses no CPU is stalled: said in its
errorMessage while it runs and taken back when it moves (stall_action: flag),
or ended FAILED with the reason (stall_action: fail). Through the real
binaries, with the operator's stall_after_seconds at 2."""

from conftest import config_yaml, make_cli, wait_for


def stalled_server(server_factory, action):
    return server_factory(config_yaml(local={"stall_after_seconds": 2, "stall_action": action}))


def test_a_silent_job_is_flagged_and_a_talking_one_is_not(server_factory, tmp_path, names):
    cli = make_cli(stalled_server(server_factory, "flag"), tmp_path, names)
    silent, talking = names.job("silent"), names.job("talking")
    gate = f"gs://{cli.bucket}/{names.job('gate')}"
    # --sleep: no line, no CPU; --wait-for prints a line every 0.5 s.
    assert cli.submit(silent, "--scale-tier", "basic", args=["--lines", "1", "--sleep", "8"]).rc == 0
    assert cli.submit(talking, "--scale-tier", "basic", args=["--wait-for", gate]).rc == 0
    wait_for(lambda: "Stalled: " in cli.describe(silent).get("errorMessage", ""), "the silent job to be flagged",
             timeout=30)
    desc = cli.describe(silent)
    assert desc["state"] == "RUNNING", desc
    assert desc["errorMessage"].startswith("Stalled: its replicas wrote no log line and used no CPU for "), desc
    talk = cli.describe(talking)
    assert talk["state"] == "RUNNING" and "Stalled" not in talk.get("errorMessage", ""), talk
    cli.open_gate(gate)
    assert cli.wait_state(talking, {"SUCCEEDED"})["state"] == "SUCCEEDED"
    done = cli.wait_state(silent, {"SUCCEEDED"}, timeout=60)
    assert done["state"] == "SUCCEEDED" and not done.get("errorMessage"), done


def test_with_the_fail_action_a_stalled_job_ends_failed_saying_why(server_factory, tmp_path, names):
    cli = make_cli(stalled_server(server_factory, "fail"), tmp_path, names)
    job = names.job("stuck")
    assert cli.submit(job, "--scale-tier", "basic", args=["--sleep", "600"]).rc == 0
    desc = cli.wait_state(job, {"FAILED"}, timeout=60)
    assert desc["errorMessage"].startswith("The job stalled: its replicas wrote no log line and used no CPU for "), desc
    assert "(local.stall_action: fail)" in desc["errorMessage"], desc


def test_replicas_that_never_connect_fail_the_job_naming_them(server_factory, tmp_path, names):
    """local.join_timeout_seconds: a job of several replicas that have not all
    connected to one another (on the job's ports) within it fails, naming
    who did not; replicas that rendezvous (gloo) are left alone."""
    import os
    from conftest import TRAINERS
    cli = make_cli(server_factory(config_yaml(local={"join_timeout_seconds": 8})), tmp_path, names)
    two = ("--scale-tier=custom", "--master-machine-type=n1-standard-4", "--worker-machine-type=n1-standard-4",
           "--worker-count=1")
    alone = names.job("alone")
    assert cli.submit(alone, *two, args=["--sleep", "60"]).rc == 0
    gloo = names.job("gloo")
    assert cli.submit(gloo, *two, package=os.path.join(TRAINERS, "warm", "trainer"),
                      args=["--end=gloo-hold:12"]).rc == 0
    failed = cli.wait_state(alone, {"FAILED", "SUCCEEDED"}, timeout=90)
    assert failed["state"] == "FAILED", failed
    assert failed["errorMessage"].startswith(
        "The replicas master-replica-0, worker-replica-0 did not connect to the job's other replicas within 8 s "
        "of their start (no TCP connection on the job's ports "), failed
    assert "(the operator's limit: local.join_timeout_seconds)" in failed["errorMessage"], failed
    done = cli.wait_state(gloo, {"FAILED", "SUCCEEDED"}, timeout=120)
    assert done["state"] == "SUCCEEDED", cli.explain(gloo)


def test_a_job_may_set_its_own_stall_limit_and_action(cli, names):
    """Labels mlengine-stall-after / mlengine-stall-action replace the
    operator's limit (an hour) and action (flag) for one job."""
    job = names.job("own")
    assert cli.submit(job, "--scale-tier", "basic", "--labels=mlengine-stall-after=2,mlengine-stall-action=fail",
                      args=["--sleep", "600"]).rc == 0
    desc = cli.wait_state(job, {"FAILED"}, timeout=60)
    assert desc["errorMessage"].startswith("The job stalled: its replicas wrote no log line and used no CPU for "), desc
    assert desc["errorMessage"].endswith(
        "The job asks to be ended when stalled (its label mlengine-stall-action: fail)."), desc
    assert [a["end"] for a in desc["attempts"]] == ["STALLED"], desc
    bad = cli.submit(names.job("bad"), "--scale-tier", "basic", "--labels=mlengine-stall-after=1h")
    assert bad.rc != 0 and "labels.mlengine-stall-after" in bad.out + bad.err, bad
