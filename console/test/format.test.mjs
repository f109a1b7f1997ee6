import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  formatDuration,
  formatDate,
  durationBetween,
  jobDuration,
  formatBytes,
  resourcesText,
  acceleratorTotals,
  labelsText,
  stateClass,
  taskTag,
  isTerminal,
  formatNumber,
} from '../src/format.js';

test('durations read as words at every scale', () => {
  const rows = [
    [null, ''],
    [NaN, ''],
    [-5, '0 ms'],
    [0, '0 ms'],
    [850, '850 ms'],
    [1000, '1 s'],
    [42_900, '42 s'],
    [60_000, '1 min'],
    [185_000, '3 min 5 s'],
    [3_600_000, '1 h'],
    [2 * 3_600_000 + 4 * 60_000 + 59_000, '2 h 4 min'],
    [3 * 86_400_000 + 4 * 3_600_000, '3 d 4 h'],
    [86_400_000, '1 d'],
  ];
  for (const [ms, want] of rows) assert.equal(formatDuration(ms), want, `formatDuration(${ms})`);
});

test('dates in UTC and the span between two times', () => {
  assert.equal(formatDate('2024-05-01T14:03:22.123456Z', { utc: true }), '2024-05-01 14:03:22 UTC');
  // Local times say their zone (this process's: TZ decides).
  assert.match(formatDate('2024-05-01T14:03:22Z'), /^2024-05-0[12] \d\d:\d\d:22 UTC([+-]\d\d:\d\d)?$/);
  assert.equal(formatDate(''), '');
  assert.equal(formatDate('not a date'), '');
  assert.equal(durationBetween('2024-05-01T14:00:00Z', '2024-05-01T14:01:30Z'), 90_000);
  const now = Date.parse('2024-05-01T14:00:10Z');
  assert.equal(durationBetween('2024-05-01T14:00:00Z', undefined, now), 10_000);
  assert.equal(durationBetween(undefined, '2024-05-01T14:00:00Z'), null);
});

test('a job runs from its start to its end or now; a job never started has no duration', () => {
  const now = Date.parse('2024-05-01T15:00:00Z');
  assert.equal(jobDuration({ createTime: '2024-05-01T14:00:00Z' }, now), null);
  assert.equal(jobDuration({ createTime: '2024-05-01T14:00:00Z', startTime: '2024-05-01T14:30:00Z' }, now), 1_800_000);
  assert.equal(
    jobDuration({ createTime: '2024-05-01T14:00:00Z', startTime: '2024-05-01T14:30:00Z', endTime: '2024-05-01T14:31:00Z' }, now),
    60_000,
  );
  // Cancelled while queued: the time it existed.
  assert.equal(jobDuration({ createTime: '2024-05-01T14:00:00Z', endTime: '2024-05-01T14:00:05Z' }, now), 5_000);
});

test('resources: the scale tier, else accelerators summed by type, else machine types', () => {
  const rows = [
    [undefined, ''],
    [{}, 'BASIC'],
    [{ scaleTier: 'BASIC_GPU' }, 'BASIC_GPU'],
    [{ scaleTier: 'BASIC_TPU' }, 'BASIC_TPU'],
    [
      { scaleTier: 'CUSTOM', masterType: 'n1-standard-8', masterConfig: { acceleratorConfig: { count: '4', type: 'NVIDIA_TESLA_T4' } } },
      '4 × NVIDIA_TESLA_T4',
    ],
    [
      { scaleTier: 'CUSTOM', masterType: 'n1-standard-8', workerType: 'cloud_tpu', workerCount: '1', workerConfig: { acceleratorConfig: { count: '8', type: 'TPU_V3' } } },
      'TPU_V3 × 8',
    ],
    [
      {
        scaleTier: 'CUSTOM',
        masterConfig: { acceleratorConfig: { count: '2', type: 'NVIDIA_TESLA_V100' } },
        workerCount: '3',
        workerConfig: { acceleratorConfig: { count: '2', type: 'NVIDIA_TESLA_V100' } },
        parameterServerCount: '1',
        parameterServerConfig: { acceleratorConfig: { count: '1', type: 'NVIDIA_TESLA_T4' } },
      },
      '8 × NVIDIA_TESLA_V100, 1 × NVIDIA_TESLA_T4',
    ],
    [{ scaleTier: 'CUSTOM', masterType: 'n1-standard-4' }, 'n1-standard-4'],
    [{ scaleTier: 'CUSTOM', masterType: 'n1-standard-4', workerType: 'n1-standard-8', workerCount: '2' }, 'n1-standard-4 + 2 × n1-standard-8'],
    [{ scaleTier: 'CUSTOM', masterType: 'm', parameterServerType: 'p', parameterServerCount: 1 }, 'm + 1 × p'],
    // A tuning job is marked as one, not shown as a BASIC job.
    [{ scaleTier: 'BASIC', hyperparameters: { maxTrials: 4, goal: 'MAXIMIZE' } }, 'tuning: 4 trials of BASIC'],
    [{ hyperparameters: { goal: 'MINIMIZE' } }, 'tuning: 1 trial of BASIC'],
  ];
  for (const [ti, want] of rows) assert.equal(resourcesText(ti), want, JSON.stringify(ti));
});

test('an accelerator without a count counts one; zero workers count none', () => {
  const t = acceleratorTotals({
    masterConfig: { acceleratorConfig: { type: 'NVIDIA_TESLA_K80' } },
    workerCount: '0',
    workerConfig: { acceleratorConfig: { count: '4', type: 'NVIDIA_TESLA_K80' } },
  });
  assert.deepEqual([...t], [['NVIDIA_TESLA_K80', 1]]);
});

test('labels, states, tags, bytes', () => {
  assert.equal(labelsText({ team: 'vision', env: 'dev' }), 'env=dev, team=vision');
  assert.equal(labelsText(undefined), '');
  assert.equal(stateClass('RUNNING'), 'state-running');
  assert.equal(stateClass(undefined), 'state-unknown');
  assert.equal(taskTag('master-replica-0'), 'master-0');
  assert.equal(taskTag('worker-replica-12'), 'worker-12');
  assert.equal(taskTag(''), '?');
  assert.ok(isTerminal('CANCELLED') && !isTerminal('CANCELLING'));
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(200 * 1024 * 1024), '200 MiB');
  assert.equal(formatBytes('x'), '');
});

test('numbers in cells keep 6 significant digits; words stay words', () => {
  assert.equal(formatNumber('0.7552789941334505'), '0.755279');
  assert.equal(formatNumber(-0.10727896249916641), '-0.107279');
  assert.equal(formatNumber('10'), '10');
  assert.equal(formatNumber(12345678), '12345700');
  assert.equal(formatNumber('good'), 'good');
  assert.equal(formatNumber(''), '');
  assert.equal(formatNumber(undefined), '');
});

test("a job's attempts: none shown for one run, each that ended and the next one otherwise", async () => {
  const { attemptRows } = await import('../src/format.js');
  const once = { state: 'SUCCEEDED', attempts: [{ attempt: 1, end: 'SUCCEEDED', endTime: '2024-05-01T12:00:05Z' }] };
  assert.deepEqual(attemptRows(once), []);
  const preempted = {
    attempt: 1,
    end: 'PREEMPTED',
    message: 'Preempted by job urgent (priority 10)',
    hosts: ['localhost'],
    startTime: '2024-05-01T12:00:00Z',
    endTime: '2024-05-01T12:01:30Z',
  };
  const rows = attemptRows({ state: 'QUEUED', attempts: [preempted] });
  assert.deepEqual(
    rows.map((r) => [r.attempt, r.what, r.message, r.hosts, r.ran]),
    [
      [1, 'preempted', 'Preempted by job urgent (priority 10)', 'localhost', '1 min 30 s'],
      [2, 'queued', '', '', ''],
    ],
  );
  const done = attemptRows({
    state: 'FAILED',
    attempts: [preempted, { attempt: 2, end: 'INFRASTRUCTURE', message: 'The node went down.', endTime: '2024-05-01T12:05:00Z' }],
  });
  assert.deepEqual(
    done.map((r) => [r.attempt, r.what, r.ran]),
    [
      [1, 'preempted', '1 min 30 s'],
      [2, 'lost to the infrastructure', 'never started'],
    ],
  );
});
