"""mlengine local train: single-process and distributed runs of a tiny trainer
that checks its own TF_CONFIG / torch variables and exits non-zero when they
are wrong."""

import json
import os
import textwrap

from conftest import clean_env, run_mlengine, write_trainer

CHECKING_TASK = textwrap.dedent('''\
    import json
    import os
    import sys
    import time

    def fail(msg):
        print("CHECK FAILED: " + msg, file=sys.stderr, flush=True)
        sys.exit(7)

    def main():
        args = sys.argv[1:]
        mode = args[args.index("--expect") + 1]
        tf = json.loads(os.environ["TF_CONFIG"])
        if tf.get("environment") != "cloud":
            fail("environment")
        if tf["job"]["job_name"] != "trainer.task" or tf["job"]["args"] != args:
            fail("job: %r vs %r" % (tf["job"], args))
        if os.getcwd() != os.environ["EXPECT_CWD"]:
            fail("cwd %s" % os.getcwd())
        name = os.environ.get("MLENGINE_TASK_NAME", "")
        if mode == "single":
            if tf["task"] != {} or tf["cluster"] != {}:
                fail("single run has task/cluster: %r" % tf)
            if os.environ.get("RANK") != "0" or os.environ.get("WORLD_SIZE") != "1":
                fail("torch vars")
            print("single OK", name, json.dumps(args), flush=True)
            return
        cluster, task = tf["cluster"], tf["task"]
        if sorted(cluster) != ["chief", "ps", "worker"]:
            fail("cluster keys %r" % sorted(cluster))
        if len(cluster["chief"]) != 1 or len(cluster["ps"]) != 1 or len(cluster["worker"]) != 1:
            fail("cluster sizes %r" % cluster)
        ports = [int(a.split(":")[1]) for k in ("chief", "ps", "worker") for a in cluster[k]]
        if len(set(ports)) != 3 or min(ports) < 31000:
            fail("ports %r" % ports)
        t, i = task["type"], task["index"]
        if i != 0 or t not in ("chief", "ps", "worker"):
            fail("task %r" % task)
        expected_rank = {"chief": "0", "worker": "1"}.get(t)
        if os.environ.get("RANK") != expected_rank:
            fail("RANK %r for %s" % (os.environ.get("RANK"), t))
        if expected_rank and (os.environ.get("WORLD_SIZE") != "2" or not os.environ.get("MASTER_PORT")):
            fail("torch vars for %s" % t)
        if not os.environ.get("PYTHONPATH", "").split(":")[0].endswith("python"):
            fail("PYTHONPATH %r" % os.environ.get("PYTHONPATH"))
        sys.stdout.write("distributed OK %s %d %s\\n" % (t, i, name))
        sys.stdout.flush()
        ready = os.path.join(os.environ["EXPECT_CWD"], "ps_ready")
        if t == "worker" and "--worker-fails" in args:
            fail("worker told to fail")
        if t == "ps":
            open(ready, "w").close()
            time.sleep(300)  # parameter servers serve until they are stopped
        if t == "chief":
            if "--worker-fails" in args:
                time.sleep(300)
            deadline = time.time() + 60
            while not os.path.exists(ready) and time.time() < deadline:
                time.sleep(0.05)

    if __name__ == "__main__":
        main()
    ''')


def prepare(tmp_path):
    pkg = write_trainer(tmp_path / "src", task=CHECKING_TASK)
    env = clean_env(tmp_path)
    env["EXPECT_CWD"] = str(pkg.parent)
    return pkg, env


def test_single_process(tmp_path):
    pkg, env = prepare(tmp_path)
    r = run_mlengine(["local", "train", "--module-name", "trainer.task", "--package-path", str(pkg),
                      "--job-dir", str(tmp_path / "out"), "--", "--expect", "single"], env, timeout=60)
    assert r.rc == 0, r
    assert "single OK" in r.out
    assert f'"--expect", "single", "--job-dir", "{tmp_path / "out"}"' in r.out


def test_single_process_gets_its_arguments_byte_for_byte(tmp_path):
    pkg, env = prepare(tmp_path)
    odd = ["--spec", "[1,2]", "--objs", '[{"a": 1}, {"b": 2}]', "--list=a,b", "--empty", "", "--", "x y"]
    r = run_mlengine(["local", "train", "--module-name", "trainer.task", "--package-path", str(pkg),
                      "--", "--expect", "single", *odd], env, timeout=60)
    assert r.rc == 0, r
    assert json.dumps(["--expect", "single", *odd]) in r.out, r.out


def test_single_process_from_cwd_and_exit_code(tmp_path):
    pkg, env = prepare(tmp_path)
    r = run_mlengine(["local", "train", "--module-name", "trainer.task", "--", "--expect", "bogus-mode-fails"],
                     env, cwd=str(pkg), timeout=60)
    assert r.rc != 0, r


def test_distributed_one_worker_one_ps(tmp_path):
    pkg, env = prepare(tmp_path)
    r = run_mlengine(["local", "train", "--module-name", "trainer.task", "--package-path", str(pkg),
                      "--distributed", "--worker-count", "1", "--parameter-server-count", "1",
                      "--start-port", "31000", "--", "--expect", "distributed"], env, timeout=120)
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert "master-replica-0: distributed OK chief 0 master-replica-0" in lines, r
    assert "worker-replica-0: distributed OK worker 0 worker-replica-0" in lines, r
    assert "ps-replica-0: distributed OK ps 0 ps-replica-0" in lines, r
    assert "CHECK FAILED" not in r.err, r


def test_distributed_failure_stops_the_rest(tmp_path):
    pkg, env = prepare(tmp_path)
    r = run_mlengine(["local", "train", "--module-name", "trainer.task", "--package-path", str(pkg),
                      "--distributed", "--worker-count", "1", "--parameter-server-count", "1",
                      "--start-port", "31000", "--", "--expect", "distributed", "--worker-fails"],
                     env, timeout=60)
    assert r.rc != 0, r
    assert "worker-replica-0: CHECK FAILED: worker told to fail" in r.err, r
    assert "worker-replica-0 exited with status 7" in r.err, r
