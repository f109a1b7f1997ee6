// One Vertex AI custom job or hyperparameter tuning job: a header (name,
// state, tabs) and the tab's content. The overview is here: why it waits,
// its error, timeline, replicas, worker pools (and study), config.yaml and
// the command, outputs and cancel. The Logs, Metrics and Trials tabs are
// the ml v1 job page's own, given the job's path under /v1/projects/P/jobs
// (mlengine's per-job views take a Vertex AI job's id) and the job in ml
// v1's shape (vertex.js mlView).
import { api, enc, isAbort } from '../api.js';
import { fill, h, presence, scroller, stateBadge, table, text } from '../dom.js';
import { isTerminal, labelsText } from '../format.js';
import { poll, whileRunning } from '../poll.js';
import { vertexJobHash } from '../router.js';
import { KINDS, kindOfCollection, mlView, mlState, parameterText, poolRows, resourcesText } from '../vertex.js';
import { bucketHashFor, jobPath, makeConfirmDialog, renderReplicas, renderTimeline } from './job.js';
import { vertexListHash } from './vertex.js';
import * as logs from './logs.js';

const REFRESH_MS = 2000;
const TABS = [
  ['overview', 'Overview'],
  ['logs', 'Logs'],
  ['metrics', 'Metrics'],
  ['trials', 'Trials'],
];

export function mount(root, ctx) {
  const { project, region, kind: collection, job: jobId } = ctx.params;
  const kind = kindOfCollection(collection);
  if (!kind) {
    fill(
      root,
      h('h1', null, 'Not found'),
      h(
        'p',
        null,
        `"${collection}" is neither customJobs nor hyperparameterTuningJobs. `,
        h('a', { href: '#/vertex' }, 'Back to Vertex AI'),
      ),
    );
    return;
  }
  const tab = ctx.tab === 'trials' && kind !== 'tuning' ? 'overview' : ctx.tab || 'overview';
  const resource = `projects/${project}/locations/${region}/${collection}/${jobId}`;
  const stateEl = h('span', { id: 'job-state-box' });
  const title = h('h1', { id: 'job-title' }, jobId);
  const tabs = h(
    'nav',
    { class: 'tabs', 'aria-label': 'Job' },
    TABS.filter(([name]) => name !== 'trials' || kind === 'tuning').map(([name, label]) => {
      const a = h('a', { id: `tab-${name}`, href: vertexJobHash(project, region, collection, jobId, name), class: 'tab' }, label);
      if (name === tab) a.setAttribute('aria-current', 'page');
      return a;
    }),
  );
  const summary = h('p', { class: 'job-summary muted' });
  const body = h('div', { class: 'tab-body' });
  root.append(
    h(
      'nav',
      { class: 'crumbs', 'aria-label': 'Breadcrumbs' },
      h('a', { href: vertexListHash({ project, region, kind }) }, 'Vertex AI'),
      ' / ',
      h('span', null, project),
      ' / ',
      h('span', null, region),
      ' / ',
      h('span', null, KINDS[kind].title),
    ),
    h('div', { class: 'page-head' }, title, stateEl),
    h('p', { class: 'job-name muted' }, h('code', { id: 'job-name' }, resource)),
    summary,
    tabs,
    body,
  );

  // Every tab reports the job it fetched here, so the header stays current.
  // fetchJob answers the job in ml v1's shape (what logs.js, metrics.js and
  // trials.js read); `.vertex` is the Vertex AI resource.
  const jobCtx = {
    ...ctx,
    project,
    jobId,
    region,
    kind,
    collection,
    resource,
    path: jobPath(project, jobId), // mlengine's per-job views: /logs, /replicas, /metrics, /waiting
    vertexPath: `/v1/projects/${enc(project)}/locations/${enc(region)}/${collection}/${enc(jobId)}`,
    stoppedEarlyKnown: false,
    job: null,
    updateJob(job) {
      jobCtx.job = job;
      fill(stateEl, stateBadge(job.state, { id: 'job-state' }, mlState(job.state)));
      text(title, job.displayName || jobId);
      text(summary, [resourcesText(job), labelsText(job.labels)].filter(Boolean).join(' · '));
    },
    async fetchJob(signal) {
      const job = await api(jobCtx.vertexPath, { signal });
      jobCtx.updateJob(job);
      return mlView(job);
    },
  };

  if (tab === 'overview') overview(body, jobCtx);
  else if (tab === 'logs') logs.mount(body, jobCtx);
  else if (tab === 'metrics') import('./metrics.js').then((m) => m.mount(body, jobCtx), ctx.setError);
  else if (tab === 'trials') import('./trials.js').then((m) => m.mount(body, jobCtx), ctx.setError);
}

const WAITS = new Set(['QUEUED', 'PREPARING', 'RUNNING']);

function overview(root, ctx) {
  const { signal } = ctx;
  // These three are in the page only while they apply.
  const waiting = presence(h('div', { id: 'job-waiting', class: 'notice notice-wait' }));
  const error = presence(h('div', { id: 'job-error', class: 'notice notice-error' }));
  const actionError = presence(h('p', { id: 'action-error', class: 'form-error', role: 'alert' }));
  const actions = h('div', { class: 'actions' });
  const timeline = h('ol', { id: 'job-timeline', class: 'timeline' });
  const details = h('dl', { id: 'job-details', class: 'details' });
  const { table: replicasTable, tbody: replicasBody } = table({ id: 'job-replicas', class: 'data' }, [
    'Task',
    'Host',
    'GPUs',
    'State',
  ]);
  const { table: poolsTable, tbody: poolsBody } = table({ id: 'job-pools', class: 'data' }, [
    'Pool',
    'Replicas',
    'Machine',
    'Runs',
    'Arguments',
  ]);
  const study = presence(h('section', { id: 'job-study', class: 'card' }));
  const yamlPre = h('pre', { id: 'job-yaml', class: 'code', tabindex: '0' });
  const commandPre = h('pre', { id: 'job-command', class: 'code', tabindex: '0' });
  const copyStatus = h('span', { class: 'muted', 'aria-live': 'polite' });
  const dialog = makeConfirmDialog();

  const copy = (what, id, getText) =>
    h(
      'button',
      {
        type: 'button',
        class: 'btn btn-small',
        id,
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(getText());
            text(copyStatus, `Copied the ${what}.`);
          } catch (e) {
            text(copyStatus, `Could not copy (${e.message}); select the text instead.`);
          }
        },
      },
      `Copy ${what}`,
    );

  root.append(
    waiting.node,
    error.node,
    actions,
    actionError.node,
    h(
      'div',
      { class: 'grid-2' },
      h('section', { class: 'card' }, h('h2', null, 'Timeline'), timeline, details),
      h('section', { class: 'card' }, h('h2', null, 'Replicas'), scroller(replicasTable)),
    ),
    h(
      'section',
      { class: 'card' },
      h('h2', null, ctx.kind === 'tuning' ? "Worker pools (each trial's)" : 'Worker pools'),
      scroller(poolsTable),
    ),
    study.node,
    h(
      'section',
      { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', null, 'config.yaml'), copy('YAML', 'copy-yaml', () => yamlPre.textContent)),
      yamlPre,
      h(
        'div',
        { class: 'card-head' },
        h('h2', null, 'Command'),
        copy('command', 'copy-command', () => commandPre.textContent),
        copyStatus,
      ),
      commandPre,
    ),
    dialog.el,
  );

  const permission = KINDS[ctx.kind].cancelPermission;
  let canCancel = null; // null until testIamPermissions answers
  let lastJob = null;

  async function checkPermissions() {
    try {
      const res = await api(`${ctx.path}:testIamPermissions`, { method: 'POST', body: { permissions: [permission] }, signal });
      canCancel = (res.permissions || []).includes(permission);
    } catch (e) {
      if (isAbort(e)) throw e;
      canCancel = false;
    }
    if (lastJob) renderActions(lastJob);
  }

  function renderActions(job) {
    const st = mlState(job.state);
    const show = canCancel && !isTerminal(st) && st !== 'CANCELLING';
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
    const name = lastJob && lastJob.displayName ? `"${lastJob.displayName}" (${ctx.jobId})` : ctx.jobId;
    if (!(await dialog.ask(`Cancel ${KINDS[ctx.kind].one} ${name}? Its replicas are stopped.`))) return;
    actionError.show(false);
    try {
      await api(`${ctx.vertexPath}:cancel`, { method: 'POST', body: {}, signal });
      const job = (await ctx.fetchJob(signal)).vertex;
      render(job, null);
    } catch (e) {
      if (isAbort(e)) return;
      text(actionError.el, e.message);
      actionError.show(true);
    }
  }

  // `why`: the /waiting answer, or null when not asked (the job has ended).
  function renderWaiting(job, why) {
    const st = mlState(job.state);
    const reason = why && WAITS.has(st) ? why.reason : '';
    waiting.show(Boolean(reason));
    if (!reason) return;
    const running = st === 'RUNNING';
    fill(
      waiting.el,
      h('strong', null, running ? 'It may be stuck: ' : 'Why it waits: '),
      reason,
      !running && why.position != null && why.position !== ''
        ? h('div', { class: 'position' }, `Position in the project's queue: ${why.position}.`)
        : null,
    );
  }

  let configShown = '';
  function render(job, why) {
    lastJob = job;
    const st = mlState(job.state);
    if (why !== undefined) renderWaiting(job, why);
    if (st === 'FAILED') {
      const message = (job.error && job.error.message) || 'no message';
      fill(error.el, h('strong', null, 'Failed: '), h('span', { class: 'pre-wrap' }, message));
      error.show(true);
    } else {
      error.show(false);
    }
    renderTimeline(timeline, job);
    renderDetails(details, job, ctx);
    renderActions(job);
    const spec = ctx.kind === 'tuning' ? job.trialJobSpec : job.jobSpec;
    const key = JSON.stringify([spec, job.studySpec, job.maxTrialCount, job.parallelTrialCount, job.labels, job.displayName]);
    if (key !== configShown) {
      configShown = key;
      renderPools(poolsBody, spec);
      if (ctx.kind === 'tuning') {
        renderStudy(study.el, job);
        study.show(true);
      }
      // The YAML library is loaded with the first job page, not with the list.
      import('../vertexconfig.js')
        .then(({ vertexConfigYaml, vertexCommand }) => {
          text(yamlPre, vertexConfigYaml(job, ctx.kind));
          text(commandPre, vertexCommand(job, ctx.kind, ctx.project, ctx.region));
        })
        .catch((e) => ctx.setError(e));
    }
  }

  const more = whileRunning();
  poll(
    async (ps) => {
      const job = (await ctx.fetchJob(ps)).vertex;
      ctx.clearError();
      const ended = isTerminal(mlState(job.state));
      // Why it waits (or that it may be stuck): mlengine's own view, as
      // Vertex AI's resource has no field for it.
      let why = null;
      if (!ended) {
        try {
          why = await api(`${ctx.path}/waiting`, { signal: ps });
        } catch (e) {
          if (isAbort(e)) throw e;
          why = null;
        }
      }
      render(job, why);
      // Asked once, in turn, so that one request at most is in flight.
      if (canCancel === null && !ended) await checkPermissions();
      try {
        renderReplicas(replicasBody, await api(`${ctx.path}/replicas`, { signal: ps }));
      } catch (e) {
        if (isAbort(e)) throw e;
        replicasBody.replaceChildren(h('tr', null, h('td', { colspan: 4 }, `Replicas unavailable: ${e.message}`)));
      }
      // One more round after the job ends, for the replicas' last states.
      return more(ended);
    },
    REFRESH_MS,
    signal,
    ctx.setError,
  );
}

// Outputs, and the spec's other settings worth a glance, as a <dl>.
function renderDetails(dl, job, ctx) {
  const spec = (ctx.kind === 'tuning' ? job.trialJobSpec : job.jobSpec) || {};
  const items = [];
  const out = spec.baseOutputDirectory && spec.baseOutputDirectory.outputUriPrefix;
  if (out) {
    const href = bucketHashFor(out);
    items.push(['Outputs', href ? h('a', { id: 'job-outputs', href }, out) : h('span', { id: 'job-outputs' }, out)]);
  }
  if (spec.scheduling && spec.scheduling.timeout) items.push(['Timeout', spec.scheduling.timeout]);
  if (spec.scheduling && spec.scheduling.maxWaitDuration) items.push(['Longest wait', spec.scheduling.maxWaitDuration]);
  if (spec.serviceAccount) items.push(['Service account', spec.serviceAccount]);
  if (spec.network) items.push(['Network', spec.network]);
  const key = JSON.stringify(items.map(([k, v]) => [k, typeof v === 'string' ? v : v.textContent]));
  if (dl.dataset.key === key) return;
  dl.dataset.key = key;
  fill(dl, items.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

// Each pool with replicas: its role, replica count, machine (and
// accelerators and disk per replica), what it runs and its arguments.
function renderPools(tbody, spec) {
  const rows = poolRows(spec).map((p) =>
    h(
      'tr',
      { 'data-pool': String(p.index) },
      h('td', { class: 'pool' }, h('strong', null, `workerpool${p.index}`), h('div', { class: 'muted' }, p.role)),
      h('td', { class: 'num replicas' }, String(p.replicas)),
      h(
        'td',
        { class: 'machine' },
        p.machine,
        p.accelerator ? h('div', null, p.accelerator) : null,
        p.disk ? h('div', { class: 'muted' }, `disk ${p.disk}`) : null,
      ),
      h(
        'td',
        { class: 'runs' },
        h(
          'dl',
          { class: 'details compact' },
          p.runs.map(([what, value]) => [h('dt', null, what), h('dd', null, h('code', null, value))]),
          p.env.length ? [h('dt', null, 'env'), h('dd', null, h('code', null, p.env.join(', ')))] : null,
        ),
      ),
      h('td', { class: 'args' }, p.args ? h('code', { class: 'pre-wrap' }, p.args) : h('span', { class: 'muted' }, 'none')),
    ),
  );
  if (!rows.length) rows.push(h('tr', { class: 'empty-row' }, h('td', { colspan: 5 }, 'No worker pool.')));
  tbody.replaceChildren(...rows);
}

// A tuning job's study: the metric and its goal, the algorithm, the
// counts, and each parameter's range.
function renderStudy(section, job) {
  const st = job.studySpec || {};
  const metrics = st.metrics || [];
  const { table: t, tbody } = table({ id: 'job-parameters', class: 'data' }, ['Parameter', 'Values']);
  tbody.replaceChildren(
    ...(st.parameters || []).map((p) =>
      h('tr', { 'data-parameter': p.parameterId }, h('td', null, p.parameterId), h('td', null, parameterText(p))),
    ),
  );
  fill(
    section,
    h('h2', null, 'Study'),
    h(
      'dl',
      { class: 'details' },
      metrics.map((m) => [h('dt', null, 'Metric'), h('dd', null, `${m.goal || '?'} ${m.metricId || '?'}`)]),
      h('dt', null, 'Algorithm'),
      h('dd', null, st.algorithm && st.algorithm !== 'ALGORITHM_UNSPECIFIED' ? st.algorithm : 'Bayesian optimisation (default)'),
      h('dt', null, 'Trials'),
      h(
        'dd',
        null,
        `${job.maxTrialCount ?? '?'} at most, ${job.parallelTrialCount ?? 1} at a time` +
          (job.maxFailedTrialCount ? `; the job fails after ${job.maxFailedTrialCount} failed` : ''),
      ),
      st.decayCurveStoppingSpec || st.medianAutomatedStoppingSpec ? [h('dt', null, 'Early stopping'), h('dd', null, 'on')] : null,
    ),
    scroller(t),
  );
}
