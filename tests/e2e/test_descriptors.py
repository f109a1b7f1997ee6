"""A running job holds none of mlengined's descriptors: neither its listening
socket (opened without O_CLOEXEC by Boost.Asio) nor any other socket, so a
server killed with -9 leaves its port free for its successor."""

import os

from conftest import make_cli, procs_of_job


def fd_links(pid):
    """{fd: link target} of a process ({} once it is gone)."""
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass
    return out


def test_replicas_hold_no_descriptor_of_the_server(server_factory, tmp_path, names):
    server = server_factory()
    cli = make_cli(server, tmp_path, names)
    job = names.job("fds")
    gate_uri = f"gs://{cli.bucket}/{job}/gate"
    r = cli.submit(job, args=["--wait-for", gate_uri])
    assert r.rc == 0, r
    cli.wait_state(job, {"RUNNING"}, timeout=60)
    cli.wait_log(job, "waiting for", timeout=60)

    server_sockets = {t for t in fd_links(server.proc.pid).values() if t.startswith("socket:")}
    assert server_sockets, "mlengined holds no socket: is it listening?"
    procs = procs_of_job(server.run_dir(cli.project, job), job)
    assert procs, "the job has no process"
    for pid, cmd, _, _ in procs:
        links = fd_links(pid)
        leaked = {fd: t for fd, t in links.items() if t in server_sockets}
        assert not leaked, f"pid {pid} ({' '.join(cmd)[:200]}) holds mlengined's sockets: {leaked}"

    gate = tmp_path / "gate"
    gate.write_text("open\n")
    cli.ok("storage", "cp", str(gate), gate_uri)
    cli.wait_state(job, {"SUCCEEDED"}, timeout=60)
