"""The process mlengine runs on each TPU host of a job under Slurm.

On AI Platform a TPU job was a master VM driving a TensorFlow server on each
TPU host. Under ``mlengined --executor slurm`` every TPU host of the job's
allocation runs this module as ``tpu-replica-<i>``: it reports which slice
it belongs to (``TPU_WORKER_ID``, ``TPU_WORKER_HOSTNAMES``,
``TPU_ACCELERATOR_TYPE``) and listens on ``MLENGINE_TPU_PORT``, where the
master's :func:`mlengine.tpu.wait_for_tpu_cluster_resolver_ready` finds it.
Each connection gets one line, ``mlengine-tpu-worker <id> <host> <type>``.

No TPU exists on mlengine's test clusters: when
``MLENGINE_SIMULATED_ACCELERATOR`` is set this worker says so, and serves
no accelerator. It runs until the job ends (Slurm stops it).
"""

import os
import signal
import socket
import sys


def main():
    worker_id = os.environ.get("TPU_WORKER_ID", "0")
    hosts = os.environ.get("TPU_WORKER_HOSTNAMES", "")
    accel = os.environ.get("TPU_ACCELERATOR_TYPE", "")
    simulated = os.environ.get("MLENGINE_SIMULATED_ACCELERATOR", "")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    port = int(os.environ.get("MLENGINE_TPU_PORT", "0") or 0)
    server = socket.create_server(("", port), reuse_port=False)
    server.settimeout(None)
    print("TPU worker %s of slice %s on %s (hosts %s), listening on port %d%s"
          % (worker_id, accel, node, hosts, server.getsockname()[1],
             "; SIMULATED: %s, no real TPU here" % simulated if simulated else ""),
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    line = ("mlengine-tpu-worker %s %s %s\n" % (worker_id, node, accel)).encode()
    while True:
        conn, _ = server.accept()
        try:
            conn.sendall(line)
        except OSError:
            pass
        finally:
            conn.close()


if __name__ == "__main__":
    main()
