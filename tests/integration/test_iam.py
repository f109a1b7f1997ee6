"""Identity and access through the real binary: the TPU guide's access steps
through Google's own client libraries (googleapiclient, unchanged but for the
root URL), roles on projects, cross-project isolation, token revocation,
escalation attempts, malformed policies, and policies surviving kill -9."""

import copy
import json
import os

import httplib2
import pytest
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from conftest import SOURCE_DIR, tpu_job


class BearerHttp(httplib2.Http):
    def __init__(self, token):
        super().__init__(timeout=15, proxy_info=None)
        self._token = token

    def request(self, uri, method="GET", body=None, headers=None, *args, **kw):
        headers = dict(headers or {})
        headers["authorization"] = "Bearer " + self._token
        return super().request(uri, method, body, headers, *args, **kw)


def client(server, api, token):
    """Google's client for `api` (a discovery document in api/), pointed at the server."""
    with open(os.path.join(SOURCE_DIR, "api", api + ".json")) as f:
        doc = copy.deepcopy(json.load(f))
    doc["rootUrl"] = server.url + "/"
    doc["baseUrl"] = server.url + "/" + doc.get("servicePath", "")
    return build_from_document(doc, http=BearerHttp(token))


def status_of(e):
    body = json.loads(e.content.decode() if isinstance(e.content, bytes) else e.content)
    return e.resp.status, body["error"]["status"], body["error"]["message"]


def new_user(server, email):
    status, user = server.call("POST", "/mlengine/v1/users", {"email": email})
    assert status == 200, user
    status, token = server.call("POST", "/mlengine/v1/users/%s:generateToken" % email, {})
    assert status == 200, token
    return token["accessToken"]


def grant(server, project, member, role):
    status, policy = server.call("POST", "/v1/projects/%s:getIamPolicy" % project, {})
    bindings = [b for b in policy.get("bindings", []) if b["role"] != role]
    old = [b for b in policy.get("bindings", []) if b["role"] == role]
    bindings.append({"role": role, "members": (old[0]["members"] if old else []) + [member]})
    status, body = server.call("POST", "/v1/projects/%s:setIamPolicy" % project,
                               {"policy": {"bindings": bindings, "etag": policy["etag"]}})
    assert status == 200, body
    return body


def test_the_guides_access_steps_through_googles_clients(fresh_server):
    server = fresh_server
    project = "guide-flow"
    owner = new_user(server, "owner@example.com")
    grant(server, project, "user:owner@example.com", "roles/owner")
    ml = client(server, "ml.v1", owner)
    crm = client(server, "cloudresourcemanager.v1", owner)
    usage = client(server, "serviceusage.v1beta1", owner)

    # Step 1: getConfig gives serviceAccountProject and config.tpuServiceAccount.
    cfg = ml.projects().getConfig(name="projects/" + project).execute()
    number, tpu_account = cfg["serviceAccountProject"], cfg["config"]["tpuServiceAccount"]
    assert number.isdigit() and tpu_account.startswith("service-" + number)

    # Without the identity and the grant, a TPU job is refused, saying what to do.
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().create(parent="projects/" + project, body=tpu_job("before")).execute()
    code, status, message = status_of(e.value)
    assert (code, status) == (400, "FAILED_PRECONDITION")
    assert tpu_account in message and "roles/ml.serviceAgent" in message and "generateServiceIdentity" in message

    # Step 2: generateServiceIdentity on projects/<serviceAccountProject>.
    op = usage.services().generateServiceIdentity(
        parent="projects/%s/services/tpu.googleapis.com" % number).execute()
    assert op["done"] and op["response"]["email"] == tpu_account
    again = usage.services().generateServiceIdentity(
        parent="projects/%s/services/tpu.googleapis.com" % number).execute()
    assert again["response"] == op["response"]  # stable

    # Still refused: the identity lacks the role, and the message names the command.
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().create(parent="projects/" + project, body=tpu_job("before")).execute()
    assert "add-iam-policy-binding" in status_of(e.value)[2]

    # Step 3: grant roles/ml.serviceAgent with setIamPolicy (what gcloud add-iam-policy-binding does).
    policy = crm.projects().getIamPolicy(resource=project, body={}).execute()
    policy.setdefault("bindings", []).append({"role": "roles/ml.serviceAgent",
                                              "members": ["serviceAccount:" + tpu_account]})
    crm.projects().setIamPolicy(resource=project, body={"policy": policy}).execute()
    job = ml.projects().jobs().create(parent="projects/" + project, body=tpu_job("after")).execute()
    assert job["state"] == "QUEUED"

    # Revoking the role refuses new TPU jobs again.
    policy = crm.projects().getIamPolicy(resource=project, body={}).execute()
    policy["bindings"] = [b for b in policy["bindings"] if b["role"] != "roles/ml.serviceAgent"]
    crm.projects().setIamPolicy(resource=project, body={"policy": policy}).execute()
    with pytest.raises(HttpError) as e:
        ml.projects().jobs().create(parent="projects/" + project, body=tpu_job("revoked")).execute()
    assert status_of(e.value)[1] == "FAILED_PRECONDITION"
    # A CPU job needs no TPU account.
    ml.projects().jobs().create(parent="projects/" + project, body=tpu_job("cpu", scaleTier="BASIC")).execute()

    # The project as Resource Manager reports it.
    got = crm.projects().get(projectId=project).execute()
    assert got["projectNumber"] == number and got["lifecycleState"] == "ACTIVE"


def test_a_caller_learns_nothing_of_a_project_it_has_no_role_on(fresh_server):
    server = fresh_server
    alice = new_user(server, "alice@example.com")
    grant(server, "alice-p", "user:alice@example.com", "roles/ml.developer")
    server.set_up_tpu_access("bob-p")
    assert server.create("bob-p", tpu_job("secret"))[0] == 200
    ml = client(server, "ml.v1", alice)
    ml.projects().jobs().create(parent="projects/alice-p", body=tpu_job("mine", scaleTier="BASIC")).execute()
    assert [j["jobId"] for j in ml.projects().jobs().list(parent="projects/alice-p").execute()["jobs"]] == ["mine"]
    # The same answer whether the job exists or not: 403 naming the permission.
    for name in ("projects/bob-p/jobs/secret", "projects/bob-p/jobs/nosuch"):
        with pytest.raises(HttpError) as e:
            ml.projects().jobs().get(name=name).execute()
        code, status, message = status_of(e.value)
        assert (code, status) == (403, "PERMISSION_DENIED"), status_of(e.value)
        # Google's sentence, then the roles that would grant it and how.
        assert message.startswith(
            "Permission 'ml.jobs.get' denied on resource '%s' (or it may not exist). Roles that grant it: "
            "roles/owner, roles/editor, roles/viewer, roles/ml.admin, roles/ml.developer, roles/ml.viewer" % name), message
        # ... to the caller refused.
        assert "mlengine projects add-iam-policy-binding PROJECT --member=user:alice@example.com --role=ROLE" in \
            message, message
        details = json.loads(e.value.content)["error"]["details"]
        assert details == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
                            "domain": "iam.googleapis.com",
                            "metadata": {"permission": "ml.jobs.get", "resource": name}}], details
    for method, path in (("GET", "/v1/projects/bob-p/jobs"), ("GET", "/v1/projects/bob-p/jobs/secret/logs"),
                         ("POST", "/v1/projects/bob-p/jobs/secret:cancel"), ("GET", "/v1/projects/bob-p:getConfig"),
                         ("POST", "/v1/projects/bob-p:getIamPolicy"),
                         ("GET", "/v1/projects/bob-p/jobs?filter=jobId%3Dsecret&fields=jobs(jobId)")):
        r = server.request(method, path, body={} if method == "POST" else None, token=alice)
        assert r.status == 403 and r.json["error"]["status"] == "PERMISSION_DENIED", (method, path, r)
        assert "trainingInput" not in r.text and "QUEUED" not in r.text, (method, path, r)
    # The job was not cancelled.
    assert server.get("bob-p", "secret")[1]["state"] == "QUEUED"
    # Storage: bob's bucket is invisible to alice.
    r = server.request("POST", "/storage/v1/b", body={"name": "bob-bucket"}, query={"project": "bob-p"})
    assert r.status == 200, r
    r = server.request("GET", "/storage/v1/b/bob-bucket/o", token=alice)
    assert r.status == 403, r
    r = server.request("GET", "/storage/v1/b", query={"project": "bob-p"}, token=alice)
    assert r.status == 403, r
    # A developer may not grant itself owner (no resourcemanager.projects.setIamPolicy).
    r = server.request("POST", "/v1/projects/alice-p:setIamPolicy", token=alice,
                       body={"policy": {"bindings": [{"role": "roles/owner", "members": ["user:alice@example.com"]}]}})
    assert r.status == 403, r


def test_tokens_die_with_their_principal_and_cannot_be_forged(fresh_server):
    server = fresh_server
    carol = new_user(server, "carol@example.com")
    grant(server, "carol-p", "user:carol@example.com", "roles/ml.viewer")
    assert server.request("GET", "/v1/projects/carol-p/jobs", token=carol).status == 200
    for forged in (carol[:-1] + ("A" if carol[-1] != "A" else "B"), "mle1.", server.token + "x"):
        r = server.request("GET", "/v1/projects/carol-p/jobs", token=forged)
        assert r.status == 401 and r.json["error"]["status"] == "UNAUTHENTICATED", r
    assert server.call("DELETE", "/mlengine/v1/users/carol@example.com")[0] == 200
    r = server.request("GET", "/v1/projects/carol-p/jobs", token=carol)
    assert r.status == 401, r
    # Her grants went with her (the project's default account keeps its own).
    status, policy = server.call("POST", "/v1/projects/carol-p:getIamPolicy", {})
    members = [m for b in policy.get("bindings", []) for m in b["members"]]
    assert members and not any("carol" in m for m in members), policy


def test_service_account_tokens_only_for_those_holding_token_creator(fresh_server):
    server = fresh_server
    project = "sa-p"
    dave = new_user(server, "dave@example.com")
    grant(server, project, "user:dave@example.com", "roles/editor")
    iam = client(server, "iam.v1", dave)
    creds = client(server, "iamcredentials.v1", dave)
    a = iam.projects().serviceAccounts().create(name="projects/" + project, body={"accountId": "trainer-a"}).execute()
    b = iam.projects().serviceAccounts().create(name="projects/" + project, body={"accountId": "trainer-b"}).execute()
    assert a["email"] == "trainer-a@sa-p.iam.mlengine.local"
    listed = iam.projects().serviceAccounts().list(name="projects/" + project).execute()
    assert {x["email"] for x in listed["accounts"]} == {a["email"], b["email"]}
    body = {"scope": ["https://www.googleapis.com/auth/cloud-platform"]}
    # An editor is no token creator.
    with pytest.raises(HttpError) as e:
        creds.projects().serviceAccounts().generateAccessToken(
            name="projects/-/serviceAccounts/" + a["email"], body=body).execute()
    assert status_of(e.value)[:2] == (403, "PERMISSION_DENIED")
    # The owner may mint: a 1 h token of account a by default.
    admin_creds = client(server, "iamcredentials.v1", server.token)
    tok = admin_creds.projects().serviceAccounts().generateAccessToken(
        name="projects/-/serviceAccounts/" + a["email"], body=body).execute()
    assert tok["accessToken"].startswith("mle1.") and tok["expireTime"].endswith("Z")
    # Account a may not mint tokens for account b.
    as_a = client(server, "iamcredentials.v1", tok["accessToken"])
    with pytest.raises(HttpError) as e:
        as_a.projects().serviceAccounts().generateAccessToken(
            name="projects/-/serviceAccounts/" + b["email"], body=body).execute()
    assert status_of(e.value)[0] == 403
    # Lifetimes beyond 12 h are refused.
    with pytest.raises(HttpError) as e:
        admin_creds.projects().serviceAccounts().generateAccessToken(
            name="projects/-/serviceAccounts/" + a["email"], body=dict(body, lifetime="43201s")).execute()
    assert status_of(e.value)[0] == 400
    # Deleting the account kills its token.
    assert server.request("GET", "/v1/projects/%s/serviceAccounts" % project, token=tok["accessToken"]).status == 403
    iam.projects().serviceAccounts().delete(name="projects/%s/serviceAccounts/%s" % (project, a["email"])).execute()
    assert server.request("GET", "/v1/projects/%s/jobs" % project, token=tok["accessToken"]).status == 401


@pytest.mark.parametrize("bindings,fragment", [
    ([{"role": "roles/superuser", "members": ["user:a@example.com"]}], "roles/superuser"),
    ([{"role": "roles/viewer", "members": ["user:nobody@example.com"]}], "does not exist"),
    ([{"role": "roles/viewer", "members": ["group:g@example.com"]}], "group"),
    ([{"role": "roles/viewer", "members": ["user:e@example.com"]},
      {"role": "roles/viewer", "members": ["user:e@example.com"]}], "two bindings"),
    ([{"role": "roles/viewer", "members": ["user:e@example.com"], "condition": {"expression": "true"}}],
     "conditional"),
    ([{"role": "roles/viewer", "members": ["user:u%d@example.com" % i for i in range(1501)]}], "at most"),
])
def test_malformed_policies_are_refused_and_change_nothing(server, bindings, fragment):
    server.call("POST", "/mlengine/v1/users", {"email": "e@example.com"})
    project = "malformed-p"
    before = server.call("POST", "/v1/projects/%s:getIamPolicy" % project, {})[1]
    status, body = server.call("POST", "/v1/projects/%s:setIamPolicy" % project,
                               {"policy": {"bindings": bindings}})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", body
    assert fragment in body["error"]["message"], body
    assert server.call("POST", "/v1/projects/%s:getIamPolicy" % project, {})[1] == before


def test_audit_log_records_changes_for_owners(fresh_server):
    server = fresh_server
    erin = new_user(server, "erin@example.com")
    grant(server, "audit-p", "user:erin@example.com", "roles/ml.developer")
    server.request("POST", "/v1/projects/audit-p/jobs", body=tpu_job("cpu_job", scaleTier="BASIC"), token=erin)
    # The same id again: refused, and recorded as such (an accepted create
    # records itself in the job's own commit, a refused one after it).
    assert server.request("POST", "/v1/projects/audit-p/jobs", body=tpu_job("cpu_job", scaleTier="BASIC"),
                          token=erin).status == 409
    server.request("POST", "/v1/projects/audit-p:setIamPolicy", body={"policy": {}}, token=erin)  # denied
    status, log = server.call("GET", "/mlengine/v1/projects/audit-p/auditLog")
    assert status == 200, log
    seen = [(e["principal"], e["method"], e["outcome"]) for e in log["entries"]]
    assert seen.count(("user:erin@example.com", "ml.projects.jobs.create", "OK")) == 1, seen
    assert ("user:erin@example.com", "ml.projects.jobs.create", "ALREADY_EXISTS") in seen, seen
    created = [e for e in log["entries"] if e["method"] == "ml.projects.jobs.create" and e["outcome"] == "OK"][0]
    assert created["resource"].endswith("/projects/audit-p/jobs") and created.get("requestId"), created
    assert ("user:erin@example.com", "cloudresourcemanager.projects.setIamPolicy", "PERMISSION_DENIED") in seen, seen
    assert ("operator", "cloudresourcemanager.projects.setIamPolicy", "OK") in seen, seen
    # A developer may not read it.
    assert server.request("GET", "/mlengine/v1/projects/audit-p/auditLog", token=erin).status == 403


def test_a_refused_upload_is_in_the_audit_log(fresh_server):
    """An upload is judged from its head, before its body is read; a refused
    one is still a refused write, recorded before it is answered, as every
    other refused write is."""
    server = fresh_server
    vera = new_user(server, "vera@example.com")
    grant(server, "audit-u", "user:vera@example.com", "roles/viewer")
    assert server.call("POST", "/storage/v1/b?project=audit-u", {"name": "audit-u-bucket"})[0] == 200
    r = server.request("POST", "/upload/storage/v1/b/audit-u-bucket/o?uploadType=media&name=notes.txt",
                       body=b"not hers to write", token=vera)
    assert r.status == 403, r
    status, log = server.call("GET", "/mlengine/v1/projects/audit-u/auditLog")
    assert status == 200, log
    refused = [e for e in log["entries"] if e["principal"] == "user:vera@example.com"]
    assert [(e["method"], e["outcome"]) for e in refused] == [("storage.objects.insert", "PERMISSION_DENIED")], refused
    assert refused[0]["resource"].endswith("buckets/audit-u-bucket/objects/notes.txt"), refused
    assert server.request("GET", "/storage/v1/b/audit-u-bucket/o/notes.txt").status == 404  # nothing written


def test_policies_tokens_and_accounts_survive_kill_9(launcher):
    data = launcher.new_data_dir()
    s1 = launcher.start(data)
    frank = new_user(s1, "frank@example.com")
    grant(s1, "kept-p", "user:frank@example.com", "roles/ml.viewer")
    s1.set_up_tpu_access("kept-p")
    policy = s1.call("POST", "/v1/projects/kept-p:getIamPolicy", {})[1]
    s1.kill9()
    s2 = launcher.start(data)
    assert s2.call("POST", "/v1/projects/kept-p:getIamPolicy", {})[1] == policy
    assert s2.request("GET", "/v1/projects/kept-p/jobs", token=frank).status == 200
    assert s2.request("POST", "/v1/projects/kept-p/jobs", body=tpu_job("j"), token=frank).status == 403
    assert s2.create("kept-p", tpu_job("tpu_ok"))[0] == 200


def test_a_project_named_by_its_number_is_that_project_everywhere(fresh_server):
    """projects/<serviceAccountProject> (the guide's serviceusage call) is the
    project with that number for the permission check and the method alike:
    a caller cannot reach past a role by spelling the project as a number."""
    server = fresh_server
    gina = new_user(server, "gina@example.com")
    grant(server, "num-p", "user:gina@example.com", "roles/ml.developer")
    number = server.get_config("num-p")[1]["serviceAccountProject"]
    assert server.call("POST", "/v1/projects/%s:getIamPolicy" % number, {}) == \
        server.call("POST", "/v1/projects/num-p:getIamPolicy", {})
    r = server.request("POST", "/v1/projects/%s/jobs" % number, body=tpu_job("by_number", scaleTier="BASIC"),
                       token=gina)
    assert r.status == 200 and r.json["jobId"] == "by_number", r
    assert server.get("num-p", "by_number")[0] == 200  # created in num-p, not in a project named by the number
