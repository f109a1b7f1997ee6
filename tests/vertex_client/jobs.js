// What the Node Vertex AI suite and tests/vertex_client/run_job.js share:
// the trainer package, the jobs that run it, Google's two clients pointed at
// an mlengined, and waiting for a job to end.
'use strict';

const assert = require('node:assert/strict');
const {execFileSync} = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const REGION = 'us-central1';
const EXECUTOR = 'us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest';

// The trainer: each replica all-reduces its rank + 1 over gloo with every
// other replica of the job (the chief of pool 0 and the worker of pool 1),
// and says which pool CLUSTER_SPEC gave it; --hold first sleeps (a job to
// cancel); a trial (--lr=V) reports accuracy V through mlengine's
// cloudml-hypertune module.
const TRAINER = `
import json, os, sys, time
if "--hold" in sys.argv:
    time.sleep(300)
import torch
import torch.distributed as dist
spec = json.loads(os.environ["CLUSTER_SPEC"])
for a in sys.argv[1:]:
    if a.startswith("--lr=") and spec["task"]["type"] == "workerpool0":
        from mlengine import hypertune
        hypertune.HyperTune().report_hyperparameter_tuning_metric("accuracy", float(a[5:]), global_step=1)
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("POOL %s ALLREDUCE %s of %d" % (spec["task"]["type"], t.item(), dist.get_world_size()), flush=True)
dist.destroy_process_group()
`;

// The trainer as an sdist (setup.py + the package trainer), as bytes.
function sdist() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mle-vertex-sdist-'));
  const base = path.join(dir, 'trainer-0.1');
  fs.mkdirSync(path.join(base, 'trainer'), {recursive: true});
  fs.writeFileSync(path.join(base, 'setup.py'),
                   'from setuptools import setup\nsetup(name="trainer", version="0.1", packages=["trainer"])\n');
  fs.writeFileSync(path.join(base, 'PKG-INFO'), 'Metadata-Version: 1.0\nName: trainer\nVersion: 0.1\n');
  fs.writeFileSync(path.join(base, 'trainer', '__init__.py'), '');
  fs.writeFileSync(path.join(base, 'trainer', 'task.py'), TRAINER);
  execFileSync('tar', ['-czf', path.join(dir, 'trainer-0.1.tar.gz'), '-C', dir, 'trainer-0.1']);
  const bytes = fs.readFileSync(path.join(dir, 'trainer-0.1.tar.gz'));
  fs.rmSync(dir, {recursive: true, force: true});
  return bytes;
}

// A CustomJob of `pools` worker pools (one replica each) running the
// trainer of `packageUri` with `args`.
function packageJob(packageUri, name, {pools = 1, args = []} = {}) {
  const pool = () => ({
    machineSpec: {machineType: 'n1-standard-4'},
    replicaCount: '1',
    pythonPackageSpec: {executorImageUri: EXECUTOR, packageUris: [packageUri], pythonModule: 'trainer.task', args},
  });
  const workerPoolSpecs = [pool()];
  if (pools > 1) workerPoolSpecs.push(pool());
  return {displayName: name, labels: {suite: 'node'}, jobSpec: {workerPoolSpecs}};
}

// Google's two clients, unchanged but for the endpoint, with `token`:
// googleapis' aiplatform v1 (REST, `rootUrl`) and @google-cloud/aiplatform's
// JobServiceClient in its REST mode (close it when done).
function clients(url, token, projectId) {
  const {google} = require('googleapis');
  const auth = new google.auth.OAuth2();
  auth.setCredentials({access_token: token, expiry_date: Date.now() + 3600e3});
  const googleapis = google.aiplatform({version: 'v1', rootUrl: url + '/', auth});

  const {OAuth2Client} = require('google-auth-library');
  const gaxAuth = new OAuth2Client();
  gaxAuth.setCredentials({access_token: token, expiry_date: Date.now() + 3600e3});
  const {JobServiceClient} = require('@google-cloud/aiplatform').v1;
  const u = new URL(url);
  const jobService = new JobServiceClient({
    fallback: true, protocol: 'http', apiEndpoint: u.hostname, port: Number(u.port), authClient: gaxAuth, projectId,
  });
  return {googleapis, jobService};
}

// Polls `get(name)` until the job ends: the job.
async function waitEnded(get, name, timeoutMs = 240000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await get(name);
    const state = String(job.state);
    if (/SUCCEEDED|FAILED|CANCELLED/.test(state)) return job;
    assert.ok(Date.now() < deadline, `${name} did not end: ${JSON.stringify(job)}`);
    await new Promise(r => setTimeout(r, 200));
  }
}

module.exports = {REGION, EXECUTOR, sdist, packageJob, clients, waitEnded};
