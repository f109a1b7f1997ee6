"""Quotas and fair-share weights set at run time through the operator's admin
API: checked whole, stored, in force at once, surviving kill -9, readable by
a project's members for their own project, and reset to the file's."""

from conftest import tpu_job

POD_JOB = dict(scaleTier="CUSTOM", masterType="n1-highcpu-16", workerType="cloud_tpu", workerCount="1",
               workerConfig={"acceleratorConfig": {"type": "TPU_V2_POD", "count": "32"}})


def test_quotas_set_at_run_time_refuse_stay_and_reset(launcher):
    data = launcher.new_data_dir()
    s = launcher.start(data)
    s.set_up_tpu_access("qp")
    status, before = s.call("GET", "/mlengine/v1/quotas")
    assert status == 200 and before["source"] == "configuration file", before
    # Pods need a quota: refused by default, naming it.
    status, body = s.create("qp", tpu_job("pod1", **POD_JOB))
    assert status == 400 and "TPU_V2_POD_CORES" in body["error"]["message"], body

    settings = {"quotas": {"defaults": {"TPU_V2_POD_CORES": 0},
                           "projects": {"qp": {"us-central1": {"TPU_V2_POD_CORES": 32, "JOBS": 5}}}},
                "shares": {"qp": 3}}
    status, now = s.call("PUT", "/mlengine/v1/quotas", settings)
    assert status == 200 and now["source"] == "admin API", now
    assert now["quotas"]["projects"]["qp"]["us-central1"] == {"TPU_V2_POD_CORES": 32, "JOBS": 5}
    assert s.create("qp", tpu_job("pod2", **POD_JOB))[0] == 200

    # A bad setting is refused whole and changes nothing.
    bad = {"quotas": {"projects": {"qp": {"us-central1": {"TPU_V9_CORES": 8}}}}, "shares": {}}
    status, body = s.call("PUT", "/mlengine/v1/quotas", bad)
    assert status == 400 and "TPU_V9_CORES" in body["error"]["message"], body
    assert s.call("GET", "/mlengine/v1/quotas")[1] == now

    # A member of the project reads its own quotas; only the operator sets them.
    s.call("POST", "/mlengine/v1/users", {"email": "q@example.com"})
    token = s.call("POST", "/mlengine/v1/users/q@example.com:generateToken", {})[1]["accessToken"]
    policy = s.call("POST", "/v1/projects/qp:getIamPolicy", {})[1]
    policy["bindings"].append({"role": "roles/ml.viewer", "members": ["user:q@example.com"]})
    assert s.call("POST", "/v1/projects/qp:setIamPolicy", {"policy": policy})[0] == 200
    r = s.request("GET", "/mlengine/v1/projects/qp/quotas", token=token)
    assert r.status == 200, r
    # Effective limits: the region's own, and the defaults it does not set.
    assert r.json["regions"]["us-central1"] == {"TPU_V2_POD_CORES": 32, "TPU_V3_POD_CORES": 0, "JOBS": 5}, r.json
    assert r.json["share"] == 3, r.json
    assert r.json["otherRegions"] == {"TPU_V2_POD_CORES": 0, "TPU_V3_POD_CORES": 0}, r.json
    assert s.request("GET", "/mlengine/v1/projects/other/quotas", token=token).status == 403
    assert s.request("PUT", "/mlengine/v1/quotas", body=settings, token=token).status == 403

    s.kill9()
    s2 = launcher.start(data)
    status, kept = s2.call("GET", "/mlengine/v1/quotas")
    assert kept == now, kept
    status, reset = s2.call("DELETE", "/mlengine/v1/quotas")
    assert status == 200 and reset == before, reset
    s2.set_up_tpu_access("qp")
    status, body = s2.create("qp", tpu_job("pod3", **POD_JOB))
    assert status == 400 and "TPU_V2_POD_CORES" in body["error"]["message"], body


def test_a_settings_file_without_a_section_keeps_the_one_in_force(launcher):
    """A file that sets one project's quotas once dropped the file's
    defaults (TPU pod cores 32 -> 0). Each section it leaves out is kept;
    a refusal names the way the quotas in force were set."""
    data = launcher.new_data_dir()
    s = launcher.start(data)
    status, before = s.call("GET", "/mlengine/v1/quotas")
    assert status == 200
    status, now = s.call("PUT", "/mlengine/v1/quotas",
                         {"quotas": {"projects": {"qp": {"us-central1": {"JOBS": 1}}}}})
    assert status == 200, now
    assert now["quotas"]["defaults"] == before["quotas"]["defaults"], now
    assert now["shares"] == before["shares"], now
    assert now["quotas"]["projects"]["qp"]["us-central1"] == {"JOBS": 1}, now
    status, now = s.call("PUT", "/mlengine/v1/quotas", {"shares": {"qp": 2}})
    assert status == 200 and now["shares"] == {"qp": 2}, now
    assert now["quotas"]["projects"]["qp"]["us-central1"] == {"JOBS": 1}, now
    status, now = s.call("PUT", "/mlengine/v1/quotas", {"quotas": {"defaults": {"TPU_V2_POD_CORES": 0}}})
    assert status == 200 and now["quotas"]["defaults"] == {"TPU_V2_POD_CORES": 0}, now
    s.set_up_tpu_access("qp")
    status, body = s.create("qp", tpu_job("pod4", **POD_JOB))
    assert status == 400 and "mlengine admin quotas set FILE` (the quotas in force were set that way" in \
        body["error"]["message"], body
    status, body = s.call("PUT", "/mlengine/v1/quotas", {"quota": {}})
    assert status == 400 and "quota" in body["error"]["message"], body
