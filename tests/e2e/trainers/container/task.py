"""A trainer baked into a custom container image by tests/e2e/test_containers.py.

Its first argument picks what it does; every mode first prints the
replica's environment contract as one JSON line ("CONTRACT {...}") so the
test can check what a container sees.

  contract         print the contract and exit 0
  tpu              the guide's custom-container TPU code: wait for the TPU
                   with its helper (mlengine.tpu), then train a little on CPU
  gloo STEPS       torch.distributed over every master/worker replica (gloo,
                   env://): DDP on a linear model, then an all_reduce check
  write PATH TEXT  write TEXT to the job's bucket path (gs://...) through the
                   mounted bucket root, then list it through the Cloud
                   Storage API at STORAGE_EMULATOR_HOST, as the job's account
  sleep            start a daemon that ignores SIGTERM, then sleep (cancel)
  fail CODE        exit with CODE
"""

import json
import os
import sys
import time


def contract():
    keys = ["TF_CONFIG", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID", "MLENGINE_TASK_NAME", "MLENGINE_GCS_ROOT",
            "TPU_CONFIG", "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE", "MLENGINE_TPU_RUNTIME_VERSION",
            "MLENGINE_SIMULATED_ACCELERATOR", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
            "STORAGE_EMULATOR_HOST", "MLENGINE_API_ENDPOINT", "MLENGINE_SERVICE_ACCOUNT", "CUDA_VISIBLE_DEVICES"]
    seen = {k: os.environ.get(k) for k in keys}
    seen["MLENGINE_ACCESS_TOKEN_SET"] = bool(os.environ.get("MLENGINE_ACCESS_TOKEN"))
    seen["argv"] = sys.argv[1:]
    seen["cwd"] = os.getcwd()
    seen["in_container"] = os.path.exists("/run/.containerenv")
    seen["hostname_net"] = open("/proc/net/dev").read().count(":")  # host network: the host's interfaces
    print("CONTRACT " + json.dumps(seen, sort_keys=True), flush=True)


def gcs_path(uri):
    assert uri.startswith("gs://"), uri
    return os.path.join(os.environ["MLENGINE_GCS_ROOT"], uri[len("gs://"):])


def main(argv):
    contract()
    mode = argv[0] if argv else "contract"
    if mode == "contract":
        return 0
    if mode == "tpu":
        from mlengine import tpu  # the guide's helper, unchanged
        resolver = tpu.wait_for_tpu_cluster_resolver_ready()
        print("TPU ready: %s" % (resolver.cluster_spec() if resolver is not None else "none (CPU)"), flush=True)
        return 0
    if mode == "gloo":
        steps = int(argv[1]) if len(argv) > 1 else 20
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo", init_method="env://")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        model = DDP(torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(100 + rank)
        w = torch.tensor([[1.0, -2.0, 0.5, 3.0]])
        loss = None
        for _ in range(steps):
            x = torch.randn(32, 4, generator=gen)
            y = x @ w.T
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        # DDP keeps every replica's weights identical: compare them.
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.zeros_like(weights) for _ in range(world)]
        dist.all_gather(gathered, weights)
        same = all(torch.allclose(gathered[0], g) for g in gathered)
        print("GLOO rank=%d world=%d sum=%d loss=%.4f same_weights=%s" % (rank, world, int(total.item()),
                                                                          loss.item(), same), flush=True)
        dist.destroy_process_group()
        return 0 if same and int(total.item()) == world * (world + 1) // 2 else 1
    if mode == "write":
        path = gcs_path(argv[1])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(argv[2])
        print("WROTE %s" % argv[1], flush=True)
        # The API, the way Google's clients find an emulator (no header: the
        # URL carries the job's token).
        import urllib.parse
        import urllib.request
        bucket, _, name = argv[1][len("gs://"):].partition("/")
        url = "%s/storage/v1/b/%s/o?prefix=%s" % (os.environ["STORAGE_EMULATOR_HOST"], bucket,
                                                  urllib.parse.quote(name, safe=""))
        with urllib.request.urlopen(url, timeout=30) as r:
            listed = [o["name"] for o in json.load(r).get("items", [])]
        print("LISTED %s" % json.dumps(listed), flush=True)
        return 0 if listed == [name] else 3
    if mode == "sleep":
        if os.fork() == 0:
            os.setsid()
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(3600)
            os._exit(0)
        print("SLEEPING", flush=True)
        time.sleep(3600)
        return 0
    if mode == "fail":
        print("failing on purpose", file=sys.stderr, flush=True)
        return int(argv[1])
    print("unknown mode %r" % mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
