# A first measurement of warm starts through mlengined (see docs/design/warm_start.md); to become bench/warm_start.py.
import os, sys, time, json, glob, statistics
sys.path.insert(0, "/work/wt-warm/tests/e2e")
os.environ["MLENGINED"] = "/work/wt-warm/build/src/server/mlengined"
os.environ["MLENGINE"] = "/work/wt-warm/build/src/cli/mlengine"
os.environ["MLE_SOURCE_DIR"] = "/work/wt-warm"
import conftest as e2e
import pathlib, tempfile
cfg = e2e.config_yaml().replace("    description: the e2e suite's runtime\n",
      "    description: the e2e suite's runtime\n    warm_start: {pool: 2, preload: [torch, numpy, sklearn]}\n")
root = pathlib.Path(tempfile.mkdtemp())
s = e2e.Server(root, cfg)
def ready():
    while len(glob.glob(os.path.join(s.data_dir, "warm", "*.sock"))) < 2: time.sleep(0.05)
def first_line_ts(cli, job):
    from datetime import datetime
    while True:
        for e in s.logs(cli.project, job):
            if e["message"].startswith("PROBE "):
                return datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
        time.sleep(0.02)
try:
    names = e2e.Names("bench", "1")
    home = root / "home"; home.mkdir()
    cli = e2e.Cli(s, home, names.project, names.bucket)
    pkg = os.path.join(e2e.TRAINERS, "warm", "trainer")
    # one job first: the package environment is built once
    cli.submit("setup", package=pkg); cli.wait_state("setup", {"SUCCEEDED"}, 180)
    uri = cli.describe("setup")["trainingInput"]["packageUris"][0]
    def create(job, cold):
        body = {"jobId": job, "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": e2e.RUNTIME,
                "packageUris": [uri], "pythonModule": "trainer.task"}}
        if cold: body["labels"] = {"mlengine-warm-start": "false"}
        t = time.time(); st, text = s.request("POST", f"/v1/projects/{cli.project}/jobs", body); assert st == 200, text
        return t
    res = {"warm": [], "cold": []}
    for i in range(6):
        for kind in ("warm", "cold"):
            ready()
            job = f"{kind}_{i}"
            t = create(job, kind == "cold")
            res[kind].append(first_line_ts(cli, job) - t)
            cli.wait_state(job, {"SUCCEEDED"}, 120)
    for k, v in res.items(): print(k, "create->first line median %.3f s" % statistics.median(v))
    for kind in ("warm", "cold"):
        ready()
        t = time.time()
        for i in range(10): create(f"many_{kind}_{i}", kind == "cold")
        for i in range(10): cli.wait_state(f"many_{kind}_{i}", {"SUCCEEDED"}, 300)
        print(kind, "10 jobs back to back: %.1f s" % (time.time() - t))
finally:
    print(s.finish())
