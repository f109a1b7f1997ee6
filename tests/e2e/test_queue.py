"""Queueing and gang placement on a server with exactly two replica slots:
a 2-replica job takes both, a 1-replica job behind it waits QUEUED (position
1) until the first is cancelled, then runs."""

import os
import re
import time

from conftest import config_yaml, make_cli


def test_queue_and_gang(server_factory, tmp_path, names):
    # Two slots: schedulable CPU is cores x 1000 x cpu_oversubscription, each
    # replica asks replica_cpu_milli (1000 on the usual 2-core machine).
    cores = os.sysconf("SC_NPROCESSORS_ONLN")
    server = server_factory(config_yaml(cpu_oversubscription=1, replica_cpu_milli=cores * 1000 // 2))
    with open(server.stderr_path) as f:
        inventory = f.read()
    assert re.search(rf"localhost: {cores} schedulable CPUs", inventory), inventory
    cli = make_cli(server, tmp_path, names)

    a = names.job("a")
    r = cli.submit(a, "--scale-tier=custom", "--master-machine-type=n1-standard-4",
                   "--worker-machine-type=n1-standard-4", "--worker-count=1", args=["--sleep", "600"])
    assert r.rc == 0, r
    cli.wait_state(a, {"RUNNING"}, timeout=60)
    cli.wait_log(a, "sleeping", task="worker-replica-0", timeout=60)

    b = names.job("b")
    r = cli.submit(b, args=["--lines", "1"])
    assert r.rc == 0, r
    # B must stay queued while A holds both slots: watch it across more than
    # one scheduler tick (the scheduler wakes at least once a second).
    deadline = time.time() + 2.5
    while time.time() < deadline:
        desc = cli.describe(b)
        assert desc["state"] == "QUEUED", f"B left the queue while A holds every slot: {desc}\n{cli.explain(a)}"
        assert desc.get("jobPosition") == "1", f"B's jobPosition: {desc}"
        time.sleep(0.2)
    assert cli.describe(a)["state"] == "RUNNING"

    cli.ok("jobs", "cancel", a)
    cli.wait_state(a, {"CANCELLED"}, timeout=30)
    desc = cli.wait_state(b, {"SUCCEEDED"}, timeout=60)
    assert "jobPosition" not in desc, desc
    assert desc["startTime"] >= cli.describe(a)["endTime"], "B started before A released its slots"
