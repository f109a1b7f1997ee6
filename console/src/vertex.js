// Vertex AI's custom jobs and hyperparameter tuning jobs as the console
// shows them: kinds, states, what a job runs on, its worker pools and a
// tuning job's trials. Pure (no DOM): unit-tested in test/vertex.test.mjs.
import { shellQuote } from './format.js';

// The two kinds of job, by the word the addresses use (kind=custom|tuning).
export const KINDS = {
  custom: {
    collection: 'customJobs',
    title: 'Custom jobs',
    one: 'custom job',
    cancelPermission: 'aiplatform.customJobs.cancel',
    cli: 'custom-jobs',
  },
  tuning: {
    collection: 'hyperparameterTuningJobs',
    title: 'Hyperparameter tuning jobs',
    one: 'tuning job',
    cancelPermission: 'aiplatform.hyperparameterTuningJobs.cancel',
    cli: 'hp-tuning-jobs',
  },
};

// 'customJobs' -> 'custom', 'hyperparameterTuningJobs' -> 'tuning', else null.
export function kindOfCollection(collection) {
  for (const [kind, k] of Object.entries(KINDS)) if (k.collection === collection) return kind;
  return null;
}

export const DEFAULT_REGION = 'us-central1';

// Google's regions, offered as suggestions (the server says which it serves
// only by refusing a job in another: any name can be typed).
export const REGIONS = [
  'us-central1',
  'us-east1',
  'us-east4',
  'us-west1',
  'northamerica-northeast1',
  'europe-west1',
  'europe-west2',
  'europe-west3',
  'europe-west4',
  'asia-east1',
  'asia-northeast1',
  'asia-southeast1',
  'australia-southeast1',
];

// A region's name as Google spells them: "us-central1", "europe-west4".
export function isRegionName(region) {
  return /^[a-z]+(-[a-z]+)*[0-9]+$/.test(String(region || ''));
}

// The states a Vertex AI job can be in (the state filter offers these).
export const VERTEX_STATES = [
  'JOB_STATE_QUEUED',
  'JOB_STATE_PENDING',
  'JOB_STATE_RUNNING',
  'JOB_STATE_SUCCEEDED',
  'JOB_STATE_FAILED',
  'JOB_STATE_CANCELLING',
  'JOB_STATE_CANCELLED',
];

// Vertex AI's state -> the ml v1 state that means the same (docs/vertex.md);
// the badges' colours and "has it ended" follow it. The last four are
// Vertex's own and never come from mlengine; they read as their nearest.
const ML_STATES = {
  JOB_STATE_QUEUED: 'QUEUED',
  JOB_STATE_PENDING: 'PREPARING',
  JOB_STATE_RUNNING: 'RUNNING',
  JOB_STATE_SUCCEEDED: 'SUCCEEDED',
  JOB_STATE_FAILED: 'FAILED',
  JOB_STATE_CANCELLING: 'CANCELLING',
  JOB_STATE_CANCELLED: 'CANCELLED',
  JOB_STATE_PAUSED: 'QUEUED',
  JOB_STATE_UPDATING: 'RUNNING',
  JOB_STATE_EXPIRED: 'FAILED',
  JOB_STATE_PARTIALLY_SUCCEEDED: 'SUCCEEDED',
};

export function mlState(state) {
  return ML_STATES[state] || '';
}

// The id of a job: the last segment of its name
// (projects/P/locations/L/customJobs/1234567890123456789).
export function jobIdOf(name) {
  const s = String(name || '');
  return s.slice(s.lastIndexOf('/') + 1);
}

const int = (v, dflt) => {
  const n = Number.parseInt(v ?? dflt, 10);
  return Number.isFinite(n) ? n : dflt;
};

// What each pool is, by its place (docs/vertex.md, "The spec, mapped").
export const POOL_ROLES = ['chief', 'workers', 'parameter servers', 'evaluators'];

// A pool's replicas: 0 for an empty pool ({}: none of that role).
export function poolReplicas(pool) {
  if (!pool || !pool.machineSpec) return 0;
  return Math.max(0, int(pool.replicaCount, 1));
}

const isTpu = (type) => String(type).startsWith('TPU');
const accelText = (type, n) => (isTpu(type) ? `${type} × ${n}` : `${n} × ${type}`);

// One replica's accelerators: "4 × NVIDIA_TESLA_T4", "TPU_V2 × 8", or "".
export function acceleratorText(machineSpec) {
  const m = machineSpec || {};
  if (!m.acceleratorType || m.acceleratorType === 'ACCELERATOR_TYPE_UNSPECIFIED') return '';
  return accelText(m.acceleratorType, int(m.acceleratorCount, 1));
}

// What a CustomJobSpec runs on, in one short line: its pools' replicas and
// machine types, then the accelerators of all of them summed by type:
// "1 × n1-standard-4 + 2 × n1-standard-8, 12 × NVIDIA_TESLA_T4".
export function specText(spec) {
  const machines = [];
  const totals = new Map();
  for (const pool of (spec && spec.workerPoolSpecs) || []) {
    const n = poolReplicas(pool);
    if (!n) continue;
    const m = pool.machineSpec;
    machines.push(`${n} × ${m.machineType || '?'}`);
    if (m.acceleratorType && m.acceleratorType !== 'ACCELERATOR_TYPE_UNSPECIFIED') {
      totals.set(m.acceleratorType, (totals.get(m.acceleratorType) || 0) + n * int(m.acceleratorCount, 1));
    }
  }
  const accels = [...totals].map(([type, n]) => accelText(type, n)).join(', ');
  return [machines.join(' + '), accels].filter(Boolean).join(', ');
}

// What a custom job or a tuning job runs on: a tuning job says so, with its
// trial count ("tuning: 4 trials of 1 × n1-standard-4").
export function resourcesText(job) {
  if (!job) return '';
  if (job.trialJobSpec) {
    const n = int(job.maxTrialCount, 0);
    return `tuning: ${n} trial${n === 1 ? '' : 's'} of ${specText(job.trialJobSpec) || '?'}`;
  }
  return specText(job.jobSpec);
}

// Arguments as a shell would take them back: each word quoted when it
// needs to be.
export function argsText(args) {
  return (args || []).map(shellQuote).join(' ');
}

// Each pool that has replicas, as the job page's table shows it:
// {index, role, replicas, machine, accelerator, disk, runs: [[what, value]...], args, env}.
export function poolRows(spec) {
  const rows = [];
  ((spec && spec.workerPoolSpecs) || []).forEach((pool, index) => {
    const replicas = poolReplicas(pool);
    if (!replicas) return;
    const runs = [];
    const c = pool.containerSpec;
    const p = pool.pythonPackageSpec;
    let args = [];
    let env = [];
    if (c) {
      runs.push(['image', c.imageUri || '']);
      if (c.command && c.command.length) runs.push(['command', argsText(c.command)]);
      args = c.args || [];
      env = c.env || [];
    } else if (p) {
      runs.push(['module', p.pythonModule || '']);
      for (const uri of p.packageUris || []) runs.push(['package', uri]);
      if (p.executorImageUri) runs.push(['executor image', p.executorImageUri]);
      args = p.args || [];
      env = p.env || [];
    }
    const d = pool.diskSpec;
    rows.push({
      index,
      role: POOL_ROLES[index] || `pool ${index}`,
      replicas,
      machine: pool.machineSpec.machineType || '',
      accelerator: acceleratorText(pool.machineSpec),
      disk: d ? [d.bootDiskSizeGb ? `${d.bootDiskSizeGb} GB` : '', d.bootDiskType || ''].filter(Boolean).join(' ') : '',
      runs,
      args: argsText(args),
      env: env.map((e) => e.name).filter(Boolean),
    });
  });
  return rows;
}

// A study parameter's range in words: "0 to 1 (UNIT_LOG_SCALE)", "one of a, b".
export function parameterText(p) {
  const scale = p.scaleType && p.scaleType !== 'SCALE_TYPE_UNSPECIFIED' ? ` (${p.scaleType})` : '';
  if (p.doubleValueSpec) return `${p.doubleValueSpec.minValue ?? '?'} to ${p.doubleValueSpec.maxValue ?? '?'}${scale}`;
  const i = p.integerValueSpec;
  if (i) return `integers ${i.minValue ?? '?'} to ${i.maxValue ?? '?'}${scale}`;
  if (p.categoricalValueSpec) return `one of ${(p.categoricalValueSpec.values || []).join(', ')}`;
  if (p.discreteValueSpec) return `one of ${(p.discreteValueSpec.values || []).join(', ')}${scale}`;
  return '';
}

// A trial's value of the study's metric: its final measurement's (the last
// reported), else null.
export function trialObjectiveOf(trial, metricId) {
  const metrics = (trial.finalMeasurement && trial.finalMeasurement.metrics) || [];
  const m = metrics.find((x) => x.metricId === metricId) || (metricId ? null : metrics[0]);
  if (!m || m.value == null) return null;
  const n = Number(m.value);
  return Number.isFinite(n) ? n : null;
}

// A HyperparameterTuningJob in the shape of an ml v1 tuning job, for the
// views both kinds share (views/trials.js, views/metrics.js): `state` the
// ml v1 word, `trainingInput.hyperparameters` from the study, and
// `trainingOutput.trials` from the trials. The Vertex AI job itself is
// `vertex`. A custom job gives just {state, vertex}.
export function mlView(job) {
  const view = { state: mlState(job.state), vertex: job };
  if (!job.studySpec && !job.trialJobSpec) return view;
  const study = job.studySpec || {};
  const metric = (study.metrics || [])[0] || {};
  const trials = (job.trials || []).map((t) => {
    const objective = trialObjectiveOf(t, metric.metricId);
    const out = {
      trialId: String(t.id ?? ''),
      state: t.state || '',
      hyperparameters: Object.fromEntries((t.parameters || []).map((p) => [p.parameterId, p.value])),
      startTime: t.startTime,
      endTime: t.endTime,
    };
    if (objective != null) out.finalMetric = { objectiveValue: objective, trainingStep: t.finalMeasurement.stepCount };
    if (t.infeasibleReason) out.infeasibleReason = t.infeasibleReason;
    return out;
  });
  view.trainingInput = {
    hyperparameters: {
      goal: metric.goal || 'MAXIMIZE',
      hyperparameterMetricTag: metric.metricId || '',
      maxTrials: job.maxTrialCount,
      maxParallelTrials: job.parallelTrialCount,
      params: (study.parameters || []).map((p) => ({ parameterName: p.parameterId })),
    },
  };
  view.trainingOutput = {
    isHyperparameterTuningJob: true,
    trials,
    completedTrialCount: trials.filter((t) => t.state === 'SUCCEEDED').length,
  };
  return view;
}
