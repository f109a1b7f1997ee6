"""Webhooks (docs/notifications.md): a project's owner registers a URL, and
every state change of the project's jobs is POSTed there, signed. A
receiver that fails is tried again with back-off while the job goes on
untouched; once it recovers it gets every event, in order; what is owed
survives a restart of mlengined; a deleted webhook is sent nothing more."""

import hashlib
import hmac
import http.server
import json
import threading

from conftest import config_yaml, make_cli, wait_for

CONFIG = config_yaml() + "webhooks:\n  allow_loopback: true\n"


class Receiver:
    """An HTTP server on 127.0.0.1 that records each POST, and answers 503
    while `failing` (or for the next `fail_next` requests)."""

    def __init__(self):
        self.events, self.attempts = [], 0
        self.failing, self.fail_next = False, 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.attempts += 1
                    fail = receiver.failing or receiver.fail_next > 0
                    receiver.fail_next = max(0, receiver.fail_next - 1)
                    if not fail:
                        receiver.events.append((dict(self.headers), body))
                self.send_response(503 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def received(self):
        with self.lock:
            return list(self.events)

    def close(self):
        self.httpd.shutdown()


def verify(secret, headers, body):
    """The receiver's check of X-Mlengine-Signature, as docs/notifications.md shows it."""
    parts = dict(p.split("=", 1) for p in headers["X-Mlengine-Signature"].split(","))
    expected = hmac.new(secret.encode(), parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"])


def events_of(receiver, job_id):
    return [json.loads(b) for _, b in receiver.received() if json.loads(b)["jobId"] == job_id]


def states_until(receiver, job_id, final, timeout=90):
    wait_for(lambda: any(e["state"] == final for e in events_of(receiver, job_id)),
             f"the {final} event of {job_id}", timeout=timeout)
    return [e["state"] for e in events_of(receiver, job_id)]


def assert_in_order(events):
    assert events[0]["state"] == "QUEUED" and "previousState" not in events[0], events
    for before, after in zip(events, events[1:]):
        assert after["previousState"] == before["state"], events


def test_a_failing_receiver_gets_every_event_in_order_once_it_recovers(server_factory, tmp_path, names):
    receiver = Receiver()
    try:
        server = server_factory(CONFIG)
        cli = make_cli(server, tmp_path, names)
        made = cli.ok("webhooks", "create", f"--url={receiver.url}", "--description=team channel",
                      "--format=json").json()
        secret, name = made["secret"], made["name"]
        assert len(secret) == 64 and name.startswith(f"projects/{cli.project}/webhooks/wh-"), made
        webhook_id = name.rsplit("/", 1)[1]
        listed = cli.ok("webhooks", "list", "--format=json").json()
        assert [h["name"] for h in listed] == [name] and "secret" not in listed[0], listed

        # The receiver is down for its first two deliveries: the job does not wait for it.
        receiver.fail_next = 2
        job = names.job("hooked")
        assert cli.submit(job, args=["--sleep", "1"]).rc == 0
        done = cli.wait_state(job, {"SUCCEEDED"}, timeout=120)
        states = states_until(receiver, job, "SUCCEEDED")
        events = events_of(receiver, job)
        assert states[-1] == "SUCCEEDED" and "RUNNING" in states, states
        assert_in_order(events)
        for headers, body in receiver.received():
            assert verify(secret, headers, body), headers
            assert headers["X-Mlengine-Webhook"] == name and headers["Content-Type"] == "application/json"
        last = events[-1]
        assert last["job"] == f"projects/{cli.project}/jobs/{job}" and last["api"] == "ml", last
        assert last["resource"]["state"] == "SUCCEEDED" and last["resource"]["jobId"] == job, last
        assert last["resource"]["endTime"] == done["endTime"], (last, done)
        assert len({e["eventId"] for e in events}) == len(events), events
        status = cli.ok("webhooks", "describe", webhook_id, "--format=json").json()["status"]
        assert status["failedAttempts"] >= 2 and "HTTP 503" in status["lastError"], status
        assert status["pendingDeliveries"] == 0 and status["delivered"] >= len(events), status
        assert status["consecutiveFailures"] == 0, status

        # Down across a restart: what is owed is stored, and sent after it.
        receiver.failing = True
        later = names.job("across")
        assert cli.submit(later, args=["--sleep", "1"]).rc == 0
        cli.wait_state(later, {"SUCCEEDED"}, timeout=120)
        wait_for(lambda: cli.ok("webhooks", "describe", webhook_id, "--format=json").json()["status"]
                 .get("pendingDeliveries", 0) >= 3, "deliveries of the second job waiting", timeout=30)
        server.stop()
        receiver.failing = False
        server.start()
        states = states_until(receiver, later, "SUCCEEDED", timeout=120)
        assert_in_order(events_of(receiver, later))
        assert states.count("SUCCEEDED") == 1, states

        # /metrics counts the attempts.
        status_code, text = server.request("GET", "/metrics")
        assert status_code == 200 and 'mlengine_webhook_deliveries_total{result="delivered"}' in text, text[-2000:]

        # Deleted: nothing more is sent.
        cli.ok("webhooks", "delete", webhook_id)
        assert cli.ok("webhooks", "list", "--format=json").json() == []
        count = len(receiver.received())
        quiet = names.job("quiet")
        assert cli.submit(quiet, args=["--sleep", "0"]).rc == 0
        cli.wait_state(quiet, {"SUCCEEDED"}, timeout=120)
        assert len(receiver.received()) == count and not events_of(receiver, quiet), receiver.received()[count:]
    finally:
        receiver.close()


def test_only_owners_register_and_bad_webhooks_are_refused(server_factory, tmp_path, names):
    server = server_factory(CONFIG)
    cli = make_cli(server, tmp_path, names)
    for flags, field, words in [
            (["--url=ftp://example.com/x"], "url", "must start with http:// or https://"),
            (["--url=http://user:pw@example.com/"], "url", "must not hold a user or password"),
            (["--url=http://169.254.169.254/latest"], "url", "link-local"),
            (["--url=https://example.com/x", "--states=SUCCEEDED,DONE"], "states", '"DONE", not a job state'),
    ]:
        r = cli("webhooks", "create", *flags)
        assert r.rc != 0 and "INVALID_ARGUMENT" in r.err and words in r.err, (flags, r)
    status, body = server.request("POST", f"/mlengine/v1/projects/{cli.project}/webhooks",
                                  {"url": "https://example.com/x", "secret": "mine"})
    assert status == 400 and "unknown field" in body, body
    # An editor may run jobs, not tell the world of them.
    email = f"editor{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/editor")
    r = cli("webhooks", "create", "--url=https://example.com/x", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err and "mlengine.webhooks.update" in r.err, r
    r = cli("webhooks", "list", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err, r
    r = cli("webhooks", "describe", "wh-000000000000")
    assert r.rc != 0 and "NOT_FOUND" in r.err, r
    # At most 10 a project (webhooks.max_per_project).
    for i in range(10):
        cli.ok("webhooks", "create", f"--url=https://example.com/{i}")
    r = cli("webhooks", "create", "--url=https://example.com/11")
    assert r.rc != 0 and "RESOURCE_EXHAUSTED" in r.err and "the most a project may have" in r.err, r
