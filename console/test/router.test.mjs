import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashFor, jobHash, parseHash } from '../src/router.js';
import { bucketHashFor, timelineSteps } from '../src/views/job.js';
import { crumbs } from '../src/views/buckets.js';
import { cpusText, gpusText, memoryText } from '../src/views/cluster.js';
import { formatBytes } from '../src/format.js';

test('hashes map to routes with decoded parts and the query', () => {
  assert.deepEqual(parseHash(''), { name: 'jobs', params: {}, query: {}, tab: undefined });
  assert.deepEqual(parseHash('#/signin').name, 'signin');
  assert.deepEqual(parseHash('#/jobs?project=p1&state=RUNNING&label=team%3Dvision'), {
    name: 'jobs',
    params: {},
    query: { project: 'p1', state: 'RUNNING', label: 'team=vision' },
    tab: undefined,
  });
  assert.deepEqual(parseHash('#/jobs/p1/job_1'), { name: 'job', params: { project: 'p1', job: 'job_1' }, query: {}, tab: 'overview' });
  assert.equal(parseHash('#/jobs/p1/job_1/logs').tab, 'logs');
  assert.equal(parseHash('#/jobs/p1/job_1/trials').tab, 'trials');
  assert.deepEqual(parseHash('#/buckets/my-b?prefix=a%2Fb%2F'), { name: 'bucket', params: { bucket: 'my-b' }, query: { prefix: 'a/b/' }, tab: undefined });
  assert.equal(parseHash('#/nope/x').name, 'notfound');
  assert.equal(parseHash('#/jobs/p/%E0%A4%A').params.job, '%E0%A4%A');
});

test('hashes are built encoded, without empty values', () => {
  assert.equal(hashFor(['jobs'], { project: 'p', state: '', q: undefined, label: 'a=b' }), '#/jobs?project=p&label=a%3Db');
  assert.equal(jobHash('p', 'j'), '#/jobs/p/j');
  assert.equal(jobHash('p', 'j', 'logs'), '#/jobs/p/j/logs');
  assert.equal(jobHash('p', 'j', 'overview'), '#/jobs/p/j');
  assert.equal(hashFor(['buckets', 'b'], { prefix: 'x/y/' }), '#/buckets/b?prefix=x%2Fy%2F');
  const r = parseHash(hashFor(['jobs', 'p q', 'a/b']));
  assert.deepEqual(r.params, { project: 'p q', job: 'a/b' });
});

test('a job directory links to the bucket browser', () => {
  assert.equal(bucketHashFor('gs://b/runs/j1'), '#/buckets/b?prefix=runs%2Fj1%2F');
  assert.equal(bucketHashFor('gs://b/runs/j1/'), '#/buckets/b?prefix=runs%2Fj1%2F');
  assert.equal(bucketHashFor('gs://b'), '#/buckets/b');
  assert.equal(bucketHashFor('/local/dir'), null);
  assert.equal(bucketHashFor(undefined), null);
  assert.deepEqual(crumbs('a/b/'), [{ label: 'a', prefix: 'a/' }, { label: 'b', prefix: 'a/b/' }]);
  assert.deepEqual(crumbs(''), []);
});

test('the timeline: created, waited, started, ran, ended', () => {
  const now = Date.parse('2024-05-01T14:10:00Z');
  const queued = timelineSteps({ state: 'QUEUED', createTime: '2024-05-01T14:00:00Z' }, now);
  assert.deepEqual(queued.map((s) => [s.step, s.duration ?? null]), [['created', null], ['queued', 600_000]]);
  const done = timelineSteps(
    { state: 'SUCCEEDED', createTime: '2024-05-01T14:00:00Z', startTime: '2024-05-01T14:00:30Z', endTime: '2024-05-01T14:05:30Z' },
    now,
  );
  assert.deepEqual(done.map((s) => s.step), ['created', 'queued', 'started', 'ran', 'ended']);
  assert.equal(done[1].duration, 30_000);
  assert.equal(done[3].duration, 300_000);
  assert.equal(done[4].label, 'Ended: SUCCEEDED');
  const cancelled = timelineSteps({ state: 'CANCELLED', createTime: '2024-05-01T14:00:00Z', endTime: '2024-05-01T14:00:05Z' }, now);
  assert.deepEqual(cancelled.map((s) => s.step), ['created', 'ran', 'ended']);
});

test('cluster cells', () => {
  assert.equal(cpusText(16000), '16');
  assert.equal(cpusText('1500'), '1.5');
  assert.equal(cpusText(undefined), '');
  assert.equal(cpusText(0), '—'); // not accounted: a TPU host runs no replica
  assert.equal(memoryText(0), '—');
  assert.equal(memoryText('2048'), formatBytes(2048 * 1024 * 1024));
  assert.equal(memoryText(undefined), '');
  assert.equal(
    gpusText([{ index: 0, type: 'NVIDIA_TESLA_T4' }, { index: 1, type: 'NVIDIA_TESLA_T4' }, { index: 2, model: 'X' }]),
    '2 × NVIDIA_TESLA_T4 (0, 1); 1 × X (2)',
  );
  assert.equal(gpusText([]), '');
});
