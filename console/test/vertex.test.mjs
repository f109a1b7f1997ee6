import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import {
  KINDS,
  VERTEX_STATES,
  acceleratorText,
  argsText,
  isRegionName,
  jobIdOf,
  kindOfCollection,
  mlState,
  mlView,
  parameterText,
  poolReplicas,
  poolRows,
  resourcesText,
  specText,
  trialObjectiveOf,
} from '../src/vertex.js';
import { buildVertexFilter } from '../src/filter.js';
import { isTerminal } from '../src/format.js';
import { vertexCommand, vertexConfigYaml } from '../src/vertexconfig.js';
import { parseHash, vertexJobHash } from '../src/router.js';
import { vertexListHash } from '../src/views/vertex.js';

const IMAGE = 'us-docker.pkg.dev/vertex-ai/training/pytorch-xla.1-11:latest';
const pkgPool = (machineType, replicaCount, extra = {}) => ({
  machineSpec: { machineType, ...extra },
  replicaCount,
  pythonPackageSpec: { executorImageUri: IMAGE, packageUris: ['gs://b/t-0.1.tar.gz'], pythonModule: 'trainer.task', args: ['--epochs', '5'] },
});

test('Vertex states read as the ml v1 states of the same meaning', () => {
  const rows = [
    ['JOB_STATE_QUEUED', 'QUEUED', false],
    ['JOB_STATE_PENDING', 'PREPARING', false],
    ['JOB_STATE_RUNNING', 'RUNNING', false],
    ['JOB_STATE_SUCCEEDED', 'SUCCEEDED', true],
    ['JOB_STATE_FAILED', 'FAILED', true],
    ['JOB_STATE_CANCELLING', 'CANCELLING', false],
    ['JOB_STATE_CANCELLED', 'CANCELLED', true],
    ['JOB_STATE_EXPIRED', 'FAILED', true],
    ['JOB_STATE_PARTIALLY_SUCCEEDED', 'SUCCEEDED', true],
    ['JOB_STATE_UNSPECIFIED', '', false],
    [undefined, '', false],
  ];
  for (const [vertex, ml, ended] of rows) {
    assert.equal(mlState(vertex), ml, vertex);
    assert.equal(isTerminal(mlState(vertex)), ended, `${vertex} ended`);
  }
  assert.equal(VERTEX_STATES.length, 7);
  assert.ok(VERTEX_STATES.every((s) => mlState(s)));
});

test('ids, kinds and regions', () => {
  assert.equal(jobIdOf('projects/p/locations/us-central1/customJobs/1234567890123456789'), '1234567890123456789');
  assert.equal(jobIdOf('42'), '42');
  assert.equal(jobIdOf(undefined), '');
  assert.equal(kindOfCollection('customJobs'), 'custom');
  assert.equal(kindOfCollection('hyperparameterTuningJobs'), 'tuning');
  assert.equal(kindOfCollection('jobs'), null);
  assert.equal(KINDS.tuning.cancelPermission, 'aiplatform.hyperparameterTuningJobs.cancel');
  assert.equal(KINDS.custom.cancelPermission, 'aiplatform.customJobs.cancel');
  for (const r of ['us-central1', 'europe-west4', 'northamerica-northeast1']) assert.ok(isRegionName(r), r);
  for (const r of ['', 'us central1', 'US-CENTRAL1', 'us-central1/x', '../x', 'global']) assert.ok(!isRegionName(r), r);
});

test('what a job runs on: pools, replicas and accelerators in one line', () => {
  assert.equal(specText({ workerPoolSpecs: [pkgPool('n1-standard-4', '1'), pkgPool('n1-standard-4', '2')] }), '1 × n1-standard-4 + 2 × n1-standard-4');
  // An empty pool is none of that role; accelerators are summed over every replica.
  const gpu = { acceleratorType: 'NVIDIA_TESLA_T4', acceleratorCount: 2 };
  assert.equal(
    specText({ workerPoolSpecs: [pkgPool('n1-standard-8', '1', gpu), {}, pkgPool('n1-standard-8', '3', gpu)] }),
    '1 × n1-standard-8 + 3 × n1-standard-8, 8 × NVIDIA_TESLA_T4',
  );
  assert.equal(specText({ workerPoolSpecs: [pkgPool('cloud-tpu', '1', { acceleratorType: 'TPU_V2', acceleratorCount: 8 })] }), '1 × cloud-tpu, TPU_V2 × 8');
  assert.equal(specText({ workerPoolSpecs: [pkgPool('n1-standard-4', undefined)] }), '1 × n1-standard-4');
  assert.equal(specText(undefined), '');
  assert.equal(acceleratorText({ acceleratorType: 'NVIDIA_TESLA_T4' }), '1 × NVIDIA_TESLA_T4');
  assert.equal(acceleratorText({ acceleratorType: 'ACCELERATOR_TYPE_UNSPECIFIED', acceleratorCount: 2 }), '');
  assert.equal(poolReplicas({}), 0);
  assert.equal(poolReplicas({ machineSpec: { machineType: 'x' }, replicaCount: '0' }), 0);

  const custom = { jobSpec: { workerPoolSpecs: [pkgPool('n1-standard-4', '1')] } };
  assert.equal(resourcesText(custom), '1 × n1-standard-4');
  assert.equal(resourcesText({ maxTrialCount: 4, trialJobSpec: custom.jobSpec }), 'tuning: 4 trials of 1 × n1-standard-4');
  assert.equal(resourcesText({ maxTrialCount: 1, trialJobSpec: custom.jobSpec }), 'tuning: 1 trial of 1 × n1-standard-4');
  assert.equal(resourcesText(null), '');
});

test('worker pools as the job page lists them', () => {
  const rows = poolRows({
    workerPoolSpecs: [
      pkgPool('n1-standard-8', '1', { acceleratorType: 'NVIDIA_TESLA_T4', acceleratorCount: 4 }),
      {},
      {
        machineSpec: { machineType: 'n1-highmem-2' },
        replicaCount: '2',
        diskSpec: { bootDiskType: 'pd-ssd', bootDiskSizeGb: 200 },
        containerSpec: {
          imageUri: 'gcr.io/p/ps:1',
          command: ['python', '-m', 'ps'],
          args: ['--note', "it's here"],
          env: [{ name: 'A', value: '1' }],
        },
      },
    ],
  });
  assert.deepEqual(rows, [
    {
      index: 0,
      role: 'chief',
      replicas: 1,
      machine: 'n1-standard-8',
      accelerator: '4 × NVIDIA_TESLA_T4',
      disk: '',
      runs: [
        ['module', 'trainer.task'],
        ['package', 'gs://b/t-0.1.tar.gz'],
        ['executor image', IMAGE],
      ],
      args: '--epochs 5',
      env: [],
    },
    {
      index: 2,
      role: 'parameter servers',
      replicas: 2,
      machine: 'n1-highmem-2',
      accelerator: '',
      disk: '200 GB pd-ssd',
      runs: [
        ['image', 'gcr.io/p/ps:1'],
        ['command', 'python -m ps'],
      ],
      args: `--note 'it'\\''s here'`,
      env: ['A'],
    },
  ]);
  assert.deepEqual(poolRows(undefined), []);
  assert.equal(argsText(['a b', '']), "'a b' ''");
});

test("a study's parameters in words", () => {
  assert.equal(parameterText({ parameterId: 'lr', doubleValueSpec: { minValue: 0.001, maxValue: 0.1 }, scaleType: 'UNIT_LOG_SCALE' }), '0.001 to 0.1 (UNIT_LOG_SCALE)');
  assert.equal(parameterText({ integerValueSpec: { minValue: '1', maxValue: '9' } }), 'integers 1 to 9');
  assert.equal(parameterText({ categoricalValueSpec: { values: ['a', 'b'] } }), 'one of a, b');
  assert.equal(parameterText({ discreteValueSpec: { values: [1, 2, 4] }, scaleType: 'SCALE_TYPE_UNSPECIFIED' }), 'one of 1, 2, 4');
  assert.equal(parameterText({}), '');
});

test("a tuning job in ml v1's shape for the trials and metrics tabs", () => {
  const job = {
    name: 'projects/p/locations/us-central1/hyperparameterTuningJobs/7',
    state: 'JOB_STATE_RUNNING',
    maxTrialCount: 3,
    parallelTrialCount: 2,
    studySpec: {
      metrics: [{ metricId: 'accuracy', goal: 'MINIMIZE' }],
      parameters: [{ parameterId: 'x', doubleValueSpec: { minValue: 0, maxValue: 1 } }, { parameterId: 'kind', categoricalValueSpec: { values: ['a'] } }],
    },
    trialJobSpec: { workerPoolSpecs: [pkgPool('n1-standard-4', '1')] },
    trials: [
      {
        id: '1',
        state: 'SUCCEEDED',
        parameters: [
          { parameterId: 'kind', value: 'a' },
          { parameterId: 'x', value: 0.25 },
        ],
        finalMeasurement: { stepCount: '3', metrics: [{ metricId: 'other', value: 9 }, { metricId: 'accuracy', value: 0.5 }] },
        startTime: '2024-05-01T12:00:00Z',
        endTime: '2024-05-01T12:01:00Z',
      },
      { id: '2', state: 'INFEASIBLE', parameters: [{ parameterId: 'x', value: 0.75 }], infeasibleReason: 'the trainer failed' },
      { id: '3', state: 'ACTIVE', parameters: [] },
    ],
  };
  const v = mlView(job);
  assert.equal(v.state, 'RUNNING');
  assert.equal(v.vertex, job);
  assert.deepEqual(v.trainingInput.hyperparameters, {
    goal: 'MINIMIZE',
    hyperparameterMetricTag: 'accuracy',
    maxTrials: 3,
    maxParallelTrials: 2,
    params: [{ parameterName: 'x' }, { parameterName: 'kind' }],
  });
  assert.deepEqual(v.trainingOutput.trials, [
    {
      trialId: '1',
      state: 'SUCCEEDED',
      hyperparameters: { kind: 'a', x: 0.25 },
      startTime: '2024-05-01T12:00:00Z',
      endTime: '2024-05-01T12:01:00Z',
      finalMetric: { objectiveValue: 0.5, trainingStep: '3' },
    },
    { trialId: '2', state: 'INFEASIBLE', hyperparameters: { x: 0.75 }, startTime: undefined, endTime: undefined, infeasibleReason: 'the trainer failed' },
    { trialId: '3', state: 'ACTIVE', hyperparameters: {}, startTime: undefined, endTime: undefined },
  ]);
  assert.equal(v.trainingOutput.completedTrialCount, 1);
  assert.equal(v.trainingOutput.isHyperparameterTuningJob, true);
  // A custom job: just its state.
  assert.deepEqual(mlView({ state: 'JOB_STATE_QUEUED', jobSpec: {} }), { state: 'QUEUED', vertex: { state: 'JOB_STATE_QUEUED', jobSpec: {} } });
  assert.equal(trialObjectiveOf({ finalMeasurement: { metrics: [{ metricId: 'm', value: 'NaN' }] } }, 'm'), null);
  assert.equal(trialObjectiveOf({}, 'm'), null);
});

test("the Vertex AI page's filter: state, label and display name", () => {
  assert.equal(buildVertexFilter({}), '');
  assert.equal(
    buildVertexFilter({ state: 'JOB_STATE_FAILED', label: 'team=vision', q: 'census' }),
    'state=JOB_STATE_FAILED AND labels.team=vision AND display_name:census*',
  );
  assert.equal(buildVertexFilter({ q: 'my run**' }), 'display_name:"my run*"');
  assert.throws(() => buildVertexFilter({ label: 'novalue' }), /KEY=VALUE/);
});

test('config.yaml and the command that creates the same job again', () => {
  const spec = { workerPoolSpecs: [pkgPool('n1-standard-4', '1')], baseOutputDirectory: { outputUriPrefix: 'gs://b/out' } };
  const custom = { displayName: "census 'v2'", labels: { team: 'vision', a: 'b' }, jobSpec: spec, state: 'JOB_STATE_RUNNING' };
  assert.deepEqual(parse(vertexConfigYaml(custom, 'custom')), spec);
  assert.equal(
    vertexCommand(custom, 'custom', 'p', 'us-central1'),
    [
      'mlengine ai custom-jobs create',
      '--project=p',
      '--region=us-central1',
      `'--display-name=census '\\''v2'\\'''`,
      '--config=config.yaml',
      '--labels=a=b,team=vision',
    ].join(' \\\n    '),
  );
  const tuning = { displayName: 't', studySpec: { metrics: [] }, maxTrialCount: 4, parallelTrialCount: 2, trialJobSpec: spec, trials: [{ id: '1' }] };
  assert.deepEqual(parse(vertexConfigYaml(tuning, 'tuning')), { studySpec: { metrics: [] }, maxTrialCount: 4, parallelTrialCount: 2, trialJobSpec: spec });
  assert.match(vertexCommand(tuning, 'tuning', 'p', 'europe-west4'), /^mlengine ai hp-tuning-jobs create \\\n {4}--project=p/);
  assert.equal(vertexConfigYaml({}, 'custom'), '');
});

test('Vertex AI addresses', () => {
  assert.equal(vertexListHash({ project: 'p', region: 'us-central1', kind: 'custom', pageSize: 50 }), '#/vertex?project=p');
  assert.equal(
    vertexListHash({ project: 'p', region: 'europe-west4', kind: 'tuning', state: 'JOB_STATE_RUNNING', label: 'a=b', q: 'x', pageSize: 5, page: 'T' }),
    '#/vertex?project=p&region=europe-west4&kind=tuning&state=JOB_STATE_RUNNING&label=a%3Db&q=x&pageSize=5&page=T',
  );
  assert.deepEqual(parseHash('#/vertex?project=p&kind=tuning'), { name: 'vertex', params: {}, query: { project: 'p', kind: 'tuning' }, tab: undefined });
  const h = vertexJobHash('p', 'us-central1', 'customJobs', '123');
  assert.equal(h, '#/vertex/p/us-central1/customJobs/123');
  assert.deepEqual(parseHash(h), {
    name: 'vertexjob',
    params: { project: 'p', region: 'us-central1', kind: 'customJobs', job: '123' },
    query: {},
    tab: 'overview',
  });
  assert.equal(parseHash(vertexJobHash('p', 'r1', 'hyperparameterTuningJobs', '9', 'trials')).tab, 'trials');
  assert.equal(vertexJobHash('p', 'r1', 'customJobs', '9', 'overview'), '#/vertex/p/r1/customJobs/9');
  assert.equal(parseHash('#/vertex/p/r1/customJobs/9/logs').tab, 'logs');
  assert.equal(parseHash('#/vertex/p/r1/customJobs/9/metrics').tab, 'metrics');
  assert.equal(parseHash('#/vertex/p/r1/customJobs').name, 'notfound');
});
