// Pure text formatting: durations, dates, resources, labels. No DOM here,
// so every function is unit-tested in test/format.test.mjs.

export const STATES = ['QUEUED', 'PREPARING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLING', 'CANCELLED'];
export const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);

export function isTerminal(state) {
  return TERMINAL.has(state);
}

// Milliseconds as "850 ms", "42 s", "3 min 5 s", "2 h 4 min", "3 d 4 h".
export function formatDuration(ms) {
  if (ms == null || !Number.isFinite(ms)) return '';
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

export function parseTime(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

// Milliseconds from `a` to `b` (ISO strings); `b` missing means `now`.
// null when `a` is missing.
export function durationBetween(a, b, now = Date.now()) {
  const ta = parseTime(a);
  if (ta == null) return null;
  const tb = b ? parseTime(b) : now;
  if (tb == null) return null;
  return tb - ta;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// "2024-05-01 14:03:22" in local time (or UTC with utc=true, for tests and titles).
export function formatDate(iso, { utc = false } = {}) {
  const t = parseTime(iso);
  if (t == null) return '';
  const d = new Date(t);
  const [Y, M, D, h, m, s] = utc
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds()];
  return `${Y}-${pad(M)}-${pad(D)} ${pad(h)}:${pad(m)}:${pad(s)} ${utc ? 'UTC' : zoneOf(d)}`;
}

// The browser's offset from UTC at `d`, as "UTC+01:00" ("UTC" when none):
// a time a reader can compare with a log's or a colleague's.
export function zoneOf(d) {
  const offset = -d.getTimezoneOffset();
  if (offset === 0) return 'UTC';
  const sign = offset > 0 ? '+' : '-';
  const a = Math.abs(offset);
  return `UTC${sign}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
}

// A job's duration: from start (or creation while it waits) to end or now.
export function jobDuration(job, now = Date.now()) {
  if (job.startTime) return durationBetween(job.startTime, job.endTime, now);
  if (job.endTime) return durationBetween(job.createTime, job.endTime, now);
  return null;
}

export function formatBytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return '';
  if (v < 1024) return `${v} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let x = v / 1024;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x < 10 ? x.toFixed(1) : Math.round(x)} ${units[i]}`;
}

const count = (v, dflt = 0) => {
  const n = Number.parseInt(v ?? dflt, 10);
  return Number.isFinite(n) ? n : dflt;
};

// The accelerators a job asks for, summed by type over its replicas:
// Map type -> total count.
export function acceleratorTotals(ti) {
  const totals = new Map();
  const add = (config, replicas) => {
    const a = config && config.acceleratorConfig;
    if (!a || !a.type || replicas <= 0) return;
    const n = count(a.count, 1) * replicas;
    if (n > 0) totals.set(a.type, (totals.get(a.type) || 0) + n);
  };
  add(ti.masterConfig, 1);
  add(ti.workerConfig, count(ti.workerCount));
  add(ti.parameterServerConfig, count(ti.parameterServerCount));
  add(ti.evaluatorConfig, count(ti.evaluatorCount));
  return totals;
}

// What a job runs on, in one short line: the scale tier when it is not
// CUSTOM, else the accelerators ("4 × NVIDIA_TESLA_T4", "TPU_V3 × 8"), else
// the machine types ("n1-standard-4 + 2 × n1-standard-8").
export function resourcesText(ti) {
  if (!ti) return '';
  const machines = machinesText(ti);
  // A tuning job runs its trials on those machines: say it is one.
  const hp = ti.hyperparameters;
  if (!hp) return machines;
  const trials = count(hp.maxTrials) || 1;
  return `tuning: ${trials} trial${trials === 1 ? '' : 's'} of ${machines}`;
}

function machinesText(ti) {
  const tier = ti.scaleTier || 'BASIC';
  if (tier !== 'CUSTOM') return tier;
  const totals = acceleratorTotals(ti);
  if (totals.size) {
    return [...totals]
      .map(([type, n]) => (type.startsWith('TPU') ? `${type} × ${n}` : `${n} × ${type}`))
      .join(', ');
  }
  const parts = [ti.masterType || 'CUSTOM'];
  const workers = count(ti.workerCount);
  if (workers > 0) parts.push(`${workers} × ${ti.workerType || 'worker'}`);
  const ps = count(ti.parameterServerCount);
  if (ps > 0) parts.push(`${ps} × ${ti.parameterServerType || 'parameter server'}`);
  return parts.join(' + ');
}

// Labels as "k=v, k2=v2", sorted by key.
export function labelsText(labels) {
  if (!labels) return '';
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(', ');
}

// A CSS class suffix for a state word; the word itself is always shown too.
export function stateClass(state) {
  return `state-${String(state || 'unknown').toLowerCase().replace(/[^a-z_]/g, '')}`;
}

// Short replica tag: "master-replica-0" -> "master-0", "worker-replica-12" -> "worker-12".
export function taskTag(taskName) {
  if (!taskName) return '?';
  return String(taskName).replace(/-replica-/, '-');
}

// A number for a table cell: at most 6 significant digits ("0.0558525",
// "1.23457e+7"); anything that is not a number stays as it is.
export function formatNumber(v) {
  if (v == null || v === '') return '';
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  return String(Number(n.toPrecision(6)));
}

const SHELL_SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

// One word for a POSIX shell: as is when it has nothing special, else in
// single quotes (a ' inside becomes '\'').
export function shellQuote(word) {
  const s = String(word);
  if (s !== '' && SHELL_SAFE.test(s)) return s;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

// How each end of an attempt reads (the API's attempts[].end).
const ATTEMPT_ENDS = {
  SUCCEEDED: 'succeeded',
  FAILED: 'the trainer failed',
  OUT_OF_MEMORY: 'out of memory',
  PREEMPTED: 'preempted',
  INFRASTRUCTURE: 'lost to the infrastructure',
  TIMED_OUT: 'timed out',
  CANCELLED: 'cancelled',
  STALLED: 'stalled',
  NOT_JOINED: 'its replicas never all connected',
};

// The rows of a job's attempts (mlengine's `attempts`, each that ended),
// plus the one running or waiting now when an earlier one ended without
// ending the job. Empty for a job that ran (or runs) once: the timeline
// says it all.
export function attemptRows(job, now = Date.now()) {
  const ended = Array.isArray(job.attempts) ? job.attempts : [];
  const more = !isTerminal(job.state) && ended.length > 0;
  if (ended.length + (more ? 1 : 0) <= 1) return [];
  const rows = ended.map((a) => ({
    attempt: a.attempt,
    end: a.end,
    what: ATTEMPT_ENDS[a.end] || String(a.end || '').toLowerCase(),
    message: a.message || '',
    hosts: (a.hosts || []).join(', '),
    started: a.startTime || null,
    ended: a.endTime || null,
    ran: a.startTime ? formatDuration(durationBetween(a.startTime, a.endTime, now)) : 'never started',
  }));
  if (more) {
    const last = ended[ended.length - 1];
    rows.push({
      attempt: (last.attempt || ended.length) + 1,
      end: '',
      what: job.state === 'RUNNING' ? 'running' : job.state === 'PREPARING' ? 'starting' : 'queued',
      message: '',
      hosts: '',
      started: null,
      ended: null,
      ran: '',
    });
  }
  return rows;
}
