"""A full disk (docs/operations.md, "A full disk"): mlengined's data
directory on a small tmpfs, filled to the last byte while a job runs and
another ends. New jobs and uploads are refused with RESOURCE_EXHAUSTED
naming the disk; nothing already written is lost (jobs, objects, log
lines); the running job goes on; /metrics and the status the console shows
say so; once space is freed everything works again without a restart, and
a restart afterwards finds every job as it was."""

import http.client
import json
import os
import subprocess
import urllib.parse

import pytest

from conftest import RUNTIME, REGION, Cli, Server, config_yaml, wait_for
from test_backup import put_object

CONFIG = config_yaml() + "disk:\n  reserve_mb: 16\n  check_seconds: 1\n"


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m,mode=0755", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(path):
    """Writes `path` until the disk has no byte left."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M"], capture_output=True)
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=4k", "oflag=append", "conv=notrunc"], capture_output=True)
    st = os.statvfs(os.path.dirname(path))
    assert st.f_bavail * st.f_frsize < 4096 * 2, "the disk is not full"


def status(server):
    code, body = server.request("GET", "/mlengine/v1/status")
    assert code == 200, body
    return json.loads(body)["dataDisk"]


def read_bytes(server, bucket, name):
    u = urllib.parse.urlparse(server.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request("GET", f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media",
                     headers={"Authorization": f"Bearer {server.token}"})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, (name, resp.status, data[:300])
    return data


def metric(server, name):
    code, text = server.request("GET", "/metrics")
    assert code == 200
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_full_disk_refuses_new_work_loses_nothing_and_recovers_without_a_restart(small_disk, tmp_path, names):
    server = Server(small_disk / "server", CONFIG)
    try:
        home = tmp_path / "home"
        home.mkdir()
        cli = Cli(server, home, names.project, names.bucket)
        # Before: objects, a job that runs until a gate opens (a line every
        # 0.5 s), and one that ends while the disk is full.
        stored = {f"data/{i}.bin": os.urandom(20000 + i) for i in range(5)}
        for name, data in stored.items():
            put_object(server, cli.bucket, name, data)
        running, ending = names.job("running"), names.job("ending")
        assert cli.submit(running, args=["--wait-for", f"gs://{cli.bucket}/gate"]).rc == 0
        assert cli.submit(ending, args=["--sleep", "4"]).rc == 0
        cli.wait_state(running, {"RUNNING"}, timeout=120)
        cli.wait_state(ending, {"RUNNING"}, timeout=120)
        cli.wait_log(running, "waiting for", timeout=60)
        assert status(server)["full"] is False

        fill(str(small_disk / "filler"))
        wait_for(lambda: status(server)["full"], "the server to see its disk full", timeout=30)
        lines_when_full = len(server.logs(cli.project, running))

        # New work is refused, saying why.
        package = cli.describe(running)["trainingInput"]["packageUris"]
        code, body = server.request("POST", f"/v1/projects/{cli.project}/jobs", {
            "jobId": names.job("refused"), "trainingInput": {
                "scaleTier": "BASIC", "region": REGION, "runtimeVersion": RUNTIME, "packageUris": package,
                "pythonModule": "trainer.task"}})
        assert code == 429 and "RESOURCE_EXHAUSTED" in body and "disk of mlengine's data directory is full" in body, body
        with pytest.raises(AssertionError) as refused:
            put_object(server, cli.bucket, "data/new.bin", b"x" * 100000)
        assert "429" in str(refused.value) and "RESOURCE_EXHAUSTED" in str(refused.value), refused.value
        r = cli.submit(names.job("cli"), args=["--sleep", "0"])  # its package upload is refused
        assert r.rc != 0 and "RESOURCE_EXHAUSTED" in r.err and "full" in r.err, r
        # Everyone sees it; the operator gets the figures.
        disk = status(server)
        assert disk["full"] and "disk is full" in disk["message"] and disk["freeBytes"] < disk["reserveBytes"], disk
        assert metric(server, "mlengine_data_disk_full") == 1
        # What was written reads back; the running job goes on; the other ends.
        for name, data in stored.items():
            assert read_bytes(server, cli.bucket, name) == data, name
        cli.wait_state(ending, {"SUCCEEDED"}, timeout=120)
        assert cli.describe(running)["state"] == "RUNNING"
        # Deleting is how space is made: it is never refused.
        code, body = server.request("DELETE", f"/storage/v1/b/{cli.bucket}/o/data%2F4.bin")
        assert code in (200, 204), body
        del stored["data/4.bin"]

        # Space freed: everything works again, without a restart.
        os.remove(small_disk / "filler")
        wait_for(lambda: not status(server)["full"], "the server to see room again", timeout=30)
        assert metric(server, "mlengine_data_disk_full") == 0
        after = names.job("after")
        assert cli.submit(after, args=["--sleep", "0"]).rc == 0
        cli.wait_state(after, {"SUCCEEDED"}, timeout=120)
        put_object(server, cli.bucket, "gate", b"open\n")
        cli.wait_state(running, {"SUCCEEDED"}, timeout=120)
        logs = [e["message"] for e in server.logs(cli.project, running)]
        assert len(logs) >= lines_when_full and any("done" == m for m in logs), logs[-5:]

        # A restart finds every job as it was and every object intact.
        before = {j["jobId"]: (j["state"], j.get("endTime")) for j in server.list_jobs(cli.project)}
        server.stop()
        server.start()
        again = {j["jobId"]: (j["state"], j.get("endTime")) for j in server.list_jobs(cli.project)}
        assert again == before, (before, again)
        assert again[ending][0] == "SUCCEEDED" and again[running][0] == "SUCCEEDED", again
        for name, data in stored.items():
            assert read_bytes(server, cli.bucket, name) == data, name
    finally:
        problems = server.finish()
    assert not problems, "\n".join(problems)
