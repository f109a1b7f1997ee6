// One job: a header (id, state, tabs) and the tab's content. The overview
// tab is here: why it waits, the timeline, config.yaml and the command,
// replicas, outputs and cancel.
import { api, enc, isAbort } from '../api.js';
import { fill, h, presence, scroller, stateBadge, table, text } from '../dom.js';
import {
  attemptRows,
  formatDate,
  formatDuration,
  durationBetween,
  isTerminal,
  resourcesText,
  labelsText,
} from '../format.js';
import { poll, whileRunning } from '../poll.js';
import { hashFor, jobHash } from '../router.js';
import * as logs from './logs.js';

const REFRESH_MS = 2000;
const TABS = [
  ['overview', 'Overview'],
  ['logs', 'Logs'],
  ['metrics', 'Metrics'],
  ['trials', 'Trials'],
];

export const isTuning = (job) =>
  Boolean((job.trainingInput && job.trainingInput.hyperparameters) || (job.trainingOutput && job.trainingOutput.isHyperparameterTuningJob));

export function jobPath(project, jobId) {
  return `/v1/projects/${enc(project)}/jobs/${enc(jobId)}`;
}

// gs://bucket/dir -> the bucket browser's address for it, or null.
export function bucketHashFor(gsPath) {
  const m = /^gs:\/\/([^/]+)\/?(.*)$/.exec(gsPath || '');
  if (!m) return null;
  const prefix = m[2] && !m[2].endsWith('/') ? `${m[2]}/` : m[2];
  return hashFor(['buckets', m[1]], { prefix });
}

export function mount(root, ctx) {
  const { project, job: jobId } = ctx.params;
  const tab = ctx.tab || 'overview';
  const stateEl = h('span', { id: 'job-state-box' });
  // The trials tab is there only once the job is known to be a tuning job.
  let trialsTab = null;
  const tabs = h(
    'nav',
    { class: 'tabs', 'aria-label': 'Job' },
    TABS.map(([name, label]) => {
      const a = h('a', { id: `tab-${name}`, href: jobHash(project, jobId, name), class: 'tab' }, label);
      if (name === tab) a.setAttribute('aria-current', 'page');
      if (name !== 'trials') return a;
      trialsTab = presence(a);
      return trialsTab.node;
    }),
  );
  const summary = h('p', { class: 'job-summary muted' });
  const body = h('div', { class: 'tab-body' });
  root.append(
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumbs' },
      h('a', { href: hashFor(['jobs'], { project }) }, 'Jobs'),
      ' / ',
      h('span', null, project),
    ),
    h('div', { class: 'page-head' }, h('h1', { id: 'job-id' }, jobId), stateEl),
    summary,
    tabs,
    body,
  );

  // Every tab reports the job it fetched here, so the header stays current.
  const jobCtx = {
    ...ctx,
    project,
    jobId,
    path: jobPath(project, jobId),
    job: null,
    updateJob(job) {
      jobCtx.job = job;
      fill(stateEl, stateBadge(job.state, { id: 'job-state' }));
      text(summary, [resourcesText(job.trainingInput), labelsText(job.labels)].filter(Boolean).join(' · '));
      trialsTab.show(isTuning(job));
    },
    async fetchJob(signal) {
      const job = await api(jobCtx.path, { signal });
      jobCtx.updateJob(job);
      return job;
    },
  };

  if (tab === 'overview') overview(body, jobCtx);
  else if (tab === 'logs') logs.mount(body, jobCtx);
  // The charts (uPlot) load with the first metrics or trials page.
  else if (tab === 'metrics') import('./metrics.js').then((m) => m.mount(body, jobCtx), ctx.setError);
  else if (tab === 'trials') import('./trials.js').then((m) => m.mount(body, jobCtx), ctx.setError);
}

function overview(root, ctx) {
  const { signal } = ctx;
  // These three are in the page only while they apply.
  const waiting = presence(h('div', { id: 'job-waiting', class: 'notice notice-wait' }));
  const error = presence(h('div', { id: 'job-error', class: 'notice notice-error' }));
  const actionError = presence(h('p', { id: 'action-error', class: 'form-error', role: 'alert' }));
  const actions = h('div', { class: 'actions' });
  const timeline = h('ol', { id: 'job-timeline', class: 'timeline' });
  // Only when the job ran (or runs) more than once: preempted, retried.
  const attempts = presence(h('div', { id: 'job-attempts' }));
  const yamlPre = h('pre', { id: 'job-yaml', class: 'code', tabindex: '0' });
  const commandPre = h('pre', { id: 'job-command', class: 'code', tabindex: '0' });
  const copyStatus = h('span', { class: 'muted', 'aria-live': 'polite' });
  const { table: replicasTable, tbody: replicasBody } = table({ id: 'job-replicas', class: 'data' }, [
    'Task',
    'Host',
    'GPUs',
    'State',
  ]);
  const outputs = h('p', { class: 'outputs' });
  const dialog = makeConfirmDialog();

  const copy = (what, getText) =>
    h(
      'button',
      {
        type: 'button',
        class: 'btn btn-small',
        id: what === 'command' ? 'copy-command' : 'copy-yaml',
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(getText());
            text(copyStatus, `Copied the ${what}.`);
          } catch (e) {
            text(copyStatus, `Could not copy (${e.message}); select the text instead.`);
          }
        },
      },
      what === 'command' ? 'Copy command' : 'Copy YAML',
    );

  root.append(
    waiting.node,
    error.node,
    actions,
    actionError.node,
    h(
      'div',
      { class: 'grid-2' },
      h('section', { class: 'card' }, h('h2', null, 'Timeline'), timeline, attempts.node, outputs),
      h('section', { class: 'card' }, h('h2', null, 'Replicas'), scroller(replicasTable)),
    ),
    h(
      'section',
      { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', null, 'config.yaml'), copy('YAML', () => yamlPre.textContent)),
      yamlPre,
      h('div', { class: 'card-head' }, h('h2', null, 'Command'), copy('command', () => commandPre.textContent), copyStatus),
      commandPre,
    ),
    dialog.el,
  );

  let canCancel = null; // null until testIamPermissions answers
  let lastJob = null;

  async function checkPermissions() {
    try {
      const res = await api(`${ctx.path}:testIamPermissions`, {
        method: 'POST',
        body: { permissions: ['ml.jobs.cancel'] },
        signal,
      });
      canCancel = (res.permissions || []).includes('ml.jobs.cancel');
    } catch (e) {
      if (isAbort(e)) throw e;
      canCancel = false;
    }
    if (lastJob) renderActions(lastJob);
  }

  function renderActions(job) {
    const show = canCancel && !isTerminal(job.state) && job.state !== 'CANCELLING';
    const existing = actions.querySelector('#cancel-button');
    if (show && !existing) {
      actions.append(
        h('button', { id: 'cancel-button', type: 'button', class: 'btn btn-danger', onclick: askCancel }, 'Cancel job'),
      );
    } else if (!show && existing) {
      existing.remove();
    }
  }

  async function askCancel() {
    if (!(await dialog.ask(`Cancel job ${ctx.jobId}? Its replicas are stopped.`))) return;
    actionError.show(false);
    try {
      await api(`${ctx.path}:cancel`, { method: 'POST', body: {}, signal });
      const job = await ctx.fetchJob(signal);
      render(job);
    } catch (e) {
      if (isAbort(e)) return;
      text(actionError.el, e.message);
      actionError.show(true);
    }
  }

  let configShown = '';
  function render(job) {
    lastJob = job;
    // A queued job's errorMessage says why it waits; a running one's, that
    // it looks stalled (no log line, no CPU for the operator's limit).
    const running = job.state === 'RUNNING';
    const waits = (job.state === 'QUEUED' || job.state === 'PREPARING' || running) && job.errorMessage;
    waiting.show(Boolean(waits));
    if (waits) {
      fill(
        waiting.el,
        h('strong', null, running ? 'It may be stuck: ' : 'Why it waits: '),
        job.errorMessage,
        job.jobPosition != null && job.jobPosition !== ''
          ? h('div', { class: 'position' }, `Position in the project's queue: ${job.jobPosition}.`)
          : null,
      );
    }
    if (job.state === 'FAILED') {
      fill(error.el, h('strong', null, 'Failed: '), h('span', { class: 'pre-wrap' }, job.errorMessage || 'no message'));
      error.show(true);
    } else {
      error.show(false);
    }
    renderTimeline(timeline, job);
    renderAttempts(attempts, job);
    renderActions(job);
    const key = JSON.stringify([job.trainingInput, job.labels]);
    if (key !== configShown) {
      configShown = key;
      // The YAML library is loaded with the first job page, not with the jobs list.
      import('../jobconfig.js')
        .then(({ configYaml, submitCommand }) => {
          text(yamlPre, configYaml(job));
          text(commandPre, submitCommand(job, ctx.params.project));
        })
        .catch((e) => ctx.setError(e));
    }
    const out = job.trainingInput && job.trainingInput.jobDir;
    const href = bucketHashFor(out);
    if (href) {
      fill(outputs, 'Outputs: ', h('a', { id: 'job-outputs', href }, out));
    } else {
      fill(outputs, out ? `Outputs: ${out}` : '');
    }
  }

  const more = whileRunning();
  poll(
    async (ps) => {
      const job = await ctx.fetchJob(ps);
      ctx.clearError();
      render(job);
      // Asked once, in turn, so that one request at most is in flight.
      if (canCancel === null && !isTerminal(job.state)) await checkPermissions();
      try {
        renderReplicas(replicasBody, await api(`${ctx.path}/replicas`, { signal: ps }));
      } catch (e) {
        if (isAbort(e)) throw e;
        replicasBody.replaceChildren(h('tr', null, h('td', { colspan: 4 }, `Replicas unavailable: ${e.message}`)));
      }
      // One more round after the job ends, for the replicas' last states.
      return more(isTerminal(job.state));
    },
    REFRESH_MS,
    signal,
    ctx.setError,
  );
}

// The replicas table's rows (#job-replicas) from the /replicas answer.
export function renderReplicas(replicasBody, res) {
  const rows = [];
  for (const r of res.replicas || []) {
    let state = r.state || '';
    if (r.exitCode != null) state += ` (exit ${r.exitCode})`;
    if (r.signal) state += ` (signal ${r.signal})`;
    rows.push(
      h(
        'tr',
        { 'data-task': r.taskName },
        h('td', { class: 'task' }, r.taskName, r.trialId ? h('span', { class: 'muted' }, ` trial ${r.trialId}`) : null),
        h('td', { class: 'host' }, r.host || '—'),
        h('td', { class: 'gpus' }, r.gpus && r.gpus.length ? r.gpus.join(', ') : '—'),
        h('td', { class: 'state' }, state),
      ),
    );
  }
  for (const t of res.tpuHosts || []) {
    const name = typeof t === 'string' ? t : t.name || t.host || JSON.stringify(t);
    rows.push(
      h(
        'tr',
        { 'data-tpu-host': name },
        h('td', { class: 'task' }, 'TPU host'),
        h('td', { class: 'host' }, `${name}${res.tpuSimulated ? ' (simulated)' : ''}`),
        h('td', { class: 'gpus' }, '—'),
        h('td', { class: 'state' }, typeof t === 'object' && t.state ? t.state : ''),
      ),
    );
  }
  if (!rows.length) rows.push(h('tr', { class: 'empty-row' }, h('td', { colspan: 4 }, 'No replica has been placed yet.')));
  replicasBody.replaceChildren(...rows);
}

// created / queued / started / ended, each with its time and the time spent.
export function timelineSteps(job, now = Date.now()) {
  const steps = [{ step: 'created', label: 'Created', time: job.createTime }];
  if (job.startTime) {
    steps.push({ step: 'queued', label: 'Waited', duration: durationBetween(job.createTime, job.startTime, now) });
    steps.push({ step: 'started', label: 'Started', time: job.startTime });
  } else if (!job.endTime) {
    steps.push({ step: 'queued', label: 'Waiting', duration: durationBetween(job.createTime, null, now), ongoing: true });
  }
  if (job.endTime) {
    const from = job.startTime || job.createTime;
    steps.push({ step: 'ran', label: job.startTime ? 'Ran' : 'Waited', duration: durationBetween(from, job.endTime, now) });
    steps.push({ step: 'ended', label: `Ended: ${job.state}`, time: job.endTime });
  } else if (job.startTime) {
    steps.push({ step: 'ran', label: 'Running', duration: durationBetween(job.startTime, null, now), ongoing: true });
  }
  return steps;
}

export function renderTimeline(ol, job) {
  const items = timelineSteps(job).map((s) =>
    h(
      'li',
      { 'data-step': s.step, class: s.time ? 'point' : 'span' },
      h('span', { class: 'tl-label' }, s.label),
      s.time ? h('time', { datetime: s.time, title: s.time }, formatDate(s.time)) : null,
      s.duration != null ? h('span', { class: 'tl-duration' }, `${formatDuration(s.duration)}${s.ongoing ? ' so far' : ''}`) : null,
    ),
  );
  ol.replaceChildren(...items);
}

// Each attempt: its number, how it ended and why, where and how long it ran.
function renderAttempts(box, job) {
  const rows = attemptRows(job);
  box.show(rows.length > 0);
  if (!rows.length) return;
  const { table: t, tbody } = table({ class: 'data attempts' }, ['Attempt', 'Ended', 'Ran', 'Where']);
  tbody.replaceChildren(
    ...rows.map((r) =>
      h(
        'tr',
        { 'data-attempt': String(r.attempt), 'data-end': r.end || 'NONE' },
        h('td', null, String(r.attempt)),
        h(
          'td',
          null,
          h('strong', null, r.what),
          r.message ? h('div', { class: 'muted pre-wrap' }, r.message) : null,
          r.ended ? h('time', { datetime: r.ended, title: r.ended, class: 'muted' }, formatDate(r.ended)) : null,
        ),
        h('td', null, r.ran),
        h('td', null, r.hosts || '—'),
      ),
    ),
  );
  fill(box.el, h('h3', null, 'Attempts'), scroller(t));
}

// A <dialog id="confirm-dialog"> asking yes or no; ask() resolves true/false.
export function makeConfirmDialog() {
  const message = h('p', { id: 'confirm-message' });
  const yes = h('button', { id: 'confirm-yes', type: 'button', class: 'btn btn-danger' }, 'Yes, cancel it');
  const no = h('button', { id: 'confirm-no', type: 'button', class: 'btn' }, 'No, keep it running');
  const el = h(
    'dialog',
    { id: 'confirm-dialog', 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-message' },
    h('h2', { id: 'confirm-title' }, 'Cancel the job?'),
    message,
    h('div', { class: 'dialog-actions' }, no, yes),
  );
  let resolve = null;
  const close = (answer) => {
    if (el.open) el.close();
    if (resolve) resolve(answer);
    resolve = null;
  };
  yes.addEventListener('click', () => close(true));
  no.addEventListener('click', () => close(false));
  el.addEventListener('cancel', () => close(false)); // Escape
  return {
    el,
    ask(msg) {
      text(message, msg);
      el.showModal();
      no.focus();
      return new Promise((r) => {
        resolve = r;
      });
    },
  };
}
