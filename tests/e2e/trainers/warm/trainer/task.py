"""The warm-start suite's probe: prints, as one JSON line, what a trainer
can see of how it was started (argv, cwd, sys.path, sys.executable,
sys.prefix, its environment, signal dispositions, torch's thread counts,
fresh random values, its pid), then ends as --end says: "exit:N", "raise",
"signal" (SIGTERM to itself), "sleep" (600 s), "gloo" (an all_reduce
across the job's replicas over torch.distributed) or "gloo-hold:S" (the same,
then S seconds more with the process group open)."""

import json
import os
import random
import signal
import sys
import time

import numpy
import torch


def main(argv):
    end = "exit:0"
    for a in argv:
        if a.startswith("--end="):
            end = a.split("=", 1)[1]
    out = {
        "argv": sys.argv[1:], "cwd": os.getcwd(), "path": sys.path, "executable": sys.executable,
        "prefix": sys.prefix, "name": __name__,
        "env": {k: v for k, v in sorted(os.environ.items())
                if not k.startswith(("MLENGINE_ACCESS_TOKEN", "CLOUD_ML_JOB_ID", "TF_CONFIG", "CLUSTER_SPEC",
                                     "MLENGINE_RUN_DIR", "CLOUD_ML_HP_METRIC_FILE", "MASTER_PORT",
                                     "STORAGE_EMULATOR_HOST"))},
        "signals": {n: str(signal.getsignal(getattr(signal, n))) for n in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGHUP")},
        "threads": [torch.get_num_threads(), torch.get_num_interop_threads()],
        "random": [random.random(), float(numpy.random.rand()), float(torch.rand(1))],
        "pid": os.getpid(),
    }
    print("PROBE " + json.dumps(out), flush=True)
    if end.startswith("exit:"):
        return int(end.split(":")[1])
    if end == "raise":
        raise RuntimeError("the probe failed on purpose")
    if end == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    if end == "sleep":
        time.sleep(600)
    if end == "gloo" or end.startswith("gloo-hold:"):
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="env://")
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        print("ALLREDUCE %s of %d" % (t.item(), dist.get_world_size()), flush=True)
        if end.startswith("gloo-hold:"):
            time.sleep(float(end.split(":")[1]))
            dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
