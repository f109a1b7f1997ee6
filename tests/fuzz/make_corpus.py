#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from real inputs.

Seeds come from what mlengine really reads: the captured Slurm output of
tests/data/slurm, the configuration files of config/, the request bodies of
tests/integration, the filters of tests/unit/job_filter_test.cc, and small
trainer packages (sdist, wheel, zip) built here with the standard library.
Run it after changing those sources; it rewrites the seeds it owns (files
named seed-*) and leaves every other file (regressions: crash-*, ...) alone.
"""
import bz2
import copy
import gzip
import io
import json
import lzma
import os
import shutil
import tarfile
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
SLURM = os.path.join(ROOT, "tests", "data", "slurm")

# The integration suite's valid job, so the seeds follow it.
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from conftest import BASE_JOB  # noqa: E402


def job(**training):
    j = copy.deepcopy(BASE_JOB)
    j["trainingInput"].update(training)
    return j


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def clear(target):
    d = os.path.join(CORPUS, target)
    if os.path.isdir(d):
        for n in os.listdir(d):
            if n.startswith("seed-"):
                os.remove(os.path.join(d, n))


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


CUSTOM_JOB = job(
    scaleTier="CUSTOM", masterType="n1-highmem-8", workerType="n1-standard-8", workerCount="4",
    parameterServerType="n1-standard-4", parameterServerCount="2",
    masterConfig={"acceleratorConfig": {"count": "2", "type": "NVIDIA_TESLA_T4"},
                  "diskConfig": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}},
    args=["--epochs=3", "--name=Zoë 日本 🚀"], jobDir="gs://bucket/out",
    scheduling={"maxRunningTime": "7200s", "maxWaitTime": "3600s", "priority": 500},
    hyperparameters={"goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2,
                     "hyperparameterMetricTag": "accuracy", "algorithm": "ALGORITHM_UNSPECIFIED",
                     "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1,
                                 "scaleType": "UNIT_LOG_SCALE"},
                                {"parameterName": "layers", "type": "DISCRETE", "discreteValues": [1, 2, 4]},
                                {"parameterName": "opt", "type": "CATEGORICAL",
                                 "categoricalValues": ["adam", "sgd"]}]})

BODIES = {
    "create_tpu.json": BASE_JOB,
    "create_custom.json": CUSTOM_JOB,
    "create_tpu_config.json": job(scaleTier="CUSTOM", masterType="n1-standard-8", workerType="cloud_tpu",
                                  workerCount="1", workerConfig={"tpuTfVersion": "2.11",
                                                                 "acceleratorConfig": {"type": "TPU_V3", "count": "8"}}),
    "output_only.json": dict(BASE_JOB, state="RUNNING", createTime="2024-01-02T03:04:05Z",
                             etag="AAAAAAAAAAE=", jobPosition="3", errorMessage=""),
    "wrong_types.json": job(region=["us-central1"], enableWebAccess="yes", scheduling={"priority": 2 ** 40},
                            workerCount="99999999999999999999", packageUris=[1]),
    "patch_labels.json": {"labels": {"team": "audio", "owner": "ada"}, "etag": "AAAAAAAAAAE="},
    "cancel.json": {},
    "unicode.json": job(args=["--name=Zoë 日本 🚀", "ok_\ud7ff"]),
}

FILTERS = [  # tests/unit/job_filter_test.cc and the API guide
    "state=FAILED", "state!=SUCCEEDED", "jobId:census*", "jobId=census_42", "labels.team=vision",
    "labels.owner:*", "jobId:census* AND state=FAILED", "jobId:census* state=FAILED",
    "state=RUNNING OR state=FAILED", "NOT state=FAILED", "-state=FAILED",
    "(state=RUNNING OR state=QUEUED) AND jobId:census*", "createTime>2023-01-01",
    "createTime<=2024-01-01T00:00:00Z", "trainingInput.region=us-central1",
    "trainingInput.scaleTier=BASIC_TPU", 'state="FAILED"', "errorMessage:'non-zero status'",
    "trainingInput.masterType:n1-* OR trainingInput.workerType:n1-*", "endTime>=2024 startTime<2025",
]

SLURM_TEXT = {
    "sbatch_parsable.txt": read(os.path.join(SLURM, "sbatch_parsable.txt")),
    "sbatch_parsable_het.txt": read(os.path.join(SLURM, "sbatch_parsable_het.txt")),
    "sbatch_cluster.txt": "42;cluster1\n",
    "sbatch_error.txt": "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification\n",
    "hostlist_tpuhost.txt": "tpuhost[1-4]",
    "hostlist_mixed.txt": "a[01-03,7],b1",
    "hostlist_product.txt": "rack[1-2]-n[01-02],gpu[1,3],cpu[5-6]x",
    "hostlist_padded.txt": "n[098-101]",
    "gres_gpu.txt": "gpu:t4:2(S:0-1),tpu:8",
    "gres_null.txt": "(null)",
    "state_pending.txt": "PENDING\nResources",
    "state_failed.txt": "FAILED\nNonZeroExitCode",
    "state_node_fail.txt": "NODE_FAIL\nNone",
    # squeue's tables (kSqueueFields; kSqueueNamedFields, the name last)
    "squeue_unnamed.txt": "204|N/A|N/A|root|COMPLETED|None|tpuhost1\n203|N/A|N/A|root|FAILED|BadConstraints|\n",
    "squeue_het.txt": "7|7|0|(null)|COMPLETED|None|tpuhost1|mle-het\n8|7|1|(null)|COMPLETED|None|tpuhost[2-3]|mle-het\n",
    "squeue_pending.txt": "10|N/A|N/A|mle-p1|PENDING|AssocGrpGRES||mle-p1-t2\n",
}


def archives():
    """Small trainer packages: what `mlengine jobs submit` uploads, good and bad."""
    out = {}

    def tar(name, entries, compress=lambda raw: gzip.compress(raw, mtime=0)):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for path, kind, data in entries:
                info = tarfile.TarInfo(path)
                info.mtime = 1700000000
                if kind == "file":
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                elif kind == "dir":
                    info.type = tarfile.DIRTYPE
                    t.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = data
                    t.addfile(info)
                elif kind == "hardlink":
                    info.type = tarfile.LNKTYPE
                    info.linkname = data
                    t.addfile(info)
        out[name] = compress(buf.getvalue())

    setup = b"from setuptools import setup\nsetup(name='trainer', version='0.0.0', packages=['trainer'])\n"
    task = b"print('training')\n"
    tar("sdist.tar.gz", [("trainer-0.0.0", "dir", None), ("trainer-0.0.0/setup.py", "file", setup),
                         ("trainer-0.0.0/trainer/__init__.py", "file", b""),
                         ("trainer-0.0.0/trainer/task.py", "file", task),
                         ("trainer-0.0.0/trainer/link.py", "symlink", "task.py")])
    tar("sdist_plain.tar", [("trainer-0.0.0/setup.py", "file", setup),
                            ("trainer-0.0.0/hard.py", "hardlink", "trainer-0.0.0/setup.py")], compress=bytes)
    tar("dotdot.tar.gz", [("trainer-0.0.0/../../etc/cron.d/x", "file", b"x")])
    tar("absolute.tar.gz", [("/tmp/x", "file", b"x")])
    tar("symlink_out.tar.gz", [("trainer-0.0.0/escape", "symlink", "../../../etc/passwd")])
    tar("symlink_abs.tar.bz2", [("trainer-0.0.0/escape", "symlink", "/etc/passwd")], compress=bz2.compress)
    tar("hardlink_out.tar.xz", [("trainer-0.0.0/h", "hardlink", "../../etc/passwd")], compress=lzma.compress)

    def zip_(name, entries, compression):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression) as z:
            for path, data in entries:
                z.writestr(zipfile.ZipInfo(path, date_time=(2024, 1, 2, 3, 4, 6)), data)
        out[name] = buf.getvalue()

    zip_("wheel.whl", [("trainer/__init__.py", ""), ("trainer/task.py", task),
                       ("trainer-0.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: trainer\nVersion: 0.0.0\n"),
                       ("trainer-0.0.0.dist-info/WHEEL",
                        "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
                       ("trainer-0.0.0.dist-info/RECORD", "")], zipfile.ZIP_DEFLATED)
    zip_("dotdot.zip", [("../evil.py", "x")], zipfile.ZIP_STORED)
    return out


def http(method, target, body=b"", content_type="application/json", token=True, extra=""):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if token:
        head += "Authorization: Bearer fuzz-token\r\n"  # http_request_fuzz.cc's kToken
    if body or method in ("POST", "PATCH", "PUT"):
        head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    head += extra + "\r\n"
    return head.encode() + body


def main():
    for t in ("job_codec", "job_filter", "server_config", "package_archive", "slurm_text", "slurm_json",
              "http_request"):
        clear(t)

    for name, body in BODIES.items():
        write("job_codec", name, json.dumps(body, ensure_ascii=False))

    for i, f in enumerate(FILTERS):
        write("job_filter", f"{i:02d}.txt", f)

    for name in sorted(os.listdir(os.path.join(ROOT, "config"))):
        if name.endswith(".yaml"):
            write("server_config", name, read(os.path.join(ROOT, "config", name)))

    for name, data in archives().items():
        write("package_archive", name, data)

    for name, text in SLURM_TEXT.items():
        write("slurm_text", name, text)

    write("slurm_json", "sinfo.json", read(os.path.join(SLURM, "sinfo.json")))

    p = "/v1/projects/proj"
    create = http("POST", f"{p}/jobs", BASE_JOB)
    write("http_request", "get_config.http", http("GET", f"{p}:getConfig"))
    write("http_request", "metrics.http", create + http("GET", "/metrics", token=False))
    write("http_request", "create_get_list.http",
          create + http("GET", f"{p}/jobs/tpu_mnist_1?prettyPrint=true")
          + http("GET", f"{p}/jobs?filter=state%3DQUEUED%20AND%20labels.team%3Avision&pageSize=2"))
    write("http_request", "create_custom.http", http("POST", f"{p}/jobs", CUSTOM_JOB))
    write("http_request", "patch_cancel.http",
          create + http("PATCH", f"{p}/jobs/tpu_mnist_1?updateMask=labels,etag",
                        {"labels": {"team": "audio"}, "etag": "AAAAAAAAAAE="})
          + http("POST", f"{p}/jobs/tpu_mnist_1:cancel", {}) + http("POST", f"{p}/jobs/tpu_mnist_1:cancel", b""))
    write("http_request", "logs.http",
          create + http("GET", f"{p}/jobs/tpu_mnist_1/logs?pageToken=end&taskName=master-replica-0&waitSeconds=0"))
    write("http_request", "bad.http",
          http("GET", f"{p}/jobs", token=False) + http("POST", f"{p}/jobs", b"{\"jobId\": ")
          + http("GET", "/v1/projects/bad%20id/jobs?x=%zz"))
    write("http_request", "chunked.http",
          b"POST " + f"{p}/jobs".encode() + b" HTTP/1.1\r\nAuthorization: Bearer fuzz-token\r\n"
          b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
          + b"%x\r\n" % len(json.dumps(BASE_JOB)) + json.dumps(BASE_JOB).encode() + b"\r\n0\r\n\r\n")
    write("http_request", "storage.http",
          http("POST", "/storage/v1/b?project=proj", {"name": "bucket"})
          + http("POST", "/upload/storage/v1/b/bucket/o?uploadType=media&name=trainer%2Ftrainer-0.0.0.tar.gz",
                 b"not really a tarball", content_type="application/octet-stream")
          + http("GET", "/storage/v1/b/bucket/o?prefix=trainer/&delimiter=/&maxResults=10")
          + http("GET", "/storage/v1/b/bucket/o/trainer%2Ftrainer-0.0.0.tar.gz?alt=media")
          + http("GET", "/storage/v1/b/bucket/o/trainer%2Ftrainer-0.0.0.tar.gz")
          + http("DELETE", "/storage/v1/b/bucket/o/trainer%2Ftrainer-0.0.0.tar.gz")
          + http("GET", "/storage/v1/b?project=proj") + http("GET", "/storage/v1/b/bucket"))


if __name__ == "__main__":
    main()
