// A Vertex AI job as the file and command a user would create it with:
// config.yaml as `mlengine ai custom-jobs create --config` (a CustomJobSpec)
// or `mlengine ai hp-tuning-jobs create --config` (the tuning job's study,
// counts and trial spec) reads it, and that command line. Loaded with the
// first Vertex AI job page (it carries the YAML library).
import { stringify } from 'yaml';
import { shellQuote } from './format.js';
import { KINDS } from './vertex.js';

const TUNING_FIELDS = ['studySpec', 'maxTrialCount', 'parallelTrialCount', 'maxFailedTrialCount', 'trialJobSpec'];

// kind: 'custom' or 'tuning'.
export function vertexConfigYaml(job, kind) {
  let doc;
  if (kind === 'tuning') {
    doc = {};
    for (const f of TUNING_FIELDS) if (job[f] != null) doc[f] = job[f];
  } else {
    doc = job.jobSpec || {};
  }
  if (!Object.keys(doc).length) return '';
  return stringify(doc, { version: '1.1', lineWidth: 0, minContentWidth: 0 });
}

// `mlengine ai custom-jobs create` (or hp-tuning-jobs) of the same job in
// `project` and `region`, with config.yaml beside it, one flag a line.
export function vertexCommand(job, kind, project, region) {
  const words = [['mlengine', 'ai', (KINDS[kind] || KINDS.custom).cli, 'create']];
  const flag = (name, value) => {
    if (value != null && value !== '') words.push([`--${name}=${value}`]);
  };
  flag('project', project);
  flag('region', region);
  flag('display-name', job.displayName || 'JOB');
  words.push(['--config=config.yaml']);
  const labels = job.labels || {};
  const keys = Object.keys(labels).sort();
  if (keys.length) flag('labels', keys.map((k) => `${k}=${labels[k]}`).join(','));
  return words.map((line) => line.map(shellQuote).join(' ')).join(' \\\n    ');
}
