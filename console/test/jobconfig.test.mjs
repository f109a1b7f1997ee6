import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { configYaml, shellQuote, submitCommand } from '../src/jobconfig.js';

const job = {
  jobId: 'census_1',
  labels: { team: 'vision', note: 'yes' },
  trainingInput: {
    scaleTier: 'CUSTOM',
    masterType: 'n1-standard-8',
    masterConfig: { acceleratorConfig: { count: '4', type: 'NVIDIA_TESLA_T4' } },
    workerCount: '2',
    workerType: 'n1-standard-8',
    region: 'us-central1',
    runtimeVersion: '2.11',
    pythonVersion: '3.7',
    pythonModule: 'trainer.task',
    packageUris: ['gs://b/pkgs/trainer-0.1.tar.gz'],
    args: ['--epochs', '5', '--note', "it's: #1", 'null', ''],
    jobDir: 'gs://b/out dir',
    hyperparameters: {
      goal: 'MAXIMIZE',
      hyperparameterMetricTag: 'accuracy',
      maxTrials: 4,
      params: [{ parameterName: 'lr', type: 'DOUBLE', minValue: 0.0001, maxValue: 0.1, scaleType: 'UNIT_LOG_SCALE' }],
    },
  },
};

test('config.yaml holds trainingInput and labels, and reads back the same', () => {
  const text = configYaml(job);
  assert.match(text, /^trainingInput:\n {2}scaleTier: CUSTOM\n/);
  const back = parse(text);
  assert.deepEqual(back, { trainingInput: job.trainingInput, labels: job.labels });
  // Numbers sent as int64 strings stay strings; words YAML would read as other types are quoted.
  assert.match(text, /workerCount: "2"/);
  assert.match(text, /- "null"/);
  assert.match(text, /note: "yes"|note: 'yes'/);
});

test('a job without labels has no labels key; an empty job an empty file', () => {
  assert.equal(parse(configYaml({ trainingInput: { scaleTier: 'BASIC' }, labels: {} })).labels, undefined);
  assert.equal(configYaml({}), '');
});

test('shell words are quoted only when needed', () => {
  assert.equal(shellQuote('--region=us-central1'), '--region=us-central1');
  assert.equal(shellQuote('gs://b/x.tar.gz'), 'gs://b/x.tar.gz');
  assert.equal(shellQuote(''), "''");
  assert.equal(shellQuote('a b'), "'a b'");
  assert.equal(shellQuote("it's"), "'it'\\''s'");
  assert.equal(shellQuote('$(rm -rf ~)'), "'$(rm -rf ~)'");
});

test('the submit command names the job, its project, the trainer, config.yaml and the args', () => {
  const cmd = submitCommand(job, 'team-a');
  assert.equal(
    cmd,
    [
      'mlengine jobs submit training census_1',
      '--project=team-a',
      '--region=us-central1',
      '--module-name=trainer.task',
      '--packages=gs://b/pkgs/trainer-0.1.tar.gz',
      "'--job-dir=gs://b/out dir'",
      '--runtime-version=2.11',
      '--python-version=3.7',
      '--config=config.yaml',
      "-- --epochs 5 --note 'it'\\''s: #1' null ''",
    ].join(' \\\n    '),
  );
  assert.equal(submitCommand({ jobId: 'j', trainingInput: {} }), 'mlengine jobs submit training j \\\n    --config=config.yaml');
});
