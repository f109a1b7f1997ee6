"""Access from the command line, as an operator and a user run it: users and
their tokens, project policy bindings, service accounts and impersonated
tokens (docs/access.md)."""



def test_operator_gives_a_user_a_role_and_the_users_token_works(cli, names):
    email = f"user{names.suffix}@example.com"
    cli.ok("admin", "users", "create", email)
    token = cli.ok("admin", "users", "create-token", email, "--lifetime=3600s").out.strip()
    as_user = {"MLENGINE_TOKEN": token}
    denied = cli("jobs", "list", env=as_user)
    assert denied.rc != 0 and "PERMISSION_DENIED" in denied.err and "ml.jobs.list" in denied.err, denied

    cli.ok("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    policy = cli.ok("projects", "get-iam-policy", "--format=json").json()
    assert {"role": "roles/ml.viewer", "members": [f"user:{email}"]} in policy["bindings"], policy
    cli.ok("jobs", "list", env=as_user)
    # A viewer cannot grant itself more.
    r = cli("projects", "add-iam-policy-binding", f"--member=user:{email}", "--role=roles/owner", env=as_user)
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err, r

    cli.ok("projects", "remove-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    assert cli("jobs", "list", env=as_user).rc != 0
    # Removing a binding that is not there says so.
    r = cli("projects", "remove-iam-policy-binding", f"--member=user:{email}", "--role=roles/ml.viewer")
    assert r.rc != 0 and "does not hold roles/ml.viewer" in r.err, r
    r = cli("projects", "remove-iam-policy-binding", "--member=user:nobody@example.com",
            "--role=roles/ml.serviceAgent")
    assert r.rc != 0 and "does not hold roles/ml.serviceAgent" in r.err, r

    cli.ok("admin", "users", "delete", email)
    r = cli("jobs", "list", env=as_user)
    assert r.rc != 0 and "UNAUTHENTICATED" in r.err, r


def test_service_account_and_impersonated_token(cli, names):
    cli.ok("iam", "service-accounts", "create", "trainer", "--display-name=Trainer")
    email = f"trainer@{cli.project}.iam.mlengine.local"
    listed = cli.ok("iam", "service-accounts", "list", "--format=json").json()
    assert email in [a["email"] for a in listed], listed
    token = cli.ok("auth", "print-access-token", f"--impersonate-service-account={email}").out.strip()
    assert token.startswith("mle1.")
    # The account holds no role yet: its token authenticates but may not list jobs.
    r = cli("jobs", "list", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err, r
    cli.ok("iam", "service-accounts", "delete", email)
    r = cli("jobs", "list", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "UNAUTHENTICATED" in r.err, r


def test_replicas_hold_a_token_of_the_account_they_run_as_and_only_while_they_run(cli, names):
    """A job running as service account `reader` (ml.viewer on the project)
    gets that account's token: it may list jobs but not cancel one; the
    project's default account (no role) may not list; the token dies with
    the job."""
    cli.ok("iam", "service-accounts", "create", "reader")
    reader = f"reader@{cli.project}.iam.mlengine.local"
    cli.ok("projects", "add-iam-policy-binding", f"--member=serviceAccount:{reader}", "--role=roles/ml.viewer")
    # It waits for a gate in the project's bucket: it must be able to read it
    # (its sandbox shows only the buckets its account may read).
    cli.ok("projects", "add-iam-policy-binding", f"--member=serviceAccount:{reader}",
           "--role=roles/storage.objectViewer")
    jobs = f"/v1/projects/{cli.project}/jobs"
    gate = f"gs://{cli.bucket}/{names.job('gate')}"
    job = names.job("reader")
    cli.submit(job, "--service-account", reader, "--scale-tier", "basic",
               args=["--print-env", "MLENGINE_SERVICE_ACCOUNT", "--call-api", f"GET {jobs}",
                     "--call-api", f"POST {jobs}/{job}:cancel", "--print-env", "MLENGINE_ACCESS_TOKEN",
                     "--wait-for", gate])
    cli.wait_log(job, f"MLENGINE_SERVICE_ACCOUNT={reader}", timeout=120)
    cli.wait_log(job, f"api GET {jobs} -> 200")
    cli.wait_log(job, f"api POST {jobs}/{job}:cancel -> 403")
    entries = cli.wait_log(job, "MLENGINE_ACCESS_TOKEN=")
    token = next(e["message"].split("MLENGINE_ACCESS_TOKEN=", 1)[1].strip()
                 for e in entries if "MLENGINE_ACCESS_TOKEN=" in e["message"])
    assert token.startswith("mle1."), token
    # While the job runs the token works; once it ends it is revoked.
    assert cli("jobs", "list", env={"MLENGINE_TOKEN": token}).rc == 0
    cli.open_gate(gate)
    cli.wait_state(job, {"SUCCEEDED"})
    r = cli("jobs", "list", env={"MLENGINE_TOKEN": token})
    assert r.rc != 0 and "UNAUTHENTICATED" in r.err, r

    # Without --service-account the job runs as the project's default account, which holds no role here.
    job2 = names.job("default")
    cli.submit(job2, "--scale-tier", "basic", args=["--print-env", "MLENGINE_SERVICE_ACCOUNT",
                                                     "--call-api", f"GET {jobs}"])
    cli.wait_state(job2, {"SUCCEEDED"})
    cli.wait_log(job2, "@cloud-ml.mlengine.iam.local")
    cli.wait_log(job2, f"api GET {jobs} -> 403")


def test_activated_credential_is_sent_until_revoked(cli, names, tmp_path):
    """gcloud's way: activate a service account's token once; later commands
    send it (over the operator's token in MLENGINE_CONFIG) until revoked."""
    cli.ok("iam", "service-accounts", "create", "activated")
    email = f"activated@{cli.project}.iam.mlengine.local"
    key = tmp_path / "key.token"
    key.write_text(cli.ok("auth", "print-access-token", f"--impersonate-service-account={email}").out)
    # The server says whose a token is: another name, or a token it does
    # not accept, activates nothing.
    r = cli("auth", "activate-service-account", f"other@{cli.project}.iam.mlengine.local", f"--key-file={key}")
    assert r.rc != 0 and f"is serviceAccount:{email}'s, not serviceAccount:other@" in r.err, r
    assert "Nothing was activated" in r.err, r
    garbage = tmp_path / "garbage.token"
    garbage.write_text("not-a-token\n")
    r = cli("auth", "activate-service-account", email, f"--key-file={garbage}")
    assert r.rc != 0 and "was not accepted" in r.err and "UNAUTHENTICATED" not in r.out, r
    assert not (tmp_path / cli.env["HOME"] / ".config/mlengine/credentials.json").exists()
    cli.ok("auth", "activate-service-account", email, f"--key-file={key}")
    assert oct((tmp_path / cli.env["HOME"] / ".config/mlengine/credentials.json").stat().st_mode & 0o777) == "0o600"
    assert cli.ok("auth", "list").out.strip() == f"active account: {email}"
    r = cli("jobs", "list")
    assert r.rc != 0 and "PERMISSION_DENIED" in r.err, r  # the account holds no role
    cli.ok("auth", "revoke")
    cli.ok("jobs", "list")  # the operator's token again
