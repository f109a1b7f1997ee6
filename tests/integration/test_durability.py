"""Acknowledged writes survive kill -9 and restarts on the same data directory."""

import http.client
import os
import threading

from conftest import assert_error, tpu_job, wait_for


def without_position(job):
    return {k: v for k, v in job.items() if k != "jobPosition"}


def snapshot(server, project):
    return [without_position(j) for j in server.list_all(project, pageSize="100")]


def test_acknowledged_creates_survive_kill_9(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    created = []
    for i in range(50):
        job = tpu_job("durable_%02d" % i, labels={"n": str(i)})
        if i % 5 == 0:
            job["trainingInput"]["scheduling"] = {"priority": i}
        created.append(s.create_ok("dur", job))
    s.kill9()  # immediately after the last 200

    s2 = launcher.start(data)
    for c in created:
        status, got = s2.get("dur", c["jobId"])
        assert status == 200, "acknowledged job %s lost after kill -9: %s" % (c["jobId"], got)
        assert without_position(got) == without_position(c)
    listed = s2.list_all("dur", pageSize="100")
    assert [j["jobId"] for j in listed] == ["durable_%02d" % i for i in reversed(range(50))]

    # The service carries on: ids stay taken, new jobs list first, positions come back.
    status, body = s2.create("dur", tpu_job("durable_00"))
    assert_error(status, body, 409, "ALREADY_EXISTS")
    s2.create_ok("dur", tpu_job("after_restart"))
    assert [j["jobId"] for j in s2.list("dur", pageSize="2")[1]["jobs"]] == ["after_restart", "durable_49"]
    wait_for(lambda: "jobPosition" in s2.get("dur", "durable_03")[1], "recovered jobs to be queued again")
    # durable_45 has the highest priority (45) of all: first in the queue.
    assert wait_for(lambda: s2.get("dur", "durable_45")[1].get("jobPosition"), "position") == "1"


def test_concurrent_acknowledged_creates_survive_kill_9(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    acked = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(w):
        for i in range(200):
            if stop.is_set():
                return
            try:
                status, body = s.create("conc", tpu_job("w%d_%03d" % (w, i)))
            except (OSError, http.client.HTTPException):
                return  # the server was killed mid-request: not acknowledged
            if status == 200:
                with lock:
                    acked.append(body)
                    if len(acked) >= 60:
                        stop.set()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    stop.wait(30)
    s.kill9()  # while the other workers' requests are still in flight
    for t in threads:
        t.join(30)
    assert len(acked) >= 60

    s2 = launcher.start(data)
    listed = {j["jobId"]: j for j in s2.list_all("conc", pageSize="100")}
    for c in acked:
        assert c["jobId"] in listed, "acknowledged job %s lost after kill -9" % c["jobId"]
        assert without_position(listed[c["jobId"]]) == without_position(c)
    # Whatever else made it in is complete and readable.
    for j in listed.values():
        assert j["state"] == "QUEUED" and j["trainingInput"]["scaleTier"] == "BASIC_TPU"


def test_cancel_and_patch_survive_a_normal_restart(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    s.create_ok("p", tpu_job("to_cancel"))
    s.create_ok("p", tpu_job("to_patch"))
    s.create_ok("p", tpu_job("untouched"))
    assert s.cancel("p", "to_cancel") == (200, {})
    cancelled = s.wait_state("p", "to_cancel", "CANCELLED")
    status, patched = s.patch("p", "to_patch", {"labels": {"team": "nlp", "v": "2"}}, "labels")
    assert status == 200
    before = snapshot(s, "p")
    status, cfg = s.get_config("p")
    assert s.stop() == 0

    s2 = launcher.start(data)
    assert snapshot(s2, "p") == before
    assert without_position(s2.get("p", "to_cancel")[1]) == cancelled
    assert without_position(s2.get("p", "to_patch")[1]) == without_position(patched)
    assert s2.get_config("p") == (200, cfg)
    # The etag is the same after the restart: a conditional patch with it succeeds.
    status, again = s2.patch("p", "to_patch", {"labels": {"v": "3"}, "etag": patched["etag"]}, "labels,etag")
    assert status == 200, again
    # And a cancelled job is still not cancellable.
    status, body = s2.cancel("p", "to_cancel")
    assert_error(status, body, 400, "FAILED_PRECONDITION")


def test_acknowledged_cancel_and_patch_survive_kill_9(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    s.create_ok("p", tpu_job("c1"))
    s.create_ok("p", tpu_job("p1"))
    status, patched = s.patch("p", "p1", {"labels": {"after": "patch"}}, "labels")
    assert status == 200
    assert s.cancel("p", "c1") == (200, {})
    s.kill9()  # right after the cancel's 200: CANCELLING is durable, CANCELLED may not be yet

    s2 = launcher.start(data)
    status, c1 = s2.get("p", "c1")
    assert status == 200
    assert c1["state"] in ("CANCELLING", "CANCELLED"), "acknowledged cancel lost: %s" % c1
    s2.wait_state("p", "c1", "CANCELLED")  # recovery finishes the cancel
    status, p1 = s2.get("p", "p1")
    assert p1["labels"] == {"after": "patch"}
    assert p1["etag"] == patched["etag"]


def test_project_number_survives_kill_9(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    status, cfg = s.get_config("numbered")
    assert status == 200
    s.create_ok("by-create", tpu_job("j"))
    status, cfg2 = s.get_config("by-create")
    s.kill9()
    s2 = launcher.start(data)
    assert s2.get_config("numbered") == (200, cfg)
    assert s2.get_config("by-create") == (200, cfg2)
    s2.kill9()
    s3 = launcher.start(data)
    assert s3.get_config("numbered") == (200, cfg)


def test_data_directory_contents(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    s.create_ok("p", tpu_job("j"))
    assert os.path.isfile(os.path.join(data, "mlengine.db"))
    assert s.stop() == 0
    # A clean stop leaves a database another start opens with everything in it.
    s2 = launcher.start(data)
    assert s2.get("p", "j")[1]["state"] == "QUEUED"


def test_a_second_server_on_the_same_data_dir_is_refused(launcher):
    data = launcher.new_data_dir()
    s1 = launcher.start(data)
    try:
        s2 = launcher.start(data)
    except AssertionError:
        s2 = None  # refused: it exited without serving (the expected outcome)
    if s2 is not None:
        # Both serve: show what that does to acknowledged data.
        s1.create_ok("p", tpu_job("from_first"))
        s2.create_ok("p", tpu_job("from_second"))
        n1 = s1.get_config("p")[1]["serviceAccountProject"]
        n2 = s2.get_config("p")[1]["serviceAccountProject"]
        s2.stop()
        s1.stop()
        s3 = launcher.start(data)
        listed = [j["jobId"] for j in s3.list_all("p")]
        n3 = s3.get_config("p")[1]["serviceAccountProject"]
        raise AssertionError(
            "SERVER BUG: a second mlengined started on a data directory that a running mlengined holds "
            "(no exclusive lock) and both served it, each with its own in-memory state. Both acknowledged "
            "a job; project p got numbers %s (first) and %s (second), %s after a restart; the listing "
            "after a restart is %s (both jobs were acknowledged with 200; duplicate sequence numbers hide "
            "one of them). mlengined should lock DATA_DIR (e.g. flock on DATA_DIR/lock) and exit non-zero "
            "when another process holds it." % (n1, n2, n3, listed))
    # The first server is unaffected.
    assert s1.alive()
    s1.create_ok("p", tpu_job("from_first"))
    assert s1.get("p", "from_first")[0] == 200
