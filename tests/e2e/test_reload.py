"""mlengined's reload (SIGHUP, what `systemctl reload mlengined` sends):
the configuration file is read again and what may change while serving is
in force at once (quotas, accounting rates, ...), without a restart; a
file that cannot be read changes nothing, and the server goes on."""

import os
import signal
from datetime import datetime

from conftest import config_yaml, make_cli, wait_for


def reloads(server):
    with open(server.stderr_path) as f:
        text = f.read()
    return text.count("reloaded "), text.count("reload refused")


def test_sighup_reads_the_configuration_again_and_a_bad_file_changes_nothing(server_factory, tmp_path, names):
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    before = cli.ok("admin", "quotas", "describe", "--format=json").json()
    assert before["quotas"]["defaults"]["TPU_V2_POD_CORES"] == 512, before

    with open(server.config_path, "w") as f:
        f.write(config_yaml(pod_quota=False) + "quotas:\n  defaults: {TPU_V2_POD_CORES: 64, TPU_V3_POD_CORES: 32}\n"
                "accounting:\n  ml_units_per_hour:\n    machine_types: {standard: 5}\n")
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: reloads(server)[0] == 1, "the reload to be logged", timeout=30)
    after = cli.ok("admin", "quotas", "describe", "--format=json").json()
    assert after["quotas"]["defaults"]["TPU_V2_POD_CORES"] == 64 and after["source"] == "configuration file", after
    job = names.job("rated")
    assert cli.submit(job, "--scale-tier=BASIC", args=["--sleep", "1"]).rc == 0
    done = cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
    def at(text):
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    hours = sum((at(a["endTime"]) - at(a["startTime"])).total_seconds() / 3600
                for a in done["attempts"] if "startTime" in a)
    assert abs(done["trainingOutput"]["consumedMLUnits"] - 5 * hours) < 1e-6, (done, hours)

    # A file that does not parse: refused, said, and nothing changes.
    with open(server.config_path, "w") as f:
        f.write("quotas: [this is not\n")
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: reloads(server)[1] == 1, "the refused reload to be logged", timeout=30)
    assert server.proc.poll() is None, "mlengined ended on a bad reload"
    assert cli.ok("admin", "quotas", "describe", "--format=json").json()["quotas"] == after["quotas"]
    assert os.path.exists(server.config_path)
