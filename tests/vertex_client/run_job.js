#!/usr/bin/env node
// Runs one Vertex AI custom job through one of Google's Node.js clients,
// unchanged but for the endpoint, against a running mlengined: for the suites
// whose fixtures start what such a job needs (the Slurm cluster, podman and
// the registry), which are Python's (tests/slurm, tests/e2e/test_containers.py).
//
//   MLE_URL=http://HOST:PORT MLE_TOKEN=... node run_job.js CLIENT PROJECT JOB
//
// CLIENT: `googleapis` (its aiplatform v1) or `gax` (@google-cloud/aiplatform's
// JobServiceClient in its REST mode). JOB: `gloo:BUCKET`, the suite's trainer
// (tests/vertex_client/jobs.js) uploaded to gs://BUCKET and run as two worker
// pools all-reducing over gloo; or a file holding a CustomJob's JSON. Creates
// it in us-central1, waits for it to end (MLE_TIMEOUT_SECONDS, default 300)
// and prints the ended CustomJob as JSON on stdout, as the client read it.
'use strict';

const fs = require('node:fs');

const {REGION, clients, packageJob, sdist, waitEnded} = require('./jobs.js');

async function upload(url, token, bucket) {
  const name = 'vertex-node/trainer-0.1.tar.gz';
  const res = await fetch(`${url}/upload/storage/v1/b/${bucket}/o?uploadType=media&name=${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: {'Authorization': `Bearer ${token}`, 'Content-Type': 'application/octet-stream'},
    body: sdist(),
  });
  if (!res.ok) throw new Error(`uploading the trainer to gs://${bucket}: ${res.status} ${await res.text()}`);
  return `gs://${bucket}/${name}`;
}

async function main() {
  const [client, project, job] = process.argv.slice(2);
  const url = process.env.MLE_URL;
  const token = process.env.MLE_TOKEN;
  if (!['googleapis', 'gax'].includes(client) || !project || !job || !url || !token) {
    throw new Error('usage: MLE_URL=... MLE_TOKEN=... run_job.js googleapis|gax PROJECT gloo:BUCKET|JOB.json');
  }
  const body = job.startsWith('gloo:')
    ? packageJob(await upload(url, token, job.slice(5)), 'gloo', {pools: 2})
    : JSON.parse(fs.readFileSync(job, 'utf8'));
  const timeoutMs = Number(process.env.MLE_TIMEOUT_SECONDS || 300) * 1000;
  const parent = `projects/${project}/locations/${REGION}`;
  const {googleapis, jobService} = clients(url, token, project);
  try {
    let ended;
    if (client === 'googleapis') {
      const jobs = googleapis.projects.locations.customJobs;
      const {data: created} = await jobs.create({parent, requestBody: body});
      ended = await waitEnded(async n => (await jobs.get({name: n})).data, created.name, timeoutMs);
    } else {
      const [created] = await jobService.createCustomJob({parent, customJob: body});
      ended = await waitEnded(async n => (await jobService.getCustomJob({name: n}))[0], created.name, timeoutMs);
    }
    process.stdout.write(JSON.stringify(ended) + '\n');
  } finally {
    await jobService.close();
  }
}

main().catch(e => {
  process.stderr.write(`run_job: ${e.stack || e}\n`);
  process.exit(1);
});
