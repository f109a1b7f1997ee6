// Google's two official Node.js clients for Vertex AI, unchanged but for
// the endpoint, against the real mlengined (docs/vertex.md):
//  - googleapis' aiplatform v1 (REST, generated from the discovery
//    document; `rootUrl` pointed at mlengined),
//  - @google-cloud/aiplatform's JobServiceClient in its REST mode
//    (`fallback: true, protocol: 'http'`), which sends
//    `$alt=json;enum-encoding=int`, integer enums and empty output-only
//    maps, and polls operations under /ui/.
// Both pinned in package.json (scripts/install-node-deps.sh installs them).
// One server with the local executor: jobs of both clients run to
// JOB_STATE_SUCCEEDED, a package of two worker pools all-reducing over
// gloo, sandboxed as every job.
'use strict';

const assert = require('node:assert/strict');
const {after, before, describe, test} = require('node:test');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const {startServer} = require('../storage_client/server.js');
const jobs = require('./jobs.js');

const {REGION, sdist, waitEnded} = jobs;

const RUNTIME = process.env.MLE_TEST_RUNTIME || 'pytorch-1.13-cpu';

let server;
let configDir;
let googleapisClient;  // googleapis' aiplatform v1
let jobService;  // @google-cloud/aiplatform's JobServiceClient (REST mode)
let packageUri;

async function call(method, urlPath, body) {
  const res = await fetch(server.url + urlPath, {
    method,
    headers: {'Authorization': `Bearer ${server.token}`, 'Content-Type': 'application/octet-stream'},
    body,
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${urlPath}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : {};
}

function packageJob(name, options) {
  return jobs.packageJob(packageUri, name, options);
}

function tuningJob(name) {
  return {
    displayName: name,
    studySpec: {
      metrics: [{metricId: 'accuracy', goal: 'MAXIMIZE'}],
      parameters: [{parameterId: 'lr', doubleValueSpec: {minValue: 0.001, maxValue: 0.1}, scaleType: 'UNIT_LOG_SCALE'}],
      algorithm: 'RANDOM_SEARCH',
    },
    maxTrialCount: 2,
    parallelTrialCount: 1,
    trialJobSpec: packageJob('trial').jobSpec,
  };
}

function violations(details) {
  const out = [];
  for (const d of details || []) {
    for (const v of d.fieldViolations || []) out.push(v.field);
  }
  return out;
}

before(async () => {
  configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mle-vertex-client-'));
  const config = path.join(configDir, 'mlengined.yaml');
  fs.writeFileSync(config, `runtimes:\n  - {name: ${RUNTIME}, python: /usr/bin/python3, python_version: '3.11'}\n` +
                           'cancel_grace_seconds: 2\n');
  server = await startServer({args: ['--config', config], prefix: 'mle-vertex-client-'});
  const upload = await call('POST', '/upload/storage/v1/b/vertex-node/o?uploadType=media&name=' +
                                    encodeURIComponent('pkgs/trainer-0.1.tar.gz'), sdist());
  packageUri = `gs://vertex-node/${upload.name}`;

  ({googleapis: googleapisClient, jobService} = jobs.clients(server.url, server.token, 'node-vertex'));
});

after(async () => {
  if (jobService) await jobService.close();
  if (server) await server.stop();
  if (configDir) fs.rmSync(configDir, {recursive: true, force: true});
});

describe("googleapis' aiplatform v1", () => {
  const project = 'node-googleapis';
  const parent = `projects/${project}/locations/${REGION}`;
  const jobs = () => googleapisClient.projects.locations.customJobs;

  test('create, get, list with a filter and pages, cancel, delete and its operation', async () => {
    const {data: created} = await jobs().create({parent, requestBody: packageJob('alpha', {args: ['--hold']})});
    assert.match(created.name, new RegExp(`^${parent}/customJobs/[0-9]{19}$`));
    assert.equal(created.displayName, 'alpha');
    assert.deepEqual(created.labels, {suite: 'node'});
    const {data: got} = await jobs().get({name: created.name});
    assert.equal(got.name, created.name);
    const names = [created.name];
    for (const n of ['beta', 'gamma']) {
      names.unshift((await jobs().create({parent, requestBody: packageJob(n)})).data.name);
    }
    const seen = [];
    let pageToken;
    do {
      const {data} = await jobs().list({parent, pageSize: 2, pageToken});
      seen.push(...data.customJobs.map(j => j.name));
      pageToken = data.nextPageToken;
    } while (pageToken);
    assert.deepEqual(seen.filter(n => names.includes(n)), names);  // newest first
    const {data: filtered} = await jobs().list({parent, filter: 'display_name="alpha"'});
    assert.deepEqual(filtered.customJobs.map(j => j.name), [created.name]);

    for (const n of names) await jobs().cancel({name: n, requestBody: {}});
    const cancelled = await waitEnded(async n => (await jobs().get({name: n})).data, created.name, 60000);
    assert.equal(cancelled.state, 'JOB_STATE_CANCELLED');
    const {data: op} = await jobs().delete({name: created.name});
    assert.equal(op.done, true);
    const ops = googleapisClient.projects.locations.operations;
    assert.deepEqual((await ops.get({name: op.name})).data, op);
    assert.deepEqual((await ops.wait({name: op.name, timeout: '5s'})).data, op);
    assert.ok((await ops.list({name: parent})).data.operations.some(o => o.name === op.name));
    await assert.rejects(jobs().get({name: created.name}), e => e.response.status === 404);
  });

  test('a bad spec is refused with every violation, in the spec\'s own paths', async () => {
    const body = packageJob('bad');
    body.jobSpec.workerPoolSpecs[0].replicaCount = '2';
    body.jobSpec.workerPoolSpecs[0].machineSpec.machineType = 'n9-giant';
    body.jobSpec.enableWebAccess = true;
    await assert.rejects(jobs().create({parent, requestBody: body}), e => {
      assert.equal(e.response.status, 400);
      const error = e.response.data.error;
      assert.equal(error.status, 'INVALID_ARGUMENT');
      const fields = violations(error.details);
      for (const f of ['jobSpec.workerPoolSpecs[0].replicaCount', 'jobSpec.workerPoolSpecs[0].machineSpec.machineType',
                       'jobSpec.enableWebAccess']) {
        assert.ok(fields.includes(f), `${f} not in ${fields}`);
      }
      return true;
    });
  });

  test('a tuning job runs its trials to JOB_STATE_SUCCEEDED', async () => {
    const tuning = googleapisClient.projects.locations.hyperparameterTuningJobs;
    const body = tuningJob('tune');
    body.trialJobSpec = packageJob('trial', {pools: 2}).jobSpec;
    const {data: created} = await tuning.create({parent, requestBody: body});
    const done = await waitEnded(async n => (await tuning.get({name: n})).data, created.name);
    assert.equal(done.state, 'JOB_STATE_SUCCEEDED', JSON.stringify(done));
    assert.equal(done.trials.length, 2);
    for (const t of done.trials) {
      // Each trial's replicas all-reduced; its chief reported accuracy = lr.
      assert.equal(t.state, 'SUCCEEDED', JSON.stringify(t));
      assert.equal(t.parameters[0].parameterId, 'lr');
      assert.equal(typeof t.parameters[0].value, 'number');
      assert.deepEqual(t.finalMeasurement.metrics, [{metricId: 'accuracy', value: t.parameters[0].value}]);
    }
    const {data: list} = await tuning.list({parent});
    assert.deepEqual(list.hyperparameterTuningJobs.map(j => j.name), [created.name]);
  });
});

describe("@google-cloud/aiplatform's JobServiceClient (REST mode)", () => {
  const project = 'node-gax';
  const parent = `projects/${project}/locations/${REGION}`;

  test('a package of two worker pools runs to JOB_STATE_SUCCEEDED, all-reducing over gloo', async () => {
    const [created] = await jobService.createCustomJob({parent, customJob: packageJob('gloo', {pools: 2})});
    assert.match(created.name, new RegExp(`^${parent}/customJobs/[0-9]{19}$`));
    assert.equal(created.state, 'JOB_STATE_QUEUED');  // sent and read back as a number: decoded by the client
    const done = await waitEnded(async n => (await jobService.getCustomJob({name: n}))[0], created.name);
    assert.equal(done.state, 'JOB_STATE_SUCCEEDED', JSON.stringify(done.error));
    const id = created.name.split('/').pop();
    const log = await call('GET', `/v1/projects/${project}/jobs/${id}/logs`);
    const lines = log.entries.map(e => e.message).filter(m => m.startsWith('POOL '));
    assert.deepEqual(lines.sort(), ['POOL workerpool0 ALLREDUCE 3.0 of 2', 'POOL workerpool1 ALLREDUCE 3.0 of 2']);
  });

  test('enums travel as numbers, lists page, cancel and delete poll their operation under /ui/', async () => {
    const body = packageJob('enums', {args: ['--hold']});
    body.jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType = 'ACCELERATOR_TYPE_UNSPECIFIED';
    body.jobSpec.scheduling = {strategy: 'STANDARD', timeout: {seconds: 600}};
    const [a] = await jobService.createCustomJob({parent, customJob: body});
    const [b] = await jobService.createCustomJob({parent, customJob: packageJob('second', {args: ['--hold']})});
    assert.equal(a.jobSpec.scheduling.strategy, 'STANDARD');
    assert.equal(String(a.jobSpec.scheduling.timeout.seconds), '600');
    const [page] = await jobService.listCustomJobs({parent, pageSize: 1, filter: 'labels.suite=node'},
                                                   {autoPaginate: false});
    assert.equal(page.length, 1);
    const all = [];
    for await (const j of jobService.listCustomJobsAsync({parent, pageSize: 1})) all.push(j.name);
    assert.ok(all.includes(a.name) && all.includes(b.name), all.join());
    for (const j of [a, b]) await jobService.cancelCustomJob({name: j.name});
    await waitEnded(async n => (await jobService.getCustomJob({name: n}))[0], a.name, 60000);
    const [operation] = await jobService.deleteCustomJob({name: a.name});
    await operation.promise();
    assert.equal(operation.done, true);
    const status = await jobService.checkDeleteCustomJobProgress(operation.name);
    assert.equal(status.done, true);
    await assert.rejects(jobService.getCustomJob({name: a.name}), e => e.code === 5 || e.code === 404);
  });

  test('a tuning job of the client, and a bad study refused with its paths', async () => {
    const [created] = await jobService.createHyperparameterTuningJob({parent, hyperparameterTuningJob: tuningJob('t')});
    assert.equal(created.studySpec.metrics[0].goal, 'MAXIMIZE');
    assert.equal(created.studySpec.algorithm, 'RANDOM_SEARCH');
    const [got] = await jobService.getHyperparameterTuningJob({name: created.name});
    assert.equal(got.name, created.name);
    await jobService.cancelHyperparameterTuningJob({name: created.name});
    const bad = tuningJob('bad');
    bad.studySpec.metrics.push({metricId: 'loss', goal: 'MINIMIZE'});
    bad.maxTrialCount = 0;
    await assert.rejects(jobService.createHyperparameterTuningJob({parent, hyperparameterTuningJob: bad}), e => {
      const text = JSON.stringify(e.statusDetails || e.details || e.message);
      assert.ok(text.includes('studySpec.metrics') && text.includes('maxTrialCount'), text);
      return true;
    });
  });
});
