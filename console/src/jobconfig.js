// A job as the files and command a user would submit it with: config.yaml
// (the Job's trainingInput and labels, as `mlengine jobs submit training
// --config` reads it) and the `mlengine jobs submit training` command line.
import { stringify } from 'yaml';
import { shellQuote } from './format.js';

// The config.yaml of a job: `trainingInput:` and, when it has any, `labels:`.
export function configYaml(job) {
  const doc = {};
  if (job.trainingInput) doc.trainingInput = job.trainingInput;
  if (job.labels && Object.keys(job.labels).length) doc.labels = job.labels;
  if (!Object.keys(doc).length) return '';
  // lineWidth 0: never fold long strings (args, URIs) over lines. YAML 1.1
  // rules quote words such as yes/no/on/off that older readers take for booleans.
  return stringify(doc, { version: '1.1', lineWidth: 0, minContentWidth: 0 });
}

// shellQuote lives in format.js (the Vertex AI pages quote arguments too).
export { shellQuote };

// The command that submits the same job in `project` with config.yaml
// beside it, one flag a line (a trailing backslash continues the line).
export function submitCommand(job, project) {
  const ti = job.trainingInput || {};
  const words = [['mlengine', 'jobs', 'submit', 'training', job.jobId || 'JOB']];
  const flag = (name, value) => {
    if (value != null && value !== '') words.push([`--${name}=${value}`]);
  };
  flag('project', project);
  flag('region', ti.region);
  flag('module-name', ti.pythonModule);
  if (Array.isArray(ti.packageUris) && ti.packageUris.length) flag('packages', ti.packageUris.join(','));
  flag('job-dir', ti.jobDir);
  flag('runtime-version', ti.runtimeVersion);
  flag('python-version', ti.pythonVersion);
  words.push(['--config=config.yaml']);
  if (Array.isArray(ti.args) && ti.args.length) words.push(['--', ...ti.args]);
  return words.map((line) => line.map(shellQuote).join(' ')).join(' \\\n    ');
}
