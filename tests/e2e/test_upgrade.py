"""Upgrades (docs/operations.md, "Upgrades"): a data directory written by a
later release (its database schema newer than this mlengined knows) is
refused with a message saying so, and left exactly as it was."""

import hashlib
import os
import sqlite3
import subprocess

from conftest import MLENGINED, config_yaml, make_cli


def digests(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_a_data_directory_of_a_later_release_is_refused_and_left_alone(server_factory, tmp_path, names):
    server = server_factory(config_yaml())
    cli = make_cli(server, tmp_path, names)
    job = names.job("before")
    assert cli.submit(job, args=["--sleep", "0"]).rc == 0
    cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
    server.stop()
    db = os.path.join(server.data_dir, "mlengine.db")
    conn = sqlite3.connect(db)
    known = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute(f"PRAGMA user_version={known + 7}")
    conn.commit()
    conn.close()  # its WAL checkpointed and gone: the directory as a later release leaves it
    before = digests(server.data_dir)

    p = subprocess.run([MLENGINED, "--listen", "127.0.0.1:0", "--data-dir", server.data_dir,
                        "--config", server.config_path], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p
    said = p.stdout + p.stderr
    assert f"schema is version {known + 7} but this mlengined knows only up to {known}" in said, said
    assert "run a newer mlengined" in said, said
    assert digests(server.data_dir) == before, "a refused data directory was changed"
